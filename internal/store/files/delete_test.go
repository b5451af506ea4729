package files_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

const nobody = 65534

// A workspace may hold read-only directories and files (a module cache, an
// agent's chmod); Delete still removes the whole run. Root ignores
// permissions, so as root the delete runs in a helper process as nobody.
func TestDeleteRemovesReadOnlyTrees(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	s, err := files.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	r := mustCreate(t, s, run.NewID())
	ws := s.L.Workspace(r.ID)
	deep := filepath.Join(ws, "pkg", "mod", "example.com@v1")
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "go.mod"), []byte("module x\n"), 0o400)
	for _, d := range []string{deep, filepath.Dir(deep), filepath.Dir(filepath.Dir(deep))} {
		os.Chmod(d, 0o500)
	}
	other := mustCreate(t, s, run.NewID())

	if os.Geteuid() != 0 {
		if err := s.Delete(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	} else {
		bin := copyTestBinary(t, base)
		if err := filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		}); err != nil {
			t.Fatal(err)
		}
		os.Chown(base, nobody, nobody) // the helper, as nobody, owns the store's parent too
		cmd := exec.Command(bin, "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=delete", helperHomeEnv+"="+home, helperRunEnv+"="+r.ID)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("delete as uid %d: %v\n%s", nobody, err, out)
		}
	}
	if _, err := os.Lstat(s.RunDir(r.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run dir still there: %v", err)
	}
	ents, _ := os.ReadDir(s.L.Runs())
	if len(ents) != 1 || ents[0].Name() != other.ID {
		t.Fatalf("runs/ holds %v after Delete, want only %s", ents, other.ID)
	}
}

// copyTestBinary copies the running test binary to a directory every user
// may enter, so a helper can run under another uid.
func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
		if d == os.TempDir() {
			break
		}
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "store.test")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

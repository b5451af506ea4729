package files

import (
	"os"
	"path/filepath"
	"testing"
)

// makeWritable opens read-only directories for removal and never changes a
// directory reached through a symlink.
func TestMakeWritableDoesNotFollowSymlinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	os.MkdirAll(filepath.Join(outside, "sub"), 0o700)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o400)
	os.Chmod(filepath.Join(outside, "sub"), 0o500)
	os.Chmod(outside, 0o500)
	t.Cleanup(func() { os.Chmod(outside, 0o700); os.Chmod(filepath.Join(outside, "sub"), 0o700) })

	root := filepath.Join(t.TempDir(), "run")
	ro := filepath.Join(root, "workspace", "ro")
	os.MkdirAll(filepath.Join(ro, "deeper"), 0o700)
	os.WriteFile(filepath.Join(ro, "deeper", "f"), []byte("x"), 0o400)
	os.Symlink(outside, filepath.Join(ro, "link"))
	os.Symlink(filepath.Join(outside, "sub"), filepath.Join(root, "link-sub"))
	os.Chmod(filepath.Join(ro, "deeper"), 0o500)
	os.Chmod(ro, 0o000)

	makeWritable(root)

	for _, d := range []string{ro, filepath.Join(ro, "deeper")} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm()&0o700 != 0o700 {
			t.Errorf("%s not made writable: %v %v", d, fi.Mode(), err)
		}
	}
	for _, d := range []string{outside, filepath.Join(outside, "sub")} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o500 {
			t.Errorf("symlink target %s changed: %v %v", d, fi.Mode(), err)
		}
	}
	if err := removeAll(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Fatalf("removing the run removed a symlink's target: %v", err)
	}
}

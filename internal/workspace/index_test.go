package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestParseIndexMatchesGit(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			repo, _ := newRepo(t, "--object-format="+format)
			// Names of every padding length, and a long one.
			for n := 1; n <= 9; n++ {
				writeFile(t, filepath.Join(repo, "p", strings.Repeat("n", n)), "x", 0o644)
			}
			writeFile(t, filepath.Join(repo, strings.Repeat("d", 200), strings.Repeat("f", 200)), "long\n", 0o644)
			testsupport.Git(t, repo, "add", "-A")
			testsupport.Git(t, repo, "commit", "-q", "-m", "names")
			base := testsupport.Git(t, repo, "rev-parse", "HEAD")
			_, dir := newWorkspace(t, repo, base)
			hashLen := map[string]int{"sha1": 20, "sha256": 32}[format]
			data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := parseIndex(data, hashLen)
			if err != nil {
				t.Fatal(err)
			}
			want, err := lsFiles(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parseIndex = %v\nls-files = %v", got, want)
			}

			// Version 3 (extended flags) parses; version 4 falls back.
			testsupport.Git(t, dir, "update-index", "--skip-worktree", "p/nnn")
			data, _ = os.ReadFile(filepath.Join(dir, ".git", "index"))
			if got3, _, err := parseIndex(data, hashLen); err != nil || !reflect.DeepEqual(got3, want) {
				t.Fatalf("version 3: %v, equal=%v", err, reflect.DeepEqual(got3, want))
			}
			testsupport.Git(t, dir, "update-index", "--index-version", "4")
			data, _ = os.ReadFile(filepath.Join(dir, ".git", "index"))
			if _, _, err := parseIndex(data, hashLen); !errors.Is(err, errIndexFormat) {
				t.Fatalf("version 4: %v, want errIndexFormat", err)
			}
		})
	}
}

func TestParseIndexRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, data := range [][]byte{nil, []byte("DIRC"), []byte("DIRC\x00\x00\x00\x02\xff\xff\xff\xff"), []byte("XXXX\x00\x00\x00\x02\x00\x00\x00\x00")} {
		if _, _, err := parseIndex(data, 20); err == nil {
			t.Errorf("parseIndex(%q) accepted", data)
		}
	}
}

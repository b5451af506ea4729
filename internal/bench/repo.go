package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/workspace"
)

// Prepare returns the repository the fixture's runs start from, and its
// base commit. A fixture with repo/ gets a new repository made in dir
// (which must not exist): repo/'s files plus accept.sh at the root, in one
// commit that depends only on them. A fixture naming an existing
// repository is used where it is (the runs' branches land there).
func Prepare(ctx context.Context, f *Fixture, dir string) (repo, base string, err error) {
	if f.Repo != "" {
		r, err := workspace.OpenRepo(ctx, f.Repo)
		if err != nil {
			return "", "", err
		}
		base, err := r.ResolveBase(ctx, f.Base)
		if err != nil {
			return "", "", err
		}
		return r.Path(), base, nil
	}
	files := f.Files
	if f.Script != nil {
		files = append(files[:len(files):len(files)], File{Path: AcceptScript, Data: f.Script, Exec: true})
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", fmt.Errorf("fixture %s: %w", f.Name, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("fixture %s: %w", f.Name, err)
	}
	if err := writeFiles(dir, files); err != nil {
		return "", "", fmt.Errorf("fixture %s: %w", f.Name, err)
	}
	base, err = workspace.CommitDir(ctx, dir, "bench fixture "+f.Name)
	if err != nil {
		return "", "", fmt.Errorf("fixture %s: %w", f.Name, err)
	}
	return dir, base, nil
}

// writeFiles writes files under dir (their paths were validated when the
// fixture was read).
func writeFiles(dir string, files []File) error {
	for _, fl := range files {
		p := filepath.Join(dir, filepath.FromSlash(fl.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if fl.Exec {
			mode = 0o755
		}
		if err := os.WriteFile(p, fl.Data, mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

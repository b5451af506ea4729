package runner

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxReadLimit caps one read_file answer even when the caller gives a Limit
// (the answer must fit in a frame).
const maxReadLimit = 16 << 20

// rel maps a request path to a clean path relative to Root. Absolute paths
// must lie under Root. Lexical escapes are refused here; symlink escapes
// are refused by os.Root on every call, which walks the path component by
// component without following links out of Root.
func (s *server) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", &OpError{Code: CodeBadRequest, Message: "path holds a NUL byte"}
	}
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		for _, r := range s.rootNames {
			if c == r {
				return ".", nil
			}
			if strings.HasPrefix(c, r+string(filepath.Separator)) {
				return c[len(r)+1:], nil
			}
		}
		return "", &OpError{Code: CodeEscape, Message: p + ": outside the workspace"}
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", &OpError{Code: CodeEscape, Message: p + ": outside the workspace"}
	}
	return c, nil
}

// fsErr turns a file system error into an OpError the caller can act on
// when there is one.
func fsErr(p string, err error) error {
	var oe *OpError
	switch {
	case errors.As(err, &oe):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &OpError{Code: CodeNotFound, Message: p + ": no such file or directory"}
	case errors.Is(err, syscall.ENOTDIR):
		return &OpError{Code: CodeNotDir, Message: p + ": not a directory"}
	case errors.Is(err, syscall.EISDIR):
		return &OpError{Code: CodeIsDir, Message: p + ": is a directory"}
	case errors.Is(err, syscall.ELOOP):
		return &OpError{Code: CodeSymlink, Message: p + ": is a symlink"}
	case errors.Is(err, fs.ErrPermission):
		return &OpError{Code: CodePermission, Message: p + ": permission denied"}
	case errors.Is(err, syscall.EROFS):
		return &OpError{Code: CodePermission, Message: p + ": read-only file system"}
	case errors.Is(err, syscall.EFBIG):
		return &OpError{Code: CodeTooLarge, Message: p + ": past the sandbox's file size limit"}
	case errors.Is(err, syscall.ENAMETOOLONG):
		return &OpError{Code: CodeBadRequest, Message: "path too long"}
	case strings.HasSuffix(err.Error(), ": not a directory"):
		// os.Root's own refusal to open a non-directory as a root.
		return &OpError{Code: CodeNotDir, Message: p + ": not a directory"}
	case strings.Contains(err.Error(), "path escapes from parent"):
		return &OpError{Code: CodeEscape, Message: p + ": outside the workspace"}
	}
	return err
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// openRegular opens a regular file for reading without blocking on FIFOs
// or devices.
func (s *server) openRegular(p, rel string) (*os.File, os.FileInfo, error) {
	f, err := s.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fsErr(p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, &OpError{Code: CodeIsDir, Message: p + ": is a directory"}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &OpError{Code: CodeNotRegular, Message: p + ": not a regular file"}
	}
	return f, fi, nil
}

func (s *server) readFile(req *ReadFileRequest) (*ReadFileResult, error) {
	if req.Offset < 0 || req.Limit < 0 || req.MaxBytes < 0 {
		return nil, &OpError{Code: CodeBadRequest, Message: "negative offset, limit or max_bytes"}
	}
	rel, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	f, fi, err := s.openRegular(req.Path, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := fi.Size()
	maxBytes := req.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultReadCap
	}
	var n int64
	if req.Limit == 0 {
		if size > maxBytes {
			return nil, &OpError{Code: CodeTooLarge, Message: req.Path + ": file is larger than the read cap; read a range with offset and limit"}
		}
		n = size - req.Offset
	} else {
		n = min(req.Limit, size-req.Offset, maxReadLimit)
	}
	n = max(n, 0)
	data := make([]byte, n)
	got, err := f.ReadAt(data, req.Offset)
	if err != nil && err != io.EOF {
		return nil, fsErr(req.Path, err)
	}
	data = data[:got]
	return &ReadFileResult{Data: data, Size: size, EOF: req.Offset+int64(got) >= size}, nil
}

func (s *server) writeFile(req *WriteFileRequest) (*WriteFileResult, error) {
	if int64(len(req.Data)) > DefaultWriteCap {
		return nil, &OpError{Code: CodeTooLarge, Message: req.Path + ": data is larger than the write cap"}
	}
	rel, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, &OpError{Code: CodeIsDir, Message: req.Path + ": is a directory"}
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				// A component of the parent is a file.
				return nil, &OpError{Code: CodeNotDir, Message: req.Path + ": a parent is not a directory"}
			}
			return nil, fsErr(req.Path, err)
		}
	}
	mode := fs.FileMode(req.Mode) & fs.ModePerm
	created := false
	fi, err := s.root.Lstat(rel)
	switch {
	case err == nil:
		if err := checkReplaceable(req.Path, fi); err != nil {
			return nil, err
		}
		if req.Mode == 0 {
			mode = fi.Mode().Perm()
		}
	case errors.Is(err, fs.ErrNotExist):
		created = true
	default:
		return nil, fsErr(req.Path, err)
	}
	if mode == 0 && req.Mode == 0 && created {
		mode = 0o644
	}
	if err := s.replace(req.Path, rel, req.Data, mode); err != nil {
		return nil, err
	}
	return &WriteFileResult{Created: created, Size: int64(len(req.Data))}, nil
}

// checkReplaceable refuses to replace what is not a regular file: a symlink
// at the final component is never written through (nor replaced).
func checkReplaceable(p string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &OpError{Code: CodeSymlink, Message: p + ": is a symlink; write its target instead"}
	case fi.IsDir():
		return &OpError{Code: CodeIsDir, Message: p + ": is a directory"}
	case !fi.Mode().IsRegular():
		return &OpError{Code: CodeNotRegular, Message: p + ": not a regular file"}
	}
	return nil
}

// replace writes data to a temporary file beside rel and renames it over
// rel: readers see the old or the new content, never a mix.
func (s *server) replace(p, rel string, data []byte, mode fs.FileMode) error {
	tmp := filepath.Join(filepath.Dir(rel), ".agentrun-"+randomID(6)+".tmp")
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsErr(p, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(mode)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = s.root.Rename(tmp, rel)
	}
	if werr != nil {
		s.root.Remove(tmp)
		return fsErr(p, werr)
	}
	return nil
}

func (s *server) editFile(req *EditFileRequest) (*EditFileResult, error) {
	if req.Old == "" {
		return nil, &OpError{Code: CodeBadRequest, Message: "old text is empty"}
	}
	rel, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return nil, fsErr(req.Path, err)
	}
	if err := checkReplaceable(req.Path, fi); err != nil {
		return nil, err
	}
	f, fi, err := s.openRegular(req.Path, rel)
	if err != nil {
		return nil, err
	}
	if fi.Size() > DefaultWriteCap {
		f.Close()
		return nil, &OpError{Code: CodeTooLarge, Message: req.Path + ": file is larger than the write cap"}
	}
	b, err := io.ReadAll(io.LimitReader(f, DefaultWriteCap+1))
	f.Close()
	if err != nil {
		return nil, fsErr(req.Path, err)
	}
	content := string(b)
	switch n := strings.Count(content, req.Old); {
	case n == 0:
		return nil, &OpError{Code: CodeNoMatch, Message: req.Path + ": old text not found"}
	case n > 1:
		return nil, &OpError{Code: CodeNotUnique, Message: req.Path + ": old text found more than once; include more context"}
	}
	out := strings.Replace(content, req.Old, req.New, 1)
	if len(out) > DefaultWriteCap {
		return nil, &OpError{Code: CodeTooLarge, Message: req.Path + ": result is larger than the write cap"}
	}
	if err := s.replace(req.Path, rel, []byte(out), fi.Mode().Perm()); err != nil {
		return nil, err
	}
	return &EditFileResult{Size: int64(len(out))}, nil
}

func (s *server) listDir(req *ListDirRequest) (*ListDirResult, error) {
	rel, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 1000
	}
	sub, err := s.root.OpenRoot(rel)
	if err != nil {
		return nil, fsErr(req.Path, err)
	}
	defer sub.Close()
	res := &ListDirResult{Entries: []DirEntry{}}
	walkErr := fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // unreadable below the top: skip
		}
		if p == "." {
			return nil
		}
		if len(res.Entries) >= limit {
			res.Truncated = true
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		res.Entries = append(res.Entries, DirEntry{
			Name: p, Type: fileType(fi.Mode()), Size: fi.Size(),
			Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime(),
		})
		if d.IsDir() && (!req.Recursive || d.Name() == ".git") {
			return fs.SkipDir
		}
		return nil
	})
	if walkErr != nil {
		return nil, fsErr(req.Path, walkErr)
	}
	return res, nil
}

func (s *server) stat(req *StatRequest) (*StatResult, error) {
	rel, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return &StatResult{Exists: false}, nil
		}
		return nil, fsErr(req.Path, err)
	}
	return &StatResult{Exists: true, Type: fileType(fi.Mode()), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime()}, nil
}

// slashRel joins a root-relative base and a path below it, slash-separated.
func slashRel(base, p string) string {
	return path.Clean(filepath.ToSlash(filepath.Join(base, p)))
}

package workspace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CommitCache keeps on disk the answers that depend on nothing but a
// commit's content (a file at a path, the size of its checkout: see
// commitMemo), so that a process asks git no more than the first one did:
// a submit on a base commit submitted before runs neither git cat-file nor
// git ls-tree. Each answer is one small file, written whole (a temporary
// file renamed into place) and never changed; one that cannot be read is
// asked of git again. The directory keeps at most commitCacheEntries
// answers: past that, the older half goes. A nil *CommitCache asks git
// every time (within the process's own memo).
//
// What a CommitCache learns is written by Keep, not before: a submit
// refused after asking leaves nothing behind.
type CommitCache struct {
	dir string

	mu      sync.Mutex
	learned map[string][]byte
}

// commitCacheEntries bounds the answers a CommitCache keeps.
const commitCacheEntries = 1024

// NewCommitCache is the cache of commit answers in dir (made on the first
// answer written).
func NewCommitCache(dir string) *CommitCache { return &CommitCache{dir: dir} }

// commitFile is a file answer as the cache keeps it.
type commitFile struct {
	OK   bool   `json:"ok"`
	Data []byte `json:"data,omitempty"`
}

// FileAt is FileAtDir through the cache.
func (c *CommitCache) FileAt(ctx context.Context, dir, commit, path string) ([]byte, bool, error) {
	if c == nil || !isObjectID(commit) || ValidatePath(path) != nil {
		return FileAtDir(ctx, dir, commit, path)
	}
	name := fileAnswerName(commit, path)
	if b, ok := c.read(name); ok {
		var a commitFile
		if json.Unmarshal(b, &a) == nil {
			return a.Data, a.OK, nil
		}
	}
	data, ok, known, err := fileAt(ctx, dir, commit, path)
	if err == nil && known {
		if b, err := json.Marshal(commitFile{OK: ok, Data: data}); err == nil {
			c.learn(name, b)
		}
	}
	return data, ok, err
}

// fileAnswerName names the answer for the file at path in commit.
func fileAnswerName(commit, path string) string {
	sum := sha256.Sum256([]byte(path))
	return commit + "-file-" + hex.EncodeToString(sum[:])
}

// Prefetch is PrefetchFiles for those of paths the cache does not answer:
// the FileAt calls to come then run no git process but this one.
func (c *CommitCache) Prefetch(ctx context.Context, dir, commit string, paths ...string) {
	if c != nil && isObjectID(commit) {
		paths = slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
			_, ok := c.read(fileAnswerName(commit, p))
			return ok
		})
	}
	PrefetchFiles(ctx, dir, commit, paths...)
}

// CheckoutBytes is the package's CheckoutBytes through the cache.
func (c *CommitCache) CheckoutBytes(ctx context.Context, repo, commit string) (int64, error) {
	if c == nil || !isObjectID(commit) {
		return CheckoutBytes(ctx, repo, commit)
	}
	name := commit + "-checkout"
	if b, ok := c.read(name); ok {
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil && n >= 0 {
			return n, nil
		}
	}
	n, err := CheckoutBytes(ctx, repo, commit)
	if err == nil {
		c.learn(name, []byte(strconv.FormatInt(n, 10)))
	}
	return n, err
}

func (c *CommitCache) read(name string) ([]byte, bool) {
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	return b, err == nil && len(b) > 0
}

// learn holds answer b as name until Keep.
func (c *CommitCache) learn(name string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.learned == nil {
		c.learned = map[string][]byte{}
	}
	c.learned[name] = b
}

// Keep writes what the cache learned since the last Keep.
func (c *CommitCache) Keep() {
	if c == nil {
		return
	}
	c.mu.Lock()
	learned := c.learned
	c.learned = nil
	c.mu.Unlock()
	if len(learned) == 0 || os.MkdirAll(c.dir, 0o755) != nil {
		return
	}
	for name, b := range learned {
		c.write(name, b)
	}
	c.prune()
}

// write keeps answer b as name; a cache that cannot be written is only
// slower.
func (c *CommitCache) write(name string, b []byte) {
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(c.dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// prune removes the older half of the answers once there are more than
// commitCacheEntries, and temporary files a writer left a minute ago or
// more.
func (c *CommitCache) prune() {
	ents, err := os.ReadDir(c.dir)
	if err != nil || len(ents) <= commitCacheEntries {
		return
	}
	type aged struct {
		name string
		mod  time.Time
	}
	var answers []aged
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if time.Since(info.ModTime()) > time.Minute {
				os.Remove(filepath.Join(c.dir, e.Name()))
			}
			continue
		}
		answers = append(answers, aged{e.Name(), info.ModTime()})
	}
	slices.SortFunc(answers, func(a, b aged) int { return cmp.Compare(a.mod.UnixNano(), b.mod.UnixNano()) })
	for _, a := range answers[:len(answers)/2] {
		os.Remove(filepath.Join(c.dir, a.name))
	}
}

package workspace

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CachedBytes adds up what the cache's layers hold, as their info files
// say (a layer being made or removed is not counted). It only reads:
// unlike List, it drops no stale refs.
func (c *LayerCache) CachedBytes() int64 {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), layerVersion+"-") {
			continue
		}
		if info, err := readLayerInfo(c.layer(e.Name())); err == nil {
			n += info.Bytes
		}
	}
	return n
}

// Cached reports that the cache holds a whole layer of commit: a new
// overlay workspace on it adds nothing to the cache.
func (c *LayerCache) Cached(commit string) bool {
	if !isObjectID(commit) {
		return false
	}
	info, err := readLayerInfo(c.layer(layerKey(commit)))
	return err == nil && info.Version == layerVersion
}

// CheckoutBytes estimates the disk a checkout of commit from repo takes,
// as a copy workspace or a new layer holds it: its files in whole 4 KiB
// blocks, as the commit's tree gives their sizes (git ls-tree, in repo;
// nothing is checked out), plus half their bytes for the pack of its
// objects in the agent's .git. The answer is remembered in the process.
func CheckoutBytes(ctx context.Context, repo, commit string) (int64, error) {
	if !isObjectID(commit) {
		return 0, fmt.Errorf("%q is not a full commit id", commit)
	}
	if n, ok := checkoutMemo.get(commit); ok {
		return n, nil
	}
	out, err := gitCmd{dir: repo, args: []string{"ls-tree", "-r", "-l", "-z", "--full-tree", commit}}.run(ctx)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", short(commit), err)
	}
	var blocks, size int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sc.Split(splitNUL)
	for sc.Scan() {
		// <mode> SP <type> SP <object> SP+ <size> TAB <path>
		meta, _, _ := strings.Cut(sc.Text(), "\t")
		fields := strings.Fields(meta)
		if len(fields) != 4 || fields[1] != "blob" {
			continue
		}
		n, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil {
			continue
		}
		blocks += (n + 4095) &^ 4095
		size += n
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	checkoutMemo.put(commit, blocks+size/2)
	return blocks + size/2, nil
}

// checkoutMemo remembers CheckoutBytes by commit (see commitMemo).
var checkoutMemo commitMemo[int64]

func splitNUL(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

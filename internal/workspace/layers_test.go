package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// overlayAt makes an overlay workspace n under root on cache c.
func overlayAt(t *testing.T, c *LayerCache, repo, base, root string, n int) (Layered, error) {
	t.Helper()
	s := strconv.Itoa(n)
	ws, err := NewOverlay(c).Create(context.Background(), repo, base, filepath.Join(root, "ws"+s), filepath.Join(root, "state"+s))
	if err != nil {
		return nil, err
	}
	return ws.(Layered), nil
}

func TestLayerMadeOnceForConcurrentWorkspaces(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	root := t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	wss := make([]Layered, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { wss[i], errs[i] = overlayAt(t, c, repo, base, root, i) })
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if wss[i].LayerMade() {
			made++
		}
		if wss[i].Layers().Lower != wss[0].Layers().Lower {
			t.Fatalf("workspaces on one commit have different lower layers: %s, %s", wss[i].Layers().Lower, wss[0].Layers().Lower)
		}
	}
	if made != 1 {
		t.Fatalf("the layer was made %d times", made)
	}
	layers, err := c.List()
	if err != nil || len(layers) != 1 || layers[0].Workspaces != n || layers[0].Commit != base || layers[0].Bytes <= 0 {
		t.Fatalf("List = %+v, %v", layers, err)
	}
	// A workspace removed (its directory and state) drops its ref; the
	// layer stays while any is left.
	for i := range n - 1 {
		removeWorkspace(t, root, i)
	}
	if removed, _, err := c.Collect(context.Background(), CollectOptions{}); err != nil || len(removed) != 0 {
		t.Fatalf("Collect removed %v (%v) while a workspace is on the layer", removed, err)
	}
	removeWorkspace(t, root, n-1)
	c.Wait() // (the background sync holds the layer's lock a moment)
	removed, total, err := c.Collect(context.Background(), CollectOptions{DryRun: true})
	if err != nil || len(removed) != 1 || total != 0 {
		t.Fatalf("dry run: %v, total %d, %v", removed, total, err)
	}
	if _, err := os.Stat(wss[0].Layers().Lower); err != nil {
		t.Fatalf("the dry run removed the layer: %v", err)
	}
	if removed, _, err = c.Collect(context.Background(), CollectOptions{}); err != nil || len(removed) != 1 {
		t.Fatalf("Collect: %v, %v", removed, err)
	}
	if _, err := os.Stat(wss[0].Layers().Lower); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unused layer is still there: %v", err)
	}
	if ents, _ := os.ReadDir(c.Dir()); len(ents) != 1 || ents[0].Name() != "tmp" {
		t.Fatalf("the cache holds %v after the collect", ents)
	}
}

func removeWorkspace(t *testing.T, root string, n int) {
	t.Helper()
	s := strconv.Itoa(n)
	for _, d := range []string{"ws" + s, "state" + s} {
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLayerCollectLeastRecentlyUsedWithinBudget(t *testing.T) {
	t.Parallel()
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	root := t.TempDir()
	var keys []string
	for i := range 3 {
		repo, base := testsupport.Repo(t, map[string]string{"f.txt": "layer " + strconv.Itoa(i) + "\n"})
		ws, err := overlayAt(t, c, repo, base, root, i)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, filepath.Base(filepath.Dir(ws.Layers().Lower)))
		removeWorkspace(t, root, i)
	}
	// Used: 1 long ago, 0 a while ago, 2 now.
	for i, age := range []time.Duration{time.Hour, 2 * time.Hour, 0} {
		at := time.Now().Add(-age)
		if err := os.Chtimes(filepath.Join(c.Dir(), keys[i], layerUsed), at, at); err != nil {
			t.Fatal(err)
		}
	}
	layers, err := c.List()
	if err != nil || len(layers) != 3 {
		t.Fatal(layers, err)
	}
	if layers[0].Key != keys[1] || layers[2].Key != keys[2] {
		t.Fatalf("not least recently used first: %v", layers)
	}
	// A budget of two layers removes the least recently used one.
	budget := layers[1].Bytes + layers[2].Bytes
	c.Wait() // (the background sync holds the layer's lock a moment)
	removed, total, err := c.Collect(context.Background(), CollectOptions{Budget: budget})
	if err != nil || len(removed) != 1 || removed[0].Key != keys[1] || total != budget {
		t.Fatalf("Collect(%d) removed %v, total %d, %v", budget, removed, total, err)
	}
}

func TestLayerFromAnEarlierBootUnsyncedIsMadeAgain(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	root := t.TempDir()
	ws, err := overlayAt(t, c, repo, base, root, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := c.layer(filepath.Base(filepath.Dir(ws.Layers().Lower)))
	unsync := func() {
		t.Helper()
		c.Wait()
		if err := os.Remove(filepath.Join(l.dir, layerSynced)); err != nil {
			t.Fatal(err)
		}
		info, err := readLayerInfo(l)
		if err != nil {
			t.Fatal(err)
		}
		info.Boot = "an-earlier-boot"
		b, _ := json.Marshal(info)
		if err := os.WriteFile(filepath.Join(l.dir, layerInfoName), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// In use: kept, and synced now.
	unsync()
	ws1, err := overlayAt(t, c, repo, base, root, 1)
	if err != nil || ws1.LayerMade() {
		t.Fatalf("a layer in use was made again (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(l.dir, layerSynced)); err != nil {
		t.Fatalf("the kept layer was not synced: %v", err)
	}
	// Unused: made again.
	removeWorkspace(t, root, 0)
	removeWorkspace(t, root, 1)
	unsync()
	ws2, err := overlayAt(t, c, repo, base, root, 2)
	if err != nil || !ws2.LayerMade() {
		t.Fatalf("an unsynced layer of an earlier boot was used as it was (%v)", err)
	}
}

func TestOverlayOpenRemakesAMissingLayer(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	root := t.TempDir()
	ws, err := overlayAt(t, c, repo, base, root, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws.Dir(), "new.txt"), "new\n", 0o644)
	c.Wait()
	if err := os.RemoveAll(c.Dir()); err != nil {
		t.Fatal(err)
	}
	again, err := NewOverlay(c).Open(context.Background(), ws.Dir(), filepath.Join(root, "state0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws.Layers().Lower, "README.md")); err != nil {
		t.Fatalf("the layer was not made again: %v", err)
	}
	if got := kinds(scanWS(t, again, Limits{})); len(got) != 1 || got["new.txt"] != "add 100644" {
		t.Fatalf("changes %v", got)
	}
	// A state directory without the overlay's record is not an overlay
	// workspace (it may be a plain checkout's).
	if _, err := NewOverlay(c).Open(context.Background(), ws.Dir(), t.TempDir()); !errors.Is(err, ErrNotOverlay) {
		t.Fatalf("Open without a record: %v, want ErrNotOverlay", err)
	}
}

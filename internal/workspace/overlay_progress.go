package workspace

import (
	"fmt"
	"os"
	"path/filepath"
)

// OverlayProgress says, for a progress line, how the overlay workspace
// whose state directory is stateDir is being made on commit: "" when
// stateDir holds no overlay workspace, or none being made (a copy, or
// nothing yet). The upper layer of an overlay starts empty, so counting
// its files would say 0 however far the making has come; this says what
// is true instead: on a layer of the cache (with its file count), or its
// layer being made. It only reads; nothing here is the agent's.
func (c *LayerCache) OverlayProgress(stateDir, commit string) string {
	if ptr, err := readPointer(stateDir); err == nil {
		if info, err := readLayerInfo(c.layer(ptr.Layer)); err == nil {
			return fmt.Sprintf("an overlay on the cached layer of %d files", info.Files)
		}
		return "an overlay on a cached layer"
	}
	if _, err := os.Lstat(filepath.Join(stateDir, repoName)); err != nil || !isObjectID(commit) {
		return ""
	}
	if info, err := readLayerInfo(c.layer(layerKey(commit))); err == nil {
		return fmt.Sprintf("an overlay on the cached layer of %d files", info.Files)
	}
	return "an overlay: making the base commit's shared layer"
}

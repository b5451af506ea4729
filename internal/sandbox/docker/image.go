package docker

import (
	"context"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// digestRE is a sha256 digest as engines write it.
var digestRE = lazyre.New(`^sha256:[0-9a-f]{64}$`)

// imageRef is a parsed --image value.
type imageRef struct {
	id     string // a full image id "sha256:..." (nothing else set)
	name   string // REF of REF@sha256:... or of a tag
	digest string // the "sha256:..." after @
}

// parseImageRef splits ref into an id, a name pinned by digest, or a tag
// (name only). A bare 64-digit hex string is an id.
func parseImageRef(ref string) imageRef {
	if digestRE.MatchString(ref) {
		return imageRef{id: ref}
	}
	if digestRE.MatchString("sha256:" + ref) {
		return imageRef{id: "sha256:" + ref}
	}
	if name, d, ok := strings.Cut(ref, "@"); ok {
		return imageRef{name: name, digest: d}
	}
	return imageRef{name: ref}
}

// ResolveImage implements sandbox.ImageResolver: the image must be on the
// engine (no pull) and pinned: by its id, by REF@sha256:DIGEST (a
// repository digest the engine holds for it), or as a tag that pins maps
// to the image's id or one of its repository digests.
func (b *Backend) ResolveImage(ctx context.Context, ref string, pins map[string]string) (sandbox.Image, error) {
	if ref == "" {
		return sandbox.Image{}, catalog.NoImage.New("the %s sandbox starts every run from an image", Name)
	}
	r := parseImageRef(ref)
	pin := r.digest
	if r.name != "" && r.digest == "" {
		pin = pins[ref]
		if pin == "" {
			return sandbox.Image{}, catalog.ImageNotPinned.New("%s is a tag: it can name another image tomorrow", ref)
		}
	}
	if pin != "" && !digestRE.MatchString(pin) {
		return sandbox.Image{}, catalog.ImageNotPinned.New("%s: %q is not a sha256 digest (sha256: and 64 hex digits)", ref, pin)
	}
	cl, err := b.engine(ctx)
	if err != nil {
		return sandbox.Image{}, err
	}
	defer cl.Close()
	// A tag is looked up by name, then held to its pin; an id or a name
	// with a digest is looked up as given: the engine finds it only if it
	// has that very content.
	res, err := cl.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandbox.Image{}, catalog.ImageMissing.New("%s is not on the engine at %s", ref, cl.DaemonHost())
		}
		return sandbox.Image{}, engineError(cl.DaemonHost(), err)
	}
	img := sandbox.Image{Ref: ref, ID: res.ID, Digests: res.RepoDigests}
	if !digestRE.MatchString(img.ID) {
		return sandbox.Image{}, catalog.ImageMissing.New("%s: the engine gave the image id %q, not a sha256 digest", ref, img.ID)
	}
	if res.Os != "" && res.Os != "linux" {
		return sandbox.Image{}, catalog.ImageMissing.New("%s is a %s image; the sandbox runs Linux images", ref, res.Os)
	}
	switch {
	case r.id != "":
		if img.ID != r.id {
			return sandbox.Image{}, catalog.ImageMismatch.New("%s names the image %s on the engine", ref, img.ID)
		}
	case pin != "":
		if !matchesDigest(img, pin) {
			return sandbox.Image{}, catalog.ImageMismatch.New("%s is %s on the engine (repository digests: %s), pinned %s",
				r.name, img.ID, strings.Join(img.Digests, ", "), pin)
		}
	}
	return img, nil
}

// matchesDigest reports whether d is img's id or the digest of one of its
// repository digests (of any repository: a digest names content, not a
// place).
func matchesDigest(img sandbox.Image, d string) bool {
	if img.ID == d {
		return true
	}
	return slices.ContainsFunc(img.Digests, func(rd string) bool {
		_, got, ok := strings.Cut(rd, "@")
		return ok && got == d
	})
}

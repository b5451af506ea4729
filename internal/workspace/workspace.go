package workspace

import (
	"context"

	"github.com/agentrun/agentrun/internal/run"
)

// Provider makes and opens workspaces. Implementations: the plain checkout
// (NewCheckout) and the copy-on-write overlay (NewOverlay).
type Provider interface {
	// Create makes dir (which must not exist) as a checkout of commit from
	// the repository repo, and records in stateDir (outside dir) what it
	// needs to scan changes later. The result is a git repository whose HEAD
	// is commit, so tools inside work.
	Create(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error)
	// Open returns an existing workspace made by Create.
	Open(ctx context.Context, dir, stateDir string) (Workspace, error)
}

// Filler is an optional Provider capability. Fill is Create into dir
// that already exists and is empty: the caller made it so that a sandbox
// can start on it while the workspace is filled (nothing may run in dir
// until Fill returns). On failure dir is left empty.
type Filler interface {
	Fill(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error)
}

// Workspace is one agent tree.
type Workspace interface {
	// Dir is the directory Create made: the tree itself, or for an
	// overlay (Layered) its upper layer, which holds what changed.
	Dir() string
	// Scan lists what changed since Create, without running anything in the
	// workspace. Entries it will not export are in ChangeSet.Refused.
	// Exceeding the limits is an error (ErrTooLarge wrapped).
	Scan(ctx context.Context, lim Limits) (*ChangeSet, error)
}

// Limits cap the export.
type Limits struct {
	MaxFiles int   // changed files; default 10000
	MaxBytes int64 // total bytes of changed content; default 100 MiB
	MaxFile  int64 // one file; default MaxBytes
}

// Change is one changed path.
type Change struct {
	Path    string // slash-separated, relative, validated
	Kind    string // add | modify | delete
	Mode    uint32 // 0100644, 0100755, 0120000 (symlink)
	Content []byte // file content or symlink target; nil for delete
}

// ChangeSet is the outcome of a scan.
type ChangeSet struct {
	Changes []Change
	Refused []run.Refusal

	base *exportBase // what the scan compared with, for Export (nil: Export asks git)
}

// ExportOptions say where and how the result commit is written.
type ExportOptions struct {
	Repo        string // user's repository
	Base        string // base commit
	Branch      string // e.g. agentrun/<id>
	Message     string // full commit message
	AuthorName  string
	AuthorEmail string
	// IdentityRead says the caller has already read the repository's
	// user.name and user.email (ConfigIdentity) into the author fields:
	// what is still empty there is not set, and is not read again.
	IdentityRead bool
	PatchPath    string // where result.patch is written
	// Force moves an existing branch (resume re-export); without it an
	// existing branch that is not an ancestor-compatible previous result is
	// an error.
	Force bool
	// Record, when set, records the result once the branch points at it;
	// nothing is cancelled from there on. An error from it moves the
	// branch back to where it was, and Export returns it.
	Record func(res *run.ExportResult) error
}

// Package workspace makes the agent's tree from the base commit, finds what
// changed, and exports the validated changes as a commit on agentrun/<id>.
//
// The pieces:
//
//   - Repo (repo.go): the user's repository. OpenRepo, ResolveBase, Dirty,
//     Inspect (the first three at once, side by side) and the branch helpers
//     run git there, and only there.
//   - Provider (checkout.go): NewCheckout makes a workspace as a fresh git
//     repository holding only the objects of the base commit (copied by a
//     pack stream, never hard-linked, no alternates), checked out detached,
//     and records a manifest of the checked-out files in the state
//     directory, outside the tree. Its Fill (the Filler capability) does the
//     same into an empty directory that already exists, so a sandbox can
//     start on the directory meanwhile.
//   - Provider (overlayws.go): NewOverlay makes a copy-on-write workspace:
//     the lower layer is the checkout of the base commit, made once per
//     commit in a LayerCache (layers.go, layers_gc.go: content-addressed,
//     made in a temp directory and renamed, flocked, shared by every
//     workspace on the commit, collected least recently used first when
//     unused) and never written; the workspace's directory is the upper
//     layer, which holds only what the agent changed. The tree the agent
//     sees is the layers mounted as an overlay (package overlay), which
//     the sandbox does in its own mount namespace (Layered).
//   - Scan (scan.go): walks the workspace from a root file descriptor with
//     openat(O_NOFOLLOW), compares with the manifest and reads every changed
//     file with symlink-safe calls. Entries it will not export become
//     run.Refusal values; see validate.go for the rules. Untracked paths
//     excluded by the tree's .gitignore files or .git/info/exclude are not
//     changes (ignore.go): a build's node_modules/ is neither exported nor
//     counted against the limits; tracked paths are never ignored.
//     An overlay workspace's scan (scan_overlay.go) walks the upper layer
//     only, by the kernel's rules (whiteouts delete, opaque directories
//     replace), with the same checks on every entry, and looks the base's
//     entries up in the layer's manifest in place (manifest_mapped.go), so
//     that it costs what the changes cost.
//   - Included files (include.go, include_copy.go): git-ignored files of
//     the user's working tree a run asks for (.worktreeinclude, --include),
//     resolved and hashed by ResolveInclude at submit (only paths git
//     ignores, regular files and symlinks within the repository, within
//     bounds), copied into a new workspace by Include (an overlay's upper
//     layer, never its lower one) and taken out of every change set by
//     DropIncluded, so that they never reach the branch.
//   - Full history (history.go): ObjectDirs names the user's object
//     directories (shown read-only by the sandbox), ShareHistory lists them
//     as the new workspace's alternates and lifts its shallow mark.
//   - Export (export.go): writes blobs, trees and commit into the user's
//     repository as loose objects (export_objects.go, on the base's tree
//     objects Create recorded beside the manifest, trees.go; fast-import
//     where that record does not cover the change), moves the branch with
//     update-ref, and writes the patch and the diffstat from one diff.
//   - workspacetest: the conformance suite every Provider passes.
//
// Invariant: the host never runs git inside a workspace after the agent has
// had it. Creation happens before the agent starts; the change scan reads
// files with symlink-safe calls (never following links, refusing special
// files, hard links, .git components and escapes, capping counts and
// bytes); export runs git plumbing only in the user's repository with hooks,
// fsmonitor, filters, textconv and external diff disabled.
//
// Limits: one file over Limits.MaxFile is refused (reported, not exported,
// the rest goes on); more changed entries (adds, modifications, deletions)
// than Limits.MaxFiles, more refusals than Limits.MaxFiles, or more changed
// bytes than Limits.MaxBytes fail the whole scan with ErrTooLarge, because
// a partial export of a too-large change would mislead the reviewer.
//
// A refused path keeps its base version: a tracked file replaced by a FIFO
// or an escaping symlink, or a directory replaced by one, is neither
// exported nor deleted.
//
// This package must never: run git with the workspace as its repository or
// work tree after Create returns (an overlay's upper layer and its
// merged tree included), write to a lower layer after it is made, follow a symlink inside the workspace,
// open a non-regular file from the workspace for reading, or read a path
// outside the workspace on behalf of the export.
package workspace

package workspace

import "errors"

var (
	// ErrNoChanges: the export found nothing to commit (no changes, or only
	// refused ones, or changes that leave the base tree as it was). The
	// caller maps it to the run reason no_changes.
	ErrNoChanges = errors.New("no changes to export")
	// ErrTooLarge: the changes exceed Limits.MaxFiles or Limits.MaxBytes.
	ErrTooLarge = errors.New("changes exceed the export limits")
	// ErrBranchExists: the result branch exists and is not the same result;
	// pass ExportOptions.Force to move it.
	ErrBranchExists = errors.New("branch already exists")
	// ErrBranchMoved: the branch no longer points where the caller expected.
	ErrBranchMoved = errors.New("branch moved")
	// ErrNoManifest: the state directory holds no manifest from Create.
	ErrNoManifest = errors.New("workspace manifest missing")
)

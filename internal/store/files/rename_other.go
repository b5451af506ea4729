//go:build !linux

package files

import "os"

// renameNoReplace renames a directory into place; rename refuses a
// non-empty target, and every run directory holds run.json.
func renameNoReplace(from, to string) error { return os.Rename(from, to) }

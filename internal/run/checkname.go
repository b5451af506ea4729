package run

import "regexp"

var checkNameRe = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$`)

// ValidCheckName reports a usable check name: letters, digits, '-', '_'
// and '.', not starting with '.', at most 64 (the name becomes a file name
// under attempts/<n>/checks).
func ValidCheckName(n string) bool { return checkNameRe.MatchString(n) }

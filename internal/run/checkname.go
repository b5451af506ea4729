package run

// ValidCheckName reports a usable check name: letters, digits, '-', '_'
// and '.', not starting with '.', at most 64 (the name becomes a file name
// under attempts/<n>/checks). It is written out rather than a pattern so
// that no process pays for compiling one at start.
func ValidCheckName(n string) bool {
	if n == "" || len(n) > 64 || n[0] == '.' {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

package submit

import "github.com/agentrun/agentrun/internal/egress"

// canonicalAllow validates allowlist entries and returns their canonical
// form (presets expanded, sorted, deduplicated; catalog.BadAllow for a bad
// entry).
func canonicalAllow(entries []string) ([]string, error) {
	a, err := egress.NewAllowlist(entries)
	if err != nil {
		return nil, err
	}
	return a.Entries(), nil
}

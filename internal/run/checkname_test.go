package run

import (
	"regexp"
	"strings"
	"testing"
)

// checkNamePattern is what ValidCheckName spells out.
var checkNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$`)

func TestValidCheckName(t *testing.T) {
	for _, n := range []string{"", "test", "go-vet", "a.b", "_x", "-x", ".x", "a/b", "a b", "é", "A9",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "x\n", "x\x00", "..", "a..b"} {
		if got, want := ValidCheckName(n), checkNamePattern.MatchString(n); got != want {
			t.Errorf("ValidCheckName(%q) = %v, the pattern says %v", n, got, want)
		}
	}
}

func FuzzValidCheckName(f *testing.F) {
	f.Add("test")
	f.Add(".hidden")
	f.Fuzz(func(t *testing.T, n string) {
		if got, want := ValidCheckName(n), checkNamePattern.MatchString(n); got != want {
			t.Errorf("ValidCheckName(%q) = %v, the pattern says %v", n, got, want)
		}
	})
}

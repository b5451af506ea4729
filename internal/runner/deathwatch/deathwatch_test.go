package deathwatch

import (
	"maps"
	"strings"
	"testing"
)

// TestReadWhatLineWrites: the groups the runner reports with Line are the
// groups Read keeps, and a malformed or hostile line changes nothing.
func TestReadWhatLineWrites(t *testing.T) {
	var b strings.Builder
	b.WriteString(Line(100, Watched{}, false))
	b.WriteString(Line(200, Watched{Link: "pipe:[4242]", Start: 77}, false))
	b.WriteString(Line(300, Watched{Link: "pipe:[1]", Start: 1}, false))
	b.WriteString(Line(300, Watched{}, true))
	b.WriteString("+ 1\n+ -5\n+ 400 /etc/passwd 3\n+ 500 pipe:[9] x\nnonsense\n+ " + strings.Repeat("9", 600) + "\n")
	got := Read(strings.NewReader(b.String()))
	want := map[int]Watched{100: {}, 200: {Link: "pipe:[4242]", Start: 77}}
	if !maps.Equal(got, want) {
		t.Fatalf("Read kept %v, want %v", got, want)
	}
}

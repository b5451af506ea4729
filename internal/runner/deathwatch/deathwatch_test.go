package deathwatch

import (
	"maps"
	"strings"
	"testing"
)

// TestReadWhatIsReported: the groups the runner reports with Started and
// Ended are the groups Read keeps, and a malformed or hostile line
// changes nothing.
func TestReadWhatIsReported(t *testing.T) {
	var b strings.Builder
	b.WriteString(Started(100, Watched{}))
	b.WriteString(Started(200, Watched{Link: "pipe:[4242]", Start: 77}))
	b.WriteString(Started(300, Watched{Link: "pipe:[1]", Start: 1}))
	b.WriteString(Ended(300))
	b.WriteString("+ 1\n+ -5\n+ 400 /etc/passwd 3\n+ 500 pipe:[9] x\nnonsense\n+ " + strings.Repeat("9", 600) + "\n")
	got := Read(strings.NewReader(b.String()))
	want := map[int]Watched{100: {}, 200: {Link: "pipe:[4242]", Start: 77}}
	if !maps.Equal(got, want) {
		t.Fatalf("Read kept %v, want %v", got, want)
	}
}

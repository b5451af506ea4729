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

// TestReadExpected: a marker reported before its command's start stays
// expected until the group's report carries it or it is dropped; a
// malformed expectation changes nothing.
func TestReadExpected(t *testing.T) {
	var b strings.Builder
	b.WriteString(Expected(Watched{Link: "pipe:[10]", Start: 5}))
	b.WriteString(Expected(Watched{Link: "pipe:[11]", Start: 6}))
	b.WriteString(Expected(Watched{Link: "pipe:[12]", Start: 7}))
	b.WriteString(Started(400, Watched{Link: "pipe:[11]", Start: 8}))
	b.WriteString(Dropped("pipe:[12]"))
	b.WriteString("? /etc/passwd 3\n? pipe:[13] x\n? pipe:[14]\n")
	live, expected := ReadAll(strings.NewReader(b.String()))
	if want := map[string]uint64{"pipe:[10]": 5}; !maps.Equal(expected, want) {
		t.Fatalf("expected %v, want %v", expected, want)
	}
	if want := map[int]Watched{400: {Link: "pipe:[11]", Start: 8}}; !maps.Equal(live, want) {
		t.Fatalf("live %v, want %v", live, want)
	}
}

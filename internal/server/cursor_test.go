package server

import (
	"testing"

	"github.com/agentrun/agentrun/internal/mcp"
)

func TestCursor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want mcp.Cursor
		ok   bool
	}{
		{"", mcp.Cursor{}, true},
		{"12.1.3456", mcp.Cursor{Seq: 12, Attempt: 1, Offset: 3456}, true},
		{"0.0.0", mcp.Cursor{}, true},
		{"12.1", mcp.Cursor{}, false},
		{"12.1.-3", mcp.Cursor{}, false},
		{"a.b.c", mcp.Cursor{}, false},
		{"1.2.3.4", mcp.Cursor{}, false},
		{"99999999999999999999.1.1", mcp.Cursor{}, false},
	} {
		got, err := parseCursor(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseCursor(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

// FuzzCursor: any Last-Event-ID is a cursor or a bad_request, and a
// cursor reads back as itself.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"", "1.1.0", "12.3.456", "x", "1..2", "-1.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			return
		}
		if c.Seq < 0 || c.Attempt < 0 || c.Offset < 0 {
			t.Fatalf("%q: a negative cursor %+v", s, c)
		}
		if back, err := parseCursor(formatCursor(c)); err != nil || back != c {
			t.Fatalf("%q: %+v does not read back (%+v, %v)", s, c, back, err)
		}
	})
}

package cli

// table.go renders aligned tables and key/value blocks for people. Unlike
// text/tabwriter it measures cells by their visible width, so a cell
// coloured with an SGR sequence still lines up.

import (
	"io"
	"strings"
	"unicode/utf8"
)

// table is a set of rows under an optional header, columns separated by
// two spaces, the last column never padded.
type table struct {
	header []string
	rows   [][]string
	colour bool // header dimmed when set
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	all := t.rows
	if len(t.header) > 0 {
		all = append([][]string{t.header}, t.rows...)
	}
	var widths []int
	for _, row := range all {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], visibleWidth(c))
		}
	}
	var b strings.Builder
	for n, row := range all {
		var line strings.Builder
		for i, c := range row {
			if n == 0 && len(t.header) > 0 {
				c = paint(t.colour, sgrDim, c)
			}
			line.WriteString(c)
			if i < len(row)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-visibleWidth(c)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// visibleWidth is the number of runes of s outside SGR escape sequences.
func visibleWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j + 1
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return n
}

// fields is a key/value block ("status   failed"), keys aligned.
type fields struct {
	t table
}

func (f *fields) add(key, value string) {
	if value == "" {
		return
	}
	f.t.add(key, value)
}

func (f *fields) write(w io.Writer) error { return f.t.write(w) }

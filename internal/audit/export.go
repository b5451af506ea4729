package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// Line is one line of an export (JSON lines): an entry or a checkpoint,
// the checkpoint after the entry it seals.
type Line struct {
	Entry      *Entry      `json:"entry,omitempty"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// exportPage is how many entries Export reads at once.
const exportPage = 1000

// Export writes the whole trail of l to w as JSON lines. It exports up
// to the head and the last checkpoint as they were when it began (so
// that a checkpoint made while it runs does not look like one past the
// end), and every checkpoint up to there, also those past the last
// entry: a log cut short keeps the checkpoints that show it.
func Export(ctx context.Context, l Log, w io.Writer) error {
	head, sealed, err := l.Head(ctx)
	if err != nil {
		return err
	}
	end := max(head, sealed)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	var cps []Checkpoint
	cpAfter := int64(0)
	nextCP := func() (*Checkpoint, error) {
		if len(cps) == 0 {
			page, err := l.Checkpoints(ctx, cpAfter, exportPage)
			if err != nil {
				return nil, err
			}
			cps = page
		}
		if len(cps) == 0 || cps[0].Seq > end {
			return nil, nil
		}
		return &cps[0], nil
	}
	// emit writes the checkpoints up to seq.
	emit := func(seq int64) error {
		for {
			cp, err := nextCP()
			if err != nil || cp == nil || cp.Seq > seq {
				return err
			}
			c := *cp
			if err := enc.Encode(Line{Checkpoint: &c}); err != nil {
				return err
			}
			cpAfter, cps = c.Seq, cps[1:]
		}
	}
	after := int64(0)
	for after < end {
		page, err := l.Entries(ctx, Query{After: after, Limit: exportPage})
		if err != nil {
			return err
		}
		for _, e := range page {
			if e.Seq > end {
				break
			}
			if err := emit(e.Seq - 1); err != nil {
				return err
			}
			if err := enc.Encode(Line{Entry: &e}); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(page) < exportPage || page[len(page)-1].Seq > end {
			break
		}
	}
	if err := emit(end); err != nil {
		return err
	}
	return bw.Flush()
}

// maxLine bounds one line of an export.
const maxLine = 16 << 20

// ReadExport reads an export written by Export (agentrun audit export).
func ReadExport(r io.Reader) ([]Entry, []Checkpoint, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var es []Entry
	var cps []Checkpoint
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l Line
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch {
		case l.Entry != nil && l.Checkpoint == nil:
			es = append(es, *l.Entry)
		case l.Checkpoint != nil && l.Entry == nil:
			cps = append(cps, *l.Checkpoint)
		default:
			return nil, nil, fmt.Errorf("line %d: want {\"entry\": ...} or {\"checkpoint\": ...}", n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return es, cps, nil
}

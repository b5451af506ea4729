package loop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/agentrun/agentrun/internal/agent/transcript"
)

// recordOutputCap bounds a tool result as recorded (the model saw up to the
// loop's result cap; the spill file holds the rest).
const recordOutputCap = 4000

type transcriptWriter struct {
	f   *os.File
	w   *bufio.Writer
	err error
}

func openTranscript(path string) (*transcriptWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open transcript: %w", err)
	}
	return &transcriptWriter{f: f, w: bufio.NewWriter(f)}, nil
}

func (t *transcriptWriter) add(r transcript.Record) {
	if t == nil || t.err != nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.err = err
		return
	}
	t.w.Write(b)
	t.w.WriteByte('\n')
	// Flush per record so logs -f and a crash see whole lines.
	t.err = t.w.Flush()
}

func (t *transcriptWriter) close() error {
	if t == nil {
		return nil
	}
	ferr := t.w.Flush()
	cerr := t.f.Close()
	if t.err != nil {
		return t.err
	}
	if ferr != nil {
		return ferr
	}
	return cerr
}

func clipRecord(s string) string {
	if len(s) <= recordOutputCap {
		return s
	}
	return s[:recordOutputCap] + fmt.Sprintf("\n[… %d more bytes not recorded]", len(s)-recordOutputCap)
}

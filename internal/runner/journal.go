package runner

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// JournalName is the journal file in the runner's state dir: one started
// request id per line, append-only.
const JournalName = "runner.journal"

// journalKeep bounds how many ids of earlier instances are carried over.
const journalKeep = 20000

type journal struct {
	f *os.File
}

// openJournal reads the ids earlier instances started, rewrites the journal
// with the most recent of them (atomically) and opens it for appending.
func openJournal(dir string) (*journal, map[string]bool, error) {
	path := filepath.Join(dir, JournalName)
	prev := map[string]bool{}
	var ids []string
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if id := strings.TrimSpace(sc.Text()); id != "" {
				ids = append(ids, id)
			}
		}
		f.Close()
	} else if !os.IsNotExist(err) {
		return nil, nil, fmt.Errorf("open runner journal: %w", err)
	}
	if len(ids) > journalKeep {
		ids = ids[len(ids)-journalKeep:]
	}
	for _, id := range ids {
		prev[id] = true
	}
	tmp := path + ".tmp"
	data := strings.Join(ids, "\n")
	if data != "" {
		data += "\n"
	}
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return nil, nil, fmt.Errorf("write runner journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, nil, fmt.Errorf("write runner journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open runner journal: %w", err)
	}
	return &journal{f: f}, prev, nil
}

// add records that id started. It is written before the request runs; a
// crash of the runner process keeps it (the kernel has the write).
func (j *journal) add(id string) error {
	if strings.ContainsAny(id, "\n\r") {
		return fmt.Errorf("bad request id %q", id)
	}
	_, err := j.f.WriteString(id + "\n")
	return err
}

func (j *journal) close() { j.f.Close() }

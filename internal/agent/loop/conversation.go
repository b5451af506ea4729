package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/agent/provider"
)

// ConversationFile is the conversation kept in the run directory across
// attempts.
const ConversationFile = "conversation.json"

type conversation struct {
	Version  int                `json:"version"`
	Messages []provider.Message `json:"messages"`
}

func loadConversation(runDir string) ([]provider.Message, error) {
	b, err := os.ReadFile(filepath.Join(runDir, ConversationFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read conversation: %w", err)
	}
	var c conversation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read conversation: %w", err)
	}
	return c.Messages, nil
}

// saveConversation replaces the conversation file atomically. Between
// turns it is not fsynced (a supervisor that dies still leaves a whole
// file; only a machine crash can lose the last turns); at the end of an
// attempt it is (durable).
func saveConversation(runDir string, msgs []provider.Message, durable bool) error {
	b, err := json.Marshal(conversation{Version: 1, Messages: msgs})
	if err != nil {
		return fmt.Errorf("encode conversation: %w", err)
	}
	return writeAtomic(filepath.Join(runDir, ConversationFile), b, durable)
}

// writeAtomic writes a temp file, fsyncs it when durable, and renames it
// into place.
func writeAtomic(path string, data []byte, durable bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

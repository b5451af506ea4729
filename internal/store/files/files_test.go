package files_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

func openStore(t testing.TB) *files.Store {
	t.Helper()
	s, err := files.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) run.Store { return openStore(t) })
}

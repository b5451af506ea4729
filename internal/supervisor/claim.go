package supervisor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentrun/agentrun/internal/run"
)

// ResumeHandoff is what the last resume of run id journaled for the
// worker that claims it (Home.Claimed): the note for the next attempt and
// how the run had ended. A run never resumed has none (the zero Handoff).
// The environment's values are never journaled: the worker reads them
// from its own environment.
func ResumeHandoff(ctx context.Context, st run.Store, id string) (Handoff, error) {
	evs, err := st.Events(ctx, id, 0)
	if err != nil {
		return Handoff{}, fmt.Errorf("read %s's journal: %w", id, err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != run.EventResume {
			continue
		}
		var ho Handoff
		if len(evs[i].Data) > 0 {
			if err := json.Unmarshal(evs[i].Data, &ho); err != nil {
				return Handoff{}, fmt.Errorf("read %s's resume: %w", id, err)
			}
		}
		return Handoff{Note: ho.Note, Ended: ho.Ended, ExportOnly: ho.ExportOnly}, nil
	}
	return Handoff{}, nil
}

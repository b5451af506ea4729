package run

import (
	"encoding/json"
	"time"
)

// Event types written to a run's journal (events.jsonl). The journal is
// append-only; every state transition is appended before it takes effect
// elsewhere.
const (
	EventSubmitted = "submitted"
	EventState     = "state"      // State/Reason carry the new state
	EventAttempt   = "attempt"    // an agent attempt started (Attempt set)
	EventAgentExit = "agent_exit" // an agent attempt ended
	EventCheck     = "check"      // a check finished (Data: name, exit_code, passed, duration)
	EventExport    = "export"     // export finished (Data: commit, files, refused)
	EventRefused   = "refused"    // export refused an entry (Data: path, reason)
	EventEgress    = "egress"     // an egress decision (Data: decision, host, port, bytes, why)
	EventSandbox   = "sandbox"    // sandbox started/stopped; enforced limits
	EventCancel    = "cancel"     // cancel requested
	EventResume    = "resume"     // resumed, for a worker to claim (Data: note, ended)
	EventWarning   = "warning"    // something the user should know
	EventTool      = "tool"       // built-in agent tool call summary
	EventVerdict   = "verdict"    // a reviewer's verdict (Data: run.Verdict)
	EventSetup     = "setup"      // the setup layer: started, cached, done (Data: key, duration, ...)
	EventGateway   = "gateway"    // the model gateway: started, capacity waits, budget, refused requests, upstream errors (Data: kind, ...)
	EventHome      = "home"       // the agent's HOME: its CLI warmed it up, or it started from that warm HOME (Data: kind, key, duration)
)

// Event is one line of the journal.
type Event struct {
	Seq     int64           `json:"seq"` // 1-based, assigned by the store
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	State   State           `json:"status,omitempty"`
	Reason  Reason          `json:"reason,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// NewEvent builds an event; data is JSON-encoded (nil for none).
func NewEvent(typ, msg string, data any) Event {
	e := Event{Time: time.Now().UTC(), Type: typ, Message: msg}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

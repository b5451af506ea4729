// Package layout names every path under the agentrun data directory
// (AGENTRUN_HOME). It only computes paths; it creates nothing. Ids must be
// validated (run.ValidateID) before they are turned into paths.
//
//	$AGENTRUN_HOME/
//	  runs/<id>/run.json            the run record (replaced atomically)
//	  runs/<id>/events.jsonl        the append-only journal
//	  runs/<id>/run.lock            flock for read-modify-write of run.json
//	  runs/<id>/supervisor.lock     flock held by the live supervisor; its fencing token
//	  runs/<id>/supervisor.log      the supervisor's own stderr
//	  runs/<id>/workspace/          the agent's tree (with an overlay: its upper layer, the changes)
//	  runs/<id>/ws-state/           workspace bookkeeping (outside the tree; an overlay's work directory)
//	  runs/<id>/workspace-removed   when agentrun gc removed the workspace (and HOME)
//	  runs/<id>/home/               HOME inside the sandbox
//	  runs/<id>/home.filling        HOME is being filled from a warm HOME (external.WarmHome)
//	  runs/<id>/sandbox/            sandbox backend state (sockets)
//	  runs/<id>/attempts/<n>/agent.log, prompt.txt, transcript.jsonl
//	  runs/<id>/attempts/<n>/checks/<name>.log
//	  runs/<id>/spill/              tool output too long for the model (built-in agent)
//	  runs/<id>/result.patch
//	  seq                           the last run's submission number (Seq)
//	  queue/<seq>-<id>              runs waiting for a slot, oldest first
//	  queue.lock, slots/<k>.lock    the queue's order and the concurrency limit
//	  capacity/                     model servers' shared request slots
//	  cache/layers/                 overlay workspaces' lower layers, one per base commit (workspace.LayerCache)
//	  cache/layers-probe-ok         the native sandbox mounted an overlay here in this boot
//	  cache/agent-homes/<profile>-<sandbox>-<install>/  an agent CLI's warm HOME, copied into each run's (external.WarmHome)
//
// The supervisor.lock, queue and slot files are the flock coordinator's
// (coord/flock); run.json, events.jsonl, run.lock and seq the files
// store's (store/files).
package layout

import (
	"path/filepath"
	"strconv"
)

// Layout is rooted at the data directory.
type Layout struct{ Home string }

func (l Layout) Runs() string             { return filepath.Join(l.Home, "runs") }
func (l Layout) RunDir(id string) string  { return filepath.Join(l.Home, "runs", id) }
func (l Layout) RunJSON(id string) string { return filepath.Join(l.RunDir(id), "run.json") }
func (l Layout) Events(id string) string  { return filepath.Join(l.RunDir(id), "events.jsonl") }
func (l Layout) RunLock(id string) string { return filepath.Join(l.RunDir(id), "run.lock") }
func (l Layout) SupervisorLock(id string) string {
	return filepath.Join(l.RunDir(id), "supervisor.lock")
}
func (l Layout) SupervisorLog(id string) string  { return filepath.Join(l.RunDir(id), "supervisor.log") }
func (l Layout) Workspace(id string) string      { return filepath.Join(l.RunDir(id), "workspace") }
func (l Layout) WorkspaceState(id string) string { return filepath.Join(l.RunDir(id), "ws-state") }
func (l Layout) SandboxHome(id string) string    { return filepath.Join(l.RunDir(id), "home") }
func (l Layout) SandboxState(id string) string   { return filepath.Join(l.RunDir(id), "sandbox") }
func (l Layout) SetupLog(id string) string       { return filepath.Join(l.RunDir(id), "setup.log") }
func (l Layout) SetupState(id string) string     { return filepath.Join(l.RunDir(id), "setup-sandbox") }
func (l Layout) Patch(id string) string          { return filepath.Join(l.RunDir(id), "result.patch") }

// WorkspaceRemoved marks a run whose workspace agentrun gc removed.
func (l Layout) WorkspaceRemoved(id string) string {
	return filepath.Join(l.RunDir(id), "workspace-removed")
}

func (l Layout) AttemptDir(id string, n int) string {
	return filepath.Join(l.RunDir(id), "attempts", strconv.Itoa(n))
}
func (l Layout) AgentLog(id string, n int) string {
	return filepath.Join(l.AttemptDir(id, n), "agent.log")
}
func (l Layout) Prompt(id string, n int) string {
	return filepath.Join(l.AttemptDir(id, n), "prompt.txt")
}
func (l Layout) Transcript(id string, n int) string {
	return filepath.Join(l.AttemptDir(id, n), "transcript.jsonl")
}

// CheckLog is the log of check name after attempt n. name must be a valid
// check name (letters, digits, '-', '_', '.'; not starting with '.').
func (l Layout) CheckLog(id string, n int, name string) string {
	return filepath.Join(l.AttemptDir(id, n), "checks", name+".log")
}

// CheckLogRel is CheckLog relative to the run directory (stored in run.json).
func CheckLogRel(n int, name string) string {
	return filepath.Join("attempts", strconv.Itoa(n), "checks", name+".log")
}

func (l Layout) QueueLock() string { return filepath.Join(l.Home, "queue.lock") }

// Queue is the directory of runs waiting for a slot.
func (l Layout) Queue() string { return filepath.Join(l.Home, "queue") }

// Cache holds what runs share: the overlay workspaces' layers, and what
// the sandbox remembers of its probe of overlay mounts.
func (l Layout) Cache() string { return filepath.Join(l.Home, "cache") }

// LayerCache is the directory of the overlay workspaces' shared lower
// layers.
func (l Layout) LayerCache() string { return filepath.Join(l.Cache(), "layers") }

// CommitCache is the directory of what is known of the commits runs were
// submitted on (a file of the base's tree, the size of its checkout), so
// that the next submit on one asks git less.
func (l Layout) CommitCache() string { return filepath.Join(l.Cache(), "commits") }

// AgentHomes is the directory of the agent CLIs' warm HOMEs.
func (l Layout) AgentHomes() string { return filepath.Join(l.Cache(), "agent-homes") }

// Capacity is the directory of the model servers' shared request slots.
func (l Layout) Capacity() string { return filepath.Join(l.Home, "capacity") }
func (l Layout) SlotLock(k int) string {
	return filepath.Join(l.Home, "slots", strconv.Itoa(k)+".lock")
}
func (l Layout) Seq() string { return filepath.Join(l.Home, "seq") }

// Package loop is the built-in agent: a tool-use loop that runs in the
// supervisor, on the host, against a model provider (OpenAI-compatible or
// Anthropic), and acts on the workspace only through the sandbox's
// runner.Client (the tools in agent/tools).
//
// One attempt, turn by turn:
//
//	prompt ─> [budget: trim old tool results, compact if short] ─> chat
//	   ^                                                               │
//	   │     tool calls: run each through the runner, cap results  <───┤
//	   │     no call: classify (truncated, empty, thinking only,       │
//	   └──── tool call as text: nudge; an answer ends the attempt) <───┘
//
// It ends the attempt on finish or an answer (completed), on repeated model
// failures (model_error), no progress (stalled), the same failing command
// again and again (stuck), max_turns, the context deadline (timeout,
// cancelled) or a context it cannot fit (context_exhausted).
//
// Contract: the conversation is kept in RunDir/conversation.json so the
// next attempt continues it; the transcript (JSON lines) is written to
// Dir/transcript.jsonl; earlier messages never change from one request to
// the next unless the context budget forces a trim or a compaction (prompt
// caches depend on it). Repository instructions (AGENTS.md, CLAUDE.md) are
// read from git objects of the base commit in the user's repository.
//
// It must never: put an API key into the sandbox, its environment, the
// transcript, the conversation, the logs or an event; run git or anything
// else in the workspace on the host; read a file the agent wrote with host
// tools.
package loop

// Package external runs external coding-agent CLIs (claude, codex, gemini,
// qwen, crush, opencode, or any command given with --agent-cmd) inside the
// sandbox. Profiles are data, kept in one table (profiles.go): the command
// line, how the task is passed, which environment variables the agent may
// receive, and which hosts it needs (the egress allowlist).
//
// Contract: the task text is data. It always reaches the agent on stdin;
// a profile whose CLI wants the prompt as an argument reads it from stdin
// in a quoted command substitution ("$(cat)"), so the shell never parses
// the task as code. The command runs through runner Exec (sh -c inside the
// sandbox) in its own process group; cancelling the context kills the whole
// group. Output is streamed to the attempt's agent.log.
//
// It must never run anything on the host, and never pass an environment
// variable a profile (or --env) does not name.
package external

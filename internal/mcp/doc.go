// Package mcp is agentrun's MCP server (the Model Context Protocol, on the
// official Go SDK): the tools an orchestrating agent drives runs with
// (submit, list, status, logs, result, diff, cancel, resume, verdict,
// egress), a run's patch and its attempts' transcripts as resources, and
// progress notifications while a submitted run is waited for.
//
// Contract: every tool runs one agentrun command line in process through
// Exec, with --json, and hands back what it printed. The structured result
// is the command's --json document (docs/json), unchanged; the command's
// catalog error ({"error": {...}} with a non-zero exit) is a tool error
// (isError) carrying that same document. So the MCP surface cannot drift
// from the CLI's machine contract, and every rule the CLI keeps (input
// validation, run id checks, reconciling a dead supervisor, the error
// catalog) holds here too.
//
// What it must never do: run a shell, or let input text choose the command
// or a flag. The argument list is built from the typed input: each value
// rides inside its own flag (--flag=VALUE, so a value can never be read as
// another flag), positional values come after "--", and the task text goes
// on stdin ('-'), as the CLI takes it. The package imports nothing else of
// agentrun: the CLI hands it Exec.
package mcp

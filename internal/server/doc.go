// Package server is the team server's HTTP API (agentrun server, Full
// mode): JSON under /v1, described by docs/openapi.json (served at
// /v1/openapi.json), plus /healthz, /readyz and /metrics, and the web UI
// under /ui/ (package web, mounted in webui.go).
//
// Every response body about runs is the --json document of the agentrun
// command of the same name (docs/json): the server runs those commands in
// process (Options.Exec) against its own data directory, store and
// coordinator, as the MCP server does, so the API cannot grow shapes of
// its own. Submit takes the command's input as JSON (mcp.SubmitInput,
// plus the project) and a git bundle of the base commit; the server
// keeps one bare repository per project (Projects) and fetches the base
// into it only after verifying the bundle on a quarantined copy. The
// queued runs are executed by workers (internal/worker) that claim them
// through the coordinator.
//
// Errors are catalog errors, {"error": {code, error, cause, fix, doc,
// exit_code}} as the CLI prints them, with the HTTP status chosen in one
// place (status.go).
//
// The server must never run a client's input through a shell, run git
// with a bundle's hooks or configuration, or answer a non-loopback client
// without its bearer token (Options.Token).
package server

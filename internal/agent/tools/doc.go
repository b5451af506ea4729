// Package tools holds the built-in agent's tools: read_file, write_file,
// edit_file, apply_edits, list_dir, grep, bash and finish. One file per
// tool, with the description the model reads embedded from a .md beside it.
// The exact schemas the model sees are pinned by testdata/schemas.golden.json.
//
// Contract: every tool acts only through the runner.Client it is given, so
// it runs inside the sandbox and nowhere else. Arguments are validated
// before a tool runs (Parse): unknown keys are dropped, numeric and boolean
// strings are coerced, missing or mistyped arguments come back as a
// bad_arguments Result the model can act on. Anything the model can act on
// (file not found, not unique, non-zero exit) is a Result; a Go error means
// the harness or the runner failed.
//
// Tools must never run anything on the host, read the host filesystem
// (except spill files the loop wrote, by their opaque name), or see API keys.
package tools

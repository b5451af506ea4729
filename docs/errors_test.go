// Package docs holds the user documentation. Its test generates
// errors.md from the error catalog (internal/catalog) and fails when the
// file, or a cause written here, is missing for any catalog code: the
// document cannot drift from the code.
//
// Regenerate after adding a catalog entry (and its cause below):
//
//	go test ./docs -update
package docs

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
)

var update = flag.Bool("update", false, "rewrite errors.md from the catalog")

// causes says, for every catalog code, what typically leads to it. The
// what and fix come from the catalog itself.
var causes = map[string]string{
	"server_unreachable":    "The CLI was pointed at a team server (`--server` or `AGENTRUN_SERVER`) that does not answer: nothing listens at the address, the host name does not resolve, or a firewall drops the connection. Nothing was created.",
	"server_tls":            "The team server's certificate is not trusted by this machine, names another host, or the URL says https:// for a server that speaks plain HTTP (or the other way round).",
	"server_protocol":       "Whatever answers at the `--server` URL is not an agentrun team server of this version: a proxy's error page, another service, or a server from another release.",
	"bad_result":            "The bundle of the run's branch that the team server sent does not hold what the run reports: the commit's parent is not the run's base commit, its tree is not the base with the run's patch applied, or the bundle is damaged.",
	"branch_exists":         "Your repository already has a branch `agentrun/<id>` that points to another commit than the run's result; it is never overwritten.",
	"bad_policy":            "The organization policy file in force (`agentrun server --policy`, `policy` in config.toml, `AGENTRUN_POLICY`) is missing, does not parse, has a key it does not know, or a value it cannot take; the error names the key. A policy that was asked for is never ignored.",
	"policy_violation":      "The run breaks a rule of the organization policy: the cause names the rule, the value asked for and what the policy allows. Submit refuses it before any record or workspace is made; resume refuses it and leaves the run as it was.",
	"enrol_refused":         "`agentrun worker --enrol-token-file` gave a token the server does not know, one that enrolled a host already (a token works once), or one past its expiry (`agentrun server enrol-token --ttl`).",
	"host_refused":          "A request under /v1/hosts carried no host credential, one the server never gave, or the credential of a host revoked with `agentrun server revoke-host`; a revoked `agentrun worker` stops.",
	"host_not_found":        "`agentrun server revoke-host` was given an id that is not one of the enrolled hosts `agentrun server hosts` lists.",
	"record_stale":          "An agent host sent a change to a run's record made from a version that another change (a cancel, a verdict) replaced meanwhile; the host reads the record again and retries on its own.",
	"lease_lost":            "An agent host wrote to a run with a fencing token that is no longer the run's: the host stopped heartbeating for longer than the lease TTL (stopped, cut off, overloaded) and the run was queued again for another host, or it ended. The host drops its copy of the run.",
	"seal_key_refused":      "An agent host asked to register a sealing key with its credential while the server holds another one for it: its data directory (host.json) was replaced or lost, or someone holding a copy of its credential tried to swap in their own key. A key is set once; a new one comes only with a new enrolment.",
	"usage":                 "A flag or argument the command does not accept: an unknown flag, a missing or extra argument, a value of the wrong type.",
	"empty_task":            "The task given as an argument, on stdin (`-`) or in `--task-file` is empty or only whitespace.",
	"task_file":             "The file named by `--task-file` does not exist, is not readable, or is not a regular file.",
	"task_too_large":        "The task given as an argument, on stdin (`-`) or in `--task-file` is over 1 MiB. It is refused rather than cut.",
	"conflicting_flags":     "Two flags that exclude each other were given together, e.g. `--wait` with `--follow`, `--agent` with `--agent-cmd`, a TASK with `--task-file`, or `clean ID` with `--finished`.",
	"bad_check":             "A `--check` value without `=`, with an empty name or command, or with a name that is not letters, digits, `.`, `-` and `_`.",
	"bad_attempts":          "`--attempts` is not a whole number of at least 1.",
	"bad_duration":          "A duration flag (`--timeout`) is not a Go duration such as `90s`, `30m` or `2h`, or is negative.",
	"bad_env":               "`--env` was given something other than a variable name (e.g. `NAME=value`: values are never put on the command line).",
	"unknown_agent":         "`--agent` names no built-in profile.",
	"no_agent":              "Neither `--agent` nor `--agent-cmd` was given, and the configuration names no default agent.",
	"bad_config":            "The configuration file (`$XDG_CONFIG_HOME/agentrun/config.toml`) is not valid TOML, or holds an unknown key or a bad value.",
	"bad_allow":             "An `--allow` entry (or `allow` in the configuration) is not a host, `host:port`, `*.domain`, IP, CIDR or known `preset:NAME`.",
	"bad_network":           "`--network` is neither `none` nor `allowlist`.",
	"bad_cli_endpoint":      "The agent CLI is set up in the submitting environment for an endpoint of its own (`ANTHROPIC_BASE_URL` for claude, `OPENAI_BASE_URL` for qwen, `GOOGLE_GEMINI_BASE_URL` for gemini), which the model gateway would then forward to as the CLI does bare, and that URL is not one it can: not http(s), credentials in it, or an OpenAI-compatible path that does not end in `/v1`. Nothing was created.",
	"no_key":                "The agent reaches a provider's public API through the model gateway, and none of the places its key may come from gives one: the provider's variable (`ANTHROPIC_API_KEY`, `CLAUDE_CODE_OAUTH_TOKEN`, `OPENAI_API_KEY`, `GEMINI_API_KEY`, ...) is not set in the submitting environment and config.toml names no key file or command for it.",
	"bad_model_server":      "`--model-server` (or `model_server` in config.toml, or `AGENTRUN_MODEL_SERVER`) is neither an http(s) URL nor the name of a `[model_servers.NAME]` entry, or the URL carries credentials.",
	"bad_budget":            "`--max-tokens` or `--max-cost` (or `max_tokens`, `max_cost`, `AGENTRUN_MAX_TOKENS`, `AGENTRUN_MAX_COST`) is negative or not a number.",
	"agent_not_visible":     "The agent CLI found on PATH (or the agent command's program), its package or the interpreter it runs on lies where the sandbox backend mounts its own, so the sandbox cannot show it at its path: under /home/agent (the sandbox's HOME), for one. Submit refuses it before anything is made, rather than the run failing as its sandbox starts.",
	"agent_missing":         "The agent profile's CLI (`claude`, `codex`, `gemini`, `qwen`, `crush`, `opencode`) is not on the submitting user's PATH. Submit looks it up so that a run never spends its attempts on \"command not found\".",
	"unsupported_flag":      "A flag of the built-in agent (`--provider`, `--base-url`, `--max-turns`, `--context-window`, `--temperature`) was given with an agent profile, which would silently ignore it.",
	"setup_failed":          "The run's setup command (`--setup`, or `setup` in the repository's `.agentrun.toml` at the base commit) exited with a non-zero status, timed out or could not start. Its output is the run's setup log; no setup layer was cached, so the next run tries again.",
	"bad_repo_config":       "The repository's `.agentrun.toml` at the base commit is not valid TOML, holds an unknown key, or is not a regular file. It is read from the commit's objects, never from the working tree.",
	"bad_toolchain_cache":   "`--toolchain-cache` (or `toolchain_caches` in config.toml) names something other than `go`, `npm`, `pip` or `cargo`.",
	"no_setup_command":      "`agentrun setup` found neither `--setup` nor a `setup` key in `.agentrun.toml` at the repository's HEAD.",
	"bad_path":              "A `--ro` path does not exist, or lies where the sandbox backend mounts its own (the native sandbox's workspace, HOME, /proc, /dev and /etc; the docker sandbox's workspace, HOME, /proc, /dev and /sys): a path under /tmp is shown on the sandbox's own /tmp, but not /tmp itself.",
	"repo_missing":          "The directory given with `--repo` (or the current directory) does not exist or is not a directory.",
	"not_git_repo":          "The directory is not inside a git work tree.",
	"no_commits":            "The repository has no commit yet (an unborn HEAD): there is no base to start a run from.",
	"unknown_base":          "`--base` names no branch, tag or commit of the repository.",
	"dirty_repo":            "The repository has uncommitted (tracked or untracked, not ignored) changes. A run always starts from the base commit, so they would silently be left out.",
	"git_missing":           "`git` is not on PATH; agentrun uses it for the base commit, the workspace and the result branch.",
	"run_not_found":         "No run has this id or id prefix in the data directory (`AGENTRUN_HOME`). It may have been cleaned, or belong to another data directory.",
	"ambiguous_id":          "The id prefix matches several runs; the message lists them.",
	"bad_id":                "The id is not 3 to 10 characters of the run id alphabet (0-9 and a-z without i, l, o, u). Anything else, such as a path, is refused before it reaches the file system.",
	"run_damaged":           "The run's record (`runs/<id>/run.json`) cannot be read: truncated or edited by hand, naming a state agentrun does not know, not a regular file (a directory, a symbolic link, a FIFO) or not readable for its permissions. Only this run is affected; `list` still lists the others, and `clean --force ID` removes it. Exit 2: it is the machine's state, not a bug.",
	"bad_workspace":         "The workspace mode (--workspace or workspace in config.toml) is none of auto, copy and overlay. Nothing was created.",
	"no_overlay":            "--workspace overlay was asked for, but the sandbox backend mounts no overlay (host), or its probe failed on this machine (an older kernel, no user-namespace overlay). Nothing was created; agentrun never makes a copy when an overlay was asked for.",
	"bad_history":           "The history mode (--history or history in config.toml) is neither shallow nor full. Nothing was created.",
	"no_full_history":       "--history full was asked for on a sandbox backend that cannot show the repository's object store read-only to the agent. Nothing was created.",
	"bad_include":           "A path that .worktreeinclude or --include names cannot be copied into the workspace: it is tracked, or untracked but not ignored by git (it would be exported), a symlink that leaves the repository, or not a regular file; or a pattern is malformed. Nothing was created.",
	"include_too_large":     "The git-ignored files to include are more, or bigger, than agentrun copies into a workspace. Nothing was created.",
	"disk_budget":           "The runs' workspaces and the layer cache, with an estimate of the new run's workspace (the base commit's checkout for a copy, nothing for a cached overlay layer, the layer for a new commit), would exceed disk_budget in config.toml. Nothing was created.",
	"disk_full":             "A write failed with no space (or no quota) left on the device: the data directory's (the run records, journals, workspaces) or the repository's, often a workspace an agent filled. Or, at submit, the data directory's file system has less free space than the new run's workspace is estimated to need (nothing is created then). Nothing half-written is kept: a state change that cannot be stored is not journaled either. Exit 2: it is the machine's state, not a bug.",
	"run_active":            "The command needs a run that has ended (e.g. `clean`), but the run is queued or in progress, or its supervisor is still exiting.",
	"not_resumable":         "`resume` was asked for a run that succeeded, was cancelled, or is still in progress.",
	"not_finished":          "The command needs a finished run (`result`, `verdict`), but the run is still queued or in progress.",
	"branch_ahead":          "`clean --delete-branch` found the run's branch `agentrun/<id>` at a commit other than the run's own result: someone committed on it or moved it.",
	"bad_verdict":           "`verdict` was given something other than `accept` or `reject`.",
	"no_patch":              "The run exported nothing: it failed before export, its agent changed nothing (`no_changes`), or it is still in progress.",
	"no_sandbox":            "No sandbox backend was chosen and none is the default on this system.",
	"unknown_sandbox":       "`--sandbox` names no backend.",
	"sandbox_preflight":     "The chosen sandbox backend cannot run on this machine (e.g. user namespaces or Landlock unavailable, Docker not reachable). agentrun never falls back to less isolation.",
	"sandbox_start":         "The sandbox passed preflight but failed to start for this run; the run's events say why.",
	"engine_down":           "`--sandbox docker` found no container engine: `DOCKER_HOST` is unset and none of `/var/run/docker.sock`, `$XDG_RUNTIME_DIR/podman/podman.sock`, `/run/podman/podman.sock` exists, or the engine named does not answer.",
	"engine_permission":     "The container engine's socket exists but this user may not connect to it (a rootful Docker socket owned by root and the `docker` group).",
	"no_image":              "`--sandbox docker` was chosen with neither `--image` nor `image` in config.toml.",
	"image_missing":         "The image named by `--image` (or `image` in config.toml) is not on the engine. agentrun never pulls during a run: pull or load it first.",
	"image_not_pinned":      "The image was named by a tag alone (`node:22`, `latest`), which can change under the run; it is refused unless `[images]` in config.toml pins the tag to a digest.",
	"image_digest_mismatch": "The tag pinned in `[images]` names, on the engine, an image whose id and repository digests differ from the pin: the image changed since it was pinned.",
	"model_unreachable":     "The model server the run would use (`--model-server`, a `[model_servers.NAME]` entry, or the built-in agent's base URL) did not accept a connection when the run was submitted, or the built-in agent could not connect to it.",
	"model_auth":            "The model server answered 401 or 403: the API key is missing, wrong or lacks access.",
	"model_not_loaded":      "The model server does not serve the model named by `--model`.",
	"model_protocol":        "The model server's answers do not follow the API chosen with `--provider` (wrong base URL, proxy, or an incompatible server).",
	"no_model":              "The built-in agent needs a model and none was given by flag, environment or configuration.",
	"home":                  "The data directory (`AGENTRUN_HOME`, default `~/.local/share/agentrun`) cannot be created or written.",
	"internal":              "A bug, or an unexpected failure of the environment (permissions changed underneath). A full disk is `disk_full`, a damaged run record `run_damaged`.",
	"bad_status":            "`list --status` was given a name that is not a run state.",
	"no_log":                "`logs` was asked for an attempt the run does not have, or a check that did not run in it.",
	"no_target":             "`clean` was given neither a run id nor `--finished`.",
	"interrupted":           "The command itself was interrupted (Ctrl-C or SIGTERM) while it waited. A run it was waiting for keeps running; follow it again with `agentrun logs -f ID`.",
	"bad_fixture":           "A bench fixture (`--fixtures DIR`, the repository's `bench/`) has no task text or acceptance command, a `fixture.toml` that does not parse or names an unknown key, a path that leaves the fixture, or a `repo` that is not a repository with commits.",
	"bad_request":           "A request to the team server's API whose body is not the JSON (or the multipart form) the route takes: malformed JSON, an unknown field, a field the server does not accept from a client (such as `repo`, which the server chooses itself), or a missing part.",
	"bad_bundle":            "The git bundle sent with a submit to the team server is missing, too large, fails `git bundle verify` (truncated, not a bundle, or its prerequisite commits are not on the server), or has no head matching the requested `base`.",
	"unauthorized":          "The team server listens on a non-loopback address and requires the bearer token of `--token-file`; the request had none, or a different one.",
	"cross_origin":          "A browser sent the request for a page of another site (the standard library's cross-origin protection refused it), or the request reached a team server without a token under a host name that is not a loopback one (DNS rebinding).",
	"no_route":              "A request to the team server for a path (or method) that its API does not have.",
	"no_fixtures":           "`bench` found no fixture (a directory holding `task.md`) where it looked, or `--task` names one that is not there.",
	"token_expired":         "The personal API token the request carries passed its expiry (`agentrun tokens create --expires`); the server refuses it from then on.",
	"token_revoked":         "The personal API token the request carries was revoked (`agentrun tokens revoke`), by its owner or an admin.",
	"user_disabled":         "The token is valid, but an admin disabled its user (`agentrun users disable`): none of the user's tokens is taken until the user is enabled again.",
	"forbidden":             "The request needs more than the caller may do: a viewer asked to change something, a member asked for user administration, or the token lacks the scope the route needs (`runs:read`, `runs:write`, `admin`).",
	"quota_exceeded":        "A submit or resume would go past one of the user's quotas (concurrent runs, runs per day, tokens or cost per day or month), or asked for more than a per-run maximum (timeout, attempts, tokens, cost). The message names the limit, the usage and when it resets.",
	"bad_user":              "A user or token name with other characters than lowercase letters, digits, `.`, `_` and `-`, a role other than admin, member or viewer, or an unknown scope.",
	"user_exists":           "`users add` (or `POST /v1/users`) named a user that exists already.",
	"user_not_found":        "A users command or route named a user the server does not have.",
	"token_not_found":       "`tokens revoke` named a token id that does not exist, or one of another user (for a caller who is not an admin).",
	"not_logged_in":         "A command that talks to the team server (`users`, `tokens`, `quota`) found no server: neither `--server`, `AGENTRUN_SERVER` nor a login stored by `agentrun login`.",
	"bad_results":           "`bench summarize` or `bench compare` was given a file that does not exist, or is not the JSON lines `bench` writes: a header line, then one line per run.",
	"audit_tampered":        "`agentrun audit verify` recomputed the audit trail's hashes and checked its checkpoints' signatures, and found an entry edited, removed, inserted or moved, the chain rewritten up to a checkpoint, the log cut short before a checkpoint, or a checkpoint that the pinned key did not sign. The cause names the first such entry.",
	"audit_key":             "`agentrun audit verify` checks checkpoints only with a key the user pinned, never with the one the server it checks serves now: no `--key`, `--key-hex` or `AGENTRUN_AUDIT_KEY` was given, or what was given is not an ed25519 public key.",
	"audit_file":            "`agentrun audit verify --file` was given a file that does not exist or is not what `agentrun audit export` writes: JSON lines, each `{\"entry\": ...}` or `{\"checkpoint\": ...}`.",
}

// extra are codes made outside the catalog (internal/cli/render.go).
var extra = []entry{{Code: "interrupted", What: "interrupted", Exit: catalog.ExitInterrupted}}

type entry struct {
	Code, What, Fix string
	Exit            int
}

type section struct {
	Title   string
	Entries []entry
}

var exitCodes = map[string]int{
	"ExitOK": catalog.ExitOK, "ExitRunFailed": catalog.ExitRunFailed, "ExitUsage": catalog.ExitUsage,
	"ExitNotFound": catalog.ExitNotFound, "ExitTampered": catalog.ExitTampered, "ExitInterrupted": catalog.ExitInterrupted, "ExitInternal": catalog.ExitInternal,
}

// readCatalog parses internal/catalog for every `X = Entry{...}`, in
// source order, grouped by the comment that opens each group.
func readCatalog(t *testing.T) []section {
	t.Helper()
	fset := token.NewFileSet()
	dir := filepath.Join("..", "internal", "catalog")
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []section
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for _, v := range vs.Values {
					lit, ok := v.(*ast.CompositeLit)
					if !ok || fmt.Sprint(lit.Type) != "Entry" {
						continue
					}
					if vs.Doc != nil || len(out) == 0 {
						title := "Errors"
						if vs.Doc != nil {
							title = strings.TrimSuffix(strings.TrimSpace(vs.Doc.Text()), ".")
						}
						out = append(out, section{Title: title})
					}
					out[len(out)-1].Entries = append(out[len(out)-1].Entries, parseEntry(t, fset, lit))
				}
			}
		}
	}
	return out
}

func parseEntry(t *testing.T, fset *token.FileSet, lit *ast.CompositeLit) entry {
	t.Helper()
	if len(lit.Elts) != 4 {
		t.Fatalf("%s: an Entry literal with %d fields; write {code, what, fix, exit}", fset.Position(lit.Pos()), len(lit.Elts))
	}
	var s [3]string
	for i := range 3 {
		bl, ok := lit.Elts[i].(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			t.Fatalf("%s: Entry field %d is not a string literal", fset.Position(lit.Pos()), i)
		}
		v, err := strconv.Unquote(bl.Value)
		if err != nil {
			t.Fatal(err)
		}
		s[i] = v
	}
	id, ok := lit.Elts[3].(*ast.Ident)
	exit, known := exitCodes[fmt.Sprint(id)]
	if !ok || !known {
		t.Fatalf("%s: Entry exit code %v is not one of the catalog's Exit constants", fset.Position(lit.Pos()), lit.Elts[3])
	}
	return entry{Code: s[0], What: s[1], Fix: s[2], Exit: exit}
}

func render(sections []section) []byte {
	var b bytes.Buffer
	b.WriteString(`# agentrun errors

<!-- Generated from internal/catalog by 'go test ./docs -update'. Edit the catalog, and the
causes in docs/errors_test.go, not this file. -->

Every failure agentrun reports comes from one catalog: a stable code, what happened, the cause
in this case, the fix, and a link to the code's section below. On a terminal:

    error: run not found: run 7qk
      fix: list runs with 'agentrun list'
      see: ` + catalog.DocBase + `#run_not_found

Under ` + "`--json`" + `, the same as one JSON object on stdout:

    {"error": {"code": "run_not_found", "error": "run not found", "cause": "...",
               "fix": "...", "doc": "...#run_not_found", "exit_code": 3}}

Scripts should branch on ` + "`code`" + ` (stable: codes are added, never renamed or reused) or on the exit
status, never on the message text.

## Exit status

| status | meaning |
|---|---|
| 0 | success |
| 1 | the run ended other than succeeded (` + "`submit --wait`, `resume --wait`" + `) |
| 2 | usage, preflight or environment error (the data directory cannot be used, the disk is full: ` + "`disk_full`" + `, a run record is damaged: ` + "`run_damaged`" + `); nothing was created |
| 3 | run not found (or the id prefix is ambiguous) |
| 70 | internal error (a bug: report it) |
| 130 | interrupted (Ctrl-C) |

## Index

| code | exit | what |
|---|---|---|
`)
	// The docs are the command line's: a field is named as its flag.
	flag := func(field string) string { return "--" + strings.ReplaceAll(field, "_", "-") }
	for i := range sections {
		for j, e := range sections[i].Entries {
			e.What, e.Fix = catalog.NameFields(e.What, flag), catalog.NameFields(e.Fix, flag)
			sections[i].Entries[j] = e
		}
	}
	for _, s := range sections {
		for _, e := range s.Entries {
			fmt.Fprintf(&b, "| [%s](#%s) | %d | %s |\n", e.Code, e.Code, e.Exit, strings.ReplaceAll(e.What, "|", `\|`))
		}
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n", s.Title)
		for _, e := range s.Entries {
			fmt.Fprintf(&b, "\n### %s\n\n", e.Code)
			fmt.Fprintf(&b, "- **What:** %s\n", e.What)
			fmt.Fprintf(&b, "- **Cause:** %s\n", causes[e.Code])
			if e.Fix != "" {
				fmt.Fprintf(&b, "- **Fix:** %s\n", e.Fix)
			}
			fmt.Fprintf(&b, "- **Exit status:** %d\n", e.Exit)
		}
	}
	return b.Bytes()
}

func TestErrorsDocMatchesCatalog(t *testing.T) {
	sections := readCatalog(t)
	sections = append(sections, section{Title: "Outside the catalog", Entries: extra})
	seen := map[string]bool{}
	n := 0
	for _, s := range sections {
		for _, e := range s.Entries {
			n++
			if seen[e.Code] {
				t.Errorf("code %q appears twice in the catalog", e.Code)
			}
			seen[e.Code] = true
			if causes[e.Code] == "" {
				t.Errorf("catalog code %q has no cause in docs/errors_test.go: add one, then run 'go test ./docs -update'", e.Code)
			}
		}
	}
	if n < 40 {
		t.Fatalf("found only %d catalog entries: the parser missed some", n)
	}
	for code := range causes {
		if !seen[code] {
			t.Errorf("docs/errors_test.go describes %q, which is not in the catalog", code)
		}
	}
	want := render(sections)
	if *update {
		if err := os.WriteFile("errors.md", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("errors.md")
	if err != nil {
		t.Fatalf("%v: run 'go test ./docs -update'", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/errors.md is out of date with the catalog: run 'go test ./docs -update'")
	}
	// Every code has its anchored heading, as the catalog's doc links expect.
	for code := range seen {
		if !bytes.Contains(got, []byte("\n### "+code+"\n")) {
			t.Errorf("errors.md has no heading for %q (anchor #%s)", code, code)
		}
	}
}

// The doc links the catalog prints point at this file.
func TestDocBasePointsHere(t *testing.T) {
	if !strings.HasSuffix(catalog.DocBase, "/docs/errors.md") {
		t.Errorf("catalog.DocBase = %q", catalog.DocBase)
	}
	if e := catalog.RunNotFound.New(""); !strings.HasSuffix(e.Doc, "/docs/errors.md#run_not_found") {
		t.Errorf("doc link %q", e.Doc)
	}
}

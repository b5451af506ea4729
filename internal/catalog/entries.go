package catalog

// The catalog. Codes are stable; add entries, never renumber or reuse.
// docs/errors.md lists each code with its anchor.
var (
	// Usage and input.
	Usage         = Entry{"usage", "invalid usage", "see the command's --help", ExitUsage}
	EmptyTask     = Entry{"empty_task", "the task is empty", "give the task as an argument, on stdin with '-', or with --task-file", ExitUsage}
	TaskFile      = Entry{"task_file", "cannot read the task file", "check the path given to --task-file", ExitUsage}
	ConflictFlags = Entry{"conflicting_flags", "conflicting options", "use only one of the options named", ExitUsage}
	BadCheck      = Entry{"bad_check", "invalid ‹check›", "name each check with letters, digits, '-', '_' and '.' (not starting with '.'), once, with a command: ‹check› NAME=COMMAND, e.g. ‹check› unit='go test ./...'", ExitUsage}
	BadAttempts   = Entry{"bad_attempts", "invalid ‹attempts›", "give ‹attempts› a whole number of at least 1", ExitUsage}
	BadDuration   = Entry{"bad_duration", "invalid duration", "write durations like 90s, 30m or 2h", ExitUsage}
	BadEnv        = Entry{"bad_env", "invalid ‹env›", "name a variable: ‹env› NAME (its value is read from your environment)", ExitUsage}
	UnknownAgent  = Entry{"unknown_agent", "unknown agent", "choose one of the profiles listed by 'agentrun submit --help', or run any command with ‹agent_cmd›", ExitUsage}
	NoAgent       = Entry{"no_agent", "no agent chosen", "pass ‹agent› NAME or ‹agent_cmd› CMD", ExitUsage}
	BadConfig     = Entry{"bad_config", "cannot read the configuration", "fix or remove the config file named", ExitUsage}
	BadAllow      = Entry{"bad_allow", "invalid ‹allow› entry", "write HOST, HOST:PORT, *.DOMAIN, an IP, a CIDR or preset:NAME", ExitUsage}
	BadNetwork    = Entry{"bad_network", "invalid ‹network›", "use ‹network› none or ‹network› allowlist", ExitUsage}

	// Repository.
	RepoMissing = Entry{"repo_missing", "repository not found", "pass ‹repo› with an existing directory", ExitUsage}
	NotGitRepo  = Entry{"not_git_repo", "not a git repository", "run agentrun inside a git repository or pass ‹repo› DIR", ExitUsage}
	NoCommits   = Entry{"no_commits", "the repository has no commits", "make a first commit: git commit --allow-empty -m init", ExitUsage}
	UnknownBase = Entry{"unknown_base", "unknown base ref", "pass ‹base› with a branch, tag or commit that exists", ExitUsage}
	DirtyRepo   = Entry{"dirty_repo", "the repository has uncommitted changes", "commit or stash them, or pass ‹include_dirty› (the run still starts from the base commit, without them)", ExitUsage}
	GitMissing  = Entry{"git_missing", "git is not installed", "install git (e.g. apt-get install git)", ExitUsage}

	// Runs.
	RunNotFound  = Entry{"run_not_found", "run not found", "list runs with 'agentrun list'", ExitNotFound}
	AmbiguousID  = Entry{"ambiguous_id", "run id prefix matches several runs", "give more characters of the id", ExitNotFound}
	BadID        = Entry{"bad_id", "invalid run id", "run ids are 10 characters of 0-9 and a-z; a prefix of 3 or more is accepted", ExitUsage}
	RunDamaged   = Entry{"run_damaged", "the run record is damaged", "inspect or remove the run directory named (agentrun clean --force ID); other runs are unaffected", ExitUsage}
	RunActive    = Entry{"run_active", "the run is in progress", "cancel it first with 'agentrun cancel ID', or wait for it to end", ExitUsage}
	NotResumable = Entry{"not_resumable", "the run cannot be resumed", "only interrupted or failed runs can be resumed", ExitUsage}
	NotFinished  = Entry{"not_finished", "the run has not finished", "wait for it with 'agentrun logs -f ID'", ExitUsage}
	BranchAhead  = Entry{"branch_ahead", "the branch has commits beyond the run's own", "keep it, or pass --force to delete it anyway", ExitUsage}
	BadVerdict   = Entry{"bad_verdict", "invalid verdict", "use 'accept' or 'reject'", ExitUsage}
	NoPatch      = Entry{"no_patch", "the run has no patch", "only runs that exported changes have a patch; see 'agentrun status ID'", ExitUsage}

	// Sandbox.
	NoSandbox        = Entry{"no_sandbox", "no sandbox backend chosen", "pass ‹sandbox› host to run without isolation (explicit opt-in), or ‹sandbox› native on Linux", ExitUsage}
	UnknownSandbox   = Entry{"unknown_sandbox", "unknown sandbox backend", "choose one of the backends named ('agentrun doctor' says which can run here)", ExitUsage}
	SandboxPreflight = Entry{"sandbox_preflight", "the sandbox backend cannot run here", "follow the cause; agentrun never falls back to less isolation", ExitUsage}
	SandboxStart     = Entry{"sandbox_start", "the sandbox did not start", "see the run's events with 'agentrun logs --events ID'", ExitRunFailed}
	// The docker backend: the engine and the image (preflight, no fallback).
	EngineDown       = Entry{"engine_down", "the container engine is not reachable", "start Docker or the Podman API (podman system service), or point DOCKER_HOST at a running engine", ExitUsage}
	EnginePermission = Entry{"engine_permission", "permission denied on the container engine's socket", "join the group that owns the socket (docker), use rootless Podman's own socket, or point DOCKER_HOST at an engine you may use", ExitUsage}
	NoImage          = Entry{"no_image", "the sandbox needs an image", "pass ‹image› REF@sha256:DIGEST (or a local image id), or set image in the config file", ExitUsage}
	ImageMissing     = Entry{"image_missing", "the image is not on the container engine", "pull or load it first (docker pull REF@sha256:DIGEST, podman load); agentrun never pulls during a run", ExitUsage}
	ImageNotPinned   = Entry{"image_not_pinned", "the image is not pinned by a digest", "name it REF@sha256:DIGEST or by its local image id, or pin the tag in the config file: [images] \"REF:TAG\" = \"sha256:DIGEST\"", ExitUsage}
	ImageMismatch    = Entry{"image_digest_mismatch", "the image does not match its pinned digest", "pull the pinned image again, or update the pin in the config file after checking the new image", ExitUsage}

	// Model providers (built-in agent).
	ModelUnreachable = Entry{"model_unreachable", "the model server is unreachable", "start the server (LM Studio, Ollama, vLLM, llama.cpp), or point --model-server (--base-url for builtin) at one that listens; behind a proxy, export HTTPS_PROXY as your agent CLIs have it", ExitUsage}
	ModelAuth        = Entry{"model_auth", "the model server refused the API key", "set a valid key in your environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY) or name a key file or command in config.toml ([providers.NAME] or [model_servers.NAME] api_key_env, api_key_file, api_key_command)", ExitUsage}
	ModelNotLoaded   = Entry{"model_not_loaded", "the model is not available on the server", "load the model on the server or pass --model with one it lists", ExitUsage}
	ModelProtocol    = Entry{"model_protocol", "the model server answered something agentrun cannot read", "check --provider and --base-url point at a compatible API", ExitRunFailed}
	NoModel          = Entry{"no_model", "no model chosen", "pass --model NAME (as the server lists it)", ExitUsage}
	NoKey            = Entry{"no_key", "no API key for the model", "export the provider's key variable (it stays on the host: the agent only gets a placeholder), name a key file or command in config.toml [providers.NAME], or use your own model server with --model-server URL", ExitUsage}
	BadModelServer   = Entry{"bad_model_server", "invalid ‹model_server›", "give an http:// or https:// URL (e.g. http://localhost:1234) or the name of a [model_servers.NAME] entry in config.toml", ExitUsage}
	BadBudget        = Entry{"bad_budget", "invalid budget", "give ‹max_tokens› a whole number and ‹max_cost› US dollars (e.g. 2.50), 0 for no limit", ExitUsage}

	// Agent CLIs (profiles).
	AgentMissing    = Entry{"agent_missing", "the agent CLI is not installed", "install it (see 'agentrun submit --help' for each profile's package) so that it is on your PATH, or use ‹agent_cmd›", ExitUsage}
	UnsupportedFlag = Entry{"unsupported_flag", "the agent cannot honour an option", "drop the option; point a profile at your own model with ‹model_server› URL and ‹model› NAME", ExitUsage}
	BadPath         = Entry{"bad_path", "invalid ‹ro› path", "name an existing absolute (or relative to here) host path outside the sandbox's own directories (the workspace, its HOME, /proc, /dev); it is made visible read-only inside the sandbox", ExitUsage}
	AgentHidden     = Entry{"agent_not_visible", "the sandbox cannot show the agent CLI", "install the CLI (with the runtime it runs on) outside the directory the cause names, e.g. under /usr/local, /opt or your home directory, and put it on PATH", ExitUsage}
	BadCLIEndpoint  = Entry{"bad_cli_endpoint", "the agent CLI's own endpoint cannot be used", "unset the CLI's base-URL variable to use the profile's provider, or set it to the http:// or https:// URL of an endpoint", ExitUsage}

	// Setup snapshots and toolchain caches.
	SetupFailed    = Entry{"setup_failed", "the setup command failed", "read its output with 'agentrun logs --setup ID', fix the command (‹setup›, or setup in the repository's .agentrun.toml) and submit again; nothing was cached", ExitRunFailed}
	BadRepoConfig  = Entry{"bad_repo_config", "cannot read the repository's .agentrun.toml", "fix the file at the base commit (its keys: setup, setup_allow), or pass ‹setup› to use another command", ExitUsage}
	BadToolchain   = Entry{"bad_toolchain_cache", "unknown toolchain cache", "name go, npm, pip or cargo (‹toolchain_cache›, toolchain_caches in the config file)", ExitUsage}
	NoSetupCommand = Entry{"no_setup_command", "the repository has no setup command", "pass ‹setup› CMD, or add setup = \"CMD\" to .agentrun.toml at the top of the repository and commit it", ExitUsage}

	// Environment.
	Home     = Entry{"home", "cannot use the data directory", "check AGENTRUN_HOME, or that ~/.local/share/agentrun is writable", ExitUsage}
	Internal = Entry{"internal", "internal error", "report this with the command and output", ExitInternal}

	// Read-side commands (list, logs, clean).
	BadStatus = Entry{"bad_status", "invalid --status", "use one of: queued, preparing, running, checking, exporting, succeeded, failed, cancelled, interrupted (comma-separated or repeated)", ExitUsage}
	NoLog     = Entry{"no_log", "no such log", "see the run's attempts and checks with 'agentrun status ID'", ExitUsage}
	NoTarget  = Entry{"no_target", "nothing chosen to clean", "name a run id, or pass --finished to clean every finished run", ExitUsage}

	// Submit input limits.
	TaskTooLarge = Entry{"task_too_large", "the task is too large", "give at most 1 MiB of task text; put longer material in a file of the repository and name it in the task", ExitUsage}

	// Bench.
	BadFixture = Entry{"bad_fixture", "a bench fixture cannot be used", "fix the fixture named: a directory with task.md, accept.sh (or accept in fixture.toml) and repo/ (see 'agentrun bench --help')", ExitUsage}
	NoFixtures = Entry{"no_fixtures", "no bench fixtures to run", "name a directory of fixtures with --fixtures DIR, or --task names that exist ('agentrun bench list' shows them)", ExitUsage}
	BadResults = Entry{"bad_results", "cannot read the bench results", "name a results file written by 'agentrun bench' (JSON lines: a header, then one line per run)", ExitUsage}

	// The team server's API (agentrun server).
	BadRequest   = Entry{"bad_request", "the request cannot be read", "send the body the API document (/v1/openapi.json) describes for this route", ExitUsage}
	BadBundle    = Entry{"bad_bundle", "the git bundle cannot be used", "send a bundle of the base commit made with 'git bundle create base.bundle HEAD' (or the branch to start from), and name one of its heads as base", ExitUsage}
	Unauthorized = Entry{"unauthorized", "the request carries no valid token", "send the server's token as 'Authorization: Bearer TOKEN' (the file given to agentrun server --token-file)", ExitUsage}
	CrossOrigin  = Entry{"cross_origin", "the request came from another site or host name", "call the API from a client, not from a web page; on loopback, use 127.0.0.1, [::1] or localhost as the host name", ExitUsage}
	NoRoute      = Entry{"no_route", "no such API route", "see the routes in the API document at /v1/openapi.json", ExitNotFound}

	// Workspaces.
	BadWorkspace    = Entry{"bad_workspace", "invalid ‹workspace›", "use ‹workspace› auto (an overlay where the sandbox can mount one, else a copy), copy or overlay", ExitUsage}
	NoOverlay       = Entry{"no_overlay", "the sandbox cannot mount an overlay workspace", "use ‹workspace› auto (a copy where no overlay can be had) or ‹workspace› copy; 'agentrun doctor' says why the overlay cannot be mounted", ExitUsage}
	BadHistory      = Entry{"bad_history", "invalid ‹history›", "use ‹history› shallow (the base commit only) or ‹history› full (the repository's whole history, read-only)", ExitUsage}
	NoFullHistory   = Entry{"no_full_history", "the sandbox cannot show the repository's history read-only", "use ‹history› shallow, or a backend that can ('agentrun submit --help' names them)", ExitUsage}
	BadInclude      = Entry{"bad_include", "a file cannot be included in the workspace", "include only git-ignored regular files (and symlinks within the repository): fix the pattern in ‹include› or .worktreeinclude, or pass ‹no_include›", ExitUsage}
	IncludeTooLarge = Entry{"include_too_large", "the included files are too large", "include fewer or smaller files (fix .worktreeinclude or ‹include›), or pass ‹no_include›", ExitUsage}
	DiskBudget      = Entry{"disk_budget", "the run would exceed the disk budget", "run 'agentrun gc' (it removes finished runs' workspaces and unused cached layers), or raise disk_budget in config.toml", ExitUsage}

	// The CLI as a client of a team server (--server, AGENTRUN_SERVER).
	ServerUnreachable = Entry{"server_unreachable", "the team server is unreachable", "check the URL given to --server (or AGENTRUN_SERVER) and that 'agentrun server' is running there", ExitUsage}
	ServerTLS         = Entry{"server_tls", "the TLS connection to the team server failed", "use the server's https:// URL with a certificate this machine trusts (add its CA to the system's store, or set SSL_CERT_FILE), or http:// for a server without TLS", ExitUsage}
	ServerProtocol    = Entry{"server_protocol", "the team server answered something agentrun cannot read", "check that --server names an agentrun server (its /v1/openapi.json answers) and that client and server are the same version", ExitUsage}
	BadResult         = Entry{"bad_result", "the run's result from the team server cannot be used", "nothing was written to your repository; fetch it again with 'agentrun result ID', and report the run to the server's operator if it persists", ExitUsage}
	BranchExists      = Entry{"branch_exists", "the run's branch already exists in your repository and points elsewhere", "look at the branch and delete it (git branch -D agentrun/ID) if it is stale, then 'agentrun result ID' again", ExitUsage}

	// The organization policy (agentrun server --policy, policy in config.toml, AGENTRUN_POLICY).
	BadPolicy       = Entry{"bad_policy", "cannot read the organization policy file", "fix the file named (its keys are listed in the README's \"Organization policy\"; check it with 'agentrun policy check FILE'), or point policy (config.toml), AGENTRUN_POLICY or --policy at the right file", ExitUsage}
	PolicyViolation = Entry{"policy_violation", "the organization policy does not allow this run", "keep the request within the rule named ('agentrun policy show' prints the policy in force), or ask the policy's owner to change it; nothing was created", ExitUsage}
	// The team server's audit trail (agentrun audit).
	AuditTampered = Entry{"audit_tampered", "the audit trail was altered", "treat the entries from the one named on as untrustworthy: compare them with an export taken earlier (agentrun audit verify --file), and find who could write the server's database", ExitTampered}
	AuditKey      = Entry{"audit_key", "no usable audit key is pinned", "pin the server's key: run 'agentrun server audit-key > audit.pub' on the server (or take it from GET /v1/audit/key once and compare its fingerprint out of band), then pass --key audit.pub (or --key-hex, or set AGENTRUN_AUDIT_KEY)", ExitUsage}
	AuditFile     = Entry{"audit_file", "the audit export cannot be read", "name a file written by 'agentrun audit export' (JSON lines of {\"entry\": ...} and {\"checkpoint\": ...})", ExitUsage}
	// Agent hosts that join a team server (agentrun worker --server).
	EnrolRefused = Entry{"enrol_refused", "the enrolment token is unknown, used or expired", "make a new one on the server's host with 'agentrun server enrol-token' and give it to 'agentrun worker --enrol-token-file' once", ExitUsage}
	HostRefused  = Entry{"host_refused", "the agent host's credential is unknown or was revoked", "enrol the host again with a new token ('agentrun server enrol-token' on the server's host; 'agentrun server hosts' lists the hosts)", ExitUsage}
	HostNotFound = Entry{"host_not_found", "no such agent host", "list the hosts with 'agentrun server hosts'", ExitNotFound}
	RecordStale  = Entry{"record_stale", "the run's record changed since the agent host read it", "nothing to do: the host reads the record again and retries", ExitUsage}
	LeaseLost    = Entry{"lease_lost", "the agent host no longer holds the run's lease", "nothing to do: the run was given to another host (or ended); this host drops its copy", ExitUsage}
	// A host's sealing key (internal/seal) is set once.
	SealKeyRefused = Entry{"seal_key_refused", "the agent host's sealing key cannot be replaced with its credential alone", "if the host's data directory was lost or replaced, revoke the host ('agentrun server revoke-host ID') and enrol it again with a new token: the enrolment brings the new key", ExitUsage}

	// The machine's state, not a bug (exit 2, not 70).
	DiskFull = Entry{"disk_full", "no space left on the device", "free space (or quota) on the device that holds the data directory or the repository; 'agentrun clean --finished' removes finished runs and their workspaces, 'agentrun clean ID' an interrupted one", ExitUsage}
)

// Users, tokens and quotas on the team server.
var (
	TokenExpired  = Entry{"token_expired", "the token has expired", "make a new token with 'agentrun tokens create NAME' (using a token that still works) or ask an admin for one, then 'agentrun login --server URL' with it", ExitUsage}
	TokenRevoked  = Entry{"token_revoked", "the token was revoked", "stop using it: make a new one with 'agentrun tokens create NAME' or ask an admin, then 'agentrun login --server URL' with it", ExitUsage}
	UserDisabled  = Entry{"user_disabled", "the token's user is disabled", "ask an admin of the server to enable the user again ('agentrun users enable NAME')", ExitUsage}
	Forbidden     = Entry{"forbidden", "the user's role or the token's scopes do not allow this", "ask an admin for a role that does ('agentrun users list' shows roles), or use a token with the scope named ('agentrun tokens create NAME --scope SCOPE')", ExitUsage}
	QuotaExceeded = Entry{"quota_exceeded", "a quota is reached", "wait until it resets, or ask an admin to raise it ('agentrun users quota NAME ...'); 'agentrun quota' shows your limits and usage", ExitUsage}
	BadUser       = Entry{"bad_user", "invalid user, role, token name or scope", "name users and tokens with lowercase letters, digits, '.', '_' and '-'; roles are admin, member and viewer; scopes runs:read, runs:write and admin", ExitUsage}
	UserExists    = Entry{"user_exists", "a user of that name exists", "choose another name, or use the user that exists ('agentrun users list')", ExitUsage}
	UserNotFound  = Entry{"user_not_found", "no such user", "list the users with 'agentrun users list'", ExitNotFound}
	TokenNotFound = Entry{"token_not_found", "no such token", "list your tokens with 'agentrun tokens list'", ExitNotFound}
	NotLoggedIn   = Entry{"not_logged_in", "no team server to talk to", "log in with 'agentrun login --server URL' (the token on stdin), or name the server with --server URL and --token-file FILE", ExitUsage}
)

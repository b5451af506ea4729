// Package bench says which agent and model are good enough for a
// repository: it runs fixture tasks through the normal submit path and
// judges each result with the fixture's acceptance command.
//
// A fixture is a directory:
//
//	task.md        the task text, as the agent gets it
//	accept.sh      the acceptance (run as `sh ./accept.sh` in the result
//	               tree's root); or accept = "COMMAND" in fixture.toml
//	repo/          the files of the repository the run starts from, made
//	               a repository (one commit) at run time; or repo.txtar,
//	               the same as a txtar archive; or repo = "PATH" in
//	               fixture.toml, an existing repository (base = "REF")
//	fixture.toml   optional: language, protected = ["PATH", ...],
//	               [expect] "PATH" = "sha256:HEX" | "absent", timeout,
//	               accept_timeout, attempts, [checks] NAME = "COMMAND"
//	solution/      optional, never shown to an agent: files that make the
//	               acceptance pass (or solution.txtar), and solution.delete,
//	               the paths they remove; `agentrun bench check` uses them
//
// A run of the bench (Bench.Run) is every agent/model × fixture × repeat.
// Each job is submitted (Submitter: submit's planning, the detached
// supervisor, the run's own backend) and waited for; its ended run is
// judged (Scorer): a run that changed accept.sh or a protected file in
// its result is gamed; otherwise the result tree is checked out from the
// user's repository into a new temporary directory and the acceptance
// runs there, in a fresh sandbox of the run's backend with no network
// (passed or failed; an expect hash that does not hold fails it too). A
// run the machinery could not carry out (a sandbox error, a cancel) is
// error: it says nothing of the agent. Every result is one JSON line of
// the results file, after a header holding the bench's settings
// (Writer, ReadFile); Summarize, Compare and WriteHTML read them back.
//
// It must never run anything the agent wrote on the host: the acceptance
// runs only in a sandbox, and the host reads results with git plumbing in
// the user's repository. The fixture's own accept.sh is the one that
// runs, written over the result tree's copy.
package bench

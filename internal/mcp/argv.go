package mcp

// The inputs' command lines, for the other front ends of the same
// commands (the team server's API takes the same typed inputs): one
// mapping from the inputs' fields to the commands' flags.

// Argv is submit's command line (--json; the task goes on stdin).
func (in SubmitInput) Argv() []string { return in.argv() }

// Argv is list's command line (--json).
func (in ListInput) Argv() []string { return in.argv() }

// Argv is result's command line (--json).
func (in ResultInput) Argv() []string { return in.argv() }

// Argv is cancel's command line (--json).
func (in CancelInput) Argv() []string { return in.argv() }

// Argv is resume's command line (--json).
func (in ResumeInput) Argv() []string { return in.argv() }

// Argv is verdict's command line (--json).
func (in VerdictInput) Argv() []string { return in.argv() }

// Argv is logs' command line (--json), without follow.
func (in LogsInput) Argv() []string { return in.argv() }

// TailArgv is the command line that reads what is new since cursor c,
// waiting up to wait (a duration such as "10s") for something new.
func (in LogsInput) TailArgv(c Cursor, wait string) []string { return in.tailArgv(c, wait) }

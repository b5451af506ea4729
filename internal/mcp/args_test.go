package mcp

import (
	"slices"
	"strings"
	"testing"
)

// The command lines the tools build: every value inside its own flag or
// after "--", zero values left to the CLI's defaults, --json always
// before "--" (where the CLI looks for it).
func TestArgv(t *testing.T) {
	zero, two := int64(0), 2.5
	for _, c := range []struct {
		what string
		got  []string
		want []string
	}{
		{"submit, least", SubmitInput{Task: "t", AgentCmd: "make fix"}.argv(),
			[]string{"submit", "--json", "--agent-cmd=make fix", "--", "-"}},
		{"submit, flags that look like flags", SubmitInput{Task: "t", Agent: "--help", Sandbox: "--json", Env: []string{"-x"},
			Checks: []Check{{Name: "unit", Command: "go test ./... --count=1"}}}.argv(),
			[]string{"submit", "--json", "--agent=--help", "--sandbox=--json", "--env=-x", "--check=unit=go test ./... --count=1", "--", "-"}},
		{"submit, budgets given as zero override the config", SubmitInput{Task: "t", MaxTokens: &zero, MaxCost: &two, Attempts: -1, Wait: true}.argv(),
			[]string{"submit", "--json", "--attempts=-1", "--max-tokens=0", "--max-cost=2.5", "--", "-"}},
		{"status of a flag", command("status").args("--help"), []string{"status", "--json", "--", "--help"}},
		{"verdict", VerdictInput{ID: "abc", Verdict: "reject", Note: "--force"}.argv(),
			[]string{"verdict", "--json", "--note=--force", "--", "abc", "reject"}},
		{"list", ListInput{Status: []string{"failed", "cancelled"}, Limit: 3}.argv(),
			[]string{"list", "--json", "--status=failed", "--status=cancelled", "--limit=3", "--"}},
		{"resume", ResumeInput{ID: "abc", Task: "-- also this", Wait: true}.argv(),
			[]string{"resume", "--json", "--task=-- also this", "--", "abc"}},
		{"cancel", CancelInput{ID: "abc", NoWait: true}.argv(), []string{"cancel", "--json", "--no-wait", "--", "abc"}},
		{"result", ResultInput{ID: "abc", Patch: true}.argv(), []string{"result", "--json", "--patch", "--", "abc"}},
		{"logs", LogsInput{ID: "abc", Check: "unit", Attempt: 2}.argv(), []string{"logs", "--json", "--attempt=2", "--check=unit", "--", "abc"}},
		{"logs follow", LogsInput{ID: "abc", Attempt: 2}.tailArgv(Cursor{Seq: 7}, "5s"),
			[]string{"mcp", "tail", "--json", "--seq=7", "--attempt=2", "--wait=5s", "--", "abc"}},
		{"logs follow from a cursor", LogsInput{ID: "abc", Attempt: 2, Events: true}.tailArgv(Cursor{Seq: 7, Attempt: 3, Offset: 10}, ""),
			[]string{"mcp", "tail", "--json", "--seq=7", "--attempt=3", "--offset=10", "--events-only", "--", "abc"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.what, c.got, c.want)
		}
		// Before "--", every element is a flag of the command.
		end := slices.Index(c.got, "--")
		for _, a := range c.got[:end] {
			if a != c.got[0] && a != "tail" && !strings.HasPrefix(a, "--") {
				t.Errorf("%s: %q before -- is not a flag", c.what, a)
			}
		}
	}
}

func TestEventSummary(t *testing.T) {
	for _, c := range []struct {
		e    event
		want string
	}{
		{event{Type: "state", Status: "running"}, "state running"},
		{event{Type: "state", Status: "failed", Reason: "checks_failed", Message: "check unit failed"}, "state failed (checks_failed): check unit failed"},
		{event{Type: "state", Status: "succeeded", Reason: "completed"}, "state succeeded"},
		{event{Type: "attempt", Attempt: 2}, "attempt 2 started"},
		{event{Type: "check", Data: []byte(`{"name":"unit","passed":true}`)}, "check unit passed"},
		{event{Type: "warning", Message: "slow\nmodel"}, "warning: slow model"},
		{event{Type: "sandbox"}, "sandbox"},
	} {
		if got := c.e.summary(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

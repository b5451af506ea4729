package supervisor

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// tailBytes is how much of a failing check's output the next prompt shows.
const tailBytes = 2048

// buildPrompt is the task, plus how the previous attempt ended.
func buildPrompt(task, prev string) string {
	if prev == "" {
		return task
	}
	return task + "\n\n---\n" + prev + "\n"
}

// previousEnding says how the run's last attempt ended, for a resumed run.
func previousEnding(r *run.Run, resumed bool, ended, note string) string {
	var b strings.Builder
	if a := r.LastAttempt(); a != nil && resumed {
		outcome := string(a.Outcome)
		if outcome == "" {
			outcome = "interrupted (the supervisor stopped)"
		}
		fmt.Fprintf(&b, "This run is resumed. The previous attempt (%d) ended: %s", a.N, outcome)
		if a.Message != "" {
			fmt.Fprintf(&b, " (%s)", a.Message)
		}
		b.WriteString(". Your earlier changes are still in the working tree; continue from there.")
		var failed []string
		for _, c := range a.Checks {
			if !c.Passed {
				failed = append(failed, c.Name)
			}
		}
		if len(failed) > 0 {
			fmt.Fprintf(&b, " Checks that failed: %s.", strings.Join(failed, ", "))
		}
		if ended != "" {
			fmt.Fprintf(&b, " The run ended %s.", ended)
		}
	}
	if note != "" {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("Additional instructions: " + note)
	}
	return b.String()
}

// failedChecks describes the failing checks of attempt n with the tail of
// their output ("" when all passed).
func failedChecks(l layout.Layout, id string, n int, results []run.CheckResult) string {
	var b strings.Builder
	for _, c := range results {
		if c.Passed {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "The previous attempt (%d) finished, but these checks failed. Fix the cause and keep your other changes.\n", n)
		}
		fmt.Fprintf(&b, "\nCheck %q failed with exit code %d", c.Name, c.ExitCode)
		if c.TimedOut {
			b.WriteString(" (timed out)")
		}
		b.WriteString(". Last lines of its output:\n")
		b.WriteString(tail(l.CheckLog(id, n, c.Name), tailBytes))
		b.WriteString("\n")
	}
	return b.String()
}

func checksSummary(results []run.CheckResult) string {
	var failed []string
	for _, c := range results {
		if !c.Passed {
			failed = append(failed, c.Name)
		}
	}
	return "checks failed: " + strings.Join(failed, ", ")
}

func describeOutcome(o *agent.Outcome) string {
	s := string(o.Reason)
	if o.Message != "" {
		s += ": " + o.Message
	} else if o.ExitCode != nil {
		s += fmt.Sprintf(" (exit code %d)", *o.ExitCode)
	}
	return s
}

// tail returns at most n bytes from the end of the file, starting at a
// line boundary when possible.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no output)"
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "(no output)"
	}
	off := max(fi.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, n))
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	if strings.TrimSpace(s) == "" {
		return "(no output)"
	}
	return strings.TrimRight(s, "\n")
}

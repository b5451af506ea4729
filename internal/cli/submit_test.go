package cli

import (
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/submit"
)

func TestSubmitValidate(t *testing.T) {
	given := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, x := range names {
				if x == n {
					return true
				}
			}
			return false
		}
	}
	ok := func() *submitOptions { return &submitOptions{AgentCmd: "true", Args: []string{"t"}, set: given()} }
	// What submit checks: the flags, then the request they make.
	validate := func(o *submitOptions) error {
		if err := o.Validate(); err != nil {
			return err
		}
		return submit.Validate(o.request(config.Settings{Attempts: config.DefaultAttempts}, func(string) string { return "" }))
	}
	if err := validate(ok()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mut  func(o *submitOptions)
		want catalog.Entry
	}{
		{"wait+follow", func(o *submitOptions) { o.Wait, o.Follow = true, true }, catalog.ConflictFlags},
		{"label without =", func(o *submitOptions) { o.Labels = []string{"gpu"} }, catalog.Usage},
		{"label key", func(o *submitOptions) { o.Labels = []string{"a b=1"} }, catalog.Usage},
		{"agent+cmd", func(o *submitOptions) { o.Agent = "claude" }, catalog.ConflictFlags},
		{"no agent", func(o *submitOptions) { o.AgentCmd = "" }, catalog.NoAgent},
		{"task+file", func(o *submitOptions) { o.TaskFile = "f" }, catalog.ConflictFlags},
		{"two args", func(o *submitOptions) { o.Args = []string{"a", "b"} }, catalog.Usage},
		{"attempts", func(o *submitOptions) { o.Attempts, o.set = 0, given("attempts") }, catalog.BadAttempts},
		{"timeout", func(o *submitOptions) { o.Timeout = "1 hour" }, catalog.BadDuration},
		{"negative timeout", func(o *submitOptions) { o.Timeout = "-1s" }, catalog.BadDuration},
		{"network", func(o *submitOptions) { o.Network = "open" }, catalog.BadNetwork},
		{"check no =", func(o *submitOptions) { o.Checks = []string{"lint"} }, catalog.BadCheck},
		{"check empty cmd", func(o *submitOptions) { o.Checks = []string{"lint= "} }, catalog.BadCheck},
		{"check dot name", func(o *submitOptions) { o.Checks = []string{".hidden=true"} }, catalog.BadCheck},
		{"check slash", func(o *submitOptions) { o.Checks = []string{"a/b=true"} }, catalog.BadCheck},
		{"check twice", func(o *submitOptions) { o.Checks = []string{"a=true", "a=false"} }, catalog.BadCheck},
		{"env", func(o *submitOptions) { o.Env = []string{"1ABC"} }, catalog.BadEnv},
		{"disk words", func(o *submitOptions) { o.Disk, o.set = "ten gigs", given("disk") }, catalog.Usage},
		{"disk zero", func(o *submitOptions) { o.Disk, o.set = "0", given("disk") }, catalog.Usage},
		{"disk-inodes zero", func(o *submitOptions) { o.DiskInodes, o.set = 0, given("disk-inodes") }, catalog.Usage},
	} {
		o := ok()
		c.mut(o)
		if err := validate(o); !catalog.Has(err, c.want) {
			t.Errorf("%s: want %s, got %v", c.name, c.want.Code, err)
		}
	}
	checks, err := parseChecks([]string{"unit=go test ./... -run 'A=B'", "lint.v2=golangci-lint run"})
	if err != nil || len(checks) != 2 || checks[0].Command != "go test ./... -run 'A=B'" || checks[1].Name != "lint.v2" {
		t.Fatalf("%v %+v", err, checks)
	}
}

// FuzzParseChecks: a --check value that submit accepts never yields a
// name that could act as a path (it becomes attempts/<n>/checks/<name>.log)
// or an empty command.
func FuzzParseChecks(f *testing.F) {
	for _, s := range []string{"unit=go test ./...", "lint", "=x", "../x=y", "a=", ".a=b", "a.b-c_d=e=f", "a/b=c", "\x00=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checks, err := parseChecks([]string{s})
		if err == nil {
			err = submit.Validate(submit.Request{AgentCmd: "true", Attempts: 1, Checks: checks})
		}
		if err != nil {
			if !catalog.Has(err, catalog.BadCheck) {
				t.Fatalf("non-catalog error %v", err)
			}
			return
		}
		c := checks[0]
		if c.Name == "" || strings.ContainsAny(c.Name, "/\\\x00") || strings.HasPrefix(c.Name, ".") || c.Name == ".." {
			t.Fatalf("unsafe name %q", c.Name)
		}
		if strings.TrimSpace(c.Command) == "" || c.Name+"="+c.Command != s {
			t.Fatalf("bad split of %q: %+v", s, c)
		}
	})
}

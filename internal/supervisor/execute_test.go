package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

// order is a resource that notes its Start and Stop in a shared list.
type order struct {
	name string
	log  *[]string
	fail error
}

func (o *order) Start(context.Context) error { *o.log = append(*o.log, "start "+o.name); return o.fail }
func (o *order) Stop(context.Context)        { *o.log = append(*o.log, "stop "+o.name) }

// TestResourcesStopInReverse: the driver stops every resource it started,
// the one whose Start failed too, in reverse order.
func TestResourcesStopInReverse(t *testing.T) {
	var log []string
	var rs resources
	ctx := context.Background()
	for _, name := range []string{"workspace", "egress", "gateway"} {
		if err := rs.start(ctx, &order{name: name, log: &log}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.start(ctx, &order{name: "sandbox", log: &log, fail: errors.New("no")}); err == nil {
		t.Fatal("the failed Start was not returned")
	}
	rs.stop()
	want := "start workspace,start egress,start gateway,start sandbox,stop sandbox,stop gateway,stop egress,stop workspace"
	if got := strings.Join(log, ","); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// TestPrepareFailureStopsWhatStarted: a sandbox that cannot start fails
// the run (sandbox_error) after the egress proxy and the workspace
// started; the proxy's socket is gone when the run is seen ended, and the
// workspace is kept.
func TestPrepareFailureStopsWhatStarted(t *testing.T) {
	s, st := inProcess(t, "true", nil)
	ctx := context.Background()
	if _, err := st.Update(ctx, s.ID, func(r *run.Run) error {
		r.Sandbox.Network, r.Sandbox.Allow = "allowlist", []string{"example.com"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Backends = nil
	if sock := filepath.Join(s.Layout.SandboxState(s.ID), "egress.sock"); len(sock) >= 100 {
		t.Fatalf("the socket would not be in the sandbox state directory: %s", sock)
	}
	if err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), "not available in this build") {
		t.Fatalf("err %v", err)
	}
	r, _ := st.Get(ctx, s.ID)
	if r.State != run.StateFailed || r.Reason != run.ReasonSandboxError {
		t.Fatalf("%s/%s: %s", r.State, r.Reason, r.Message)
	}
	if _, err := os.Stat(s.Layout.SandboxState(s.ID)); err != nil {
		t.Fatalf("the egress proxy never started: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Layout.SandboxState(s.ID), "egress.sock")); !os.IsNotExist(err) {
		t.Fatalf("egress socket left: %v", err)
	}
	if _, err := os.Stat(s.Layout.Workspace(s.ID)); err != nil {
		t.Fatalf("workspace: %v", err)
	}
	evs, _ := st.Events(ctx, s.ID, 0)
	var warned bool
	for _, e := range evs {
		warned = warned || (e.Type == run.EventWarning && strings.HasPrefix(e.Message, "prepare failed: "))
		if e.Type == run.EventSandbox {
			t.Fatalf("sandbox event for a sandbox that never started: %+v", e)
		}
	}
	if !warned {
		t.Fatal("no prepare failed warning")
	}
}

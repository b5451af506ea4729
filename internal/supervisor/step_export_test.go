package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// exportIn is an export step of a fresh workspace of a real repository;
// its Finish records the result into *finished and fails with finishErr.
func exportIn(t *testing.T, finishErr error) (*exportStep, *[]*run.ExportResult, *journal) {
	t.Helper()
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	ws := startWorkspace(t, r, l)
	j := &journal{}
	var finished []*run.ExportResult
	return &exportStep{Record: r, Layout: l, Workspace: ws, Export: workspace.Export, Event: j.add,
		Finish: func(ctx context.Context, res *run.ExportResult) error {
			if ctx.Err() != nil {
				t.Error("Finish was given an ended context")
			}
			finished = append(finished, res)
			return finishErr
		}}, &finished, j
}

// branchTip is the commit the run's branch points at ("" when absent).
func branchTip(t *testing.T, e *exportStep) string {
	t.Helper()
	return testsupport.Git(t, e.Record.Repo, "for-each-ref", "--format=%(objectname)", "refs/heads/"+e.Record.Branch)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExportStep: the changes become a commit on the run's branch and the
// patch; the export is journaled, then Finish records the result, and the
// branch is left pointing at it.
func TestExportStep(t *testing.T) {
	e, finished, j := exportIn(t, nil)
	dir := e.Workspace.Dir()
	write(t, filepath.Join(dir, "a.txt"), "changed\n")
	write(t, filepath.Join(dir, "b.txt"), "new\n")
	res, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := e.Record
	if res.NoChanges || res.Result == nil || res.Result.FilesChanged != 2 || len(*finished) != 1 || (*finished)[0] != res.Result {
		t.Fatalf("result %+v, finished %v", res, *finished)
	}
	if tip := branchTip(t, e); tip != res.Result.Commit {
		t.Fatalf("branch at %q, result %q", tip, res.Result.Commit)
	}
	if msg := testsupport.Git(t, r.Repo, "log", "-1", "--format=%an <%ae>%n%B", res.Result.Commit); msg != "T <t@example.com>\n"+strings.TrimSpace(CommitMessage(r.Task, r.ID)) {
		t.Fatalf("commit %q", msg)
	}
	if b, err := os.ReadFile(e.Layout.Patch(r.ID)); err != nil || !strings.Contains(string(b), "+new") {
		t.Fatalf("patch %q %v", b, err)
	}
	evs := j.of(run.EventExport)
	if len(evs) != 1 || evs[0].Message != "exported 2 files to "+r.Branch || j.len() != 1 {
		t.Fatalf("events %+v", j.evs)
	}
	d := data(t, evs[0])
	hasKeys(t, d, "refused", "scan_time", "export_time")
	if d["commit"] != res.Result.Commit || d["files"] != float64(2) {
		t.Fatalf("export event data %v", d)
	}
}

// TestExportStepFinishFails: when the result cannot be recorded, the
// branch is moved back (here: never made), the patch removed, and a
// warning says so after the export event.
func TestExportStepFinishFails(t *testing.T) {
	lost := errors.New("the run was cancelled first")
	e, finished, j := exportIn(t, lost)
	write(t, filepath.Join(e.Workspace.Dir(), "b.txt"), "new\n")
	res, err := e.Run(context.Background())
	if !errors.Is(err, lost) || res.Result != nil || len(*finished) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if tip := branchTip(t, e); tip != "" {
		t.Fatalf("branch left at %s", tip)
	}
	if _, err := os.Stat(e.Layout.Patch(e.Record.ID)); !os.IsNotExist(err) {
		t.Fatalf("patch left: %v", err)
	}
	if j.len() != 2 || j.evs[0].Type != run.EventExport || j.evs[1].Type != run.EventWarning ||
		!strings.HasPrefix(j.evs[1].Message, "the export could not be recorded; branch "+e.Record.Branch+" is left as it was") {
		t.Fatalf("events %+v", j.evs)
	}
}

// TestExportStepNothingToExport: no change, or only refused ones, is no
// export: the branch is not made and Finish is not called; each refusal
// is journaled.
func TestExportStepNothingToExport(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		e, finished, j := exportIn(t, nil)
		if fifo {
			if err := syscall.Mkfifo(filepath.Join(e.Workspace.Dir(), "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.Run(context.Background())
		if err != nil || !res.NoChanges || res.Result != nil || len(*finished) != 0 || branchTip(t, e) != "" {
			t.Fatalf("fifo %v: %+v %v", fifo, res, err)
		}
		refused := j.of(run.EventRefused)
		if !fifo {
			if len(res.Refused) != 0 || j.len() != 0 {
				t.Fatalf("refused %+v, events %+v", res.Refused, j.evs)
			}
			continue
		}
		if len(res.Refused) != 1 || res.Refused[0].Path != "pipe" || len(refused) != 1 || j.len() != 1 ||
			!strings.HasPrefix(refused[0].Message, "pipe: ") {
			t.Fatalf("refused %+v, events %+v", res.Refused, j.evs)
		}
		hasKeys(t, data(t, refused[0]), "path", "reason")
	}
}

// TestExportStepAuthorFromRepository: a run that names no author takes
// the repository's, read while the agent worked.
func TestExportStepAuthorFromRepository(t *testing.T) {
	e, _, _ := exportIn(t, nil)
	r := e.Record
	testsupport.Git(t, r.Repo, "config", "user.name", "Repo Author")
	testsupport.Git(t, r.Repo, "config", "user.email", "repo@example.com")
	r.Export.AuthorName, r.Export.AuthorEmail = "", ""
	e.Ident = authorIdentity(context.Background(), r)
	write(t, filepath.Join(e.Workspace.Dir(), "b.txt"), "new\n")
	res, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if who := testsupport.Git(t, r.Repo, "log", "-1", "--format=%an <%ae>", res.Result.Commit); who != "Repo Author <repo@example.com>" {
		t.Fatalf("author %q", who)
	}
	r.Export.AuthorName, r.Export.AuthorEmail = "A", "a@example.com"
	if authorIdentity(context.Background(), r) != nil {
		t.Fatal("the repository's author was read for a run that names one")
	}
}

func TestExportStepNoExport(t *testing.T) {
	e, _, _ := exportIn(t, nil)
	e.Export = nil
	if _, err := e.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "export is not available") {
		t.Fatalf("err %v", err)
	}
}

// TestExportRecordDeadline: Finish is given FinishWithin (an agent host's
// store waits for its server longer than a local one), or
// DefaultRecordWithin when the step names none; a Finish that outlives it
// fails the export and the branch goes back.
func TestExportRecordDeadline(t *testing.T) {
	for _, within := range []time.Duration{0, 150 * time.Millisecond, 5 * time.Minute} {
		e, _, _ := exportIn(t, nil)
		e.FinishWithin = within
		want := within
		if want == 0 {
			want = DefaultRecordWithin
		}
		var left time.Duration
		e.Finish = func(ctx context.Context, res *run.ExportResult) error {
			dl, ok := ctx.Deadline()
			if !ok {
				t.Fatal("Finish has no deadline")
			}
			left = time.Until(dl)
			if within == 150*time.Millisecond {
				<-ctx.Done() // a store that does not answer in time
				return ctx.Err()
			}
			return nil
		}
		write(t, filepath.Join(e.Workspace.Dir(), "a.txt"), "changed\n")
		_, err := e.Run(context.Background())
		if left > want || left < want-time.Second {
			t.Errorf("FinishWithin %v: Finish had %v, want about %v", within, left, want)
		}
		switch {
		case within == 150*time.Millisecond && !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("a Finish past its deadline: %v", err)
		case within == 150*time.Millisecond && branchTip(t, e) != "":
			t.Errorf("the branch was left at %s", branchTip(t, e))
		case within != 150*time.Millisecond && err != nil:
			t.Errorf("FinishWithin %v: %v", within, err)
		}
	}
}

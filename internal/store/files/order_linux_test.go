package files_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// skipUnlessCap skips a test that needs a capability this machine lacks,
// and fails it instead where AGENTRUN_REQUIRE_CAPS=1 says it must be there.
func skipUnlessCap(t *testing.T, name string, err error) {
	t.Helper()
	testsupport.Require(t, name, false, "%v", err)
}

// fsImmutable is FS_IMMUTABLE_FL of linux/fs.h.
const fsImmutable = 0x00000010

// setImmutable sets or clears FS_IMMUTABLE_FL on a directory: no entry can
// be created, removed or renamed in it, while existing files stay writable.
func setImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutable
	} else {
		flags &^= fsImmutable
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
}

// Transition writes its state event to the journal before it stores
// run.json, and takes it back when the record cannot be replaced (the run
// directory is immutable, so no temp file can be made): the journal never
// holds a transition the record does not have, and run.json is unchanged.
func TestTransitionJournalsBeforeStoring(t *testing.T) {
	s := openStore(t)
	r := mustCreate(t, s, run.NewID())
	dir := s.RunDir(r.ID)
	if err := setImmutable(dir, true); err != nil {
		skipUnlessCap(t, "CAP_LINUX_IMMUTABLE and a file system with the immutable flag", err)
	}
	t.Cleanup(func() { setImmutable(dir, false) })

	_, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", "making the workspace")
	if err == nil {
		t.Fatal("Transition stored run.json in an immutable directory")
	}
	evs, err := s.Events(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("journal after a failed store = %+v; want no state event the record does not have", evs)
	}
	got, err := s.Get(ctx, r.ID)
	if err != nil || got.State != run.StateQueued || got.Version != 1 {
		t.Fatalf("run after a failed store = %+v, %v", got, err)
	}
	if err := setImmutable(dir, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", "retry"); err != nil {
		t.Fatal(err)
	}
	if evs, _ = s.Events(ctx, r.ID, 0); len(evs) != 1 || evs[0].Seq != 1 || evs[0].Message != "retry" {
		t.Fatalf("journal after the retry = %+v", evs)
	}
}

package cli

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestInProcessCommandsAreFreed: the command tree a server or an MCP
// server builds for each request it runs in process is garbage once the
// request is answered: its flags too. (Cobra keeps flag completions for the process's
// life in a map keyed by the flag: registering them per request kept
// every tree, tens of kilobytes each, and a team server under load grew
// by gigabytes.)
func TestInProcessCommandsAreFreed(t *testing.T) {
	var freed atomic.Int64
	const n = 50
	for range n {
		app := &App{Deps: testDeps, local: true, Getenv: func(string) string { return "" }}
		root := app.newRootCmd()
		sub, _, err := root.Find([]string{"submit"})
		if err != nil {
			t.Fatal(err)
		}
		// A flag that has a completion (what the map would keep).
		flag := sub.Flags().Lookup("sandbox")
		if flag == nil {
			t.Fatal("submit has no --sandbox")
		}
		runtime.AddCleanup(flag, func(int) { freed.Add(1) }, 0)
	}
	for deadline := time.Now().Add(5 * time.Second); freed.Load() < n && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := freed.Load(); got < n {
		t.Fatalf("%d of %d in-process command trees freed", got, n)
	}
}

// TestInProcessTreeHoldsItsCommand: a tree built for one command run in
// process holds that command and no other, for every top-level command
// the full tree has (the table of names is kept by hand).
func TestInProcessTreeHoldsItsCommand(t *testing.T) {
	full := (&App{Deps: testDeps, Getenv: func(string) string { return "" }}).newRootCmd()
	n := 0
	for _, c := range full.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue // cobra's own
		}
		n++
		one := (&App{Deps: testDeps, local: true, only: c.Name(), Getenv: func(string) string { return "" }}).newRootCmd()
		var names []string
		for _, o := range one.Commands() {
			if o.Name() != "help" && o.Name() != "completion" {
				names = append(names, o.Name())
			}
		}
		if len(names) != 1 || names[0] != c.Name() {
			t.Errorf("the tree for %q holds %v", c.Name(), names)
		}
	}
	if n < 20 {
		t.Fatalf("the full tree has %d commands", n)
	}
}

// BenchmarkInProcessTree: the command tree a request run in process
// builds, whole (as before) and for its own command only.
func BenchmarkInProcessTree(b *testing.B) {
	for _, only := range []string{"", "submit", "status"} {
		b.Run("only="+only, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				(&App{Deps: testDeps, local: true, only: only, Getenv: func(string) string { return "" }}).newRootCmd()
			}
		})
	}
}

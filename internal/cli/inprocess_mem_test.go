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

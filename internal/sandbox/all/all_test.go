package all

import (
	"runtime"
	"testing"
)

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range List(Options{}) {
		if seen[b.Name()] {
			t.Fatalf("backend %s listed twice", b.Name())
		}
		seen[b.Name()] = true
	}
	for _, want := range []string{"host", "native", "docker"} {
		if !seen[want] {
			t.Fatalf("backend %s not listed: %v", want, seen)
		}
	}
	d := Default()
	for _, b := range List(Options{}) {
		if b.Name() == d && b.Isolation().None() {
			t.Fatalf("the default backend %s isolates nothing", d)
		}
	}
	if runtime.GOOS == "linux" && d != "native" {
		t.Fatalf("default on linux is %q", d)
	}
}

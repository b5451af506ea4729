package all

import (
	"runtime"
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	m := Backends(Options{})
	names := Names(Options{})
	for _, want := range []string{"host", "native"} {
		if _, ok := m[want]; !ok || !slices.Contains(names, want) {
			t.Fatalf("backend %s not registered: %v", want, names)
		}
	}
	for n, b := range m {
		if b.Name() != n {
			t.Fatalf("%s registered as %s", b.Name(), n)
		}
	}
	if d := Default(); d == "host" {
		t.Fatal("the host backend must never be the default")
	} else if runtime.GOOS == "linux" && d != "native" {
		t.Fatalf("default on linux is %q", d)
	}
}

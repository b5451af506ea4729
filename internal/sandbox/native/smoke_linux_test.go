package native_test

import "testing"

func TestSmoke(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	r := sh(t, b, spec, "id; ls /; echo hi > /workspace/x; cat /workspace/x; hostname; cat /proc/self/status | grep -i cap; ps 2>/dev/null; ls /proc")
	t.Logf("%v\n%v", r, r.enforced)
}

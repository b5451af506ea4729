package sandbox

import "testing"

func TestLowestPrivilegedPort(t *testing.T) {
	for _, c := range []struct {
		forwards []string
		want     int
	}{
		{nil, 0},
		{[]string{"127.0.0.1:5432", "127.0.0.1:1024"}, 0},
		{[]string{"127.0.0.1:5432", "127.0.0.1:443", "127.0.0.2:80", "127.0.0.1:1023"}, 80},
		{[]string{"127.0.0.1:1023"}, 1023},
		{[]string{"127.0.0.1:1"}, 1},
		{[]string{"not an address", "127.0.0.1:0"}, 0},
	} {
		if got := LowestPrivilegedPort(c.forwards); got != c.want {
			t.Errorf("LowestPrivilegedPort(%q) = %d, want %d", c.forwards, got, c.want)
		}
	}
}

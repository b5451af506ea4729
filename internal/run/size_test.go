package run

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"10G": 10 << 30, "512M": 512 << 20, "1KiB": 1024, "7": 7, "2t": 2 << 40, "3GB": 3 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1G", "ten", "1.5G", "99999999999T"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

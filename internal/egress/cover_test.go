package egress

import "testing"

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		policy, entry string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "example.com:443", true},
		{"example.com", "example.com:80", true},
		{"example.com", "example.com:8443", false},
		{"example.com", "example.com:*", false},
		{"example.com:443", "example.com", false}, // the default is 443 and 80
		{"example.com:*", "example.com:8443", true},
		{"example.com", "api.example.com", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "a.b.example.com:443", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "*.api.example.com", true},
		{"*.api.example.com", "*.example.com", false},
		{"*.example.com", "badexample.com", false},
		{"10.0.0.0/8", "10.1.2.3", true},
		{"10.0.0.0/8", "10.1.0.0/16:443", true},
		{"10.1.0.0/16", "10.0.0.0/8", false},
		{"10.0.0.0/8", "11.0.0.1", false},
		{"10.0.0.0/8", "ten.example", false},
		{"[2001:db8::/32]:443", "[2001:db8::1]:443", true},
	} {
		p, err := ParseEntry(c.policy)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseEntry(c.entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Covers(e); got != c.want {
			t.Errorf("%s covers %s = %v, want %v", c.policy, c.entry, got, c.want)
		}
	}
}

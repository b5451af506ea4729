package egress

import (
	"reflect"
	"testing"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	recs := []Record{
		{Allow: true, Host: "registry.npmjs.org", Port: 443, IP: "104.16.0.1", Method: "CONNECT", Rule: "registry.npmjs.org:443", Code: CodeAllowed, BytesUp: 100, BytesDn: 2000},
		{Allow: true, Host: "registry.npmjs.org", Port: 443, IP: "104.16.0.2", Method: "CONNECT", Rule: "registry.npmjs.org:443", Code: CodeAllowed, BytesUp: 50, BytesDn: 500, Error: "idle timeout"},
		{Allow: true, Host: "api.github.com", Port: 443, Method: "CONNECT", Rule: "*.github.com", Code: CodeAllowed, BytesUp: 1, BytesDn: 2},
		{Host: "evil.example", Port: 443, Method: "CONNECT", Why: "evil.example is not in the allowlist", Code: CodeNotListed},
		{Host: "evil.example", Port: 443, Method: "CONNECT", Why: "evil.example is not in the allowlist", Code: CodeNotListed},
		{Host: "api.github.com", Port: 22, Method: "CONNECT", Why: "port 22 is not allowed", Code: CodePort},
		{Host: "db.internal.example", Port: 5432, IP: "10.0.0.7", Method: "CONNECT", Why: "resolves to private 10.0.0.7", Rule: "db.internal.example:5432", Code: CodeSpecialIP},
		{Host: "::1", Port: 8080, IP: "::1", Method: "GET", Why: "IP literal [::1]:8080 is not in the allowlist", Code: CodeIPLiteral},
		{Host: "169.254.169.254", Port: 80, Method: "GET", Why: "IP literal", Code: CodeIPLiteral},
		{Host: "nowhere.example", Port: 443, Method: "CONNECT", Why: "cannot resolve", Code: CodeResolve},
	}
	got := Summarize(recs)
	want := Summary{
		Allowed: []AllowedHost{
			{Host: "api.github.com", Port: 443, Count: 1, BytesUp: 1, BytesDn: 2, Rules: []string{"*.github.com"}},
			{Host: "registry.npmjs.org", Port: 443, Count: 2, BytesUp: 150, BytesDn: 2500, Rules: []string{"registry.npmjs.org:443"}, Errors: 1},
		},
		Denied: []DeniedHost{
			{Host: "169.254.169.254", Port: 80, Count: 1, Why: "IP literal", Code: CodeIPLiteral, Flag: "--allow 169.254.169.254:80"},
			{Host: "::1", Port: 8080, Count: 1, Why: "IP literal [::1]:8080 is not in the allowlist", Code: CodeIPLiteral, Flag: "--allow [::1]:8080"},
			{Host: "api.github.com", Port: 22, Count: 1, Why: "port 22 is not allowed", Code: CodePort, Flag: "--allow api.github.com:22"},
			{Host: "db.internal.example", Port: 5432, Count: 1, Why: "resolves to private 10.0.0.7", Code: CodeSpecialIP, Flag: "--allow 10.0.0.7:5432"},
			{Host: "evil.example", Port: 443, Count: 2, Why: "evil.example is not in the allowlist", Code: CodeNotListed, Flag: "--allow evil.example:443"},
			{Host: "nowhere.example", Port: 443, Count: 1, Why: "cannot resolve", Code: CodeResolve},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize:\n got %+v\nwant %+v", got, want)
	}
	if s := Summarize(nil); s.Allowed != nil || s.Denied != nil {
		t.Errorf("Summarize(nil) = %+v", s)
	}
}

// Every suggested flag parses and, added to the allowlist, allows the
// request that was denied.
func TestSuggestFlagAllows(t *testing.T) {
	t.Parallel()
	base := []string{"db.example.com:5432", "meta.example.com"}
	cases := []struct {
		req Request
	}{
		{Request{Host: "new.example.com", Port: 443, IPs: ips(public4)}},
		{Request{Host: "db.example.com", Port: 5433, IPs: ips(public4)}},
		{Request{Host: "db.example.com", Port: 5432, IPs: ips("10.0.0.7")}},
		{Request{Host: "meta.example.com", Port: 80, IPs: ips("::ffff:169.254.169.254")}},
		{Request{Host: "203.0.113.9", Port: 8443}},
		{Request{Host: "::1", Port: 9000}},
	}
	al, _ := NewAllowlist(base)
	for _, c := range cases {
		d := al.Decide(t.Context(), c.req)
		if d.Allow {
			t.Fatalf("%+v allowed by the base list", c.req)
		}
		rec := Record{Host: c.req.Host, Port: c.req.Port, Why: d.Why, Code: d.Code, Rule: d.Rule, IP: d.IP}
		flag := SuggestFlag(rec)
		entry, ok := cutFlag(flag)
		if !ok {
			t.Fatalf("%+v: flag %q", c.req, flag)
		}
		al2, err := NewAllowlist(append(append([]string(nil), base...), entry))
		if err != nil {
			t.Fatalf("flag %q: %v", flag, err)
		}
		if d := al2.Decide(t.Context(), c.req); !d.Allow {
			t.Errorf("%+v still denied with %s: %+v", c.req, flag, d)
		}
	}
	if f := SuggestFlag(Record{Allow: true, Host: "x.example", Port: 443}); f != "" {
		t.Errorf("flag for an allowed record: %q", f)
	}
	if f := SuggestFlag(Record{Host: "bad host", Port: 443, Code: CodeBadHost}); f != "" {
		t.Errorf("flag for a bad host: %q", f)
	}
}

func cutFlag(f string) (string, bool) {
	const p = "--allow "
	if len(f) <= len(p) || f[:len(p)] != p {
		return "", false
	}
	return f[len(p):], true
}

func TestRecordString(t *testing.T) {
	t.Parallel()
	tests := map[string]Record{
		"allowed CONNECT api.github.com:443 (140.82.112.5) by api.github.com:443, 517 B up, 4.2 KiB down": {
			Allow: true, Method: "CONNECT", Host: "api.github.com", Port: 443, IP: "140.82.112.5", Rule: "api.github.com:443", BytesUp: 517, BytesDn: 4300},
		"allowed GET [::1]:8080 by [::1]:8080, 0 B up, 3.0 MiB down: stream response: reset": {
			Allow: true, Method: "GET", Host: "::1", Port: 8080, IP: "::1", Rule: "[::1]:8080", BytesDn: 3 << 20, Error: "stream response: reset"},
		"denied CONNECT evil.example:443: evil.example is not in the allowlist": {
			Method: "CONNECT", Host: "evil.example", Port: 443, Why: "evil.example is not in the allowlist"},
	}
	for want, r := range tests {
		if got := r.String(); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	}
}

func TestProxyEnv(t *testing.T) {
	t.Parallel()
	want := []string{
		"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
		"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	}
	if got := ProxyEnv("http://127.0.0.1:3128"); !reflect.DeepEqual(got, want) {
		t.Errorf("ProxyEnv = %q", got)
	}
}

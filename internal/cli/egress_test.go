package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
)

func TestEgressSummary(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.Sandbox.Network, r.Sandbox.Allow = "allowlist", []string{"proxy.golang.org"}
	})
	ctx := context.Background()
	for _, rec := range []egress.Record{
		{Allow: true, Host: "proxy.golang.org", Port: 443, Method: "CONNECT", Rule: "proxy.golang.org", Code: egress.CodeAllowed, BytesUp: 100, BytesDn: 5000},
		{Allow: true, Host: "proxy.golang.org", Port: 443, Method: "CONNECT", Rule: "proxy.golang.org", Code: egress.CodeAllowed, BytesUp: 100, BytesDn: 5000},
		{Allow: false, Host: "evil.example", Port: 443, Method: "CONNECT", Why: "not in allowlist", Code: egress.CodeNotListed},
		{Allow: false, Host: "metadata.internal", Port: 80, IP: "169.254.169.254", Method: "GET", Why: "resolves to link-local 169.254.169.254", Code: egress.CodeSpecialIP},
	} {
		if _, err := h.st.AppendEvent(ctx, r.ID, run.NewEvent(run.EventEgress, "", rec)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.st.AppendEvent(ctx, r.ID, run.Event{Type: run.EventEgress, Data: json.RawMessage(`"garbage"`)}); err != nil {
		t.Fatal(err)
	}
	app, out, errb := h.app()
	if err := runEgress(ctx, &egressOptions{ID: r.ID}, app); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"network  allowlist: proxy.golang.org", "proxy.golang.org:443  2", "200 B", "9.8 KiB",
		"evil.example:443", "not in allowlist", "--allow evil.example:443",
		"metadata.internal:80", "--allow 169.254.169.254:80",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("egress lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(errb.String(), "1 egress events") {
		t.Errorf("unreadable event not reported: %q", errb.String())
	}
	code, js, _ := h.exec("egress", r.ID, "--json")
	var doc egressOutput
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if len(doc.Allowed) != 1 || doc.Allowed[0].Count != 2 || len(doc.Denied) != 2 || doc.Unreadable != 1 || doc.Network != "allowlist" {
		t.Errorf("%+v", doc)
	}
}

func TestEgressNoNetwork(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	code, out, _ := h.exec("egress", r.ID)
	if code != 0 || !strings.Contains(out, "network  none") || !strings.Contains(out, "no network") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = h.exec("egress", r.ID, "--json")
	if code != 0 || !strings.Contains(out, `"allowed": []`) || !strings.Contains(out, `"denied": []`) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestEgressBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "egress")
}

func TestEgressNeverSuggestsTelemetry(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.Agent.Name = "claude"
		r.Sandbox.Network, r.Sandbox.Allow = "allowlist", []string{"registry.npmjs.org"}
	})
	ctx := context.Background()
	for _, rec := range []egress.Record{
		{Allow: false, Host: "api.anthropic.com", Port: 443, Method: "CONNECT", Why: "not in allowlist", Code: egress.CodeNotListed},
		{Allow: false, Host: "http-intake.logs.us5.datadoghq.com", Port: 443, Method: "CONNECT", Why: "not in allowlist", Code: egress.CodeNotListed},
		{Allow: false, Host: "pypi.org", Port: 443, Method: "CONNECT", Why: "not in allowlist", Code: egress.CodeNotListed},
	} {
		if _, err := h.st.AppendEvent(ctx, r.ID, run.NewEvent(run.EventEgress, "", rec)); err != nil {
			t.Fatal(err)
		}
	}
	app, out, _ := h.app()
	if err := runEgress(ctx, &egressOptions{ID: r.ID}, app); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "--allow api.anthropic.com") || strings.Contains(s, "datadoghq") && strings.Contains(s, "--allow http-intake") {
		t.Fatalf("a telemetry host was suggested:\n%s", s)
	}
	if !strings.Contains(s, "--allow pypi.org") || !strings.Contains(s, "(not needed)") {
		t.Fatalf("egress:\n%s", s)
	}
	code, js, _ := h.exec("egress", r.ID, "--json")
	var doc egressOutput
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, d := range doc.Denied {
		if d.Host != "pypi.org" && (d.Flag != "" || d.Code != "not_needed") {
			t.Errorf("%+v", d)
		}
	}
}

package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// entryDoc is audit-list.schema.json's entry.
type entryDoc struct {
	Seq      int64           `json:"seq"`
	Time     string          `json:"time"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Run      string          `json:"run"`
	Payload  json.RawMessage `json:"payload"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

type checkpointDoc struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	Time string `json:"time"`
	Key  string `json:"key"`
}

type auditEntry struct {
	entryDoc
	Pretty string // the payload, indented
}

type auditContent struct {
	Entries      []auditEntry
	Checkpoints  []checkpointDoc
	Run          string
	Limit        int
	Older, Newer string // the paging links ("": none)
	Fingerprint  string
	PublicKey    string
	Server       string // this server's URL, for the verify command
}

const (
	auditPage    = 50
	auditMaxPage = 500
	// auditScan is the page size the UI reads the trail in to find its
	// newest entries: the API reads the trail from the oldest.
	auditScan = 1000
)

// auditPage shows the trail newest first, a page at a time: ?before=SEQ
// the page of entries before SEQ (default: the newest), ?after=SEQ the
// page after it; ?run=ID only that run's; ?limit=N entries a page. It
// shows the key's fingerprint and how to verify the trail with a pinned
// key: a check the server made of itself would prove nothing.
func (u *UI) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := auditContent{Run: strings.TrimSpace(q.Get("run")), Limit: auditPage}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		c.Limit = min(n, auditMaxPage)
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	after, afterErr := strconv.ParseInt(q.Get("after"), 10, 64)
	var es []entryDoc
	var older bool
	var a answer
	if afterErr == nil && after >= 0 {
		es, a = u.auditEntries(r, after, c.Limit, c.Run)
		older = after > 0
	} else {
		es, older, a = u.auditNewest(r, before, c.Limit, c.Run)
	}
	if a.status/100 != 2 {
		u.failAPI(w, r, a)
		return
	}
	slices.Reverse(es)
	for _, e := range es {
		c.Entries = append(c.Entries, auditEntry{entryDoc: e, Pretty: pretty(e.Payload)})
	}
	c.links(q, es, older, afterErr == nil || before > 0)
	var cps struct {
		Checkpoints []checkpointDoc `json:"checkpoints"`
	}
	if a, ok := u.get(r.Context(), "/v1/audit/checkpoints", &cps); !ok {
		u.failAPI(w, r, a)
		return
	}
	c.Checkpoints = cps.Checkpoints[max(0, len(cps.Checkpoints)-10):]
	slices.Reverse(c.Checkpoints)
	var key struct {
		PublicKey   string `json:"public_key"`
		Fingerprint string `json:"fingerprint"`
	}
	if _, ok := u.get(r.Context(), "/v1/audit/key", &key); ok {
		c.Fingerprint, c.PublicKey = key.Fingerprint, key.PublicKey
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	c.Server = scheme + "://" + r.Host
	u.render(w, r, http.StatusOK, "audit", "Audit log", c)
}

// links sets the paging links of the page of es (oldest first).
func (c *auditContent) links(q url.Values, es []entryDoc, older, paged bool) {
	if len(es) == 0 {
		return
	}
	v := url.Values{}
	if c.Run != "" {
		v.Set("run", c.Run)
	}
	if c.Limit != auditPage {
		v.Set("limit", strconv.Itoa(c.Limit))
	}
	if older {
		o := url.Values{"before": {strconv.FormatInt(es[len(es)-1].Seq, 10)}}
		for k, x := range v {
			o[k] = x
		}
		c.Older = "/ui/audit?" + o.Encode()
	}
	if paged {
		n := url.Values{"after": {strconv.FormatInt(es[0].Seq, 10)}}
		for k, x := range v {
			n[k] = x
		}
		c.Newer = "/ui/audit?" + n.Encode()
	}
}

// auditEntries is one call of GET /v1/audit.
func (u *UI) auditEntries(r *http.Request, after int64, limit int, run string) ([]entryDoc, answer) {
	p := "/v1/audit?after=" + strconv.FormatInt(after, 10) + "&limit=" + strconv.Itoa(limit)
	if run != "" {
		p += "&run=" + url.QueryEscape(run)
	}
	var doc struct {
		Entries []entryDoc `json:"entries"`
	}
	a, _ := u.get(r.Context(), p, &doc)
	return doc.Entries, a
}

// auditNewest are the newest limit entries before seq before (0: the
// newest of all), oldest first, and whether there are older ones.
func (u *UI) auditNewest(r *http.Request, before int64, limit int, run string) ([]entryDoc, bool, answer) {
	if before > 0 && run == "" {
		// Without a filter the sequence has no gaps: one call.
		from := max(0, before-1-int64(limit))
		es, a := u.auditEntries(r, from, int(before-1-from), "")
		return es, from > 0, a
	}
	var keep []entryDoc
	older := false
	for after := int64(0); ; {
		es, a := u.auditEntries(r, after, auditScan, run)
		if a.status/100 != 2 {
			return nil, false, a
		}
		for _, e := range es {
			if before > 0 && e.Seq >= before {
				return keep, older, a
			}
			keep = append(keep, e)
			if len(keep) > limit {
				keep, older = keep[1:], true
			}
		}
		if len(es) < auditScan {
			return keep, older, a
		}
		after = es[len(es)-1].Seq
	}
}

// policyContent is policy.schema.json, with its rules for people.
type policyContent struct {
	Path, Source, Digest string
	None                 bool
	Rules                []kv
	Canonical            string
}

func (u *UI) policyPage(w http.ResponseWriter, r *http.Request) {
	var doc struct {
		Path   string         `json:"path"`
		Source string         `json:"source"`
		Digest string         `json:"digest"`
		Policy map[string]any `json:"policy"`
	}
	a, ok := u.get(r.Context(), "/v1/policy", &doc)
	if !ok {
		u.failAPI(w, r, a)
		return
	}
	c := policyContent{Path: doc.Path, Source: doc.Source, Digest: doc.Digest, None: doc.Policy == nil}
	if !c.None {
		c.Rules = policyRules(doc.Policy)
		b, _ := json.MarshalIndent(doc.Policy, "", "  ")
		c.Canonical = string(b)
	}
	u.render(w, r, http.StatusOK, "policy", "Policy", c)
}

// policyRules are the rules a policy sets, in the order agentrun policy
// show prints them; a rule left out bounds nothing.
func policyRules(p map[string]any) []kv {
	var out []kv
	for _, k := range []string{"agents", "sandboxes", "host_sandbox", "images", "network", "egress", "env", "checks",
		"max_timeout", "max_attempts", "max_tokens", "max_cost", "max_disk"} {
		v, ok := p[k]
		if !ok || v == nil {
			continue
		}
		switch k {
		case "egress":
			e, _ := v.(map[string]any)
			out = append(out, kv{"egress.allow", list(e["allow"])}, kv{"egress.presets", list(e["presets"])})
		case "checks":
			cs, _ := v.([]any)
			for _, ch := range cs {
				m, _ := ch.(map[string]any)
				out = append(out, kv{"checks", show(m["name"]) + "=" + show(m["command"])})
			}
		default:
			if l, isList := v.([]any); isList {
				out = append(out, kv{k, list(l)})
			} else {
				out = append(out, kv{k, show(v)})
			}
		}
	}
	return out
}

// list is a list of names as text.
func list(v any) string {
	l, _ := v.([]any)
	var s []string
	for _, x := range l {
		s = append(s, show(x))
	}
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// pretty is a payload indented, its characters as they are (the page
// escapes them; JSON's \u003c would hide what was sent).
func pretty(raw json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

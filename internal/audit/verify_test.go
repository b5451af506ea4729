package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/audit"
)

func newKey(t *testing.T) *audit.Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return audit.NewKey(priv)
}

// chain makes n entries and a checkpoint after every entry in sealAt.
func chain(t *testing.T, k *audit.Key, n int, sealAt ...int64) ([]audit.Entry, []audit.Checkpoint) {
	t.Helper()
	var es []audit.Entry
	var cps []audit.Checkpoint
	seq, hash := int64(0), audit.ZeroHash
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		e, err := audit.Chain(audit.Entry{Actor: "token", Action: "submit", Run: fmt.Sprintf("run%d", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"n": %d, "b": [1, 2], "a": "x"}`, i))}, seq, hash, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		seq, hash = e.Seq, e.Hash
		for _, s := range sealAt {
			if s == seq {
				cps = append(cps, k.Sign(audit.Checkpoint{Seq: seq, Hash: hash, Time: e.Time}))
			}
		}
	}
	return es, cps
}

// rehash recomputes the hashes from entry i on, as someone who can write
// the log but has not the key would.
func rehash(es []audit.Entry, i int) {
	for ; i < len(es); i++ {
		if i > 0 {
			es[i].PrevHash = es[i-1].Hash
		}
		es[i].Hash = es[i].ComputeHash()
	}
}

func TestCanonical(t *testing.T) {
	got, err := audit.Canonical([]byte(` {"b": 1, "a": {"d": 12345678901234567890, "c": [true, null]}} `))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"c":[true,null],"d":12345678901234567890},"b":1}`; string(got) != want {
		t.Fatalf("canonical %s, want %s", got, want)
	}
	if _, err := audit.Canonical([]byte(`{} {}`)); err == nil {
		t.Fatal("two values taken")
	}
}

// TestVerify: each kind of tampering is found, with the entry named.
func TestVerify(t *testing.T) {
	k := newKey(t)
	keys := []ed25519.PublicKey{k.Public()}
	for _, tc := range []struct {
		name   string
		tamper func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint)
		kind   string
		seq    int64
	}{
		{"untouched", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) { return es, cps }, "", 0},
		{"payload edited", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			es[6].Payload = json.RawMessage(`{"a":"y","b":[1,2],"n":6}`)
			return es, cps
		}, audit.Edited, 7},
		{"actor edited and rehashed", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			es[6].Actor = "someone"
			es[6].Hash = es[6].ComputeHash()
			return es, cps
		}, audit.Edited, 7},
		{"rewritten to the end", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			es[6].Actor = "someone"
			rehash(es, 6)
			return es, cps
		}, audit.Rewritten, 10},
		{"removed", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			return append(es[:3:3], es[4:]...), cps
		}, audit.Removed, 4},
		{"two removed", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			return append(es[:3:3], es[5:]...), cps
		}, audit.Removed, 4},
		{"lines swapped", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			es[2], es[5] = es[5], es[2]
			return es, cps
		}, audit.Reordered, 3},
		{"seqs swapped", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			es[2], es[5] = es[5], es[2]
			es[2].Seq, es[5].Seq = 3, 6
			return es, cps
		}, audit.Reordered, 3},
		{"inserted and renumbered", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			x, _ := audit.Chain(audit.Entry{Actor: "token", Action: "cancel"}, es[3].Seq, es[3].Hash, time.Now())
			out := append(append(es[:4:4], x), es[4:]...)
			for i := 5; i < len(out); i++ {
				out[i].Seq++
			}
			return out, cps
		}, audit.Inserted, 5},
		{"inserted with a bad hash", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			x := es[3]
			x.Seq, x.Action, x.PrevHash = 5, "cancel", es[3].Hash
			out := append(append(es[:4:4], x), es[4:]...)
			for i := 5; i < len(out); i++ {
				out[i].Seq++
			}
			return out, cps
		}, audit.Inserted, 5},
		{"duplicate line", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			return append(append(es[:4:4], es[3]), es[4:]...), cps
		}, audit.Inserted, 4},
		{"truncated after a checkpoint", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			return es[:8], cps
		}, audit.Truncated, 9},
		{"forged checkpoint", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			other := newKey(t)
			return es, append(cps, other.Sign(audit.Checkpoint{Seq: 12, Hash: es[11].Hash, Time: es[11].Time}))
		}, audit.BadCheckpoint, 12},
		{"checkpoint altered", func(es []audit.Entry, cps []audit.Checkpoint) ([]audit.Entry, []audit.Checkpoint) {
			cps[0].Hash = es[3].Hash
			return es, cps
		}, audit.BadCheckpoint, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, cps := chain(t, k, 12, 5, 10)
			es, cps = tc.tamper(es, cps)
			rep := audit.Verify(es, cps, keys)
			if tc.kind == "" {
				if !rep.OK || rep.Problem != nil || rep.Checkpoints != 2 || rep.Sealed != 10 || rep.Unsealed != 2 || rep.Head != 12 {
					t.Fatalf("untouched: %+v", rep)
				}
				return
			}
			if rep.OK || rep.Problem == nil {
				t.Fatalf("%s: not found: %+v", tc.name, rep)
			}
			if rep.Problem.Kind != tc.kind || rep.Problem.Seq != tc.seq {
				t.Fatalf("%s: found %s at %d (%s), want %s at %d", tc.name, rep.Problem.Kind, rep.Problem.Seq, rep.Problem.Detail, tc.kind, tc.seq)
			}
		})
	}
}

// TestVerifyNeedsThePinnedKey: a trail signed by another key than the
// one pinned does not verify, though it is whole.
func TestVerifyNeedsThePinnedKey(t *testing.T) {
	es, cps := chain(t, newKey(t), 4, 4)
	rep := audit.Verify(es, cps, []ed25519.PublicKey{newKey(t).Public()})
	if rep.Problem == nil || rep.Problem.Kind != audit.BadCheckpoint || !strings.Contains(rep.Problem.Detail, "not pinned") {
		t.Fatalf("%+v", rep.Problem)
	}
}

// TestExportRoundTrip: ReadExport reads what the export format holds, and
// refuses other lines.
func TestExportRoundTrip(t *testing.T) {
	k := newKey(t)
	es, cps := chain(t, k, 3, 2)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range es {
		enc.Encode(audit.Line{Entry: &es[i]})
		if es[i].Seq == 2 {
			enc.Encode(audit.Line{Checkpoint: &cps[0]})
		}
	}
	ges, gcps, err := audit.ReadExport(&buf)
	if err != nil || len(ges) != 3 || len(gcps) != 1 {
		t.Fatalf("%d entries, %d checkpoints, %v", len(ges), len(gcps), err)
	}
	if rep := audit.Verify(ges, gcps, []ed25519.PublicKey{k.Public()}); !rep.OK {
		t.Fatalf("%+v", rep.Problem)
	}
	for _, bad := range []string{`{"entry": {}, "checkpoint": {}}`, `{}`, `{"other": 1}`, `not json`} {
		if _, _, err := audit.ReadExport(strings.NewReader(bad)); err == nil {
			t.Errorf("%s taken", bad)
		}
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	a, err := audit.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := audit.LoadOrCreateKey(dir)
	if err != nil || !a.Public().Equal(b.Public()) {
		t.Fatalf("second load: %v, same key %v", err, err == nil && a.Public().Equal(b.Public()))
	}
	pub, err := audit.ParsePublicKey(fmt.Sprintf("%x  ed25519 sha256:...\n", a.Public()))
	if err != nil || !pub.Equal(a.Public()) {
		t.Fatalf("parse: %v", err)
	}
	if _, err := audit.ParsePublicKey("abcd"); err == nil {
		t.Fatal("a short key taken")
	}
}

// memLog is a Log in memory, for the checkpointer's test.
type memLog struct {
	mu  sync.Mutex
	es  []audit.Entry
	cps []audit.Checkpoint
}

func (m *memLog) Append(_ context.Context, e audit.Entry) (audit.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seq, hash := int64(0), audit.ZeroHash
	if n := len(m.es); n > 0 {
		seq, hash = m.es[n-1].Seq, m.es[n-1].Hash
	}
	c, err := audit.Chain(e, seq, hash, time.Now())
	if err == nil {
		m.es = append(m.es, c)
	}
	return c, err
}

func (m *memLog) Entries(context.Context, audit.Query) ([]audit.Entry, error) { return nil, nil }

func (m *memLog) Checkpoints(context.Context, int64, int) ([]audit.Checkpoint, error) {
	return nil, nil
}

func (m *memLog) Seal(_ context.Context, s audit.Signer) (audit.Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.es)
	if n == 0 || (len(m.cps) > 0 && m.cps[len(m.cps)-1].Seq == int64(n)) {
		return audit.Checkpoint{}, false, nil
	}
	cp := s.Sign(audit.Checkpoint{Seq: int64(n), Hash: m.es[n-1].Hash, Time: audit.FormatTime(time.Now())})
	m.cps = append(m.cps, cp)
	return cp, true, nil
}

func (m *memLog) Head(context.Context) (int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sealed := int64(0)
	if len(m.cps) > 0 {
		sealed = m.cps[len(m.cps)-1].Seq
	}
	return int64(len(m.es)), sealed, nil
}

// TestCheckpointer: a checkpoint comes once Every entries are unsealed,
// and at Stop for the rest; Stop twice, and Stop before Start, only seal.
func TestCheckpointer(t *testing.T) {
	m := &memLog{}
	c := &audit.Checkpointer{Log: m, Signer: newKey(t), Every: 3, Interval: time.Hour}
	c.Start()
	for i := range 4 {
		m.Append(context.Background(), audit.Entry{Actor: "a", Action: fmt.Sprint(i)})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, sealed, _ := m.Head(context.Background()); sealed >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint after 4 entries with Every 3")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.Append(context.Background(), audit.Entry{Actor: "a", Action: "last"})
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if head, sealed, _ := m.Head(context.Background()); head != 5 || sealed != 5 {
		t.Fatalf("after Stop: head %d, sealed %d", head, sealed)
	}
	if err := (&audit.Checkpointer{Log: &memLog{}, Signer: newKey(t)}).Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	(&audit.Checkpointer{}).Start()
}

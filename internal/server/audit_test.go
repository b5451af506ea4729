package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/users"
)

// cli runs the built binary with args and returns its stdout and exit
// status.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testsupport.Agentrun(t), args...)
	home := t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AGENTRUN_HOME=" + filepath.Join(home, "agentrun"), "LANG=C"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("agentrun %s: %v", strings.Join(args, " "), err)
	}
	if ee != nil && ee.ExitCode() != 4 && ee.ExitCode() != 0 {
		t.Logf("agentrun %s: exit %d: %s", strings.Join(args, " "), ee.ExitCode(), errb.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// verifyDoc is what the checks read of audit verify --json.
type verifyDoc struct {
	OK          bool `json:"ok"`
	Entries     int  `json:"entries"`
	Checkpoints int  `json:"checkpoints"`
	Problem     *struct {
		Kind   string `json:"kind"`
		Seq    int64  `json:"seq"`
		Detail string `json:"detail"`
	} `json:"problem"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// verify runs agentrun audit verify against the server with the pinned
// key; its document validates.
func (in *instance) verify(t *testing.T, key string, extra ...string) (verifyDoc, int) {
	t.Helper()
	out, code := cli(t, append([]string{"--server", in.url, "audit", "verify", "--key-hex", key, "--json"}, extra...)...)
	if err := schemas(t).Validate("audit-verify.schema.json", []byte(out), jsonschema.Options{}); err != nil {
		t.Errorf("audit verify --json: %v\n%s", err, out)
	}
	var d verifyDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("audit verify --json: %v\n%s", err, out)
	}
	return d, code
}

// trail is a snapshot of the audit tables, put back after each tampering.
type trail struct {
	entries []audit.Entry
	cps     []audit.Checkpoint
}

func snapshot(t *testing.T, db *sqldb.DB) trail {
	t.Helper()
	var tr trail
	rows, err := db.Read().Query(`SELECT seq, time, actor, action, run_id, payload, prev_hash, hash FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e audit.Entry
		var p string
		if err := rows.Scan(&e.Seq, &e.Time, &e.Actor, &e.Action, &e.Run, &p, &e.PrevHash, &e.Hash); err != nil {
			t.Fatal(err)
		}
		e.Payload = json.RawMessage(p)
		tr.entries = append(tr.entries, e)
	}
	rows.Close()
	rows, err = db.Read().Query(`SELECT seq, hash, time, key, signature FROM audit_checkpoints ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c audit.Checkpoint
		if err := rows.Scan(&c.Seq, &c.Hash, &c.Time, &c.Key, &c.Signature); err != nil {
			t.Fatal(err)
		}
		tr.cps = append(tr.cps, c)
	}
	rows.Close()
	return tr
}

// write replaces the audit tables' rows with tr's.
func (tr trail) write(t *testing.T, db *sqldb.DB) {
	t.Helper()
	err := db.InTx(context.Background(), func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM audit_entries`, `DELETE FROM audit_checkpoints`} {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
		for _, e := range tr.entries {
			if _, err := tx.Exec(`INSERT INTO audit_entries (seq, time, actor, action, run_id, payload, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				e.Seq, e.Time, e.Actor, e.Action, e.Run, string(e.Payload), e.PrevHash, e.Hash); err != nil {
				return err
			}
		}
		for _, c := range tr.cps {
			if _, err := tx.Exec(`INSERT INTO audit_checkpoints (seq, hash, time, key, signature) VALUES ($1, $2, $3, $4, $5)`,
				c.Seq, c.Hash, c.Time, c.Key, c.Signature); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func exec1(t *testing.T, db *sqldb.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Write().Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestAuditTrailTampering: a real server on a real database records its
// requests and its runs' events; verify, against the server, passes on
// the untouched trail and names the entry of each tampering done in the
// database: an edited payload, a deleted entry, two entries swapped, one
// inserted, the log cut short after a checkpoint, the chain rewritten, a
// checkpoint forged.
func TestAuditTrailTampering(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--audit-every", "4", "--audit-interval", "1s"}
		srv := start(t, c)
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		id := srv.runID(t, spec("add b", "echo b > b.txt", map[string]any{"checks": []map[string]string{{"name": "b", "command": "test -f b.txt"}}}), bundleOf(t, repo))
		srv.waitState(t, id, "succeeded")
		if v := srv.post(t, "/v1/runs/{id}/verdict", id, map[string]string{"verdict": "accept", "note": "fine"}); v.status != http.StatusOK {
			t.Fatalf("verdict: %d %s", v.status, v.body)
		}
		if a := srv.post(t, "/v1/runs/{id}/resume", id, nil); a.status == http.StatusOK {
			t.Fatalf("resume of a succeeded run: %s", a.body)
		}

		key := srv.get(t, "/v1/audit/key", "").doc(t)
		local, code := cli(t, "server", "audit-key", "--data", c.data)
		if code != 0 || !strings.HasPrefix(local, key["public_key"].(string)+"  ed25519 "+key["fingerprint"].(string)) {
			t.Fatalf("server audit-key printed %q (exit %d); the server serves %v", local, code, key)
		}
		pin := key["public_key"].(string)

		list := srv.get(t, "/v1/audit?limit=1000", "").doc(t)
		actions := map[string]int{}
		for _, e := range list["entries"].([]any) {
			m := e.(map[string]any)
			actions[m["action"].(string)]++
			if m["action"] == "submit" && (m["actor"] != users.LocalName || m["run"] != id) {
				t.Errorf("submit entry %v", m)
			}
			if m["action"] == "resume" && m["payload"].(map[string]any)["error"] != "not_resumable" {
				t.Errorf("the refused resume's entry: %v", m)
			}
		}
		for _, a := range []string{"submit", "verdict", "resume", "run.submitted", "run.state", "run.attempt", "run.check", "run.export", "run.verdict"} {
			if actions[a] == 0 {
				t.Errorf("no %s entry among %v", a, actions)
			}
		}
		srv.get(t, "/v1/audit?run="+id+"&after=2", "")
		// Wait for the head to be sealed (--audit-interval 1s).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if _, sealed, head := lastSeal(t, srv); sealed == head {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the head was never sealed")
			}
		}
		if d, code := srv.verify(t, pin); !d.OK || code != 0 || d.Checkpoints == 0 {
			t.Fatalf("untouched: exit %d, %+v", code, d)
		}
		export, code := cli(t, "--server", srv.url, "audit", "export")
		file := filepath.Join(t.TempDir(), "trail.jsonl")
		if err := os.WriteFile(file, []byte(export), 0o600); code != 0 || err != nil {
			t.Fatalf("export: exit %d, %v", code, err)
		}

		db, err := sqldb.Connect(context.Background(), c.db)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		orig := snapshot(t, db)
		last := orig.cps[len(orig.cps)-1].Seq
		_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
		other := audit.NewKey(otherPriv)
		for _, tc := range []struct {
			name   string
			tamper func()
			kind   string
			seq    int64
		}{
			{"edit a payload", func() {
				exec1(t, db, `UPDATE audit_entries SET payload = $1 WHERE seq = 3`, `{"changed":true}`)
			}, audit.Edited, 3},
			{"delete an entry", func() { exec1(t, db, `DELETE FROM audit_entries WHERE seq = 5`) }, audit.Removed, 5},
			{"swap two entries", func() {
				exec1(t, db, `UPDATE audit_entries SET seq = -1 WHERE seq = 4`)
				exec1(t, db, `UPDATE audit_entries SET seq = 4 WHERE seq = 6`)
				exec1(t, db, `UPDATE audit_entries SET seq = 6 WHERE seq = -1`)
			}, audit.Reordered, 4},
			{"insert an entry", func() {
				exec1(t, db, `UPDATE audit_entries SET seq = -seq WHERE seq > 5`)
				exec1(t, db, `UPDATE audit_entries SET seq = 1 - seq WHERE seq < 0`)
				e5 := orig.entries[4]
				x, err := audit.Chain(audit.Entry{Actor: users.LocalName, Action: "cancel", Run: id}, e5.Seq, e5.Hash, srvTime(t, e5))
				if err != nil {
					t.Fatal(err)
				}
				exec1(t, db, `INSERT INTO audit_entries (seq, time, actor, action, run_id, payload, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
					x.Seq, x.Time, x.Actor, x.Action, x.Run, string(x.Payload), x.PrevHash, x.Hash)
			}, audit.Inserted, 6},
			{"truncate after a checkpoint", func() { exec1(t, db, `DELETE FROM audit_entries WHERE seq > $1`, last-2) }, audit.Truncated, last - 1},
			{"rewrite the chain", func() {
				tr := rewritten(orig, 2)
				tr.write(t, db)
			}, audit.Rewritten, firstSealAtOrAfter(orig, 2)},
			{"forge the checkpoints", func() {
				tr := rewritten(orig, 2)
				for i := range tr.cps {
					tr.cps[i] = other.Sign(audit.Checkpoint{Seq: tr.cps[i].Seq, Hash: tr.entries[tr.cps[i].Seq-1].Hash, Time: tr.cps[i].Time})
				}
				tr.write(t, db)
			}, audit.BadCheckpoint, orig.cps[0].Seq},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.tamper()
				d, code := srv.verify(t, pin)
				if code != 4 || d.OK || d.Problem == nil || d.Error == nil || d.Error.Code != "audit_tampered" {
					t.Fatalf("exit %d, %+v", code, d)
				}
				if d.Problem.Kind != tc.kind || d.Problem.Seq != tc.seq {
					t.Errorf("found %s at %d (%s), want %s at %d", d.Problem.Kind, d.Problem.Seq, d.Problem.Detail, tc.kind, tc.seq)
				}
				orig.write(t, db)
				if d, code := srv.verify(t, pin); !d.OK || code != 0 {
					t.Fatalf("put back: exit %d, %+v", code, d)
				}
			})
		}
		// The export verifies on its own; another key does not verify it.
		if d, code := srv.verify(t, pin, "--file", file); !d.OK || code != 0 {
			t.Errorf("the export: exit %d, %+v", code, d)
		}
		if d, code := srv.verify(t, fmt.Sprintf("%x", other.Public()), "--file", file); code != 4 || d.Problem == nil || d.Problem.Kind != audit.BadCheckpoint {
			t.Errorf("another key: exit %d, %+v", code, d)
		}
	})
}

// srvTime is e's time.
func srvTime(t *testing.T, e audit.Entry) time.Time {
	t.Helper()
	tm, err := time.Parse(audit.TimeFormat, e.Time)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// rewritten is orig with entry seq's actor changed and every hash from
// there recomputed, as someone who can write the database but has not
// the key would do.
func rewritten(orig trail, seq int64) trail {
	tr := trail{entries: append([]audit.Entry(nil), orig.entries...), cps: append([]audit.Checkpoint(nil), orig.cps...)}
	tr.entries[seq-1].Actor = "someone else"
	for i := seq - 1; i < int64(len(tr.entries)); i++ {
		if i > 0 {
			tr.entries[i].PrevHash = tr.entries[i-1].Hash
		}
		tr.entries[i].Hash = tr.entries[i].ComputeHash()
	}
	return tr
}

func firstSealAtOrAfter(tr trail, seq int64) int64 {
	for _, c := range tr.cps {
		if c.Seq >= seq {
			return c.Seq
		}
	}
	return 0
}

// TestAuditConcurrentSubmitters: 20 clients submit at once to two server
// processes on one database, while their local workers run the runs; the
// trail is one unbroken chain holding every submit, sealed at shutdown.
func TestAuditConcurrentSubmitters(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		// Two servers, twenty submits and their runs load the machine
		// enough that a renewal can come later than 2 s after the last.
		c.leaseTTL = "15s"
		srvs := []*instance{start(t, c), start(t, c)}
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		bundle := bundleOf(t, repo)
		// The project's repository is made by the first submit, alone:
		// two processes making it at once collide in git init (the
		// project lock is per process).
		first := srvs[0].runID(t, spec("first", "true", nil), bundle)
		const n = 20
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				a := srvs[i%2].submit(t, spec(fmt.Sprintf("task %d", i), "echo x > x.txt", nil), bundle)
				if a.status != http.StatusCreated {
					t.Errorf("submit %d: %d %s", i, a.status, a.body)
					return
				}
				ids[i], _ = a.doc(t)["id"].(string)
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, id := range append(ids, first) {
			srvs[0].waitState(t, id, "succeeded", "failed")
		}
		pin := srvs[0].get(t, "/v1/audit/key", "").doc(t)["public_key"].(string)
		for _, s := range srvs {
			s.stop(syscall.SIGTERM)
		}
		srv := start(t, c)
		d, code := srv.verify(t, pin)
		if !d.OK || code != 0 {
			t.Fatalf("exit %d, %+v", code, d)
		}
		var doc struct{ Entries []audit.Entry }
		if err := json.Unmarshal(srv.get(t, "/v1/audit?limit=10000", "").body, &doc); err != nil {
			t.Fatal(err)
		}
		submits := map[string]bool{}
		for _, e := range doc.Entries {
			if e.Action == "submit" {
				submits[e.Run] = true
			}
		}
		for _, id := range ids {
			if !submits[id] {
				t.Errorf("no submit entry for run %s", id)
			}
		}
		_, sealed, head := lastSeal(t, srv)
		if sealed != head {
			t.Errorf("after shutdown the head %d is not sealed (last checkpoint %d)", head, sealed)
		}
	})
}

// lastSeal reads the checkpoints and the list's last entry.
func lastSeal(t *testing.T, srv *instance) (int, int64, int64) {
	t.Helper()
	var cps struct{ Checkpoints []audit.Checkpoint }
	if err := json.Unmarshal(srv.get(t, "/v1/audit/checkpoints?limit=10000", "").body, &cps); err != nil {
		t.Fatal(err)
	}
	var doc struct{ Entries []audit.Entry }
	if err := json.Unmarshal(srv.get(t, "/v1/audit?limit=10000", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Entries) == 0 {
		t.Fatal("no entries")
	}
	sealed := int64(0)
	if len(cps.Checkpoints) > 0 {
		sealed = cps.Checkpoints[len(cps.Checkpoints)-1].Seq
	}
	return len(cps.Checkpoints), sealed, doc.Entries[len(doc.Entries)-1].Seq
}

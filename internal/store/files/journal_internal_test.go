package files

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

// leadingSeq, the shortcut Events takes past old lines, agrees with a full
// decode on every line that decodes and names seq once (the store writes
// each key once; of duplicate keys, in any case, the decoder keeps the last).
func FuzzLeadingSeq(f *testing.F) {
	e, _ := json.Marshal(run.NewEvent(run.EventWarning, "m", map[string]int{"a": 1}))
	for _, seed := range []string{string(e), `{"seq":12,"type":"x"}`, `{"seq":12}`, `{"seq":1e3,"type":"x"}`,
		`{"seq":-1,"type":"x"}`, `{"seq":0012,"type":"x"}`, `{"seq":9999999999999999999,"type":"x"}`,
		`{"seq":5,"seq":7}`, `{"seq":`, `{"seq":3,`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		n, ok := leadingSeq([]byte(line))
		if !ok {
			return
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &keys) != nil {
			return
		}
		seqKeys := 0
		for k := range keys {
			if strings.EqualFold(k, "seq") {
				seqKeys++
			}
		}
		if seqKeys != 1 || strings.Count(line, `"seq"`) != 1 {
			return // the decoder keeps the last of duplicate keys
		}
		var v struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return // not an event: Events skips it either way
		}
		if v.Seq != n {
			t.Fatalf("leadingSeq(%q) = %d, decode says %d", line, n, v.Seq)
		}
	})
}

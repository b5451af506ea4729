package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// ZeroHash is the PrevHash of the first entry.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// TimeFormat is the form of every time in the trail: UTC, microseconds,
// fixed width. Times are kept as this text, so that they hash as they are
// written and read.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// FormatTime formats t as TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Entry is one entry of the trail.
type Entry struct {
	Seq    int64  `json:"seq"`
	Time   string `json:"time"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Run    string `json:"run,omitempty"`
	// Payload is canonical JSON (Canonical): what the action was about.
	Payload  json.RawMessage `json:"payload"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// Checkpoint seals the trail up to Seq: Hash is the hash of entry Seq,
// and Signature (hex) is Key's ed25519 signature over SignedBytes.
type Checkpoint struct {
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`
	Time      string `json:"time"`
	Key       string `json:"key"`
	Signature string `json:"signature"`
}

// Query selects entries: those with seq > After, of run Run when set, at
// most Limit (0: the Log's default), in seq order.
type Query struct {
	After int64
	Run   string
	Limit int
}

// Log keeps a trail. Every method is safe for concurrent use, also by
// several processes on one database.
type Log interface {
	// Append adds an entry made of e's Actor, Action, Run and Payload
	// (made canonical), assigning Seq, Time, PrevHash and Hash; appends
	// are serialised, so the chain never forks.
	Append(ctx context.Context, e Entry) (Entry, error)
	// Entries returns the entries q selects.
	Entries(ctx context.Context, q Query) ([]Entry, error)
	// Checkpoints returns the checkpoints with seq > after, in seq order,
	// at most limit (0: the Log's default).
	Checkpoints(ctx context.Context, after int64, limit int) ([]Checkpoint, error)
	// Seal writes a checkpoint of the current head signed with s, unless
	// the head is empty or sealed already (then ok is false).
	Seal(ctx context.Context, s Signer) (cp Checkpoint, ok bool, err error)
	// Head is the seq of the last entry (0: none) and of the last
	// checkpoint.
	Head(ctx context.Context) (seq, sealed int64, err error)
}

// Canonical returns v as canonical JSON: object keys sorted, no
// insignificant space, numbers as written. v may be raw JSON ([]byte or
// json.RawMessage) or any value json.Marshal takes; nil is {}.
func Canonical(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("audit payload: %w", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("audit payload: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("audit payload: more than one JSON value")
	}
	// Maps marshal with sorted keys, json.Number as its literal.
	b, err := json.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("audit payload: %w", err)
	}
	return b, nil
}

// field appends a length-prefixed field: no two tuples encode alike.
func field(buf *bytes.Buffer, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	buf.Write(n[:])
	buf.Write(b)
}

func seqBytes(seq int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return b[:]
}

// ComputeHash is the hash e should carry: hex SHA-256 over the domain
// "agentrun-audit-entry-v1" and the length-prefixed seq, time, actor,
// action, run, payload and prev_hash.
func (e Entry) ComputeHash() string {
	var buf bytes.Buffer
	field(&buf, []byte("agentrun-audit-entry-v1"))
	field(&buf, seqBytes(e.Seq))
	for _, s := range []string{e.Time, e.Actor, e.Action, e.Run} {
		field(&buf, []byte(s))
	}
	field(&buf, e.Payload)
	field(&buf, []byte(e.PrevHash))
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// Chain completes e as the entry after (prevSeq, prevHash) at time now:
// e.Payload is made canonical.
func Chain(e Entry, prevSeq int64, prevHash string, now time.Time) (Entry, error) {
	p, err := Canonical(e.Payload)
	if len(e.Payload) == 0 {
		p, err = Canonical(nil)
	}
	if err != nil {
		return e, err
	}
	if e.Actor == "" || e.Action == "" {
		return e, fmt.Errorf("audit entry: actor and action are required")
	}
	e.Payload, e.Seq, e.Time, e.PrevHash = p, prevSeq+1, FormatTime(now), prevHash
	e.Hash = e.ComputeHash()
	return e, nil
}

// SignedBytes is what a checkpoint's signature covers: the domain
// "agentrun-audit-checkpoint-v1" and the length-prefixed seq, hash, time
// and key.
func (c Checkpoint) SignedBytes() []byte {
	var buf bytes.Buffer
	field(&buf, []byte("agentrun-audit-checkpoint-v1"))
	field(&buf, seqBytes(c.Seq))
	for _, s := range []string{c.Hash, c.Time, c.Key} {
		field(&buf, []byte(s))
	}
	return buf.Bytes()
}

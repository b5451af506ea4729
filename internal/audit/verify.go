package audit

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"slices"
)

// What Verify found wrong with an entry or a checkpoint.
const (
	// Edited: an entry's content no longer matches its hash, or it was
	// rewritten with a new hash that the entry after it does not link to.
	Edited = "edited"
	// Removed: entries are missing between two that remain.
	Removed = "removed"
	// Inserted: an entry that is not part of the chain sits in it.
	Inserted = "inserted"
	// Reordered: an entry sits at a place other than the one it was
	// written at.
	Reordered = "reordered"
	// Rewritten: the chain is whole, but its hash at a checkpoint is not
	// the one the checkpoint signed: entries up to it were rewritten and
	// every hash after them recomputed.
	Rewritten = "rewritten"
	// Truncated: a checkpoint signed an entry past the end of the log.
	Truncated = "truncated"
	// BadCheckpoint: a checkpoint's signature does not verify with a
	// pinned key (forged, altered, or signed by a key not pinned).
	BadCheckpoint = "bad_checkpoint"
)

// Problem is the first thing wrong in a trail.
type Problem struct {
	Kind string `json:"kind"`
	// Seq is the entry named: the bad entry, the first missing one, or
	// the checkpoint's seq.
	Seq    int64  `json:"seq"`
	Detail string `json:"detail"`
}

func (p *Problem) Error() string { return fmt.Sprintf("entry %d %s: %s", p.Seq, p.Kind, p.Detail) }

// Report is what Verify found.
type Report struct {
	OK       bool   `json:"ok"`
	Entries  int    `json:"entries"`
	Head     int64  `json:"head"`
	HeadHash string `json:"head_hash"`
	// Checkpoints counts the checkpoints verified; Sealed is the seq of
	// the last of them, and Unsealed the entries after it, which no
	// signature covers (they could be cut off or rewritten unseen).
	Checkpoints int      `json:"checkpoints"`
	Sealed      int64    `json:"sealed"`
	Unsealed    int64    `json:"unsealed"`
	Keys        []string `json:"keys"`
	Problem     *Problem `json:"problem,omitempty"`
}

// Verify checks entries (in the order given) and checkpoints against
// keys, the public keys the user pinned: every hash is recomputed, every
// link followed, every checkpoint's signature checked and its hash
// compared with the entry it names. It reports the first problem found,
// in seq order.
func Verify(entries []Entry, cps []Checkpoint, keys []ed25519.PublicKey) Report {
	v := verifier{entries: entries, keys: keys, bySeq: map[int64]int{}, byHash: map[string]int64{}}
	rep := Report{Entries: len(entries), HeadHash: ZeroHash, Keys: []string{}}
	for _, k := range keys {
		rep.Keys = append(rep.Keys, Fingerprint(k))
	}
	cps = slices.Clone(cps)
	slices.SortStableFunc(cps, func(a, b Checkpoint) int { return int(a.Seq - b.Seq) })
	for i, e := range entries {
		if _, dup := v.bySeq[e.Seq]; !dup {
			v.bySeq[e.Seq] = i
		}
		v.byHash[e.Hash] = e.Seq
		v.maxSeq = max(v.maxSeq, e.Seq)
	}
	prevSeq, prevHash := int64(0), ZeroHash
	ci := 0
	// seal checks the checkpoints up to entry e. They are checked once the
	// entry after e is: an entry inserted before a checkpoint's is named
	// as inserted, not as the chain rewritten.
	seal := func(e Entry) *Problem {
		for ; ci < len(cps) && cps[ci].Seq <= e.Seq; ci++ {
			if p := v.checkpoint(cps[ci], e, rep.Sealed); p != nil {
				return p
			}
			rep.Checkpoints++
			rep.Sealed = cps[ci].Seq
		}
		return nil
	}
	for i, e := range entries {
		p := v.entry(i, prevSeq, prevHash)
		if p == nil && i > 0 {
			p = seal(entries[i-1])
		}
		if p != nil {
			rep.Problem = p
			return rep
		}
		prevSeq, prevHash = e.Seq, e.Hash
		rep.Head, rep.HeadHash = e.Seq, e.Hash
	}
	if len(entries) > 0 {
		if p := seal(entries[len(entries)-1]); p != nil {
			rep.Problem = p
			return rep
		}
	}
	// A checkpoint past the last entry: signed, it shows the log was cut
	// short; unsigned, it is a forgery.
	if ci < len(cps) {
		cp := cps[ci]
		if p := v.signature(cp); p != nil {
			rep.Problem = p
			return rep
		}
		rep.Problem = &Problem{Kind: Truncated, Seq: prevSeq + 1, Detail: fmt.Sprintf(
			"the log ends at entry %d, but a checkpoint signed entry %d: entries %d to %d were removed", prevSeq, cp.Seq, prevSeq+1, cp.Seq)}
		return rep
	}
	rep.OK = true
	rep.Unsealed = rep.Head - rep.Sealed
	return rep
}

type verifier struct {
	entries []Entry
	keys    []ed25519.PublicKey
	bySeq   map[int64]int    // first position of each seq
	byHash  map[string]int64 // seq of the entry carrying each hash
	maxSeq  int64
}

// entry checks entry i, which follows (prevSeq, prevHash).
func (v *verifier) entry(i int, prevSeq int64, prevHash string) *Problem {
	e := v.entries[i]
	want := prevSeq + 1
	switch {
	case e.Seq == prevSeq && i > 0:
		return &Problem{Inserted, e.Seq, fmt.Sprintf("two entries carry seq %d", e.Seq)}
	case e.Seq < want:
		return &Problem{Reordered, e.Seq, fmt.Sprintf("entry %d comes after entry %d", e.Seq, prevSeq)}
	case e.Seq > want:
		if _, ok := v.bySeq[want]; ok {
			return &Problem{Reordered, want, fmt.Sprintf("entry %d is out of place: entry %d comes where it belongs, after entry %d", want, e.Seq, prevSeq)}
		}
		if want == e.Seq-1 {
			return &Problem{Removed, want, fmt.Sprintf("entry %d is missing: entry %d follows entry %d", want, e.Seq, prevSeq)}
		}
		return &Problem{Removed, want, fmt.Sprintf("entries %d to %d are missing: entry %d follows entry %d", want, e.Seq-1, e.Seq, prevSeq)}
	}
	hashOK := e.ComputeHash() == e.Hash
	linked := e.PrevHash == prevHash
	if hashOK && linked {
		return nil
	}
	if i > 0 && !linked && e.PrevHash == v.entries[i-1].PrevHash {
		return &Problem{Inserted, prevSeq, fmt.Sprintf("entry %d is not part of the chain: entry %d links past it to entry %d", prevSeq, e.Seq, prevSeq-1)}
	}
	if i+1 < len(v.entries) && v.entries[i+1].PrevHash == prevHash {
		return &Problem{Inserted, e.Seq, fmt.Sprintf("entry %d is not part of the chain: entry %d links past it to entry %d", e.Seq, v.entries[i+1].Seq, prevSeq)}
	}
	if !hashOK {
		if s := v.hashedAs(e); s != 0 {
			return &Problem{Reordered, e.Seq, fmt.Sprintf("the entry at seq %d was written as entry %d", e.Seq, s)}
		}
		return &Problem{Edited, e.Seq, fmt.Sprintf("entry %d does not match its hash: its time, actor, action, run or payload was changed", e.Seq)}
	}
	if s, ok := v.byHash[e.PrevHash]; ok && s != prevSeq {
		return &Problem{Reordered, e.Seq, fmt.Sprintf("entry %d was written after entry %d, not after entry %d", e.Seq, s, prevSeq)}
	}
	if i == 0 {
		return &Problem{Edited, e.Seq, fmt.Sprintf("entry %d links to no entry before it: the first entry links to %s", e.Seq, ZeroHash[:8]+"...")}
	}
	return &Problem{Edited, prevSeq, fmt.Sprintf("entry %d was rewritten with a new hash: entry %d still links to its old one", prevSeq, e.Seq)}
}

// hashedAs is the seq under which e's content hashes to its hash, if it
// is not its own: the entry was moved. 0 if none.
func (v *verifier) hashedAs(e Entry) int64 {
	for s := int64(1); s <= v.maxSeq+1; s++ {
		if s == e.Seq {
			continue
		}
		c := e
		c.Seq = s
		if c.ComputeHash() == e.Hash {
			return s
		}
	}
	return 0
}

// checkpoint checks cp against the entry at its seq (or, when the entry
// at cp.Seq is missing, the entry e it is checked after).
func (v *verifier) checkpoint(cp Checkpoint, e Entry, sealed int64) *Problem {
	if p := v.signature(cp); p != nil {
		return p
	}
	if cp.Seq != e.Seq {
		return &Problem{BadCheckpoint, cp.Seq, fmt.Sprintf("the checkpoint at seq %d names no entry of the log", cp.Seq)}
	}
	if cp.Hash != e.Hash {
		return &Problem{Rewritten, cp.Seq, fmt.Sprintf("the chain is whole, but entry %d's hash is not the one its checkpoint signed: entries %d to %d were rewritten, every hash recomputed",
			cp.Seq, sealed+1, cp.Seq)}
	}
	return nil
}

// signature checks that a pinned key signed cp.
func (v *verifier) signature(cp Checkpoint) *Problem {
	sig, err := hex.DecodeString(cp.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return &Problem{BadCheckpoint, cp.Seq, fmt.Sprintf("the checkpoint at seq %d carries no well-formed signature", cp.Seq)}
	}
	for _, k := range v.keys {
		if hex.EncodeToString(k) == cp.Key && ed25519.Verify(k, cp.SignedBytes(), sig) {
			return nil
		}
	}
	who := "a key that is not pinned"
	if b, err := hex.DecodeString(cp.Key); err == nil && len(b) == ed25519.PublicKeySize {
		who = "key " + Fingerprint(b) + ", which is not pinned"
		for _, k := range v.keys {
			if hex.EncodeToString(k) == cp.Key {
				who = "the pinned key " + Fingerprint(k) + ", but the signature does not verify (forged or altered)"
			}
		}
	}
	return &Problem{BadCheckpoint, cp.Seq, fmt.Sprintf("the checkpoint at seq %d claims to be signed by %s", cp.Seq, who)}
}

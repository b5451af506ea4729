package runner

import (
	"bytes"
	"encoding/json"
)

// File contents travel as raw bytes, not as base64 inside the JSON: a
// request's or result's body is its JSON, and for the types below a
// newline and the raw contents after it (JSON never holds a raw newline,
// so the split is unambiguous). Base64 made a file a third larger and was
// most of write_file's CPU.

// withContents is a request or result (value or pointer) whose file
// contents travel raw: contents returns them and the value without them.
type withContents interface {
	contents() (data []byte, rest any)
}

// takesContents is where raw contents are put back when decoding.
type takesContents interface{ setContents(data []byte) }

func (r ReadFileResult) contents() ([]byte, any)   { d := r.Data; r.Data = nil; return d, r }
func (r *ReadFileResult) setContents(d []byte)     { r.Data = d }
func (r WriteFileRequest) contents() ([]byte, any) { d := r.Data; r.Data = nil; return d, r }
func (r *WriteFileRequest) setContents(d []byte)   { r.Data = d }

// marshalBody encodes v as a body.
func marshalBody(v any) ([]byte, error) {
	c, raw := v.(withContents)
	var data []byte
	if raw {
		data, v = c.contents()
	}
	j, err := json.Marshal(v)
	if err != nil || !raw {
		return j, err
	}
	out := make([]byte, 0, len(j)+1+len(data))
	out = append(append(append(out, j...), '\n'), data...)
	return out, nil
}

// unmarshalBody decodes a body into v.
func unmarshalBody(body []byte, v any) error {
	b, ok := v.(takesContents)
	if !ok {
		return json.Unmarshal(body, v)
	}
	j, data, found := bytes.Cut(body, []byte{'\n'})
	if err := json.Unmarshal(j, v); err != nil {
		return err
	}
	if found {
		b.setContents(data)
	}
	return nil
}

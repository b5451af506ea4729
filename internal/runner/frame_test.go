package runner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func frame(payload string) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, p := range []string{"", "{}", string(bytes.Repeat([]byte("x"), 200<<10))} {
		if err := WriteFrame(&buf, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{0, 2, 200 << 10} {
		got, err := ReadFrame(&buf)
		if err != nil || len(got) != want {
			t.Fatalf("got %d bytes, %v; want %d", len(got), err, want)
		}
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("at end: %v", err)
	}
	if err := WriteFrame(io.Discard, make([]byte, MaxFrameSize+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []byte
		want error
	}{
		"too large": {[]byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
		"cap+1":     {[]byte{0x02, 0x00, 0x00, 0x01}, ErrFrameTooLarge},
		"short hdr": {[]byte{0, 0}, io.ErrUnexpectedEOF},
		"short":     {append([]byte{0, 0, 0, 9}, "abc"...), io.ErrUnexpectedEOF},
		"short big": {append([]byte{0, 2, 0, 0}, "abc"...), io.ErrUnexpectedEOF},
	} {
		if _, err := ReadFrame(bytes.NewReader(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame decoder and the message
// decoding both ends do: it must never panic, never return more than the
// cap, and a decoded frame must re-encode to the same bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame("{\"id\":\"a-1\",\"op\":\"exec\"}\n{\"argv\":[\"true\"]}"))
	f.Add(frame("{\"id\":\"a-1\",\"stream\":\"stdout\",\"off\":3}\nhi\x00\n"))
	f.Add(frame("{\"id\":\"a-1\",\"stream\":\"stderr\",\"off\":-5}\nx"))
	f.Add(frame("{\"id\":\"a-1\",\"done\":true}\n{\"exit_code\":0}"))
	f.Add(frame(`{"id":"a-1","done":true,"error":{"code":"not_found","message":"x"}}`))
	f.Add(frame(`{"proto":1,"instance":"abc","pid":1}`))
	f.Add(frame(`null`))
	f.Add(frame(``))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0, 0, 10, '{'})
	f.Add(append(frame(`{"id":"x","op":"stat"}`), frame(`{"id":"y"`)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			p, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(p) > MaxFrameSize {
				t.Fatalf("frame of %d bytes", len(p))
			}
			var buf bytes.Buffer
			if err := WriteFrame(&buf, p); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFrame(&buf)
			if err != nil || !bytes.Equal(back, p) {
				t.Fatalf("round trip: %v", err)
			}
			if req, err := decodeRequest(p); err == nil {
				var a ExecRequest
				_ = decodeArgs(req.Args, &a)
			}
			var h hello
			_ = json.Unmarshal(p, &h)
			if resp, err := decodeResponse(p); err == nil {
				c := &call{id: resp.ID, outs: [2]io.Writer{io.Discard, io.Discard}, limit: 100, doneCh: make(chan struct{})}
				c.deliver(resp) // must not panic on any offset
				if resp.Done {
					c.finish(resp, nil)
					var res ExecResult
					if raw, err := result(c); err == nil {
						_ = json.Unmarshal(raw, &res)
					}
				}
			}
		}
	})
}

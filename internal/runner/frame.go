package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFrameSize caps one frame's payload. A write_file of DefaultWriteCap
// bytes fits (with room: the contents once travelled as base64); anything larger is a protocol error that
// closes the connection.
const MaxFrameSize = 32 << 20

// ErrFrameTooLarge is returned for a frame whose declared length exceeds
// MaxFrameSize.
var ErrFrameTooLarge = errors.New("frame too large")

// ReadFrame reads one frame: a 4-byte big-endian length, then that many
// bytes. It never allocates more than it has actually read plus one chunk,
// so a lying length header cannot make it reserve MaxFrameSize up front.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("read frame: %d bytes: %w", n, ErrFrameTooLarge)
	}
	if n <= 64<<10 {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("read frame: %w", unexpectedEOF(err))
		}
		return buf, nil
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		return nil, fmt.Errorf("read frame: %w", unexpectedEOF(err))
	}
	return buf.Bytes(), nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteFrame writes payload as one frame in a single Write call (so
// concurrent writers serialised by a mutex never interleave).
func WriteFrame(w io.Writer, payload []byte) error {
	if len(payload) > MaxFrameSize {
		return fmt.Errorf("write frame: %d bytes: %w", len(payload), ErrFrameTooLarge)
	}
	buf := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(len(payload)))
	copy(buf[4:], payload)
	_, err := w.Write(buf)
	return err
}

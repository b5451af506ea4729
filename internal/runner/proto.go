package runner

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ProtocolVersion is the version of the frame protocol. The server sends it
// in its hello; a client refuses a server with another version. (2: file
// contents travel raw, see body.go.)
const ProtocolVersion = 2

// Op names on the wire.
const (
	opExec      = "exec"
	opReadFile  = "read_file"
	opWriteFile = "write_file"
	opEditFile  = "edit_file"
	opListDir   = "list_dir"
	opGrep      = "grep"
	opStat      = "stat"
	// opCancel asks the server to cancel the request with the same id. It
	// has no response of its own; the cancelled request answers.
	opCancel = "cancel"
)

// mutating reports whether an op changes the sandbox: its id is journaled
// so that a runner restart never runs it twice.
func mutating(op string) bool {
	return op == opExec || op == opWriteFile || op == opEditFile
}

// hello is the first frame on every connection, sent by the server.
type hello struct {
	Proto    int    `json:"proto"`
	Instance string `json:"instance"` // random per runner process start
	PID      int    `json:"pid"`
}

// A frame's payload is a JSON header, then (if there is a body) a newline
// and the body: the op's arguments for a request, the raw bytes of a
// stream chunk, or the result JSON of a final response. The header never
// holds a raw newline (JSON escapes it), so the split is unambiguous; large
// payloads (file contents, output) are neither re-encoded nor scanned twice.

// request is a client frame.
type request struct {
	ID string `json:"id"`
	Op string `json:"op"`
	// StdoutOff/StderrOff are how many bytes of each stream the client
	// already has (a resend after reconnect); chunks start there.
	StdoutOff int64 `json:"stdout_off,omitempty"`
	StderrOff int64 `json:"stderr_off,omitempty"`

	Args json.RawMessage `json:"-"` // the body
}

// response is a server frame: either a stream chunk (Stream set, Data the
// body) or the final answer (Done set) carrying Result (the body), Error
// (an op error the caller can act on) or Fail (the runner failed).
type response struct {
	ID     string   `json:"id"`
	Stream string   `json:"stream,omitempty"` // stdout | stderr
	Off    int64    `json:"off,omitempty"`
	Done   bool     `json:"done,omitempty"`
	Error  *OpError `json:"error,omitempty"`
	Fail   string   `json:"fail,omitempty"`

	Data   []byte          `json:"-"` // chunk body
	Result json.RawMessage `json:"-"` // final body
}

// encodePayload makes a frame payload from a header and a body.
func encodePayload(header any, body []byte) ([]byte, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return h, nil
	}
	out := make([]byte, 0, len(h)+1+len(body))
	out = append(append(append(out, h...), '\n'), body...)
	return out, nil
}

// splitPayload decodes the header into v and returns the body (nil if
// there is none).
func splitPayload(p []byte, v any) ([]byte, error) {
	h, body := p, []byte(nil)
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		h, body = p[:i], p[i+1:]
	}
	if err := json.Unmarshal(h, v); err != nil {
		return nil, err
	}
	return body, nil
}

func encodeRequest(r *request) ([]byte, error) { return encodePayload(r, r.Args) }

func decodeRequest(p []byte) (*request, error) {
	var r request
	body, err := splitPayload(p, &r)
	if err != nil {
		return nil, err
	}
	if r.ID == "" || r.Op == "" {
		return nil, errors.New("request without id or op")
	}
	r.Args = body
	return &r, nil
}

func encodeResponse(r *response) ([]byte, error) {
	if r.Stream != "" {
		return encodePayload(r, r.Data)
	}
	return encodePayload(r, r.Result)
}

func decodeResponse(p []byte) (*response, error) {
	var r response
	body, err := splitPayload(p, &r)
	if err != nil {
		return nil, err
	}
	if r.Stream != "" {
		r.Data = body
	} else {
		r.Result = body
	}
	return &r, nil
}

const (
	streamStdout = "stdout"
	streamStderr = "stderr"
	chunkSize    = 32 << 10
	tailSize     = 64 << 10
)

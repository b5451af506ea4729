package runner

import "encoding/json"

// ProtocolVersion is the version of the frame protocol. The server sends it
// in its hello; a client refuses a server with another version.
const ProtocolVersion = 1

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

// request is a client frame.
type request struct {
	ID   string          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	// StdoutOff/StderrOff are how many bytes of each stream the client
	// already has (a resend after reconnect); chunks start there.
	StdoutOff int64 `json:"stdout_off,omitempty"`
	StderrOff int64 `json:"stderr_off,omitempty"`
}

// response is a server frame: either a stream chunk (Stream set) or the
// final answer (Done set) carrying Result, Error (an op error the caller
// can act on) or Fail (the runner failed).
type response struct {
	ID     string          `json:"id"`
	Stream string          `json:"stream,omitempty"` // stdout | stderr
	Off    int64           `json:"off,omitempty"`
	Data   []byte          `json:"data,omitempty"`
	Done   bool            `json:"done,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *OpError        `json:"error,omitempty"`
	Fail   string          `json:"fail,omitempty"`
}

const (
	streamStdout = "stdout"
	streamStderr = "stderr"
	chunkSize    = 32 << 10
	tailSize     = 64 << 10
)

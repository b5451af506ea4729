package cli

// Env is the resolved environment of a command: data directory and
// configuration. Filled in by the submit/core work (config precedence:
// flag > environment > config file > default).
type Env struct {
	Home string
}

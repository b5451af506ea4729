package loop

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// MaxInstructionBytes caps repository instructions put into the prompt.
const MaxInstructionBytes = 32 << 10

// instructionFiles are looked for at the root of the base commit, in order;
// the first one present is used.
var instructionFiles = []string{"AGENTS.md", "CLAUDE.md"}

// repoInstructions reads AGENTS.md or CLAUDE.md from the git objects of
// base in the user's repository (never from a working tree, never in the
// agent's workspace). A symlink is refused; content past
// MaxInstructionBytes is cut. It returns the file name and text, or "" when
// there is none.
func repoInstructions(ctx context.Context, repo, base string, warn func(string)) (string, string) {
	if repo == "" || base == "" {
		return "", ""
	}
	out, err := git(ctx, repo, nil, append([]string{"ls-tree", "-z", base, "--"}, instructionFiles...)...)
	if err != nil {
		warn("cannot read repository instructions: " + err.Error())
		return "", ""
	}
	entries := map[string][3]string{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, name, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) != 3 {
			continue
		}
		entries[name] = [3]string{f[0], f[1], f[2]}
	}
	for _, name := range instructionFiles {
		e, ok := entries[name]
		if !ok {
			continue
		}
		mode, typ, sha := e[0], e[1], e[2]
		if mode == "120000" {
			warn(name + " at the base commit is a symlink; refused")
			continue
		}
		if typ != "blob" {
			continue
		}
		sz, err := git(ctx, repo, nil, "cat-file", "-s", sha)
		if err != nil {
			continue
		}
		size, _ := strconv.ParseInt(strings.TrimSpace(string(sz)), 10, 64)
		data, err := git(ctx, repo, nil, "cat-file", "blob", sha)
		if err != nil {
			continue
		}
		text := string(data)
		if size > MaxInstructionBytes || len(text) > MaxInstructionBytes {
			text = text[:MaxInstructionBytes] + fmt.Sprintf("\n[… %s cut at %d of %d bytes]", name, MaxInstructionBytes, size)
			warn(fmt.Sprintf("%s is %d bytes; only the first %d go into the prompt", name, size, MaxInstructionBytes))
		}
		return name, text
	}
	return "", ""
}

// git runs plumbing in the user's repository with hooks and filters off and
// without the user's global or system configuration.
func git(ctx context.Context, repo string, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	full := append([]string{"-C", repo, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

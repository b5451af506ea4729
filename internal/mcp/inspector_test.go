package mcp_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// A real MCP client that is not the Go SDK: the MCP inspector's CLI
// (TypeScript SDK), installed by .ci/install-agents.sh, starts `agentrun
// mcp` over stdio, lists the tools and calls two.
func TestInspectorCLI(t *testing.T) {
	testsupport.Program(t, "node")
	bin := agenttest.CLI(t, "mcp-inspector", "mcp-inspector-cli")
	w := newWorld(t)
	// It finds its own package.json relative to the working directory,
	// so it runs from the directory its script is in.
	script, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	inspect := func(args ...string) map[string]any {
		t.Helper()
		argv := []string{"-e", "AGENTRUN_HOME=" + w.home, "-e", "XDG_CONFIG_HOME=" + filepath.Join(w.root, "config"),
			"--cli", w.bin, "mcp"}
		cmd := exec.Command(bin, append(argv, args...)...)
		cmd.Dir = filepath.Dir(script)
		cmd.Env = w.vars
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("inspector %v: %v\n%s\n%s", args, err, out, stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("inspector %v: not JSON: %v\n%s", args, err, out)
		}
		return doc
	}
	var names []string
	for _, tool := range inspect("--method", "tools/list")["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	if !slices.Contains(names, "submit") || len(names) != 10 {
		t.Fatalf("tools: %v", names)
	}
	res := inspect("--method", "tools/call", "--tool-name", "submit", "--tool-arg", "task=Write a file",
		"--tool-arg", "agent_cmd=echo hi > hi.txt", "--tool-arg", "sandbox=host", "--tool-arg", "repo="+w.repo,
		"--tool-arg", "wait=true")
	b, _ := json.Marshal(res["structuredContent"])
	if d := valid(t, "submit.schema.json", "submit through the inspector", b); res["isError"] == true || d["status"] != "succeeded" {
		t.Fatalf("submit: %v", res)
	}
	res = inspect("--method", "tools/call", "--tool-name", "status", "--tool-arg", "id=zzzzzzzzzz")
	b, _ = json.Marshal(res["structuredContent"])
	valid(t, "error.schema.json", "status through the inspector", b)
	if res["isError"] != true {
		t.Errorf("status of no run: %v", res)
	}
}

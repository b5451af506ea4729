package docs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmeMCP holds the README's `agentrun mcp` section to the server:
// its client configuration starts the server (the built binary standing
// in for agentrun on PATH), its tool table names exactly the tools the
// server lists, and its worked example runs as written, in a fresh
// repository (AGENTRUN_SANDBOX=host, as in the quick start's test, so it
// runs anywhere), each call answered without a tool error.
func TestReadmeMCP(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Orchestrating agents: `agentrun mcp`\n")
	if !ok {
		t.Fatal("README has no '## Orchestrating agents: `agentrun mcp`' section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(fenced(t, section, "json")), &cfg); err != nil {
		t.Fatalf("the client configuration is not JSON: %v", err)
	}
	server, ok := cfg.MCPServers["agentrun"]
	if !ok || server.Command != "agentrun" {
		t.Fatalf("the configuration names no agentrun server: %+v", cfg)
	}

	bin := testsupport.Agentrun(t)
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(root, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "HOME=" + filepath.Join(root, "home"), "LANG=C.UTF-8",
		"AGENTRUN_HOME=" + filepath.Join(root, "data"), "XDG_CONFIG_HOME=" + filepath.Join(root, "config"), "AGENTRUN_SANDBOX=host", "USER=you"}
	testsupport.RepoAt(t, repo, nil)
	// The command as the client runs it: looked up on PATH, in the project.
	cmd := exec.Command(filepath.Join(filepath.Dir(bin), server.Command), server.Args...)
	cmd.Dir, cmd.Env = repo, env
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "readme", Version: "v0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	var tools []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool.Name)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(tools)
	slices.Sort(documented)
	if !slices.Equal(tools, documented) {
		t.Errorf("the README's tool table %v, the server's tools %v", documented, tools)
	}

	// The worked example: a tool name and its arguments a line.
	example := fenced(t, section, "text")
	const exampleID = "sem3x37949"
	id := ""
	var cursor any
	for _, line := range strings.Split(strings.TrimSpace(example), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "→") {
			continue
		}
		tool, argText, _ := strings.Cut(line, " ")
		if id != "" {
			argText = strings.ReplaceAll(argText, exampleID, id)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(argText), &args); err != nil {
			t.Fatalf("%s: the arguments are not JSON: %v", tool, err)
		}
		if tool == "logs" && cursor != nil {
			args["cursor"] = cursor // the example's cursor stands for the answer's
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s %s: %v %+v", tool, argText, err, res)
		}
		doc, _ := res.StructuredContent.(map[string]any)
		switch tool {
		case "submit":
			id, _ = doc["id"].(string)
		case "logs":
			// The example's second call is the one that sees the end:
			// follow until done, as a client would.
			cursor = doc["cursor"]
			for doc["done"] != true && strings.Contains(argText, `"cursor"`) {
				args["cursor"] = cursor
				if res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args}); err != nil || res.IsError {
					t.Fatalf("logs: %v %+v", err, res)
				}
				doc, _ = res.StructuredContent.(map[string]any)
				cursor = doc["cursor"]
			}
			if run, _ := doc["run"].(map[string]any); doc["done"] == true && run["status"] != "succeeded" {
				t.Fatalf("the example's run: %v", doc)
			}
		case "diff":
			if p, _ := doc["patch"].(string); !strings.Contains(p, "diff --git a/hello.txt b/hello.txt") {
				t.Errorf("diff: %v", doc)
			}
		}
	}
	if id == "" {
		t.Fatal("the example submitted nothing")
	}
}

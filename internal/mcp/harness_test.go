package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// world is one isolated agentrun installation (data dir, config dir,
// HOME) with a git repository, served by the real binary's `agentrun mcp`.
type world struct {
	t    *testing.T
	bin  string
	root string
	home string // AGENTRUN_HOME
	repo string
	vars []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{t: t, bin: testsupport.Agentrun(t), root: root, home: filepath.Join(root, "data"), repo: filepath.Join(root, "repo")}
	w.vars = []string{
		"AGENTRUN_HOME=" + w.home,
		"XDG_CONFIG_HOME=" + filepath.Join(root, "config"),
		"HOME=" + filepath.Join(root, "userhome"),
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	}
	if err := os.MkdirAll(filepath.Join(root, "userhome"), 0o755); err != nil {
		t.Fatal(err)
	}
	testsupport.RepoAt(t, w.repo, map[string]string{"README.md": "hello\n"})
	t.Cleanup(w.stopAll)
	return w
}

// command is the agentrun binary with args, in the repository, with the
// world's environment.
func (w *world) command(args ...string) *exec.Cmd {
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.repo
	cmd.Env = w.vars
	return cmd
}

// connect starts `agentrun mcp` and connects the SDK's client to it over
// the command transport (the server's stdin and stdout).
func (w *world) connect(opts *sdk.ClientOptions) *sdk.ClientSession {
	w.t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: w.command("mcp")}, nil)
	if err != nil {
		w.t.Fatalf("connect: %v", err)
	}
	w.t.Cleanup(func() { cs.Close() })
	return cs
}

// stopAll cancels the runs still active when a test ends and waits for
// their supervisors to let go, so the temp dir is not removed under them.
func (w *world) stopAll() {
	ents, _ := os.ReadDir(filepath.Join(w.home, "runs"))
	deadline := time.Now().Add(15 * time.Second)
	for _, d := range ents {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		_ = w.command("cancel", d.Name()).Run()
		for time.Now().Before(deadline) {
			held, err := flock.New(w.home).Held(context.Background(), d.Name())
			if err != nil || !held {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// call calls a tool and returns its result and structured content (as
// JSON). A protocol error fails the test; a tool error is returned.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// ok calls a tool that must succeed and holds its structured content to
// the CLI's schema of the same command.
func ok(t *testing.T, cs *sdk.ClientSession, name, schema string, args any) map[string]any {
	t.Helper()
	res, doc := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, text(res))
	}
	return valid(t, schema, name, doc)
}

// text is a result's text content.
func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var (
	schemaOnce sync.Once
	schemaSet  *jsonschema.Set
	schemaErr  error
)

// valid holds doc to schema file name of docs/json and decodes it.
func valid(t *testing.T, name, what string, doc []byte) map[string]any {
	t.Helper()
	schemaOnce.Do(func() { schemaSet, schemaErr = jsonschema.Load("../../docs/json") })
	if schemaErr != nil {
		t.Fatalf("load docs/json: %v", schemaErr)
	}
	if err := schemaSet.Validate(name, doc, jsonschema.Options{}); err != nil {
		t.Errorf("%s: %v\n%s", what, err, doc)
	}
	var m map[string]any
	_ = json.Unmarshal(doc, &m)
	return m
}

// catalogErr asserts a tool error carrying the catalog error code.
func catalogErr(t *testing.T, res *sdk.CallToolResult, doc []byte, code string) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want the %s tool error, got a result: %s", code, doc)
	}
	d := valid(t, "error.schema.json", "tool error", doc)
	e, _ := d["error"].(map[string]any)
	if e["code"] != code {
		t.Fatalf("error code %v, want %s: %s", e["code"], code, doc)
	}
	if !strings.Contains(text(res), "error: ") {
		t.Errorf("the error's text says nothing: %q", text(res))
	}
	return e
}

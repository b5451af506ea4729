package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestDoctor(t *testing.T) {
	h := newTestHome(t)
	h.executable = testsupport.Agentrun(t)
	bin := t.TempDir()
	// Fake CLIs: one at the tested version, one at another, installed as
	// npm installs it: a launcher on PATH, its native program nested in
	// its package.
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\necho '2.1.337 (Claude Code)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// crush's tested version is not what npm installs: its fix says
	// where that version came from.
	if err := os.WriteFile(filepath.Join(bin, "crush"), []byte("#!/bin/sh\necho 'crush version 0.96.1'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A development build whose --version names no version: not "the
	// version agentrun was tested with".
	if err := os.WriteFile(filepath.Join(bin, "opencode"), []byte("#!/bin/sh\necho 'opencode local-build'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	launcher, program := fakeNativeCLI(t, "codex", "#!/bin/sh\necho 'codex-cli 0.1.0'\n")
	if err := os.Symlink(launcher, filepath.Join(bin, "codex")); err != nil {
		t.Fatal(err)
	}
	models := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[{"id":"qwen3-coder-30b"}]}`)
	}))
	defer models.Close()
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "agentrun"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("[model_servers.local]\nurl = %q\nmax_concurrent = 2\n[model_servers.gone]\nurl = \"http://127.0.0.1:9\"\n", models.URL+"/v1")
	if err := os.WriteFile(filepath.Join(cfg, "agentrun", "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env["XDG_CONFIG_HOME"] = cfg
	h.env["PATH"] = bin + ":" + os.Getenv("PATH")
	h.env["AGENTRUN_SANDBOX"] = "host"
	h.env["OPENAI_API_KEY"] = "sk-doctor-test"
	code, js, doc, got := doctorJSON(t, h)
	want := map[string]string{
		"data_directory": "ok", "config": "ok", "git": "ok",
		"agent.claude": "ok", "agent.codex": "warn", "agent.qwen": "warn", "agent.crush": "warn", "agent.opencode": "warn",
		"key.openai": "ok", "key.anthropic": "warn",
		"model_server.local": "ok", "model_server.gone": "fail",
		"sandbox.host": "warn",
	}
	for name, status := range want {
		if got[name].Status != status {
			t.Errorf("%s: %+v, want %s", name, got[name], status)
		}
	}
	if !strings.Contains(got["model_server.local"].Detail, "qwen3-coder-30b") || got["agent.codex"].Version != "0.1.0" ||
		!strings.Contains(got["agent.codex"].Fix, "@0.171.0") || got["model_server.gone"].Fix == "" {
		t.Errorf("details: %+v %+v %+v", got["model_server.local"], got["agent.codex"], got["model_server.gone"])
	}
	if c := got["key.anthropic"]; !strings.Contains(c.Detail, "the claude profile needs one") {
		t.Errorf("key.anthropic: %+v", c)
	}
	if c := got["agent.opencode"]; c.Version != "" || !strings.Contains(c.Detail, "names no version") {
		t.Errorf("agent.opencode: %+v", c)
	}
	if c := got["agent.crush"]; c.Version != "0.96.1" || !strings.Contains(c.Detail, "tested with 0.90.0 (built from source)") ||
		strings.Contains(c.Fix, "npm install") || !strings.Contains(c.Fix, "0.90.0 (built from source)") {
		t.Errorf("agent.crush: %+v", c)
	}
	if program != "" && !strings.HasSuffix(got["agent.codex"].Detail, "its npm launcher runs, "+program) {
		t.Errorf("agent.codex: %+v, want the native program %s", got["agent.codex"], program)
	}
	if len(got["sandbox.host"].Enforced) == 0 {
		t.Errorf("no enforced list for the host backend: %+v", got["sandbox.host"])
	}
	if strings.Contains(js, "sk-doctor-test") {
		t.Fatal("doctor printed a key")
	}
	// A failed check: exit 1, ok false; the human output names the fix.
	if code != 1 || doc.OK {
		t.Fatalf("exit %d ok %v with an unreachable model server", code, doc.OK)
	}
	code, out, _ := h.exec("doctor")
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "fix: ") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// Every detail and fix is there whole, wrapped, never cut.
	words := strings.Join(strings.Fields(out), " ")
	for _, c := range doc.Checks {
		if c.Fix != "" && c.Status != "ok" && !strings.Contains(words, strings.Join(strings.Fields("fix: "+c.Fix), " ")) {
			t.Errorf("%s: the fix is not whole in\n%s\nwant %q", c.Name, out, c.Fix)
		}
		if len(c.Enforced) > 0 && !strings.Contains(words, enforcedLine(c.Enforced)) {
			t.Errorf("%s: the enforced list is not whole in\n%s", c.Name, out)
		}
	}
	if strings.Contains(out, "…") {
		t.Errorf("doctor cut a line:\n%s", out)
	}
	// A relative data directory fails.
	h.env["AGENTRUN_HOME"] = "relative/dir"
	code, js, _ = h.exec("doctor", "--json")
	if code != 1 || !strings.Contains(js, "AGENTRUN_HOME is a relative path") {
		t.Fatalf("exit %d: %s", code, js)
	}
	if _, err := os.Stat("relative"); err == nil {
		t.Fatal("doctor created the relative data directory")
	}
}

// fakeNativeCLI installs profile name's CLI as npm does under a new
// prefix: its launcher (a script printing launcher) in its package and,
// where the profile's agent.Native names one for this platform, the
// native program it runs, nested in it. It returns both real paths
// (program "" where there is none).
func fakeNativeCLI(t *testing.T, name, launcher string) (string, string) {
	t.Helper()
	prefix, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := testDeps.Agents.Lookup(name)
	root := filepath.Join(prefix, "lib", "node_modules", "@openai", name)
	files := map[string]string{filepath.Join(root, p.Native.Launcher): launcher}
	program := ""
	if tgt, ok := p.Native.Targets[runtime.GOOS+"/"+runtime.GOARCH]; ok {
		pkg := filepath.Join(root, "node_modules", tgt.Package)
		program = filepath.Join(pkg, "vendor", tgt.Target, p.Native.Program)
		files[filepath.Join(pkg, "package.json")] = "{}\n"
		files[program] = "#!/bin/sh\nexit 0\n"
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, p.Native.Launcher), program
}

func TestWrapWords(t *testing.T) {
	long := strings.Repeat("x", 30)
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"one two", []string{"one two"}},
		{"one two three", []string{"one two", "three"}},
		{"aaaa bbbb cccc dddd", []string{"aaaa bbbb", "cccc dddd"}},
		{"a " + long + " b", []string{"a", long, "b"}},
		{"ééé ééé ééé", []string{"ééé ééé", "ééé"}},
	} {
		got := wrapWords(tc.in, 10)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("wrapWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// doctorJSON runs doctor --json: its exit code, output, document and
// checks by name.
func doctorJSON(t *testing.T, h *testHome) (int, string, doctorOutput, map[string]doctorCheck) {
	t.Helper()
	code, js, _ := h.exec("doctor", "--json")
	var doc doctorOutput
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	got := map[string]doctorCheck{}
	for _, c := range doc.Checks {
		got[c.Name] = c
	}
	return code, js, doc, got
}

// TestDoctorCLIEndpoint: a CLI set up for an endpoint of its own is
// checked as endpoint.PROFILE, and its family's public API no longer
// counts it as needing a key.
func TestDoctorCLIEndpoint(t *testing.T) {
	h := newTestHome(t)
	h.executable = testsupport.Agentrun(t)
	h.env["AGENTRUN_SANDBOX"] = "host"
	h.env["ANTHROPIC_BASE_URL"] = "https://anthropic-compatible.example.com/api/anthropic"
	h.env["ANTHROPIC_AUTH_TOKEN"] = "sk-doctor-endpoint"
	h.env["OPENAI_BASE_URL"] = "openai-compatible.example.com/api/v4" // no scheme
	h.env["GOOGLE_GEMINI_BASE_URL"] = "https://gemini-compatible.example.com"
	_, js, _, got := doctorJSON(t, h)
	if c := got["endpoint.claude"]; c.Status != "ok" || !strings.Contains(c.Detail, "goes to https://anthropic-compatible.example.com/api/anthropic") ||
		!strings.Contains(c.Detail, "key from ANTHROPIC_AUTH_TOKEN") {
		t.Errorf("endpoint.claude: %+v", c)
	}
	if c := got["endpoint.qwen"]; c.Status != "warn" || !strings.Contains(c.Detail, "--agent qwen is refused: OPENAI_BASE_URL=") || !strings.Contains(c.Detail, "is not an http:// or https:// URL") || !strings.Contains(c.Fix, "unset OPENAI_BASE_URL") {
		t.Errorf("endpoint.qwen: %+v", c)
	}
	if c := got["endpoint.gemini"]; c.Status != "warn" || !strings.Contains(c.Detail, "none of GEMINI_API_KEY, GOOGLE_API_KEY is set") {
		t.Errorf("endpoint.gemini: %+v", c)
	}
	if c := got["key.anthropic"]; c.Status != "ok" || !strings.Contains(c.Detail, "no profile goes there") {
		t.Errorf("key.anthropic: %+v", c)
	}
	if _, ok := got["endpoint.codex"]; ok {
		t.Error("codex has no endpoint variable agentrun reads")
	}
	if strings.Contains(js, "sk-doctor-endpoint") {
		t.Fatal("doctor printed a key")
	}
}

// TestDoctorProxy: behind a proxy, doctor says how model servers
// are reached (the proxy without its credentials, what bypasses it, the
// certificate authorities added) and warns of a certificate file that
// added nothing; with none of those variables there is no such check.
func TestDoctorProxy(t *testing.T) {
	h := newTestHome(t)
	h.executable = testsupport.Agentrun(t)
	h.env["AGENTRUN_SANDBOX"] = "host"
	if _, _, _, got := doctorJSON(t, h); got["proxy"].Name != "" {
		t.Fatalf("a proxy check without a proxy: %+v", got["proxy"])
	}
	ca := filepath.Join(t.TempDir(), "corp.pem")
	if err := os.WriteFile(ca, testsupport.NewPrivateCA(t).CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	h.env["HTTPS_PROXY"] = "http://alice:s3cret-proxy-pass@proxy.corp.example:3128"
	h.env["NO_PROXY"] = ".corp.example"
	h.env["NODE_EXTRA_CA_CERTS"] = ca
	h.env["SSL_CERT_FILE"] = "/nonexistent/ca.pem"
	_, js, _, got := doctorJSON(t, h)
	c := got["proxy"]
	for _, want := range []string{"are reached through HTTPS_PROXY=http://proxy.corp.example:3128, except .corp.example and this machine",
		"NODE_EXTRA_CA_CERTS=" + ca + " besides the system's", "no certificate added from SSL_CERT_FILE=/nonexistent/ca.pem"} {
		if !strings.Contains(c.Detail, want) {
			t.Errorf("proxy %+v lacks %q", c, want)
		}
	}
	if c.Status != "warn" || !strings.Contains(c.Fix, "point the certificate variable") {
		t.Errorf("proxy %+v: a certificate file that added nothing is a warning", c)
	}
	if !strings.Contains(c.Detail, "the https:// proxy at proxy.corp.example:3128 takes no connection") || !strings.Contains(c.Fix, "start the proxy") {
		t.Errorf("proxy %+v: a proxy that takes no connection is a warning", c)
	}
	if strings.Contains(js, "s3cret-proxy-pass") {
		t.Error("doctor printed the proxy's password")
	}
	// A proxy that listens, and nothing else amiss: ok.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h.env["HTTPS_PROXY"] = "http://" + ln.Addr().String()
	delete(h.env, "SSL_CERT_FILE")
	if _, _, _, got := doctorJSON(t, h); got["proxy"].Status != "ok" || strings.Contains(got["proxy"].Detail, "takes no connection") {
		t.Errorf("proxy %+v", got["proxy"])
	}
}

// TestDoctorHelper: a profile's CLI whose helper (opencode's rg) is
// neither on PATH nor in the CLI's data directory is a warning that says
// which tools fail and how to install it; with the copy opencode keeps in
// its data directory it is fine, and says it.
func TestDoctorHelper(t *testing.T) {
	h := newTestHome(t)
	h.executable = testsupport.Agentrun(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "opencode"), []byte("#!/bin/sh\necho 1.18.33\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.env["PATH"] = bin // (no system directory: no rg)
	h.env["AGENTRUN_SANDBOX"] = "host"
	_, _, _, got := doctorJSON(t, h)
	data := filepath.Join(h.env["HOME"], ".local", "share", "opencode", "bin")
	if c := got["agent.opencode"]; c.Status != "warn" || !strings.Contains(c.Detail, "found, the version agentrun was tested with; but rg (ripgrep, which opencode's grep and glob tools run) is neither on PATH nor in "+data+": those tools fail in the sandbox") ||
		c.Fix != "install ripgrep (apt install ripgrep, brew install ripgrep)" {
		t.Errorf("without rg: %+v", c)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "rg"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, _, got = doctorJSON(t, h)
	if c := got["agent.opencode"]; c.Status != "ok" || c.Fix != "" || !strings.HasSuffix(c.Detail, "; runs find rg at "+filepath.Join(data, "rg")) {
		t.Errorf("with opencode's own rg: %+v", c)
	}
}

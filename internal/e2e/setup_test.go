package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// Setup snapshots, for real: a registry reached only by the setup (through
// its own egress allowlist), then checks that need what it fetched under
// --network none; a second run on the same key finds the layer cached and
// reaches no network at all.

// newSetupEnv is newEnv outside /tmp: the native sandbox shows a run the
// setup's HOME (in the data directory) at its own path, and its /tmp is
// its own.
func newSetupEnv(t *testing.T) *env {
	t.Setenv("TMPDIR", "/var/tmp")
	return newEnv(t)
}

// registry skips (fails under AGENTRUN_REQUIRE_CAPS=1) when the host does
// not reach url, and returns --setup-allow flags for its host: the name,
// and the address it resolves to when that is a special-purpose one
// (a machine whose resolver answers with one: the egress proxy refuses
// such an address unless an entry names it).
func registry(t *testing.T, url string) []string {
	t.Helper()
	c := http.Client{Timeout: 15 * time.Second}
	resp, err := c.Get(url)
	if err == nil {
		resp.Body.Close()
	}
	testsupport.Require(t, "network to "+url, err == nil && resp.StatusCode < 500, "%v", err)
	host := strings.Split(strings.TrimPrefix(url, "https://"), "/")[0]
	flags := []string{"--setup-allow", host}
	addrs, _ := net.DefaultResolver.LookupHost(context.Background(), host)
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && egress.SpecialClass(ip) != "" {
			flags = append(flags, "--setup-allow", ip.String())
		}
	}
	return flags
}

// commitFiles writes files into the env's repository and commits them.
func commitFiles(t *testing.T, e *env, files map[string]string) {
	t.Helper()
	for p, s := range files {
		if err := os.WriteFile(filepath.Join(e.repo, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Git(t, e.repo, "add", "-A")
	testsupport.Git(t, e.repo, "commit", "-qm", "files")
}

// setupEvents are the run's setup events' kinds, and whether it made any
// egress decision.
func setupEvents(t *testing.T, e *env, id string) (kinds []string, egressed bool) {
	t.Helper()
	evs, err := e.store().Events(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		switch ev.Type {
		case run.EventSetup:
			var d struct{ Kind string }
			_ = json.Unmarshal(ev.Data, &d)
			kinds = append(kinds, d.Kind)
		case run.EventEgress:
			egressed = true
		}
	}
	return kinds, egressed
}

const goMod = "module example.com/setupcheck\n\ngo 1.22\n\nrequire github.com/pkg/errors v0.9.1\n"
const goSum = "github.com/pkg/errors v0.9.1 h1:FEBLx1zS214owpjy7qsBeixbURkuhQAwrK5UwLGTwt4=\n" +
	"github.com/pkg/errors v0.9.1/go.mod h1:bwawxfHBFNV+L2hUp1rHADufV3IMtnDRdf1r5NINEl0=\n"
const goMain = "package main\n\nimport \"github.com/pkg/errors\"\n\nfunc main() { _ = errors.New(\"x\") }\n"

func TestSetupSnapshotGoModulesOffline(t *testing.T) {
	testsupport.Program(t, "go")
	e := newSetupEnv(t)
	allow := registry(t, "https://proxy.golang.org/github.com/pkg/errors/@v/list")
	commitFiles(t, e, map[string]string{"go.mod": goMod, "go.sum": goSum, "main.go": goMain})
	base := strings.TrimSpace(testsupport.Git(t, e.repo, "rev-parse", "HEAD"))
	check := []string{"--check", "build=go build ./...", "--attempts", "1", "--agent-cmd", "echo agent > agent.txt"}

	// Without the snapshot, the check cannot fetch the module.
	d, res := e.submitOn("native", nil, append(check, "--wait", "no setup")...)
	if d.Status != "failed" || d.Reason != string(run.ReasonChecksFailed) {
		t.Fatalf("without setup: %s/%s, want failed/checks_failed\n%s", d.Status, d.Reason, res.stderr)
	}

	// The setup fetches it (and tries to change a base file: its own
	// layer takes that, never the shared checkout).
	setup := []string{"--setup", "go mod download && echo setup >> README.md"}
	d, res = e.submitOn("native", nil, append(append(append(check, setup...), allow...), "--wait", "with setup")...)
	if d.Status != "succeeded" {
		t.Fatalf("with setup: %s/%s\n%s\nsetup log:\n%s", d.Status, d.Reason, res.stderr, e.run("logs", "--setup", d.ID).stdout)
	}
	r := e.get(d.ID)
	if r.Setup == nil || r.Setup.Layer == "" || r.Setup.Cached || r.Setup.Source != "flag" {
		t.Fatalf("setup record: %+v", r.Setup)
	}
	if kinds, egressed := setupEvents(t, e, d.ID); strings.Join(kinds, ",") != "started,done" || !egressed {
		t.Fatalf("setup events %v, egress %v", kinds, egressed)
	}
	patch, err := os.ReadFile(d.Patch)
	if err != nil || strings.Contains(string(patch), "README.md") || !strings.Contains(string(patch), "agent.txt") {
		t.Fatalf("the export holds the setup's change, or not the agent's (%v):\n%s", err, patch)
	}
	lower := filepath.Join(e.home, "cache", "layers", "v1-"+base, "tree", "README.md")
	if b, err := os.ReadFile(lower); err == nil && string(b) != "hello\n" {
		t.Fatalf("the setup wrote the shared checkout layer: %q", b)
	}

	// The same key again: cached, no network in the setup, still offline.
	d, res = e.submitOn("native", nil, append(append(append(check, setup...), allow...), "--wait", "cached")...)
	if d.Status != "succeeded" {
		t.Fatalf("cached: %s/%s\n%s", d.Status, d.Reason, res.stderr)
	}
	if kinds, egressed := setupEvents(t, e, d.ID); strings.Join(kinds, ",") != "cached" || egressed {
		t.Fatalf("cached run: setup events %v, egress %v", kinds, egressed)
	}
	if r := e.get(d.ID); r.Setup == nil || !r.Setup.Cached || r.Setup.Layer != e.get(r.ID).Setup.Layer {
		t.Fatalf("cached setup record: %+v", r.Setup)
	}

	// The layer is listed for the repository.
	st := e.run("setup", "--status", "--json")
	must(t, st, 0)
	var doc struct {
		Layers []struct {
			Key, Commit, Command string
			Workspaces           int
		}
	}
	if err := json.Unmarshal([]byte(st.stdout), &doc); err != nil || len(doc.Layers) != 1 || doc.Layers[0].Commit != base || doc.Layers[0].Workspaces != 2 {
		t.Fatalf("setup --status: %v\n%s", err, st.stdout)
	}
}

func TestSetupSnapshotNpmOffline(t *testing.T) {
	testsupport.Program(t, "npm")
	testsupport.Program(t, "node")
	e := newSetupEnv(t)
	allow := registry(t, "https://registry.npmjs.org/is-number")
	commitFiles(t, e, map[string]string{
		"package.json": `{"name":"setupcheck","version":"1.0.0","private":true,"dependencies":{"is-number":"7.0.0"}}` + "\n",
		".gitignore":   "node_modules/\n",
		// The repository names its setup; the network is the user's to give.
		".agentrun.toml": "setup = \"npm install --no-audit --no-fund --fetch-retries=0\"\nsetup_allow = [\"registry.npmjs.org\"]\n",
	})
	check := []string{"--check", "require=node -e \"require('is-number')\"", "--attempts", "1", "--agent-cmd", "echo agent > agent.txt"}

	d, res := e.submitOn("native", nil, append(check, "--no-setup", "--wait", "no setup")...)
	if d.Status != "failed" || d.Reason != string(run.ReasonChecksFailed) {
		t.Fatalf("without setup: %s/%s\n%s", d.Status, d.Reason, res.stderr)
	}
	// The repository's own setup_allow opens nothing: without the user's
	// allowlist npm cannot reach the registry, the run fails at setup.
	d, res = e.submitOn("native", nil, append(check, "--wait", "setup without network")...)
	if d.Status != "failed" || d.Reason != string(run.ReasonSetupFailed) || !strings.Contains(res.stderr, "cannot open it") {
		t.Fatalf("setup without network: %s/%s\n%s", d.Status, d.Reason, res.stderr)
	}
	if log := e.run("logs", "--setup", d.ID); log.code != 0 || !strings.Contains(log.stdout, "npm") {
		t.Fatalf("no setup log: %+v", log)
	}
	if st := e.run("setup", "--status", "--json"); !strings.Contains(st.stdout, `"layers": []`) {
		t.Fatalf("a failed setup was cached: %s", st.stdout)
	}

	// Two runs at once on the same key: one builds, the other waits and
	// finds it made.
	var wg sync.WaitGroup
	docs := make([]submitDoc, 2)
	for i := range docs {
		wg.Go(func() {
			docs[i], _ = e.submitOn("native", nil, append(append(check, allow...), "--wait", "with setup")...)
		})
	}
	wg.Wait()
	var kinds []string
	for _, d := range docs {
		if d.Status != "succeeded" {
			t.Fatalf("with setup: %s/%s; setup log:\n%s", d.Status, d.Reason, e.run("logs", "--setup", d.ID).stdout)
		}
		k, _ := setupEvents(t, e, d.ID)
		kinds = append(kinds, strings.Join(k, ","))
		if r := e.get(d.ID); r.Setup == nil || r.Setup.Source != ".agentrun.toml" {
			t.Fatalf("setup record: %+v", r.Setup)
		}
	}
	if !(kinds[0] == "started,done" && kinds[1] == "cached" || kinds[1] == "started,done" && kinds[0] == "cached") {
		t.Fatalf("concurrent runs' setup events: %v (want one build, one cached)", kinds)
	}
}

// TestSetupCopyWorkspace runs the setup where no overlay is mounted (the
// host backend): the layer is the whole tree after the setup, copied into
// the run's workspace, and its HOME is shown to the run.
func TestSetupCopyWorkspace(t *testing.T) {
	e := newSetupEnv(t)
	setup := "mkdir -p data && echo made > data/made.txt && rm README.md && mkdir -p \"$HOME/go/pkg/mod\" && echo mod > \"$HOME/go/pkg/mod/m.txt\""
	check := "test \"$(cat data/made.txt)\" = made && test ! -e README.md && test \"$(cat \"$GOMODCACHE/m.txt\")\" = mod"
	for i, want := range []string{"started,done", "cached"} {
		d, res := e.submitJSON(nil, "--sandbox", "host", "--setup", setup, "--check", "copy="+check, "--attempts", "1",
			"--agent-cmd", "echo agent > agent.txt", "--wait", "copy")
		if d.Status != "succeeded" {
			t.Fatalf("run %d: %s/%s\n%s\nsetup log:\n%s", i, d.Status, d.Reason, res.stderr, e.run("logs", "--setup", d.ID).stdout)
		}
		if kinds, _ := setupEvents(t, e, d.ID); strings.Join(kinds, ",") != want {
			t.Fatalf("run %d: setup events %v, want %s", i, kinds, want)
		}
		patch, err := os.ReadFile(d.Patch)
		if err != nil || !strings.Contains(string(patch), "agent.txt") {
			t.Fatalf("run %d: patch (%v):\n%s", i, err, patch)
		}
	}
	if b, err := os.ReadFile(filepath.Join(e.repo, "README.md")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the user's repository changed: %q %v", b, err)
	}
}

// TestToolchainCacheReadOnly shows the host's Go module cache to a run
// read-only: the run finds it where GOMODCACHE says and cannot write it.
func TestToolchainCacheReadOnly(t *testing.T) {
	e := newSetupEnv(t)
	mod := filepath.Join(e.root, "hostmod")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "cached.txt"), []byte("cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := "test \"$GOMODCACHE\" = " + sh(mod) + " && test \"$(cat \"$GOMODCACHE/cached.txt\")\" = cached && ! touch \"$GOMODCACHE/written\" 2>/dev/null"
	// The setup sees the cache too, and cannot write it either.
	setup := "cat " + sh(mod+"/cached.txt") + " && case \"$GOPROXY\" in file://" + mod + "/cache/download,*) ;; *) exit 1;; esac && ! touch " + sh(mod+"/by-setup") + " 2>/dev/null"
	d, res := e.submitOn("native", []string{"GOMODCACHE=" + mod}, "--toolchain-cache", "go", "--setup", setup, "--check", "ro="+check, "--attempts", "1",
		"--agent-cmd", "echo agent > agent.txt", "--wait", "toolchain")
	if d.Status != "succeeded" {
		t.Fatalf("%s/%s\n%s", d.Status, d.Reason, res.stderr)
	}
	if fileExists(filepath.Join(mod, "written")) || fileExists(filepath.Join(mod, "by-setup")) {
		t.Fatal("the run or its setup wrote the host's module cache")
	}
	if r := e.get(d.ID); len(r.Sandbox.Toolchains) != 1 || r.Sandbox.Toolchains[0].Path != mod {
		t.Fatalf("toolchain caches: %+v", r.Sandbox.Toolchains)
	}
	if res := e.run("submit", "--json", "--toolchain-cache", "maven", "--agent-cmd", "true", "x"); res.code != 2 || !strings.Contains(res.stdout, "bad_toolchain_cache") {
		t.Fatalf("unknown cache: %+v", res)
	}
}

// TestSetupAheadOfTheRuns: agentrun setup builds HEAD's layer from the
// repository's .agentrun.toml; the next run finds it cached.
func TestSetupAheadOfTheRuns(t *testing.T) {
	e := newSetupEnv(t)
	if res := e.run("setup", "--sandbox", "native", "--json"); res.code != 2 || !strings.Contains(res.stdout, "no_setup_command") {
		if strings.Contains(res.stdout, "sandbox_preflight") {
			requireCaps(t, "the native sandbox", false, res.stdout)
		}
		t.Fatalf("without a setup command: %+v", res)
	}
	commitFiles(t, e, map[string]string{".agentrun.toml": "setup = \"echo ahead > ahead.txt\"\n"})
	res := e.run("setup", "--sandbox", "native", "--json")
	must(t, res, 0)
	var doc struct {
		Built  *bool
		Layers []struct{ Key, Mode string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || doc.Built == nil || !*doc.Built || len(doc.Layers) != 1 {
		t.Fatalf("setup: %v\n%s", err, res.stdout)
	}
	if res := e.run("setup", "--sandbox", "native", "--json"); !strings.Contains(res.stdout, `"built": false`) {
		t.Fatalf("setup again: %+v", res)
	}
	d, res := e.submitOn("native", nil, "--agent-cmd", "cat ahead.txt > seen.txt", "--wait", "t")
	if d.Status != "succeeded" {
		t.Fatalf("%s/%s\n%s", d.Status, d.Reason, res.stderr)
	}
	if kinds, _ := setupEvents(t, e, d.ID); strings.Join(kinds, ",") != "cached" {
		t.Fatalf("setup events %v", kinds)
	}
	if r := e.get(d.ID); r.Setup == nil || r.Setup.Layer != doc.Layers[0].Key {
		t.Fatalf("the run's layer %+v, built %s", r.Setup, doc.Layers[0].Key)
	}
	if st := e.run("status", d.ID); !strings.Contains(st.stdout, "setup") || !strings.Contains(st.stdout, "cached") {
		t.Fatalf("status:\n%s", st.stdout)
	}
}

// TestSetupOnDocker: the docker backend mounts no overlay; the setup runs
// in a checkout of its own in a container, the runs get the whole tree by
// copying and the setup's HOME read-only.
func TestSetupOnDocker(t *testing.T) {
	host, image := os.Getenv("AGENTRUN_DOCKER_TEST_HOST"), os.Getenv("AGENTRUN_DOCKER_TEST_IMAGE")
	testsupport.Require(t, "a container engine and a test image", host != "" && image != "",
		"set AGENTRUN_DOCKER_TEST_HOST and AGENTRUN_DOCKER_TEST_IMAGE (eval \"$(bash .ci/install-podman.sh)\")")
	e := newSetupEnv(t)
	setup := "echo dep > dep.txt && mkdir -p \"$HOME/go/pkg/mod\" && echo m > \"$HOME/go/pkg/mod/m\""
	check := "test \"$(cat dep.txt)\" = dep && test \"$(cat \"$GOMODCACHE/m\")\" = m && ! touch \"$GOMODCACHE/x\" 2>/dev/null"
	for _, want := range []string{"started,done", "cached"} {
		d, res := e.submitJSON([]string{"DOCKER_HOST=" + host}, "--sandbox", "docker", "--image", image, "--setup", setup,
			"--check", "c="+check, "--attempts", "1", "--agent-cmd", "echo a > a.txt", "--wait", "docker")
		if d.Status != "succeeded" {
			t.Fatalf("%s/%s\n%s\nsetup log:\n%s", d.Status, d.Reason, res.stderr, e.run("logs", "--setup", d.ID).stdout)
		}
		if kinds, _ := setupEvents(t, e, d.ID); strings.Join(kinds, ",") != want {
			t.Fatalf("setup events %v, want %s", kinds, want)
		}
	}
}

// fetchJava prints the body of the URL it is given: the JVM's own HTTP
// client, which ignores HTTPS_PROXY and finds the egress relay only
// through the proxy properties of JAVA_TOOL_OPTIONS.
const fetchJava = `import java.io.InputStream;
import java.net.URI;

public class Fetch {
    public static void main(String[] args) throws Exception {
        try (InputStream in = URI.create(args[0]).toURL().openStream()) {
            in.transferTo(System.out);
        }
    }
}
`

// TestSetupJVMThroughTheProxy: a JVM program in the setup reaches the
// module proxy through the setup's allowlist (JAVA_TOOL_OPTIONS), and the
// run reads what it fetched offline.
func TestSetupJVMThroughTheProxy(t *testing.T) {
	testsupport.Program(t, "java")
	e := newSetupEnv(t)
	url := "https://proxy.golang.org/github.com/pkg/errors/@v/v0.9.1.info"
	allow := registry(t, url)
	commitFiles(t, e, map[string]string{"Fetch.java": fetchJava, ".gitignore": "fetched.json\n"})
	d, res := e.submitOn("native", nil, append(allow, "--setup", "java Fetch.java "+url+" > fetched.json",
		"--check", "fetched=grep -q v0.9.1 fetched.json", "--attempts", "1", "--agent-cmd", "echo a > a.txt", "--wait", "jvm")...)
	if d.Status != "succeeded" {
		t.Fatalf("%s/%s\n%s\nsetup log:\n%s", d.Status, d.Reason, res.stderr, e.run("logs", "--setup", d.ID).stdout)
	}
	if kinds, egressed := setupEvents(t, e, d.ID); strings.Join(kinds, ",") != "started,done" || !egressed {
		t.Fatalf("setup events %v, egress %v", kinds, egressed)
	}
}

// TestSetupFromHostLoopback: a setup fetches from a service on this
// machine's loopback (a local registry) that --setup-allow
// 127.0.0.1:PORT admits, at that same address inside the native sandbox;
// the agent then finds what it fetched.
func TestSetupFromHostLoopback(t *testing.T) {
	e := newSetupEnv(t)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "package "+r.URL.Path+"\n")
	}))
	t.Cleanup(svc.Close)
	addr := svc.Listener.Addr().String()
	d, res := e.submitJSON(nil, "--sandbox", "native", "--setup", "curl -sSf --max-time 10 http://"+addr+"/left-pad > dep.txt",
		"--setup-allow", addr, "--agent-cmd", "cp dep.txt copy.txt", "--attempts", "1", "--wait", "use the dependency")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	if d.Status != "succeeded" {
		t.Fatalf("%s/%s\n%s\nsetup log:\n%s", d.Status, d.Reason, res.stderr, e.run("logs", "--setup", d.ID).stdout)
	}
	if got, _ := resultFile(e, d.Commit, "copy.txt"); got != "package /left-pad" {
		t.Fatalf("copy.txt %q", got)
	}
}

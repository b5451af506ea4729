package docker_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/sandbox/sandboxtest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The engine and the test image come from .ci/install-podman.sh:
//
//	eval "$(bash .ci/install-podman.sh)"
const (
	hostEnv  = "AGENTRUN_DOCKER_TEST_HOST"
	imageEnv = "AGENTRUN_DOCKER_TEST_IMAGE"
)

// requireEngine returns the backend on the test engine and the test
// image's id, or skips (fails with AGENTRUN_REQUIRE_CAPS=1).
func requireEngine(t testing.TB) (*docker.Backend, string) {
	t.Helper()
	host, image := os.Getenv(hostEnv), os.Getenv(imageEnv)
	testsupport.Require(t, "a container engine and a test image", host != "" && image != "",
		"%s and %s are unset (eval \"$(bash .ci/install-podman.sh)\" sets them)", hostEnv, imageEnv)
	b := docker.New(docker.Options{Host: host, Executable: testsupport.Agentrun(t)})
	err := b.Preflight(context.Background())
	testsupport.Require(t, "a container engine", err == nil, "preflight: %v", err)
	img, err := b.ResolveImage(context.Background(), image, nil)
	if err != nil {
		t.Fatalf("resolve the test image %s: %v", image, err)
	}
	return b, img.ID
}

func newSpec(t testing.TB, image string) sandbox.Spec {
	t.Helper()
	dir := t.TempDir()
	spec := sandbox.Spec{
		RunID:     "dockertest",
		Repo:      "/src/repo",
		Workspace: filepath.Join(dir, "ws"),
		Home:      filepath.Join(dir, "home"),
		StateDir:  filepath.Join(dir, "state"),
		Env:       []string{"PATH=/usr/bin:/bin", "LANG=C"},
		Network:   sandbox.NetworkNone,
		Image:     image,
	}
	for _, d := range []string{spec.Workspace, spec.Home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return spec
}

func start(t testing.TB, b *docker.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

func sh(t testing.TB, sb sandbox.Sandbox, script string) *runner.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: script}, nil, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

func TestConformance(t *testing.T) {
	b, image := requireEngine(t)
	sandboxtest.Run(t, b, sandboxtest.Options{Spec: func(s *sandbox.Spec) { s.Image = image }})
}

// TestConfinement checks from inside what the container may do: no
// capability, no network but loopback, a read-only root, the host user's
// uid, bounded /tmp, and none of the host's files.
func TestConfinement(t *testing.T) {
	b, image := requireEngine(t)
	spec := newSpec(t, image)
	spec.Limits = sandbox.Limits{MemoryBytes: 256 << 20, Pids: 128, DiskBytes: 32 << 20}
	sb := start(t, b, spec)
	checks := map[string]string{
		"caps":       `grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | grep -v '0000000000000000' || echo none`,
		"nnp":        `grep NoNewPrivs /proc/self/status | tr -d '\t '`,
		"root-ro":    `touch /x 2>/dev/null && echo writable || echo read-only`,
		"uid":        `id -u`,
		"net":        `ls /sys/class/net | tr '\n' ' '`,
		"tmp-bound":  `dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/dev/null; test $(du -m /tmp/fill | cut -f1) -le 32 && echo bounded`,
		"host-files": `test -e /etc/shadow && echo shadow; test -e /root && ls /root 2>/dev/null | head -1; echo done`,
		"pid1":       `cat /proc/1/cmdline | tr '\0' ' '`,
		"pid1-env":   `cat /proc/1/environ >/dev/null 2>&1 && echo readable || echo hidden`,
		"workspace":  `pwd; touch made-inside && stat -c %u made-inside`,
	}
	want := map[string]string{
		"caps": "none", "nnp": "NoNewPrivs:1", "root-ro": "read-only", "uid": itoa(os.Getuid()),
		"net": "lo ", "tmp-bound": "bounded", "host-files": "done", "pid1": "/.agentrun/agentrun __docker init",
		"pid1-env": "hidden", "workspace": "/workspace\n" + itoa(os.Getuid()),
	}
	for name, script := range checks {
		got := strings.TrimSpace(string(sh(t, sb, script).Stdout))
		if got != strings.TrimSpace(want[name]) {
			t.Errorf("%s: got %q, want %q", name, got, want[name])
		}
	}
	if fi, err := os.Stat(filepath.Join(spec.Workspace, "made-inside")); err != nil {
		t.Errorf("a file made inside is not in the host workspace: %v", err)
	} else if !fi.Mode().IsRegular() {
		t.Errorf("made-inside: %v", fi.Mode())
	}
	enf := sb.Enforced()
	for _, k := range []string{"namespaces", "caps", "no_new_privs", "read_only_root", "network", "memory", "pids", "cpu", "rlimit_nofile", "rlimit_nproc", "disk_tmpfs"} {
		if !strings.HasPrefix(enf[k], "enforced") {
			t.Errorf("Enforced[%s] = %q", k, enf[k])
		}
	}
	if !strings.HasPrefix(enf["memory"], "enforced: 268435456") || !strings.HasPrefix(enf["pids"], "enforced: 128") {
		t.Errorf("limits read back: memory %q, pids %q", enf["memory"], enf["pids"])
	}
	if !strings.HasPrefix(enf["disk"], "sampled") {
		t.Errorf("Enforced[disk] = %q: the workspace is sampled against the bound", enf["disk"])
	}
}

func TestGatewayBridge(t *testing.T) {
	b, image := requireEngine(t)
	spec := newSpec(t, image)
	spec.GatewaySocket = echoSocket(t)
	sb := start(t, b, spec)
	if sb.GatewayAddr() != "127.0.0.1:3129" {
		t.Fatalf("GatewayAddr = %q", sb.GatewayAddr())
	}
	res := sh(t, sb, `exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/3129; printf ping >&3; head -c 4 <&3'`)
	if got := string(res.Stdout); got != "ping" {
		t.Fatalf("through the gateway bridge: %q (stderr %q)", got, res.Stderr)
	}
}

func TestLabelsAndSweep(t *testing.T) {
	b, image := requireEngine(t)
	spec := newSpec(t, image)
	spec.RunID = "sweep-" + itoa(os.Getpid())
	sb := start(t, b, spec)
	ctx := context.Background()
	// An active run's container stays.
	stateDir := func(string) string { return spec.StateDir }
	swept, err := b.Sweep(ctx, stateDir, func(id string) bool { return true })
	if err != nil || len(swept) != 0 {
		t.Fatalf("sweep with every run active: %v %v", swept, err)
	}
	// Another data directory's sweep (or another user's) leaves it alone.
	elsewhere := func(id string) string { return filepath.Join(t.TempDir(), "runs", id, "sandbox") }
	swept, err = b.Sweep(ctx, elsewhere, func(id string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range swept {
		if s.RunID == spec.RunID {
			t.Fatalf("another data directory's sweep removed this run's container: %v", swept)
		}
	}
	swept, err = b.Sweep(ctx, stateDir, func(id string) bool { return id != spec.RunID })
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0].RunID != spec.RunID {
		t.Fatalf("swept %v, want the container of %s", swept, spec.RunID)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := sb.Runner().Stat(sctx, runner.StatRequest{Path: "."}); err == nil {
		t.Error("the runner answers after its container was swept")
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("destroy after the sweep: %v", err)
	}
}

func TestStartRefusesWithoutImage(t *testing.T) {
	b, _ := requireEngine(t)
	spec := newSpec(t, "")
	_, err := b.Start(context.Background(), spec)
	if !catalog.NoImage.Is(err) {
		t.Fatalf("start without an image: %v", err)
	}
	spec.Image = "sha256:" + strings.Repeat("0", 64)
	_, err = b.Start(context.Background(), spec)
	if !catalog.ImageMissing.Is(err) {
		t.Fatalf("start with a missing image: %v", err)
	}
	if _, err := os.Stat(spec.StateDir); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(spec.StateDir, "sock")); len(ents) > 0 {
			t.Errorf("a failed start left %v", ents)
		}
	}
}

func TestResolveImage(t *testing.T) {
	b, id := requireEngine(t)
	ctx := context.Background()
	const tag = "localhost/agentrun-test:busybox"
	for _, c := range []struct {
		ref  string
		pins map[string]string
		want catalog.Entry
	}{
		{ref: "", want: catalog.NoImage},
		{ref: tag, want: catalog.ImageNotPinned},
		{ref: "busybox:latest", want: catalog.ImageNotPinned},
		{ref: tag, pins: map[string]string{tag: "sha256:" + strings.Repeat("1", 64)}, want: catalog.ImageMismatch},
		{ref: tag, pins: map[string]string{tag: "latest"}, want: catalog.ImageNotPinned},
		{ref: "sha256:" + strings.Repeat("2", 64), want: catalog.ImageMissing},
		{ref: "localhost/nothing@sha256:" + strings.Repeat("3", 64), want: catalog.ImageMissing},
	} {
		_, err := b.ResolveImage(ctx, c.ref, c.pins)
		if !c.want.Is(err) {
			t.Errorf("ResolveImage(%q, %v) = %v, want %s", c.ref, c.pins, err, c.want.Code)
		}
	}
	for _, c := range []struct {
		ref  string
		pins map[string]string
	}{
		{ref: id},
		{ref: strings.TrimPrefix(id, "sha256:")},
		{ref: tag, pins: map[string]string{tag: id}},
	} {
		img, err := b.ResolveImage(ctx, c.ref, c.pins)
		if err != nil || img.ID != id {
			t.Errorf("ResolveImage(%q, %v) = %+v, %v; want id %s", c.ref, c.pins, img, err, id)
		}
	}
}

func TestPreflightEngineDown(t *testing.T) {
	dir := t.TempDir()
	b := docker.New(docker.Options{Host: "unix://" + filepath.Join(dir, "none.sock"), Executable: testsupport.Agentrun(t)})
	if err := b.Preflight(context.Background()); !catalog.EngineDown.Is(err) {
		t.Fatalf("preflight with no engine: %v", err)
	}
	b = docker.New(docker.Options{Getenv: func(string) string { return "" }, Executable: testsupport.Agentrun(t)})
	if docker.EngineHost("", func(string) string { return "" }) == "" {
		if err := b.Preflight(context.Background()); !catalog.EngineDown.Is(err) {
			t.Fatalf("preflight with no socket at all: %v", err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// echoSocket serves a unix socket that echoes every connection.
func echoSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dkg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Echo(t, ln)
	return sock
}

package sandboxtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// proxyEcho serves a unix socket standing in for the egress proxy: it
// echoes every connection.
func proxyEcho(t *testing.T) string {
	t.Helper()
	sock, ln := proxySocket(t)
	testsupport.Echo(t, ln)
	return sock
}

// proxySocket listens on a unix socket that the sandbox's unprivileged
// user can reach too, as the egress proxy's is, in a directory removed
// at the test's end.
func proxySocket(t *testing.T) (string, net.Listener) {
	t.Helper()
	sock := filepath.Join(testsupport.SearchableDir(t, "", "sbp-"), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	must(t, err)
	must(t, os.Chmod(sock, 0o777))
	return sock, ln
}

// egressScript connects to $HTTP_PROXY from inside the sandbox (bash's
// /dev/tcp: no client tool needed) and prints what comes back, after
// checking that JVM tools are pointed at the same relay.
const egressScript = `command -v bash >/dev/null 2>&1 || { echo no-bash; exit 0; }
exec bash -c 'hp=${HTTP_PROXY#http://}; h=${hp%:*}; p=${hp##*:}
[ -n "$HTTP_PROXY" ] && [ "$HTTPS_PROXY" = "$HTTP_PROXY" ] && [ "$http_proxy" = "$HTTP_PROXY" ] || { echo bad-env; exit 0; }
for v in "$JAVA_TOOL_OPTIONS" "$GRADLE_OPTS" "$MAVEN_OPTS"; do
  case "$v" in *"-Dhttps.proxyHost=$h -Dhttps.proxyPort=$p "*) ;; *) echo bad-jvm-env; exit 0;; esac
done
exec 3<>"/dev/tcp/$h/$p" || exit 1
printf "CONNECT example.test:443 HTTP/1.1\r\n\r\n" >&3
head -c 7 <&3'`

// runEgress checks the allowlist network path: processes inside find the
// proxy in HTTP_PROXY (and the lowercase and HTTPS forms) and their bytes
// reach the host's proxy socket through the backend's relay.
func runEgress(t *testing.T, b, ref sandbox.Backend, adjust func(*sandbox.Spec)) {
	proxy := proxyEcho(t)
	allow := func(s *sandbox.Spec) {
		if adjust != nil {
			adjust(s)
		}
		s.Network, s.ProxySocket = sandbox.NetworkAllowlist, proxy
	}
	for _, be := range []sandbox.Backend{b, ref} {
		e := startEnv(t, be, allow)
		got, res := execBash(t, e, be.Name(), egressScript)
		if got != "CONNECT" {
			t.Errorf("%s: through the proxy relay got %q (exit %d %s, stderr %q)", be.Name(), got, res.ExitCode, res.Signal, res.Stderr)
		}
		e.sb.Destroy(context.Background())
	}
}

// execBash runs script in the sandbox of e (backend name) and returns
// its stdout, trimmed, and its result. The script prints no-bash where
// the sandbox has no bash, which opens the TCP connections these cases
// need: a missing capability, not a pass.
func execBash(t *testing.T, e *env, name, script string) (string, *runner.ExecResult) {
	t.Helper()
	res, err := e.cl.Exec(context.Background(), runner.ExecRequest{Shell: script}, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got := strings.TrimSpace(string(res.Stdout))
	if got == "no-bash" {
		testsupport.Require(t, "bash inside the sandbox", false, "%s: no bash to open a TCP connection", name)
	}
	return got, res
}

// hostService serves a unix socket standing in for the egress proxy in
// front of services on the host's loopback: a CONNECT to one of them is
// answered 200, and the tunnel then carries "host-service\n" back; any
// other target is refused (403). It records every target asked for.
func hostService(t *testing.T, services ...string) (sock string, targets func() []string) {
	t.Helper()
	sock, ln := proxySocket(t)
	return sock, testsupport.TunnelProxy(t, ln, func(target string) bool { return slices.Contains(services, target) }, "host-service\n")
}

// hostLoopbackScript connects to 127.0.0.1:41873 and 127.0.0.1:80
// (forwards) and to 127.0.0.1:41874 (none) from inside, with bash's
// /dev/tcp.
const hostLoopbackScript = `command -v bash >/dev/null 2>&1 || { echo no-bash; exit 0; }
exec bash -c 'for p in 41873 80; do (exec 3<>/dev/tcp/127.0.0.1/$p && head -n 1 <&3) || echo "$p refused"; done; (exec 4<>/dev/tcp/127.0.0.1/41874) 2>/dev/null && echo reached || echo refused'`

// runHostLoopback checks Spec.Forwards: a service on the host's loopback
// that the allowlist admits is reached inside at the same address, its
// connection tunnelled through the egress proxy (a CONNECT the proxy
// decides), a port below 1024 too (bound by the sandbox's unprivileged
// runner); another port of the sandbox's loopback reaches nothing.
func runHostLoopback(t *testing.T, b sandbox.Backend, adjust func(*sandbox.Spec)) {
	forwards := []string{"127.0.0.1:41873", "127.0.0.1:80"}
	proxy, targets := hostService(t, forwards...)
	e := startEnv(t, b, func(s *sandbox.Spec) {
		if adjust != nil {
			adjust(s)
		}
		s.Network, s.ProxySocket, s.Forwards = sandbox.NetworkAllowlist, proxy, forwards
	})
	defer e.sb.Destroy(context.Background())
	got, res := execBash(t, e, b.Name(), hostLoopbackScript)
	if got != "host-service\nhost-service\nrefused" {
		t.Errorf("%s: the host's service inside got %q (exit %d %s, stderr %q)", b.Name(), got, res.ExitCode, res.Signal, res.Stderr)
	}
	if got := targets(); !slices.Equal(got, []string{"CONNECT 127.0.0.1:41873", "CONNECT 127.0.0.1:80"}) {
		t.Errorf("%s: the proxy was asked for %v", b.Name(), got)
	}
}

package sandboxtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "sbp-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	sock := filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", sock)
	must(t, err)
	must(t, os.Chmod(sock, 0o777))
	testsupport.Echo(t, ln)
	return sock
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
		res, err := e.cl.Exec(context.Background(), runner.ExecRequest{Shell: egressScript}, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
		got := strings.TrimSpace(string(res.Stdout))
		if got == "no-bash" {
			testsupport.Require(t, "bash inside the sandbox", false, "%s: no bash to open a TCP connection", be.Name())
		}
		if got != "CONNECT" {
			t.Errorf("%s: through the proxy relay got %q (exit %d %s, stderr %q)", be.Name(), got, res.ExitCode, res.Signal, res.Stderr)
		}
		e.sb.Destroy(context.Background())
	}
}

package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native/execpriv"
	"github.com/agentrun/agentrun/internal/sandbox/seccomp"
)

func refuse(cause, fix string) error {
	return catalog.SandboxPreflight.Wrap(sandbox.ErrUnavailable, "%s", cause).WithFix("%s", fix)
}

func readSysctl(name string) (string, bool) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// Preflight implements sandbox.Backend: it checks what the kernel must
// allow, then starts a throwaway sandbox that does the whole setup
// (namespaces, mounts, pivot_root, capabilities, no_new_privs, Landlock,
// seccomp) and exits.
func (b *Backend) Preflight(ctx context.Context) error {
	if _, err := b.executable(); err != nil {
		return refuse(err.Error(), "pass the agentrun binary's path, or reinstall agentrun")
	}
	if !seccomp.Available() {
		return refuse("no seccomp filter is written for this architecture", "run agentrun on amd64 or arm64")
	}
	if err := unix.Prctl(unix.PR_GET_SECCOMP, 0, 0, 0, 0); errors.Is(err, unix.EINVAL) {
		return refuse("the kernel has no seccomp (CONFIG_SECCOMP_FILTER)", "use a kernel built with seccomp (CONFIG_SECCOMP_FILTER)")
	}
	if os.Getuid() != 0 {
		if v, ok := readSysctl("user.max_user_namespaces"); ok && v == "0" {
			return refuse("user namespaces are disabled (user.max_user_namespaces = 0)", "as root: sysctl -w user.max_user_namespaces=15000")
		}
		if v, ok := readSysctl("kernel.unprivileged_userns_clone"); ok && v == "0" {
			return refuse("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)", "as root: sysctl -w kernel.unprivileged_userns_clone=1")
		}
		if v, ok := readSysctl("kernel.apparmor_restrict_unprivileged_userns"); ok && v == "1" {
			return refuse("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)",
				"as root: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or add an AppArmor profile allowing userns for agentrun")
		}
	}
	tmp, err := os.MkdirTemp("", "agentrun-preflight-")
	if err != nil {
		return refuse(fmt.Sprintf("cannot make a temporary directory: %v", err), "check TMPDIR is writable")
	}
	defer os.RemoveAll(tmp)
	ws := filepath.Join(tmp, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return refuse(err.Error(), "check TMPDIR is writable")
	}
	spec := sandbox.Spec{RunID: "preflight", Workspace: ws, StateDir: filepath.Join(tmp, "state"), Network: sandbox.NetworkNone, Limits: sandbox.Limits{Pids: 64}}
	c, lim, err := b.makeConfig(spec, modeProbe)
	if err != nil {
		return refuse(err.Error(), "check the sandbox configuration")
	}
	p, err := b.launch(ctx, spec, c, lim, nil, nil, nil, nil)
	if err != nil {
		return probeError(err)
	}
	p.wait()
	p.cg.remove()
	return nil
}

func probeError(err error) error {
	if ll := landlockRefusal(err); ll != nil {
		return ll
	}
	var se *setupError
	if !errors.As(err, &se) {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSPC) {
			return refuse(fmt.Sprintf("the kernel refused to create the sandbox's namespaces: %v", err),
				"enable user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone) or run as root; inside a container, allow unshare (e.g. --security-opt seccomp=unconfined)")
		}
		return refuse(err.Error(), "see the cause")
	}
	fix := "see the cause; agentrun never starts a sandbox with less isolation"
	switch se.Step {
	case "root":
		fix = "the kernel refused a mount inside the sandbox; inside a container, /proc must not be partly masked (run it with --privileged, or run agentrun on the host)"
	case "network":
		fix = "the kernel refused to configure the sandbox's loopback interface"
	case "confine":
		fix = "the kernel refused seccomp, Landlock or dropping capabilities; check the kernel's seccomp support"
	}
	if strings.Contains(se.Msg, execpriv.CgoRefusal) {
		fix = "rebuild agentrun with CGO_ENABLED=0 (as the README's install does): a cgo binary's own threads cannot all be confined"
	}
	return refuse("native sandbox setup failed at "+se.Error(), fix)
}

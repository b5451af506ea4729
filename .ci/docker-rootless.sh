#!/usr/bin/env bash
# Run the docker sandbox's tests as an unprivileged user against that
# user's rootless Podman API ($XDG_RUNTIME_DIR/podman/podman.sock), with
# every capability skip turned into a failure. Run as root from the module
# root after install-podman.sh (its test image is copied into the user's
# storage): .ci/docker-rootless.sh [go test flags, e.g. -test.run X]
#
# On a machine without the unified cgroup v2 hierarchy a rootless engine
# cannot apply the memory, pids and CPU limits, and the backend refuses it
# in preflight: there only that refusal is tested, since every other test
# needs a sandbox it will not start.
set -euo pipefail

user=${AGENTRUN_ROOTLESS_USER:-agentrun-podman}
tag=localhost/agentrun-test:busybox
log() { echo "docker-rootless: $*" >&2; }

need=()
command -v newuidmap >/dev/null || need+=(uidmap)
command -v setpriv >/dev/null || need+=(util-linux)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
if ((${#need[@]})); then
	log "installing ${need[*]}"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi
if ! id "$user" >/dev/null 2>&1; then
	useradd --system --create-home --shell /bin/sh "$user"
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
home=$(getent passwd "$user" | cut -d: -f6)
# Subordinate ids of its own, far above any other user's range.
for f in /etc/subuid /etc/subgid; do
	grep -q "^$user:" "$f" 2>/dev/null || echo "$user:$((1000000 + uid * 65536)):65536" >>"$f"
done
run=/run/user/$uid
mkdir -p "$run/podman"
chown -R "$uid:$gid" "$run"
chmod 700 "$run"
sock=$run/podman/podman.sock

as_user() {
	setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env -- \
		env HOME="$home" XDG_RUNTIME_DIR="$run" PATH=/usr/local/go/bin:/usr/bin:/bin TMPDIR=/tmp "$@"
}
ping() { as_user curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; }
if ! ping; then
	log "starting $user's rootless podman API on $sock"
	rm -f "$sock"
	# In /, detached, holding none of this script's descriptors (a caller
	# reading its output through a pipe would wait for the service).
	(
		cd /
		exec setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env -- \
			env HOME="$home" XDG_RUNTIME_DIR="$run" PATH=/usr/bin:/bin \
			setsid podman system service --time=0 "unix://$sock"
	) >"$run/podman/service.log" 2>&1 </dev/null &
	for _ in $(seq 100); do
		ping && break
		sleep 0.1
	done
	ping || { log "the rootless podman API did not come up:"; tail -20 "$run/podman/service.log" >&2; exit 1; }
fi

id=$(podman image inspect --format '{{.Id}}' "$tag")
if ! as_user podman image exists "$id"; then
	log "copying $tag into $user's storage"
	podman save "$tag" | as_user podman load -q >&2
fi

out=$(mktemp -d /tmp/agentrun-rootless-XXXXXX)
trap 'rm -rf "$out"' EXIT
chmod 755 "$out"
go test -c -race -o "$out/docker.test" ./internal/sandbox/docker
CGO_ENABLED=0 go build -o "$out/agentrun" ./cmd/agentrun
(cd internal/sandbox/docker && CGO_ENABLED=0 go build -o "$out/probe" ./testdata/probe)
chmod 755 "$out"/*

args=(-test.count=1 "$@")
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
	log "no unified cgroup v2 hierarchy: testing that preflight refuses the rootless engine"
	args+=(-test.run 'TestPreflightLimitsOnThisEngine|TestRootlessEngine|TestLimitsRefusal')
fi
cd "$out"
as_user AGENTRUN_REQUIRE_CAPS=1 AGENTRUN_TEST_BIN="$out/agentrun" AGENTRUN_DOCKER_TEST_PROBE="$out/probe" \
	AGENTRUN_DOCKER_TEST_HOST="unix://$sock" AGENTRUN_DOCKER_TEST_IMAGE="sha256:$id" \
	"$out/docker.test" -test.v "${args[@]}"

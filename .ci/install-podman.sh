#!/usr/bin/env bash
# Set up a container engine for the docker sandbox backend's tests, as root,
# idempotently: install Debian's podman (with runc: Debian's default runtime
# does not start containers on these machines), configure it (cgroupfs, no
# journald, explicit nofile/nproc ulimits), start its Docker-compatible API
# on /run/podman/podman.sock, and build the test image from Debian packages
# (there is no registry to pull from): busybox-static for the tools the
# conformance suite runs and bash-static for its TCP check, nothing else.
#
# It prints, on stdout and nothing else, the variables the tests read:
#   eval "$(bash .ci/install-podman.sh)"
# Progress goes to stderr.
set -euo pipefail

# AGENTRUN_PODMAN_SOCK serves the API elsewhere (default: podman's rootful socket).
sock=${AGENTRUN_PODMAN_SOCK:-/run/podman/podman.sock}
tag=localhost/agentrun-test:busybox
log() { echo "install-podman: $*" >&2; }

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
[ -x /bin/busybox ] || need+=(busybox-static)
[ -x /bin/bash-static ] || need+=(bash-static)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
	log "installing ${need[*]}"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

# A drop-in, so that a machine's own containers.conf stays as it is.
mkdir -p /etc/containers/containers.conf.d
cat >/etc/containers/containers.conf.d/50-agentrun-ci.conf <<'EOF'
# Written by agentrun's .ci/install-podman.sh.
[containers]
# These machines' podman refuses to start a container without them.
default_ulimits = ["nofile=8192:8192", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF

ping() { curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; }
pidfile=$(dirname "$sock")/agentrun-podman-service.pid
start_service() {
	log "starting the podman API on $sock"
	# Not in the caller's directory: the service and its conmons keep it
	# as their working directory (conmon writes a file "oom" there when a
	# container is killed for memory).
	cd /
	mkdir -p "$(dirname "$sock")"
	rm -f "$sock"
	setsid nohup podman system service --time=0 "unix://$sock" >/var/log/agentrun-podman.log 2>&1 </dev/null &
	echo $! >"$pidfile"
	for _ in $(seq 100); do
		ping && break
		sleep 0.1
	done
	ping || { log "the podman API did not come up:"; tail -20 /var/log/agentrun-podman.log >&2; exit 1; }
}
# stop_service ends the service serving $sock: the one this script started
# (its pid file), else the one started by hand on this socket.
stop_service() {
	local pids=""
	[ -f "$pidfile" ] && pids=$(cat "$pidfile")
	[ -n "$pids" ] && kill -0 "$pids" 2>/dev/null || pids=$(pgrep -f "^podman system service .*unix://$sock\$" || true)
	[ -n "$pids" ] || return 0
	log "stopping the stale podman API (pid $pids)"
	kill $pids 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 $pids 2>/dev/null || break
		sleep 0.1
	done
	kill -9 $pids 2>/dev/null || true
	rm -f "$pidfile"
}
ping || start_service

# The image's revision, in a label: a machine with an older one builds it
# again (revision 2: the root directory is 0755, so that a container user
# other than root, as on rootless Podman, can reach the mounts).
revision=2
have=$(podman image inspect --format '{{index .Labels "agentrun.test-image"}}' "$tag" 2>/dev/null || true)
if [ "$have" != "$revision" ]; then
	log "building $tag from busybox-static and bash-static"
	root=$(mktemp -d)
	chmod 755 "$root"
	trap 'rm -rf "$root"' EXIT
	mkdir -p "$root/bin" "$root/usr/bin" "$root/etc" "$root/tmp" "$root/workspace"
	cp /bin/busybox "$root/bin/busybox"
	cp /bin/bash-static "$root/bin/bash"
	for a in $(/bin/busybox --list); do
		[ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\n' >"$root/etc/group"
	chmod 1777 "$root/tmp"
	tar -C "$root" -c . | podman import --quiet --change "LABEL=agentrun.test-image=$revision" - "$tag" >&2
fi
id=$(podman image inspect --format '{{.Id}}' "$tag")

# api ISSUE METHOD PATH [BODY]: one call to the engine's API, its body on
# stdout; fails on an HTTP error or after 30 s.
api() {
	curl -fsS --max-time 30 --unix-socket "$sock" -X "$1" -H 'Content-Type: application/json' \
		${3:+--data "$3"} "http://d/v1.41$2"
}
# can_run: the API starts a container of the test image and sees it exit 0.
# A service that answers _ping can still be unable to start one (it fails
# with 'write child: broken pipe', or hangs) after the machine's runtime
# state changed under it; only a restart brings it back.
can_run() {
	local c status
	c=$(api POST "/containers/create?name=agentrun-ci-probe-$$" \
		"{\"Image\":\"sha256:$id\",\"Entrypoint\":[\"/bin/true\"],\"Cmd\":[],\"HostConfig\":{\"NetworkMode\":\"none\"}}" |
		sed -n 's/.*"Id":"\([0-9a-f]*\)".*/\1/p') || return 1
	[ -n "$c" ] || return 1
	status=$(api POST "/containers/$c/start" >/dev/null && api POST "/containers/$c/wait" |
		sed -n 's/.*"StatusCode":\([0-9]*\).*/\1/p') || status=""
	api DELETE "/containers/$c?force=true" >/dev/null 2>&1 || true
	[ "$status" = 0 ]
}
if ! can_run; then
	log "the podman API answers but cannot run a container: restarting it"
	stop_service
	start_service
	can_run || { log "the restarted podman API cannot run a container either:"; tail -20 /var/log/agentrun-podman.log >&2; exit 1; }
fi
log "test image $tag is sha256:$id"
echo "export AGENTRUN_DOCKER_TEST_HOST=unix://$sock"
echo "export AGENTRUN_DOCKER_TEST_IMAGE=sha256:$id"

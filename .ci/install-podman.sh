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

sock=/run/podman/podman.sock
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
if ! ping; then
	log "starting the podman API on $sock"
	mkdir -p "$(dirname "$sock")"
	rm -f "$sock"
	setsid nohup podman system service --time=0 "unix://$sock" >/var/log/agentrun-podman.log 2>&1 </dev/null &
	for _ in $(seq 100); do
		ping && break
		sleep 0.1
	done
	ping || { log "the podman API did not come up:"; tail -20 /var/log/agentrun-podman.log >&2; exit 1; }
fi

if ! podman image exists "$tag"; then
	log "building $tag from busybox-static and bash-static"
	root=$(mktemp -d)
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
	tar -C "$root" -c . | podman import --quiet - "$tag" >&2
fi
id=$(podman image inspect --format '{{.Id}}' "$tag")
log "test image $tag is sha256:$id"
echo "export AGENTRUN_DOCKER_TEST_HOST=unix://$sock"
echo "export AGENTRUN_DOCKER_TEST_IMAGE=sha256:$id"

// Package docker is the container sandbox backend: each sandbox is one
// container, made and driven through the Docker Engine API (Docker, or
// Podman's compatible API) with the moby client, never a CLI.
//
// The engine is DOCKER_HOST, else the first existing of
// /var/run/docker.sock, $XDG_RUNTIME_DIR/podman/podman.sock and
// /run/podman/podman.sock; the API version is negotiated. It must be on
// this machine (a unix socket): the workspace, HOME, the runner binary and
// the sockets are bind mounts of host paths.
//
// The image is named by digest (REF@sha256:..., or the engine's image id);
// a tag is taken only when the user's config pins it to a digest
// (ResolveImage). Nothing is pulled: an image that is not on the engine is
// a preflight error. The image needs no shell and no libc for the runner:
// the entry point is the agentrun binary itself (a static build,
// CGO_ENABLED=0), bind-mounted read-only at /.agentrun/agentrun and run as
// "__docker init" (pid 1: it checks it holds no capability, has
// no_new_privs and a read-only root, then starts "__docker serve", the
// runner, and reaps every orphan). What the agent and the checks run
// (git, a toolchain, sh) comes from the image.
//
// The container: --network none (loopback only), a read-only root, every
// capability dropped, no-new-privileges, the host user's uid:gid (keep-id
// on rootless Podman), private pid/ipc/uts namespaces, tmpfs /tmp with a
// size, memory (no swap), CPUs, pids and nofile/nproc/fsize/core ulimits.
// Mounted from the host: the workspace at /workspace and HOME at
// /home/agent (read-write), the runner binary, the host's socket the
// runner dials (read-only, at /.agentrun/runner.sock), the egress proxy's
// and the model gateway's sockets (read-only, at /.agentrun/egress.sock
// and gateway.sock; the runner bridges them to 127.0.0.1:3128 and :3129),
// and the named read-only paths. No other host path.
//
// The runner serves the same protocol as in every backend, on a
// connection it dials out to the host (link.go): the host listens in the
// state dir, which only the host user can write, and keeps a connection
// only once it has sent the run's random token, which the init and the
// runner hold in non-dumpable memory. The agent runs as the runner's uid
// and can connect to that socket as well, but it cannot replace it (a
// read-only mount on a read-only root), listen in its place, or learn the
// token, so nothing it does is taken for the runner.
//
// Enforced is read back from the engine (ContainerInspect, Info) and says
// which features the inside checked itself. Disk: /tmp is a tmpfs with a
// size and each file is bounded (RLIMIT_FSIZE); the workspace, HOME and
// /tmp together are sampled against the bound (internal/sandbox/diskwatch,
// as in native) and the container is killed past it.
//
// Every container carries the labels agentrun.run (the run id),
// agentrun.repo and agentrun.owner; Destroy removes it; Sweep removes the
// containers of runs that are no longer active, and only ours.
//
// It must never: fall back to less isolation (an engine that does not
// apply what was asked fails Start), pull an image during a run, mount a
// host path other than those above, or touch a container without its
// labels.
package docker

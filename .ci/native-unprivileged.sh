#!/bin/sh
# Run the native sandbox's tests, and the end-to-end tests of the model
# gateway and the real agent CLIs in it, as an unprivileged user (user
# namespaces), with every capability skip turned into a failure. Run as
# root from the module root: .ci/native-unprivileged.sh [go test flags for
# the native package, e.g. -test.run X]
set -eu

user=${AGENTRUN_CI_USER:-agentrun-ci}
out=$(mktemp -d /tmp/agentrun-ci-XXXXXX)
trap 'rm -rf "$out"' EXIT
chmod 755 "$out"

if ! id "$user" >/dev/null 2>&1; then
	useradd --system --create-home --shell /bin/sh "$user"
fi

go test -c -race -o "$out/native.test" ./internal/sandbox/native
go test -c -race -o "$out/e2e.test" ./internal/e2e
CGO_ENABLED=0 go build -o "$out/agentrun" ./cmd/agentrun
chmod 755 "$out/native.test" "$out/e2e.test" "$out/agentrun"

uid=$(id -u "$user")
gid=$(id -g "$user")
home=$(getent passwd "$user" | cut -d: -f6)
cd "$out"
as_user() {
	setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env -- \
		env HOME="$home" PATH=/usr/local/go/bin:/usr/bin:/bin TMPDIR=/tmp \
		AGENTRUN_REQUIRE_CAPS=1 AGENTRUN_TEST_BIN="$out/agentrun" \
		${AGENTRUN_TEST_CLIS:+AGENTRUN_TEST_CLIS="$AGENTRUN_TEST_CLIS"} "$@"
}
as_user "$out/native.test" -test.count=1 "$@"
echo "== gateway, agent CLI, read-only path, start-ahead and inherited-descriptor end-to-end tests as an unprivileged user"
as_user "$out/e2e.test" -test.count=1 -test.run 'TestGateway|TestEgressThroughCompanyProxy|TestAllowHostLoopback|TestProfilesEndToEnd|TestProfilesRunShellCommands|TestKeyNeverOnDisk|TestProfileSessionContinues|TestProfileBudget|TestProfileStopped|TestProfileClaudeSubscription|TestProfileFindsItsHelper|TestProfileWarmHome|TestReadOnly|TestWarmInit|TestRunTakesWarm|TestSubmitterDescriptors' -test.v

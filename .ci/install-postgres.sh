#!/usr/bin/env bash
# Starts a private PostgreSQL server for the tests of the SQL run store and
# coordinator, from Debian's packages, and prints its URL on stdout (and
# nothing else there):
#
#	export AGENTRUN_TEST_POSTGRES=$(.ci/install-postgres.sh)
#
# Idempotent: installs postgresql only if no server binaries are there,
# makes the cluster only once, starts it only if it is not running, and
# creates the role and the database only if they are missing. The server
# listens on a unix socket in its own directory and on no TCP port, so it
# neither meets nor disturbs the distribution's own cluster. Trust
# authentication on that socket is enough for a test server: only local
# users who can reach the directory can connect.
set -euo pipefail

dir=${AGENTRUN_PG_DIR:-/tmp/agentrun-pg}
port=${AGENTRUN_PG_PORT:-5432} # names the socket file only
role=agentrun
db=agentrun

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
bin=$(bindir)
if [[ -z $bin || ! -x $bin/initdb ]]; then
	echo "== installing postgresql" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
	bin=$(bindir)
fi

# initdb and the server refuse to run as root: as root they run as the
# postgres user the package made; anyone else runs them as themselves.
owner=$(id -un)
as_owner() { "$@"; }
if [[ $(id -u) == 0 ]]; then
	owner=postgres
	as_owner() { runuser -u postgres -- "$@"; }
fi

mkdir -p "$dir"
chown "$owner" "$dir"
chmod 755 "$dir"
data=$dir/data
if [[ ! -s $data/PG_VERSION ]]; then
	echo "== initdb $data" >&2
	rm -rf "$data"
	as_owner "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >&2
	cat >>"$data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
max_connections = 200
EOF
fi
ready() { as_owner "$bin/pg_isready" -q -h "$dir" -p "$port"; }
if ! ready; then
	# A server killed without a clean stop (the end of a CI run) leaves its
	# pid file, and for a moment its children, behind: stop whatever is
	# left of it first.
	as_owner "$bin/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
	echo "== starting postgresql in $data" >&2
	as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >&2
	ready
fi

psql_su() { as_owner psql -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtAX "$@"; }
if [[ -z $(psql_su -c "SELECT 1 FROM pg_roles WHERE rolname = '$role'") ]]; then
	psql_su -c "CREATE ROLE $role LOGIN" >&2
fi
if [[ -z $(psql_su -c "SELECT 1 FROM pg_database WHERE datname = '$db'") ]]; then
	psql_su -c "CREATE DATABASE $db OWNER $role" >&2
fi

echo "postgres://$role@/$db?host=$dir&port=$port&sslmode=disable"

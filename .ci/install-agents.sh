#!/usr/bin/env bash
# Installs the real agent CLIs the profile tests run, and the real MCP
# client the MCP server's tests drive (the MCP inspector's CLI), each at a
# pinned version under its own prefix outside /usr
# ($AGENTRUN_TEST_CLIS/<profile>, default /opt/agentrun-ci), so the tests
# also prove that a CLI installed anywhere is made visible inside the
# sandbox. Idempotent: a prefix that already holds the pinned version is
# kept.
#
# crush is not here: its npm package downloads its binary from outside the
# registries at install time, and the Go module proxy does not serve it.
# The inspector is its v1 CLI: v2 needs Node.js 22, newer than the
# machines' 20 (and Debian's 18).
set -euo pipefail
root=${AGENTRUN_TEST_CLIS:-/opt/agentrun-ci}

# profile  package@version  binary
agents=(
	"claude   @anthropic-ai/claude-code@2.1.337 claude"
	"codex    @openai/codex@0.171.0             codex"
	"gemini   @google/gemini-cli@0.61.0         gemini"
	"qwen     @qwen-code/qwen-code@0.24.4       qwen"
	"opencode opencode-ai@1.18.33               opencode"
	"mcp-inspector @modelcontextprotocol/inspector-cli@1.0.3 mcp-inspector-cli"
)

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
	echo "== installing nodejs and npm"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi

pids=()
for a in "${agents[@]}"; do
	read -r name pkg bin <<<"$a"
	prefix=$root/$name
	if [[ -x $prefix/bin/$bin && "$(cat "$prefix/.pinned" 2>/dev/null)" == "$pkg" ]]; then
		echo "== $name: $pkg already installed"
		continue
	fi
	(
		rm -rf "$prefix"
		mkdir -p "$prefix"
		log=$(mktemp)
		if ! npm install -g --no-fund --no-audit --loglevel=error --prefix "$prefix" "$pkg" >"$log" 2>&1; then
			echo "== $name: npm install $pkg failed" >&2
			cat "$log" >&2
			exit 1
		fi
		rm -f "$log"
		test -x "$prefix/bin/$bin"
		echo "$pkg" >"$prefix/.pinned"
		echo "== $name: installed $pkg"
	) &
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p"
done

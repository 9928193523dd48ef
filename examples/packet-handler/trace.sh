#!/usr/bin/env bash
# Builds handler.c, runs it under Valgrind's lackey (every instruction and data access) and cuts
# the run into one trace per call of handle_packet: traces/traces.ptrace and traces/regions.toml,
# which handler.toml replays. Without valgrind the committed traces/ are kept as they are.
#
#   bash examples/packet-handler/trace.sh [OUT_DIR]    (default: examples/packet-handler/traces)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/traces}"
# steer on PATH, else the repository's own install (scripts/setup.sh).
steer="${STEER:-$(command -v steer || echo "$here/../../.venv/bin/steer")}"
if ! command -v valgrind >/dev/null; then
  echo "trace.sh: valgrind not found (Debian/Ubuntu: apt-get install valgrind); keeping the committed $here/traces" >&2
  exit 0
fi
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
# No PIE: the symbols nm lists are the addresses the run uses.
cc -O2 -g -no-pie -Wall -Wextra -o "$build/handler" "$here/handler.c"
valgrind --tool=lackey --trace-mem=yes --log-file="$build/handler.lackey" "$build/handler"
"$steer" trace-import "$build/handler.lackey" --binary "$build/handler" --function handle_packet \
  --regions "$here/regions.toml" --packet-bytes 1500 -o "$out"

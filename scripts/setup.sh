#!/usr/bin/env bash
# Creates .venv at the repository root, installs the pinned tools (and Valgrind where it can), and builds
# steer into it.
#
# The extension is built with profile-guided optimisation (docs/speed.md): an instrumented build
# runs scripts/pgo_train.py, and the build installed is optimised with the counts that run left.
# Both are skipped while the sources and the installed extension are those of the last such build.
# STEER_PGO=0 installs a plain release build instead (faster to build, slower to run).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
export VIRTUAL_ENV="$PWD/.venv"
# The traced example (examples/packet-handler/trace.sh, run by the tests) runs its C handler under
# Valgrind's lackey: Debian's package, installed where this can (root with apt-get).
if ! command -v valgrind >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
  else
    echo "setup: valgrind not found (apt-get install valgrind); the traced example keeps its committed traces" >&2
  fi
fi
extension=python/steer/_core.abi3.so

if [ "${STEER_PGO:-1}" = 0 ]; then
  .venv/bin/maturin develop --release --quiet
  exit 0
fi

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools >/dev/null 2>&1 || true
fi
if [ ! -x "$profdata" ]; then
  echo "setup: llvm-profdata not found (rustup component add llvm-tools); building without profile-guided optimisation" >&2
  .venv/bin/maturin develop --release --quiet
  exit 0
fi

sources=$( (rustc -vV; find crates Cargo.toml Cargo.lock pyproject.toml scripts/pgo_train.py -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16)
stamp=target/pgo/installed
if [ -f "$stamp" ] && [ -f "$extension" ] && [ "$(cat "$stamp")" = "$sources $(sha256sum < "$extension" | cut -c1-16)" ]; then
  exit 0
fi
raw="$PWD/target/pgo/raw"
rm -rf "$raw"
echo "setup: building steer's extension with profile-guided optimisation (about 3 minutes)" >&2
RUSTFLAGS="-Cprofile-generate=$raw" .venv/bin/maturin develop --profile dist --quiet --target-dir target/pgo/instrumented
rm -rf "$raw"  # counts left by the build's own proc macros and build scripts
.venv/bin/python scripts/pgo_train.py
"$profdata" merge -o "target/pgo/$sources.profdata" "$raw"
RUSTFLAGS="-Cprofile-use=$PWD/target/pgo/$sources.profdata" .venv/bin/maturin develop --profile dist --quiet
echo "$sources $(sha256sum < "$extension" | cut -c1-16)" > "$stamp"

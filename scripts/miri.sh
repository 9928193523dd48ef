#!/usr/bin/env bash
# Miri over the offloading cache's library tests: the wait protocol, copy jobs and the DSA backend
# against its software engine, checked for undefined behaviour, data races and leaks. Installs the
# nightly toolchain's Miri if missing. Tests that need the kernel (NUMA policy, page locations)
# are ignored under Miri, as are topology's parsing tests (safe code, and half of Miri's time);
# file-system tests need isolation off; the DSA engine addresses memory by integer, as the device
# does (permissive provenance).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null
fi
MIRIFLAGS="-Zmiri-permissive-provenance -Zmiri-disable-isolation" \
    cargo +nightly miri test -q -p steer-offload --lib "$@"

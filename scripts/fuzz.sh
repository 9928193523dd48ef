#!/usr/bin/env bash
# Runs every fuzz target for a bounded time (default 60 s each; `scripts/fuzz.sh 300` for longer,
# `scripts/fuzz.sh 60 tph_dump` for one target) and prints executions and crashes per target.
# Crashing inputs land in fuzz/artifacts/TARGET/; once fixed, copy them to fuzz/regressions/TARGET/,
# where the crates' tests replay them.
#
# cargo-fuzz needs nightly flags; the stable toolchain accepts them with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(scenario trace tph_dump lspci_text)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
cargo fuzz build --release >/dev/null
seeds() {
  case $1 in
    scenario) echo ../crates/steer-sim/scenarios ../examples ;;
    trace) echo seeds/trace ;;
    tph_dump | lspci_text) echo ../crates/steer-tph/tests/data ;;
  esac
}
printf '%-14s %12s %16s %8s %s\n' target executions oom/timeout/crash inputs seconds
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target" "artifacts/$target" "regressions/$target"
  log=$(mktemp)
  # shellcheck disable=SC2046
  cargo fuzz run --release "$target" "corpus/$target" $(seeds "$target") "regressions/$target" -- \
    -max_total_time="$seconds" -fork=1 -ignore_crashes=1 -rss_limit_mb=4096 -timeout=10 \
    -artifact_prefix="artifacts/$target/" >"$log" 2>&1 || true
  # fork mode's last status line: "#EXECS: cov: ... oom/timeout/crash: O/T/C time: ..."
  status=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$status")
  failures=$(sed -E 's/.*oom\/timeout\/crash: ([0-9/]+).*/\1/' <<<"$status")
  inputs=$(find "artifacts/$target" -type f | wc -l)
  printf '%-14s %12s %16s %8s %s\n' "$target" "${execs:-?}" "${failures:-?}" "$inputs" "$seconds"
  rm -f "$log"
done

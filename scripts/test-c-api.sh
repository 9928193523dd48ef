#!/usr/bin/env bash
# Builds steer-offload's static library, then the C and C++ examples against it, and runs both.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p steer-offload --release
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
inc=crates/steer-offload/include
lib=target/release/libsteer_offload.a
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I "$inc" crates/steer-offload/examples/c/scan.c "$lib" -lpthread -ldl -lm -o "$out/scan-c"
c++ -std=c++17 -Wall -Wextra -Werror -I "$inc" crates/steer-offload/examples/c/scan.cpp "$lib" -lpthread -ldl -lm -o "$out/scan-cpp"
"$out/scan-c"
"$out/scan-cpp"

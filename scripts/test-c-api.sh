#!/usr/bin/env bash
# Builds the C libraries, then the examples against them, and runs each: steer-offload's C and C++
# examples (static library), and the simulator's C example (steer-capi, static and shared, and as C++).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p steer-offload --release
cargo build -q -p steer-capi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
inc=crates/steer-offload/include
lib=target/release/libsteer_offload.a
cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I "$inc" crates/steer-offload/examples/c/scan.c "$lib" -lpthread -ldl -lm -o "$out/scan-c"
c++ -std=c++17 -Wall -Wextra -Werror -I "$inc" crates/steer-offload/examples/c/scan.cpp "$lib" -lpthread -ldl -lm -o "$out/scan-cpp"
"$out/scan-c"
"$out/scan-cpp"
sim=(-std=c11 -Wall -Wextra -Werror -I crates/steer-capi/include crates/steer-capi/examples/c/placements.c)
cc "${sim[@]}" target/debug/libsteer.a -lpthread -ldl -lm -o "$out/placements-static"
cc "${sim[@]}" target/debug/libsteer.so -Wl,-rpath,"$PWD/target/debug" -o "$out/placements-shared"
# The header also compiles as C++ (the same example, built as C++).
c++ -std=c++17 -Wall -Wextra -Werror -I crates/steer-capi/include -x c++ crates/steer-capi/examples/c/placements.c \
    -x none target/debug/libsteer.a -lpthread -ldl -lm -o "$out/placements-cpp"
"$out/placements-static"
"$out/placements-shared"
"$out/placements-cpp"

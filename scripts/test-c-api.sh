#!/usr/bin/env bash
# Builds the C libraries, then the examples against them, and runs each: steer-offload's C and C++
# examples (static library), and the simulator's C example (steer-capi, static and shared, and as C++).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p steer-offload --release
# The simulator's libraries as its tests build them (a plain build compiles the simulator again,
# without the features the tests' dependencies add); cargo's messages say where they are.
libs=$(cargo test -q -p steer-capi --no-run --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "steer" and not m["profile"]["test"]:
        print(*(f for f in m["filenames"] if f.endswith((".a", ".so"))))
')
read -r static shared <<< "$libs"
[[ $static == *.a && $shared == *.so ]] || { echo "test-c-api: no libsteer.a and .so in cargo's messages: $libs" >&2; exit 1; }
# The whole archive, as the README links it: each kind registers itself in its own module's object,
# which a linker takes from an archive only when something else in that object is used.
whole=(-Wl,--whole-archive "$static" -Wl,--no-whole-archive)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
inc=crates/steer-offload/include
lib=target/release/libsteer_offload.a
# As docs/offload.md links it: the example defines what it needs of POSIX itself.
cc -std=c11 -Wall -Wextra -Werror -I "$inc" crates/steer-offload/examples/c/scan.c "$lib" -lpthread -ldl -lm -o "$out/scan-c"
c++ -std=c++17 -Wall -Wextra -Werror -I "$inc" crates/steer-offload/examples/c/scan.cpp "$lib" -lpthread -ldl -lm -o "$out/scan-cpp"
"$out/scan-c"
"$out/scan-cpp"
sim=(-std=c11 -Wall -Wextra -Werror -I crates/steer-capi/include crates/steer-capi/examples/c/placements.c)
cc "${sim[@]}" "${whole[@]}" -lpthread -ldl -lm -o "$out/placements-static"
cc "${sim[@]}" "$shared" -Wl,-rpath,"$(dirname "$shared")" -o "$out/placements-shared"
# The header also compiles as C++ (the same example, built as C++).
c++ -std=c++17 -Wall -Wextra -Werror -I crates/steer-capi/include -x c++ crates/steer-capi/examples/c/placements.c \
    -x none "${whole[@]}" -lpthread -ldl -lm -o "$out/placements-cpp"
"$out/placements-static"
"$out/placements-shared"
"$out/placements-cpp"

#!/usr/bin/env bash
# Mutation testing of one module of the Python layer with mutmut 2.5.1, installed in its own
# environment under target/ (apart from the project's pinned .venv, which runs the tests). It
# mutates a clone of HEAD, never the working tree: commit first. A mutant counts as killed when
# the named tests fail in any way, an import error or a run past the time bound included (mutmut
# 2 alone counts only pytest's exit code 1, so a mutant that breaks the import "survives").
# Prints the count per outcome, then each survivor's diff.
#
#   scripts/mutate_python.sh MODULE TEST...       e.g. scripts/mutate_python.sh sweep tests/test_sweep.py
#
# TEST is a file or a test id, in the order to run them: fast tests first make killed mutants
# cheap. STEER_MUTANT_SECONDS bounds one run of the tests (default 120).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 MODULE TEST... (a module of python/steer, without .py)" >&2
    exit 2
fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
module=$1
shift
if [ ! -f "$repo/python/steer/$module.py" ]; then
    echo "$0: python/steer/$module.py: no such module" >&2
    exit 2
fi
tools="$repo/target/mutmut"
if [ ! -x "$tools/bin/mutmut" ]; then
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q mutmut==2.5.1
fi
clone=$(mktemp -d)
trap 'rm -rf "$clone"' EXIT
git clone -q "$repo" "$clone"
cp "$repo"/python/steer/_core*.so "$clone/python/steer/"
cat >"$clone/run-tests" <<EOF
#!/usr/bin/env bash
timeout ${STEER_MUTANT_SECONDS:-120} "$repo/.venv/bin/python" -m pytest -x -q -p no:cacheprovider "\$@" >/dev/null 2>&1 || exit 1
EOF
chmod +x "$clone/run-tests"
cd "$clone"
export PYTHONPATH="$clone/python"
status=0
"$tools/bin/mutmut" run --paths-to-mutate "python/steer/$module.py" --runner "./run-tests $*" --no-progress \
    >mutmut.log 2>&1 || status=$?
if ((status & 1)); then # mutmut's fatal error, as when the tests fail unmutated
    echo "$0: mutmut could not run; its log:" >&2
    cat mutmut.log >&2
    exit 1
fi
PATH="$tools/bin:$PATH" "$tools/bin/python" - <<'EOF'
import sqlite3
import subprocess

db = sqlite3.connect(".mutmut-cache")
counts = db.execute("SELECT status, count(*) FROM Mutant GROUP BY status").fetchall()
print(", ".join(f"{n} {status}" for status, n in counts) or "no mutants")
left = db.execute("SELECT id FROM Mutant WHERE status NOT IN ('ok_killed', 'ok_suspicious') ORDER BY id").fetchall()
db.close()  # `mutmut show` writes to the cache
for (mutant,) in left:
    shown = subprocess.run(["mutmut", "show", str(mutant)], capture_output=True, text=True).stdout
    print(f"\nmutant {mutant}:\n" + shown[shown.find("@@"):].rstrip())
EOF

#!/usr/bin/env bash
# Creates .venv at the repository root, installs the pinned tools, and builds steer into it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release --quiet

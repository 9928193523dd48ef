import subprocess
import sys

import pytest


@pytest.fixture
def steer_cli():
    """Runs the `steer` command in a subprocess; returns the CompletedProcess."""

    def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "steer", *args], capture_output=True, text=True, cwd=cwd, timeout=600
        )

    return run

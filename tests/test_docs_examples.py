"""Every example in the README and docs/ runs as written: the Python blocks, and the command lines
of the shell blocks (a ```sh block's every line; in a block without a language, the lines that
start with `steer `). A command too slow or too dependent on the host for CI is listed in SKIPPED
with the reason, and shows as a skipped test."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Names an example uses without defining them, as its text says where they come from.
GIVEN = {"trace-format.md": {"accesses": [(False, 0x1000), (True, 0x1040)]}}

BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
# The trailing comment a command line carries in the docs.
COMMENT = re.compile(r"\s+#.*$")


def blocks(doc: Path, language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(doc.read_text()) if lang == language]


# Files the shell examples name as the reader's own, as the docs describe them: a scenario (the
# README points at rx-default's file as the example of one), a din trace (docs/trace-format.md's
# example), a config-space dump or lspci output (a real one, from steer tph's fixtures) and a fit
# file (docs/fit.md's).
GIVEN_FILES = {
    "my.toml": (ROOT / "crates/steer-sim/scenarios/rx-default.toml").read_text(),
    "app.din": next(b for b in blocks(ROOT / "docs/trace-format.md", "") if b.startswith("# hot loop")),
    "nic.lspci": (ROOT / "crates/steer-tph/tests/data/real/e810-lspci-vv.txt").read_text(),
    "my-fit.toml": blocks(ROOT / "docs/fit.md", "toml")[0],
}

CALIBRATES_FIRST = "measures this host, after a `steer calibrate --quick` when there is no calibration (a minute)"
SYNOPSIS = "a synopsis, not a command: its words in capitals and brackets stand for the reader's values"
READS_NICS = (
    "reads this host's NICs (a host without one: exit 2); tests/test_host_scenario.py writes and runs"
    " the scenarios of this host and of each captured tree, and compares one"
)
# Commands not run, each with the reason.
SKIPPED = {
    "steer scenario --from-host -o here.toml": READS_NICS,
    "steer scenario --from-host --cpus 1 -o here.toml": READS_NICS,
    "steer scenario --from-host --pid 1234 -o here.toml": READS_NICS,
    "steer scenario --from-host --root DIR": SYNOPSIS,
    "steer compare here.toml": READS_NICS,
    "./scripts/setup.sh && .venv/bin/steer reproduce": "builds and installs the extension (minutes) and runs every"
    " published experiment; CI installs with the same script (.ci/run), and tests/test_reproduce*.py run reproduce",
    "bash .ci/run": "the CI command, which runs this test",
    "sudo lspci -vvxxxx | steer tph - --json": "needs root and this host's PCI devices; `steer tph nic.lspci` runs"
    " the same decoder on a real dump",
    "steer sweep examples/rx-placement-sweep.toml -o results/rx --executor ray [--address HOST:PORT]": "a synopsis"
    " ([--address] is optional) that needs Ray, an optional extra; tests/test_sweep.py runs the Ray executor",
    "steer trace-import run.lackey --binary ./your-program --function handle_packet --regions regions.toml -o traces": (
        "the reader's own program and its run; tests/test_trace_workload.py imports the example's"
    ),
    "steer calibrate": "measures this host for about 90 s",
    "steer calibrate --quick": "measures this host (45 s on two busy cores); tests/test_calibrate.py runs calibrate"
    " and validate end to end with tiny working sets",
    "steer calibrate --plot cal.png --json cal.json": "measures this host for about 90 s",
    "steer validate": CALIBRATES_FIRST,
    "steer validate --quick --json -": CALIBRATES_FIRST,
    "steer doctor --pid 1234": "1234 stands for a running process's id (no such process: exit 2)",
    "steer doctor --json [FILE]": SYNOPSIS,
    "steer doctor --root DIR": SYNOPSIS,
    "scripts/fuzz.sh": "a fuzzing campaign of 60 s a target; needs cargo-fuzz",
    "scripts/fuzz.sh 600 trace": "a fuzzing campaign of 10 minutes; needs cargo-fuzz",
    ".venv/bin/python scripts/fuzz_runs.py --cases 20000": "a fuzzing campaign of about 2 minutes;"
    " tests/test_fuzz_runs.py runs the script on a few cases",
    ".venv/bin/python scripts/fuzz_runs.py --cases 2000 --accepted": "a fuzzing campaign (15 s);"
    " tests/test_fuzz_runs.py runs the script on a few cases",
    ".venv/bin/python scripts/fuzz_runs.py --structural --cases 20000": "a fuzzing campaign of about 2.5 minutes;"
    " tests/test_fuzz_runs.py runs the script on a few cases",
    "CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true"
    " CARGO_TARGET_DIR=target/checked .venv/bin/maturin develop --release -m crates/steer-python/Cargo.toml": "builds"
    " the extension again with overflow checks (minutes) and installs it in place of the tested one",
    "steer sweep SWEEP_FILE [-o DIR] [--executor local|ray] [--address ADDR] [--workers N]"
    " [--set KEY=VALUE ...] [--skip-failed] [--keep-going] [--dry-run] [--quiet]": SYNOPSIS,
    "steer plot RESULTS --kind dram|fills|latency|metric [-o FILE.png|FILE.svg] [--by COLUMN]"
    " [--x PARAM] [--y COLUMN ...] [--field PATH] [--dc-fills] [--where KEY=VALUE ...]": SYNOPSIS,
}


def command_lines(language: str, body: str) -> list[str]:
    """A block's commands: continuation lines joined, trailing comments dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", body)
    if not language:
        # A synopsis goes on in indented lines of options.
        joined = re.sub(r"\n\s+(?=\[)", " ", joined)
    lines = [COMMENT.sub("", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line and (language == "sh" or line.startswith("steer "))]


def shell_blocks():
    """(doc, line of the block, its commands) for every shell block with a command."""
    for doc in DOCS:
        text = doc.read_text()
        for match in BLOCK.finditer(text):
            language, body = match.groups()
            if language not in ("sh", ""):
                continue
            commands = command_lines(language, body)
            if commands:
                yield doc.name, text[: match.start()].count("\n") + 1, commands


SHELL_BLOCKS = list(shell_blocks())


def examples():
    for doc in DOCS:
        for i, block in enumerate(blocks(doc, "python")):
            yield pytest.param(doc.name, block, id=f"{doc.name}-{i}")


@pytest.mark.parametrize(("doc", "code"), list(examples()))
def test_example_runs(doc, code, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, doc, "exec"), {"__name__": "__example__", **GIVEN.get(doc, {})})


@pytest.mark.parametrize(
    "commands",
    [
        pytest.param([c for c in commands if c not in SKIPPED], id=f"{doc}:{line}")
        for doc, line, commands in SHELL_BLOCKS
        if not set(commands) <= SKIPPED.keys()
    ],
)
def test_shell_block_runs(commands, tmp_path):
    """Each command of the block not in SKIPPED, in order, in one directory holding the repository's
    examples and fit files and the GIVEN_FILES: a command may use what an earlier one wrote."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "fits", tmp_path / "fits")
    for name, text in GIVEN_FILES.items():
        (tmp_path / name).write_text(text)
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "steer").exists(), "the steer command is installed beside this Python"
    environment = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        # Nothing a command does may reach the user's own calibration.
        "STEER_HOST_CALIBRATION": str(tmp_path / "host.toml"),
    }
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize(
    ("command", "reason"),
    [pytest.param(c, r, id=c[:60]) for c, r in SKIPPED.items()],
)
def test_skipped_command(command, reason):
    """Each skipped command is still in the docs (else its entry is stale), and shows as skipped."""
    assert any(command in commands for _, _, commands in SHELL_BLOCKS), f"not in the docs any more: {command}"
    pytest.skip(reason)


def test_shell_commands_are_found():
    """The extraction finds the commands of the blocks, joined and without their comments."""
    found = {command for _, _, commands in SHELL_BLOCKS for command in commands}
    assert {
        "steer platforms turin-9655 --set l2.ways=8",
        "steer compare ddio-l2fwd --placement memory,ddio,sdci",
        "steer doctor --cpus 0-1",
        "steer report results/rx-placement -o rx-placement.html",
    } <= found
    assert not any(command.startswith("steer:") or "#" in command for command in found)


def test_docs_fit_md_counts_and_names_every_fit_file():
    """docs/fit.md says how many fit files the repository's calibration has, and describes each."""
    text = (ROOT / "docs/fit.md").read_text()
    files = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "fits").glob("*.toml"))
    numbers = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    assert f"one of the {numbers[len(files) - 1]} fit files in `fits/`" in text
    assert [f for f in files if f"`{f}`" not in text] == []

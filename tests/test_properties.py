"""Property tests (Hypothesis) of the command line's argument and `--set` handling: whatever a
user types gets a result or one clear line, never a traceback or a crash of the core."""

import contextlib
import io
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import steer
from steer.cli import main

# Keys a user might set: declared parameters, real key paths, near misses and nonsense.
KEYS = st.one_of(
    st.sampled_from(
        [
            "offered_gbps",
            "placement",
            "ring",
            "packet_bytes",
            "sim.measure_us",
            "sim.warmup_us",
            "sim.max_runahead_ns",
            "seed",
            "platform.preset",
            "platform.l2.ways",
            "platform.l1d.size_kib",
            "platform.l3.way_masks",
            "devices.0.queues.0.count",
            "devices.0.queues.0.ring_entries",
            "devices.0.placement.policy",
            "devices.1.name",
            "workloads.0.cpu",
            "workloads.5.kind",
            "name",
            "params",
            "sim",
            "ofered_gbps",
            "a..b",
            ".",
            "",
        ]
    ),
    st.text(min_size=0, max_size=12),
)
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["inf", "-inf", "nan", "1e400", "true", '"l2"', "l2", "[1, 2]", "{a = 1}", '"${x}"', "", "="]),
    st.text(max_size=16),
)
# STEER_HYPOTHESIS=long (scripts/fuzz.sh) tries many more cases than a test run does.
settings.register_profile("test", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("STEER_HYPOTHESIS", "test"))


@given(st.lists(st.tuples(KEYS, VALUES), max_size=3))
def test_any_set_resolves_or_fails_in_one_line(assignments):
    overrides = [f"{key}={value}" for key, value in assignments]
    try:
        resolved = steer.resolve("rx-default", overrides)
    except steer.ScenarioError as error:
        message = str(error)
        assert message and "\n" not in message, message
        return
    # What resolved loads back to itself.
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "resolved.toml"
        path.write_text(resolved)
        assert steer.resolve(path) == resolved


COMMANDS = st.sampled_from(["resolve", "stats", "kinds", "platforms", "scenarios", "tph", "run", "sweep", "report"])
TOKENS = st.one_of(
    st.sampled_from(
        [
            "rx-default",
            "eflatency",
            "turin-9655",
            "--set",
            "--json",
            "--quiet",
            "--allow-large",
            "--markdown",
            "-",
            "placement",
            "workload",
            "sim.measure_us=-1",
            "offered_gbps=nan",
            "/nonexistent/file.toml",
            "/dev/null",
            "--bogus",
        ]
    ),
    st.text(min_size=1, max_size=10).filter(lambda t: "\x00" not in t),
)


@given(COMMANDS, st.lists(TOKENS, max_size=4))
def test_any_command_line_exits_0_or_2_without_a_traceback(command, tokens):
    if command in ("run", "sweep", "report") and tokens and not tokens[0].startswith("/"):
        tokens = ["/nonexistent/file.toml", *tokens]  # bad input only: no simulation runs here
    out, err = io.StringIO(), io.StringIO()
    # In a directory of its own: `--json TEXT` writes a file named TEXT.
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.MonkeyPatch.context() as patch,
        tempfile.TemporaryDirectory() as directory,
    ):
        patch.chdir(directory)
        patch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
        try:
            code = main([command, *tokens])
        except SystemExit as exit:  # argparse: usage errors exit 2, --help exits 0
            code = exit.code
    assert code in (0, 2), (command, tokens, code, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert any(line.startswith("steer") and "error: " in line for line in err.getvalue().split("\n")), (
            err.getvalue()
        )

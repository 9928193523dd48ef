"""The `trace` workload and `steer trace-import`: a user's own handler, traced, cut per packet and
replayed under each placement (docs/your-code.md)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from steer import api
from steer.trace_import import Region, cut, lackey_records

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/packet-handler"

# Two calls of a handler at 0x402000 from a call instruction at 0x401000 (5 bytes: returns to
# 0x401005), each touching the packet buffer at 0x601000, the first also a counter at 0x700040
# and the stack (in no region). Accesses outside a call are not any packet's.
LACKEY = """\
==1== Lackey, an example Valgrind tool
I  00401000,5
I  00402000,3
 L 00601000,8
I  00402003,4
 M 00700040,4
 S 7ff000010,8
I  00402007,1
I  00401005,2
 L 00601000,8
I  00401000,5
I  00402000,3
 S 00601010,2
I  00401005,2
==1== exit
"""
REGIONS = """\
[[regions]]
name = "buf"
kind = "packet"
start = 0x601000
bytes = 2048

[[regions]]
name = "counters"
kind = "state"
start = 0x700000
bytes = 4096
"""
# The two per-packet traces LACKEY holds, at 0.5 cycles an instruction: each packet's size is
# the extent of the buffer it touched.
EXPECTED = """\
# steer per-packet traces (docs/your-code.md), written by steer trace-import
packet 8
C 0.5
L 601000 8
C 0.5
M 700040 4
C 0.5
packet 18
C 0.5
S 601010 2
"""


@pytest.fixture
def sample(tmp_path):
    (tmp_path / "run.lackey").write_text(LACKEY)
    (tmp_path / "regions.toml").write_text(REGIONS)
    return tmp_path


def test_a_lackey_run_is_cut_at_each_call_and_its_return(sample, steer_cli):
    done = steer_cli(
        "trace-import", "run.lackey", "--range", "402000-402010", "--regions", "regions.toml", "-o", "out", cwd=sample
    )
    assert done.returncode == 0, done.stderr
    assert (sample / "out/traces.ptrace").read_text() == EXPECTED
    assert "start = 0x601000\nbytes = 2048" in (sample / "out/regions.toml").read_text()
    assert done.stdout.startswith("2 per-packet traces (1 to 2 accesses)")
    assert "; 1 accesses outside the regions left out" in done.stdout


def test_a_call_ends_at_the_instruction_after_the_call_not_on_leaving_the_function(sample):
    regions = [Region("buf", "packet", 0x601000, 2048), Region("counters", "state", 0x700000, 4096)]
    # The handler calls a helper at 0x403000 (outside it) which bumps the counter: still this packet's.
    records = [("I", 0x401000, 5), ("I", 0x402000, 5), ("I", 0x403000, 3), ("M", 0x700000, 8), ("I", 0x401005, 1)]
    traces, dropped = cut(records, 0x402000, None, regions, 1.0)
    assert ([t.lines for t in traces], dropped) == ([["C 2", "M 700000 8"]], 0)
    within, _ = cut(records, 0x402000, range(0x402000, 0x402010), regions, 1.0)
    assert within[0].accesses == 0, "with a range, the helper's accesses are outside it"


def test_din_is_read_by_steer_s_trace_reader(sample, steer_cli):
    din = "2 401000 5\n2 402000 3\n0 601000 8\n1 700040 4\n2 401005 2\n"
    (sample / "run.din").write_text(din)
    done = steer_cli(
        "trace-import", "run.din", "--range", "402000-402010", "--regions", "regions.toml", "-o", "out", cwd=sample
    )
    assert done.returncode == 0, done.stderr
    assert (sample / "out/traces.ptrace").read_text().splitlines()[1:] == [
        "packet 8",
        "C 0.5",
        "L 601000 8",
        "S 700040 4",
    ]


@pytest.mark.parametrize(
    ("run", "text", "message"),
    [
        (
            "notes.txt",
            "==1== Lackey\nhello world\n",
            "notes.txt:2: not a line of Valgrind lackey --trace-mem output: `hello world`",
        ),
        ("empty.lackey", "==1== Lackey\n", "empty.lackey: no lackey record (run valgrind --tool=lackey"),
        ("nocall.lackey", "I  00401000,5\n L 00601000,8\n", "nocall.lackey: no call of 402000-402010"),
        (
            "nothing.lackey",
            "I  00401000,5\nI  00402000,3\n S 7ff000010,8\nI  00401005,2\n",
            "nothing.lackey: call 1 of 402000-402010 made no access inside the regions of regions.toml",
        ),
    ],
)
def test_a_run_that_is_not_lackey_or_has_no_packet_is_one_line_and_exit_2(sample, steer_cli, run, text, message):
    (sample / run).write_text(text)
    done = steer_cli(
        "trace-import", run, "--range", "402000-402010", "--regions", "regions.toml", "-o", "out", cwd=sample
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"steer: error: {message}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_lackey_records_skip_valgrind_s_own_lines(sample):
    records = list(lackey_records(str(sample / "run.lackey")))
    assert records[:3] == [("I", 0x401000, 5), ("I", 0x402000, 3), ("L", 0x601000, 8)]
    assert len(records) == 13


# A scenario of the trace workload on the sample's files, on a small preset.
SCENARIO = """\
[platform]
preset = "skylake-sp-6140"
[sim]
warmup_us = 20.0
measure_us = 100.0
[[devices]]
name = "nic0"
placement = { policy = "memory" }
[[devices.queues]]
packet_bytes = 64
offered_gbps = 1.0
consumer_cpu = 1
[[workloads]]
kind = "trace"
cpu = 1
traces = ["traces.ptrace"]
regions = "regions.toml"
"""


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        (
            "packet 64\nL 601000 8\nS dead0000 4\n",
            "workloads.0.traces: traces.ptrace:3: access of 4 B at 0xdead0000 is outside every mapped region",
        ),
        (
            "packet 64\nL 601000 8\npacket 64\nC 5\n",
            "workloads.0.traces: traces.ptrace:3: this packet's trace is empty",
        ),
    ],
)
def test_a_bad_trace_is_one_line_naming_file_and_line_and_exit_2(sample, steer_cli, trace, message):
    (sample / "traces.ptrace").write_text(trace)
    (sample / "my.toml").write_text(SCENARIO)
    done = steer_cli("run", "my.toml", cwd=sample)
    assert done.returncode == 2
    # The file as steer read it: from the scenario's directory.
    message = message.replace(" traces.ptrace:", f" {sample / 'traces.ptrace'}:")
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_example_is_deterministic(monkeypatch):
    monkeypatch.chdir(ROOT)
    runs = [api.run("examples/packet-handler/handler.toml", ["sim.measure_us=200"]) for _ in range(2)]
    for run in runs:
        run["sim"].pop("host_seconds")
    assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)


def compares_as_its_mechanisms_say(scenario: Path) -> None:
    """Under memory the core reads every packet line from DRAM; DDIO and SDCI put them in the L3
    and the core's L2, so the packet costs fewer cycles there, SDCI fewest; the flow table stays in
    the core's caches under every placement."""
    results = {p: api.run(str(scenario), [f'placement="{p}"']) for p in ("memory", "ddio", "l2")}
    core = {p: r["cores"]["1"] for p, r in results.items()}
    cycles = {p: c["workload"]["cycles_per_packet"] for p, c in core.items()}
    assert cycles["memory"] > cycles["ddio"] > cycles["l2"]
    rx = {p: r["devices"]["nic0"]["rx_gbps"] for p, r in results.items()}
    read_per_rx = {p: results[p]["dram"]["read_gbps"] * 8 / rx[p] for p in results}
    assert read_per_rx["memory"] > 0.9 and read_per_rx["ddio"] < 0.1 and read_per_rx["l2"] < 0.1
    assert core["l2"]["fill_counts"]["l2"] > core["l2"]["fill_counts"]["dram"] * 10


def test_the_example_compares_as_its_mechanisms_say():
    compares_as_its_mechanisms_say(EXAMPLE / "handler.toml")


def test_the_example_compares_the_same_from_any_directory(tmp_path, steer_cli):
    """The scenario names its traces from its own directory: the compare of the README gives the same
    table from the repository's root and from elsewhere."""
    placements = ("--placement", "memory,ddio,sdci")
    from_root = steer_cli("compare", "examples/packet-handler/handler.toml", *placements, cwd=ROOT)
    elsewhere = steer_cli("compare", str(EXAMPLE / "handler.toml"), *placements, cwd=tmp_path)
    assert from_root.returncode == 0 and elsewhere.returncode == 0, elsewhere.stderr
    assert elsewhere.stdout == from_root.stdout
    assert "cpu 1 (trace) fills from DRAM" in elsewhere.stdout


def test_a_missing_trace_file_is_one_line_naming_it_and_its_key(tmp_path, steer_cli):
    """A copy of the scenario beside its region map but not its traces: the file it looked for, from
    the scenario's directory, and the key that names it."""
    (tmp_path / "traces").mkdir()
    shutil.copy(EXAMPLE / "handler.toml", tmp_path / "handler.toml")
    shutil.copy(EXAMPLE / "traces/regions.toml", tmp_path / "traces/regions.toml")
    done = steer_cli("compare", str(tmp_path / "handler.toml"), cwd=ROOT)
    assert done.returncode == 2
    line = f"workloads.0.traces: {tmp_path / 'traces/traces.ptrace'}: cannot read: No such file or directory"
    assert line in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_example_traces_its_handler_with_valgrind_and_compares_it(tmp_path):
    """trace.sh builds handler.c, traces it and cuts 64 packets, each of the 1500 B the traces replay;
    the scenario beside those traces compares as the committed ones do. CI must run it:
    scripts/setup.sh installs Valgrind there; elsewhere a machine without it skips."""
    if shutil.which("valgrind") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("valgrind is missing in CI: scripts/setup.sh installs it (apt-get install valgrind)")
        pytest.skip("valgrind not installed (apt-get install valgrind)")
    steer = Path(sys.executable).parent / "steer"
    done = subprocess.run(
        ["bash", str(EXAMPLE / "trace.sh"), str(tmp_path / "traces")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "STEER": str(steer)},
    )
    assert done.returncode == 0, done.stderr
    traces = (tmp_path / "traces/traces.ptrace").read_text()
    assert traces.count("\npacket 1500\n") == 64
    assert done.stdout.splitlines()[-1].startswith("64 per-packet traces")
    committed = (EXAMPLE / "traces/regions.toml").read_text()
    assert [line for line in committed.splitlines() if "name" in line or "kind" in line] == [
        line for line in (tmp_path / "traces/regions.toml").read_text().splitlines() if "name" in line or "kind" in line
    ]
    shutil.copy(EXAMPLE / "handler.toml", tmp_path / "handler.toml")
    compares_as_its_mechanisms_say(tmp_path / "handler.toml")


def test_the_example_runs_in_a_sweep(tmp_path, steer_cli):
    """A sweep over placement and load runs the trace workload at every point."""
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'scenario = "{EXAMPLE / "handler.toml"}"\n'
        '[set]\n"sim.measure_us" = 200\n'
        '[grid]\nplacement = ["memory", "l2"]\noffered_gbps = [2.0, 8.0]\n'
    )
    done = steer_cli("sweep", str(sweep), "-o", str(tmp_path / "out"), "--quiet", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    runs = [json.loads(p.read_text()) for p in sorted((tmp_path / "out/runs").glob("*.json"))]
    assert len(runs) == 4 and all(r["status"] == "ok" for r in runs), [r["status"] for r in runs]
    assert all(r["result"]["cores"]["1"]["role"] == "trace" for r in runs)


@pytest.mark.parametrize(
    ("regions", "arguments", "message"),
    [
        ("[[regions]]\nname = 'b'\nkind = 'heap'\n", [], "regions.toml: regions.0: needs a name and kind"),
        ("[[regions]]\nname = 'b'\nkind = 'state'\n", [], "regions.0: needs `symbol`, or `start` and `bytes`"),
        ("[[regions]]\nname = 'b'\nkind = 'state'\nsymbol = 'table'\n", [], "symbol `table` needs --binary"),
        ("regions = 3\n", [], "regions.toml: no [[regions]]"),
        ("[[regions\n", [], "regions.toml: invalid TOML"),
        (REGIONS, ["--function", "handle"], "--function handle: needs --binary to find it in"),
        (REGIONS, ["--cycles-per-instruction", "-1"], "--cycles-per-instruction must be at least 0"),
    ],
)
def test_a_bad_region_map_or_option_is_one_line_and_exit_2(sample, steer_cli, regions, arguments, message):
    (sample / "regions.toml").write_text(regions)
    marker = [] if "--function" in arguments else ["--range", "402000-402010"]
    done = steer_cli(
        "trace-import", "run.lackey", *marker, *arguments, "--regions", "regions.toml", "-o", "o", cwd=sample
    )
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_handler_is_named_by_function_or_range_not_both(sample, steer_cli):
    done = steer_cli("trace-import", "run.lackey", "--regions", "regions.toml", "-o", "o", cwd=sample)
    assert done.returncode == 2
    assert "give the packet handler as --function NAME (with --binary) or --range" in done.stderr
    done = steer_cli("trace-import", "run.lackey", "--range", "402010-402000", "--regions", "r", "-o", "o", cwd=sample)
    assert done.returncode == 2 and "expected START-END in hexadecimal, START below END" in done.stderr


def test_a_binary_nm_cannot_read_is_one_line_and_exit_2(sample, steer_cli):
    done = steer_cli(
        "trace-import",
        "run.lackey",
        "--binary",
        "regions.toml",
        "--function",
        "f",
        "--regions",
        "regions.toml",
        "-o",
        "o",
        cwd=sample,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("steer: error: --binary: nm regions.toml: ") and "[" not in done.stderr

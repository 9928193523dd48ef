"""Golden output of `steer reproduce`: every run its experiments ask for, and every row they make.

`tests/fixtures/reproduce/runs.json` keeps, for each run (scenario and overrides), the parts of
its result the rows read; `rows.json` keeps the rows. One test builds the rows from the stored
runs (no simulation: it pins how rows are made from results, which runs are asked for and with
which overrides); the other re-runs every scenario and compares the parts the rows read (it pins
the model behind the rows). A change to either is a change to `steer reproduce`'s table: bless it
with `STEER_BLESS=1 .venv/bin/python -m pytest tests/test_reproduce_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from steer import reproduce, sensitivity

FIXTURES = Path(__file__).parent / "fixtures" / "reproduce"
RUNS = FIXTURES / "runs.json"
ROWS = FIXTURES / "rows.json"
BLESS = os.environ.get("STEER_BLESS") == "1"


def run_key(scenario: str, overrides: tuple[str, ...]) -> str:
    return " ".join((scenario, *overrides))


def read_parts(result: dict) -> dict:
    """The parts of a result that rows read: DRAM bandwidth, each core's role and DC fills, the
    Leon and eflatency workloads' timings, a copy's throughput, each ring's passes; and its
    platform (`--sensitivity` changes the runs of a parameter's platform)."""
    parts: dict = {"platform": result["platform"]}
    if "dram" in result:
        parts["dram"] = {k: result["dram"][k] for k in ("read_gbps", "write_gbps", "total_gbps")}
    cores = {}
    for name, core in result.get("cores", {}).items():
        kept = {k: core[k] for k in ("role", "dc_fill_counts") if k in core}
        workload = core.get("workload", {})
        if "exec_ns_per_message" in workload:
            kept["workload"] = {"exec_ns_per_message": workload["exec_ns_per_message"]}
        if "half_rtt_ns" in workload:
            kept["workload"] = {"half_rtt_ns": {"p50": workload["half_rtt_ns"]["p50"]}}
        cores[name] = kept
    if cores:
        parts["cores"] = cores
    if "copy" in result:
        parts["copy"] = {"gibps": result["copy"]["gibps"]}
    nic = result.get("devices", {}).get("nic0")
    if nic and "queues" in nic:
        parts["devices"] = {"nic0": {"queues": [{"ring_passes": q["ring_passes"]} for q in nic["queues"]]}}
    return parts


class StoredRunner(reproduce.Runner):
    """Answers each run from the stored results and records what was asked."""

    def __init__(self, stored: dict[str, dict]) -> None:
        super().__init__()
        self.stored = stored
        self.asked: list[str] = []

    def run(self, scenario: str, *overrides: str) -> dict:
        key = run_key(scenario, overrides)
        self.asked.append(key)
        assert key in self.stored, f"a run the golden file does not have: {key}"
        return self.stored[key]


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def close(a, b, where: str = "") -> list[str]:
    """Where two JSON values differ, numbers compared to 1e-9 relative."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in close(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in close(x, y, f"{where}[{i}]")]
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else [f"{where}: {a} != {b}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def test_every_run_behind_the_rows_gives_its_stored_result():
    # First in the file: blessing stores the runs the next test reads.
    runner = reproduce.Runner()
    for experiment in reproduce.EXPERIMENTS.values():
        experiment(runner)
    results = {run_key(*key): read_parts(result) for key, result in runner.cache.items()}
    if BLESS:
        write_json(RUNS, results)
    stored = json.loads(RUNS.read_text())
    assert close(results, stored) == []


def test_rows_from_the_stored_runs_are_the_golden_rows_and_ask_for_exactly_those_runs():
    stored = json.loads(RUNS.read_text())
    runner = StoredRunner(stored)
    rows = [row.to_dict() for row in reproduce.reproduce(runner=runner)]
    if BLESS:
        write_json(ROWS, rows)
    # Each run is asked for once per row group that needs it; none stored goes unasked.
    assert set(runner.asked) == set(stored)
    assert rows == json.loads(ROWS.read_text())


def test_every_sdci_run_measures_a_whole_pass_over_every_ring():
    # A window that sees part of a ring can see a part whose buffers are cached more or less than
    # the rest (docs/reproduce.md); every run behind seed 000's and 002's rows sees whole passes.
    iperf = {key: run for key, run in json.loads(RUNS.read_text()).items() if key.startswith("iperf-rx ")}
    assert len(iperf) == 12
    for key, run in iperf.items():
        passes = [q["ring_passes"] for q in run["devices"]["nic0"]["queues"]]
        assert min(passes) >= 1, (key, passes)


def test_each_experiment_plans_its_runs_and_rows_and_only_runs_experiments_with_a_matching_row():
    stored = json.loads(RUNS.read_text())
    assert list(reproduce.ROW_IDS) == list(reproduce.EXPERIMENTS)
    for name, experiment in reproduce.EXPERIMENTS.items():
        runner = StoredRunner(stored)
        assert tuple(row.id for row in experiment(runner)) == reproduce.ROW_IDS[name], name
        assert reproduce.RUNS[name] == len(set(runner.asked)), name
    assert reproduce.planned_runs(None) == len(stored) == 98
    assert reproduce.planned_runs("leon/*time") == 16
    assert reproduce.planned_runs("seed00") == 4 + 28 + 8 + 42
    assert reproduce.planned_runs("dram") == 4 + 8
    # A pattern that names no experiment (`4q`) runs those with a matching row, and keeps those rows.
    runner = StoredRunner(stored)
    rows = reproduce.reproduce("4q/dram-read", runner=runner)
    assert [r.id for r in rows] == [f"seed000/4q/dram-read-{x}" for x in ("sdci-off", "sdci-on", "change")]
    assert len(set(runner.asked)) == 4
    # A pattern no row matches runs nothing.
    runner = StoredRunner(stored)
    assert (reproduce.reproduce("seed00/nothing", runner=runner), runner.asked) == ([], [])
    assert reproduce.planned_runs("seed00/nothing") == 0
    runner = StoredRunner(stored)
    rows = reproduce.reproduce("leon/*time", runner=runner)
    assert [r.id for r in rows] == ["leon/prefetch-time", "leon/inject-l3-time", "leon/inject-l2-time"]
    assert {key.split()[0] for key in runner.asked} == {"leon-reduce"}


def test_several_only_patterns_keep_the_rows_any_of_them_matches():
    stored = json.loads(RUNS.read_text())
    runner = StoredRunner(stored)
    rows = reproduce.reproduce(["seed004", "leon/*time", "nothing-like-this"], runner=runner)
    assert [r.id for r in rows] == [*reproduce.ROW_IDS["seed004"], "leon/prefetch-time", "leon/inject-l3-time"] + [
        "leon/inject-l2-time"
    ]
    assert {key.split()[0] for key in runner.asked} == {"eflatency", "leon-reduce"}
    assert reproduce.planned_runs(["seed004", "leon/*time"]) == 42 + 16
    assert reproduce.planned_runs(["seed004/*", "eflatency"]) == 42
    assert reproduce.only_patterns("leon") == ["leon"] and reproduce.only_patterns(None) == []
    assert reproduce.only_text(["a", "b/*"]) == "--only a --only b/*"


def test_sensitivity_reports_each_stage_from_its_first_run_to_its_last(monkeypatch):
    stored = json.loads(RUNS.read_text())
    calls = []

    def stored_run(scenario, overrides):
        # The changed value comes last; the stored base result stands in for every run.
        calls.append(scenario)
        key = run_key(scenario, tuple(overrides))
        return stored.get(key) or stored[run_key(scenario, tuple(overrides[:-1]))]

    monkeypatch.setattr(reproduce.api, "run", stored_run)
    reports = []
    sensitivity.sensitivity("seed004/eflatency-avg", progress=lambda *report: reports.append(report))
    base = [f for stage, f in reports if stage == "base rows"]
    changes = [f for stage, f in reports if stage == "changes"]
    assert [stage for stage, _ in reports] == ["base rows"] * 42 + ["changes"] * (len(calls) - 42)
    # Each stage counts its runs exactly; the bar waits at 99% for the rows to be made.
    assert base == [min(i / 42, 0.99) for i in range(1, 43)]
    n = len(changes)
    assert n > 42 and changes == [min(i / n, 0.99) for i in range(1, n + 1)]

"""Sweeps: the file format, bad input, failing points, resuming after SIGKILL, local vs Ray."""

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from contextlib import suppress
from pathlib import Path
from types import SimpleNamespace

import pytest

import steer
from steer import sweep as sweeps
from steer.cli import main as steer_main
from steer.store import Store

STEER = [sys.executable, "-m", "steer"]
TINY = """scenario = "rx-default"
[set]
"sim.measure_us" = 100
sim.warmup_us = 50
"""


def write(tmp_path: Path, body: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(TINY + body)
    return path


def without_host_time(result: dict) -> dict:
    return {**result, "sim": {k: v for k, v in result["sim"].items() if k != "host_seconds"}}


def results_by_id(directory: Path) -> dict:
    return {r["run_id"]: without_host_time(r["result"]) for r in Store(directory).records() if r["status"] == "ok"}


def no_partial_files(directory: Path) -> bool:
    return not [p for p in directory.rglob("*") if p.name.endswith(".tmp")]


def test_grid_is_a_product_and_zip_advances_together(tmp_path):
    sweep = sweeps.load_sweep(
        write(
            tmp_path,
            """
[grid]
placement = ["memory", "l2"]
offered_gbps = [10.0, 20.0, 30.0]
[zip]
ring = [128, 256]
packet_bytes = [1500, 1024]
""",
        )
    )
    points = sweep.points()
    assert len(points) == 2 * 3 * 2
    assert points[0] == {"placement": "memory", "offered_gbps": 10.0, "ring": 128, "packet_bytes": 1500}
    assert points[1] == {"placement": "memory", "offered_gbps": 10.0, "ring": 256, "packet_bytes": 1024}
    assert points[-1] == {"placement": "l2", "offered_gbps": 30.0, "ring": 256, "packet_bytes": 1024}
    assert sweep.sets == {"sim.measure_us": 100, "sim.warmup_us": 50}
    assert sweep.keys() == ["placement", "offered_gbps", "ring", "packet_bytes"]
    # Several zip groups are crossed with each other.
    two = sweeps.sweep_from_dict(
        {"scenario": "rx-default", "zip": [{"ring": [128, 256]}, {"offered_gbps": [1.0, 2.0, 3.0]}]}
    )
    assert len(two.points()) == 6


def test_run_ids_are_stable_and_equal_points_run_once(tmp_path):
    sweep = sweeps.load_sweep(
        write(
            tmp_path,
            """
[grid]
offered_gbps = [10.0, 10.0, 20.0]
placement = ["memory"]
""",
        )
    )
    tasks = sweeps.plan(sweep)
    assert len(tasks) == 2
    again = sweeps.plan(sweeps.load_sweep(tmp_path / "sweep.toml"))
    assert [t.run_id for t in tasks] == [t.run_id for t in again]
    # The id is the hash of the resolved scenario and the build: the default placement is the same run.
    plain = sweeps.plan(
        sweeps.sweep_from_dict({"scenario": "rx-default", "set": sweep.sets, "grid": {"offered_gbps": [10.0]}})
    )
    assert plain[0].run_id == tasks[0].run_id
    assert steer.store.run_id(tasks[0].resolved) == tasks[0].run_id
    assert steer.store.run_id(tasks[0].resolved, build="0.0.0") != tasks[0].run_id


def test_a_rebuilt_core_gives_new_run_ids(tmp_path, monkeypatch):
    # A resumed sweep or fit must not reuse results of a model changed under the same version.
    core = tmp_path / "core.so"
    core.write_bytes(b"one build")
    monkeypatch.setattr(steer.store._core, "__file__", str(core))
    try:
        steer.store.build_identity.cache_clear()
        first = steer.store.run_id("[sim]\n")
        assert steer.store.build_identity().startswith(f"{steer.__version__}+")
        core.write_bytes(b"another build")
        steer.store.build_identity.cache_clear()
        assert steer.store.run_id("[sim]\n") != first
    finally:
        monkeypatch.undo()
        steer.store.build_identity.cache_clear()


EVERY_POINT = "(2 of 2 points are invalid; --keep-going runs the others)"
NOT_A_PARAMETER = (
    "not a parameter (declared: offered_gbps, packet_bytes, placement, ring); other keys are set by their path, "
    "e.g. sim.measure_us"
)


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            '[grids]\nplacement = ["l2"]\n',
            "sweep.toml: unknown key `grids` (expected one of: scenario, description, set, grid, zip)",
        ),
        ("[grid]\noffered_gbps = 50\n", "sweep.toml: grid.offered_gbps: expected a list of values (got an integer)"),
        (
            "[grid]\noffered_gbps = []\n",
            "sweep.toml: grid.offered_gbps: expected at least one value (got an empty list)",
        ),
        (
            "[zip]\nring = [1, 2]\npacket_bytes = [1500]\n",
            "sweep.toml: zip: lists must have the same length (ring has 2, packet_bytes has 1)",
        ),
        ('[grid]\n"sim.measure_us" = [100, 200]\n', "sweep.toml: grid.sim.measure_us: also given in [set]"),
        ("[zip]\nring = [128]\n[grid]\nring = [64]\n", "sweep.toml: zip.ring: also given in [grid]"),
        ("[[zip]]\nring = [128]\n[[zip]]\nring = [64]\n", "sweep.toml: zip.ring: also given in [zip]"),
        ('[zip]\n"params.ring" = [128]\n[grid]\nring = [64]\n', "sweep.toml: zip.params.ring: also given in [grid]"),
        ('"params.ring" = 128\n[grid]\nring = [64]\n', "sweep.toml: grid.ring: also given in [set]"),
        ("[grid]\nwhen = [1979-05-27]\n", "sweep.toml: grid.when[0]: date cannot be a scenario value"),
        ("when = 1979-05-27\n", "sweep.toml: set.when: date cannot be a scenario value"),
        ("[grid]\nbogus = [1, 2]\n", f"sweep.toml: grid.bogus = 1: {NOT_A_PARAMETER} {EVERY_POINT}"),
        ("bogus = 1\n", f"sweep.toml: set.bogus = 1: {NOT_A_PARAMETER}"),
        (
            '[grid]\n"sim.bogus" = [1, 2]\n',
            "sweep.toml: grid.sim.bogus = 1: unknown field `bogus`, expected one of `warmup_us`, `measure_us`, "
            f"`max_runahead_ns`, `allow_large` {EVERY_POINT}",
        ),
        (
            '[grid]\noffered_gbps = ["fast"]\n',
            'sweep.toml: grid.offered_gbps = "fast": devices.0.queues.0.offered_gbps: invalid type: string "fast", '
            "expected a number",
        ),
        (
            "[grid\n",
            "sweep.toml: invalid TOML: Expected ']' at the end of a table declaration (at line 5, column 6)",
        ),
        (
            "[grid]\nring = "
            + str(list(range(1, 102)))
            + "\noffered_gbps = "
            + str([float(g) for g in range(1, 101)])
            + "\n",
            "sweep.toml: the grid and zips make 10,100 points, more than 10,000 (each is validated before any "
            "runs): split the sweep",
        ),
    ],
)
def test_bad_sweep_files_are_one_line_with_exit_code_2(tmp_path, capsys, body, expected):
    path = write(tmp_path, body)
    code = steer_main(["sweep", str(path), "-o", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.replace(str(tmp_path) + "/", "") == f"steer: error: {expected}\n"
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"description": "no scenario"}, "sweep: missing `scenario` (a scenario file or built-in name)"),
        ({"scenario": 3}, "sweep: scenario: expected a string (got an integer)"),
        ({"scenario": "rx-default", "description": 1.5}, "sweep: description: expected a string (got a float)"),
        ({"scenario": "rx-default", "set": [1]}, "sweep: set: expected a table (got a list)"),
        ({"scenario": "rx-default", "description": {"a": 1}}, "sweep: description: expected a string (got a table)"),
        ({"scenario": "rx-default", "grid": "ring"}, "sweep: grid: expected a table of lists (got a string)"),
        (
            {"scenario": "rx-default", "grid": {"ring": True}},
            "sweep: grid.ring: expected a list of values (got a boolean)",
        ),
        (
            {"scenario": "rx-default", "zip": {"ring": []}},
            "sweep: zip.ring: expected at least one value (got an empty list)",
        ),
        (
            {"scenario": "rx-default", "zip": {"ring": [datetime.date(2026, 11, 29)]}},
            "sweep: zip.ring[0]: date cannot be a scenario value",
        ),
        (
            {"scenario": "rx-default", "zip": 7},
            "sweep: zip: expected a table or an array of tables (got an integer)",
        ),
        ({"scenario": "rx-default", "zip": [[1]]}, "sweep: zip: expected a table of lists (got a list)"),
    ],
)
def test_malformed_sweeps_from_python_name_the_key_and_the_type(data, expected):
    with pytest.raises(steer.ScenarioError) as raised:
        sweeps.sweep_from_dict(data)
    assert str(raised.value) == expected


def test_missing_files_and_bad_options(tmp_path, capsys):
    cases = [
        (
            ["sweep", str(tmp_path / "nope.toml")],
            f"{tmp_path / 'nope.toml'}: cannot read sweep file: No such file or directory",
        ),
        (["sweep", str(write(tmp_path, "", "s1.toml").with_name("s2.toml"))], "cannot read sweep file"),
        (["sweep", str(write(tmp_path, "[set]\n", "s3.toml"))], "s3.toml: invalid TOML"),
        (
            ["sweep", str(write(tmp_path, "[grid]\nring = [128]\n", "s4.toml")), "--set", "ring=64"],
            "--set ring: already swept in",
        ),
        (
            ["sweep", str(write(tmp_path, "", "s5.toml")), "--workers", "0"],
            "--workers: must be a whole number, at least 1",
        ),
        (["sweep", str(write(tmp_path, "", "s6.toml")), "--address", "auto"], "--address: only for --executor ray"),
    ]
    (tmp_path / "other.toml").write_text('scenario = "missing-scenario.toml"\n')
    cases.append(
        (
            ["sweep", str(tmp_path / "other.toml")],
            f"{tmp_path / 'other.toml'}: scenario: {tmp_path / 'missing-scenario.toml'}: cannot read scenario: "
            "No such file or directory",
        )
    )
    for argv, expected in cases:
        assert steer_main(argv + ["-o", str(tmp_path / "out")]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, err
        if argv in (cases[0][0], cases[-1][0]):
            assert err == f"steer: error: {expected}"
    # The same from Python, with numbers that are not whole.
    for workers in (float("nan"), 2.5, True):
        with pytest.raises(steer.ScenarioError, match=r"--workers: must be a whole number, at least 1 \(got "):
            steer.run_sweep(write(tmp_path, "", "s7.toml"), tmp_path / "out", workers=workers)
    # Through a real process: no traceback, one line.
    done = subprocess.run([*STEER, "sweep", str(tmp_path / "nope.toml")], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_relative_scenario_path_is_taken_from_the_sweep_files_directory(tmp_path, monkeypatch):
    (tmp_path / "sweeps" / "cases").mkdir(parents=True)
    api_source = steer.api.scenario_source("rx-default")[0]
    for name in ("one.toml", "cases/two"):
        (tmp_path / "sweeps" / name).write_text(api_source)
    monkeypatch.chdir(tmp_path)
    for name in ("one.toml", "cases/two", str(tmp_path / "sweeps" / "one.toml")):
        path = tmp_path / "sweeps" / "sweep.toml"
        path.write_text(f'scenario = "{name}"\n[grid]\nring = [64]\n')
        sweep = sweeps.load_sweep(path)
        assert sweep.scenario == tmp_path / "sweeps" / name
        assert sweeps.plan(sweep)[0].resolved is not None
    # A built-in name stays a name, and a Path from Python is taken from the base given.
    assert sweeps.sweep_from_dict({"scenario": "rx-default"}, base=tmp_path).scenario == "rx-default"
    assert sweeps.sweep_from_dict({"scenario": Path("two")}, base=tmp_path).scenario == tmp_path / "two"


def test_a_sweep_made_in_python_needs_only_its_scenario(tmp_path, capsys):
    tiny = {"sim.measure_us": 100, "sim.warmup_us": 50}
    for sweep in (sweeps.Sweep("rx-default", sets=tiny), {"scenario": "rx-default", "set": tiny}):
        summary = steer.run_sweep(sweep, tmp_path / "out", workers=1)
        assert summary.ok is True and summary.total == 1 and 0 <= summary.seconds < 600
        manifest = Store(tmp_path / "out").manifest()
        written_at = manifest.pop("written_at")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written_at)
        assert manifest == {
            "sweep": "sweep",
            "text": "",
            "scenario": "rx-default",
            "description": "",
            "points": [
                {"index": 0, "run_id": sweeps.plan(sweeps.Sweep("rx-default", sets=tiny))[0].run_id, "point": {}}
            ],
            "steer_version": steer.__version__,
        }
    assert capsys.readouterr().err == "", "quiet unless asked"
    # Invalid points stop the sweep unless asked to keep going.
    with pytest.raises(steer.ScenarioError, match="invalid type"):
        steer.run_sweep(sweeps.Sweep("rx-default", grid={"sim.measure_us": ["x", 100]}), tmp_path / "bad", workers=1)
    # No values at all: the scenario as it is, one point; errors are named after "sweep".
    assert sweeps.Sweep("rx-default").points() == [{}]
    bad = sweeps.Sweep("rx-default", zips=[{"sim.measure_us": [100.0, "x"]}])
    assert [t.error for t in sweeps.plan(bad, keep_going=True)] == [
        None,
        'sweep: zip.sim.measure_us = "x": invalid type: string "x", expected a number',
    ]


def test_set_may_change_a_fixed_value_of_the_sweep_but_not_a_swept_one():
    sweep = sweeps.sweep_from_dict(
        {"scenario": "rx-default", "set": {"sim.measure_us": 100}, "grid": {"ring": [64]}}, origin="s.toml"
    )
    # A value the sweep fixes, and one it does not mention: the --set value wins.
    task = sweeps.plan(sweep, ["sim.measure_us=300", "sim.warmup_us=70"])[0]
    resolved = tomllib.loads(task.resolved)["sim"]
    assert (resolved["measure_us"], resolved["warmup_us"]) == (300.0, 70.0)
    with pytest.raises(steer.ScenarioError) as raised:
        sweeps.plan(sweep, ["ring=32"])
    assert str(raised.value) == "--set ring: already swept in s.toml"


def test_an_error_not_tied_to_one_value_names_the_point_or_the_scenario():
    too_long = (
        "sim: 10000300 µs of simulated time is more than 1000000 µs; set sim.allow_large = true (or --allow-large) "
        "to run it anyway"
    )
    for data, where in (
        ({"grid": {"sim.measure_us": [1e7]}}, "sim.measure_us=10000000.0"),
        ({"set": {"sim.measure_us": 1e7}}, "the scenario"),
        ({"grid": {"ring": [64]}, "zip": {"sim.measure_us": [1e7]}}, "ring=64, sim.measure_us=10000000.0"),
    ):
        with pytest.raises(steer.ScenarioError) as raised:
            sweeps.plan(sweeps.sweep_from_dict({"scenario": "rx-default", **data}))
        assert str(raised.value) == f"sweep: {where}: {too_long}"


def test_executor_options_that_cannot_work_are_refused_by_name():
    for options, expected in (
        (("dask", None, None), "unknown executor `dask` (expected local or ray)"),
        (("local", None, "auto"), "--address: only for --executor ray"),
        (("local", 0, None), "--workers: must be a whole number, at least 1 (got 0)"),
    ):
        with pytest.raises(steer.ScenarioError) as raised:
            sweeps.check_executor(*options)
        assert str(raised.value) == expected
    sweeps.check_executor("ray", 4, "auto")


def test_at_most_ten_thousand_points(tmp_path):
    hundred = [float(g) for g in range(1, 101)]
    sweep = sweeps.sweep_from_dict({"scenario": "rx-default", "grid": {"offered_gbps": hundred, "ring": hundred}})
    assert len(sweep.points()) == sweeps.MAX_POINTS == 10_000


def test_a_rejected_value_names_its_section_key_and_value_once():
    sweep = sweeps.sweep_from_dict({"scenario": "rx-default", "grid": {"sim.measure_us": ["long", 5]}})
    expected = 'sweep: grid.sim.measure_us = "long": invalid type: string "long", expected a number'
    # plan refuses a sweep with an invalid point unless asked to keep going.
    with pytest.raises(steer.ScenarioError) as raised:
        sweeps.plan(sweep)
    assert str(raised.value) == expected
    tasks = sweeps.plan(sweep, keep_going=True)
    assert [t.error for t in tasks] == [expected, None]
    assert tasks[0].resolved is None and tasks[1].resolved is not None


def test_invalid_points_stop_a_sweep_unless_keep_going_records_them_and_runs_the_rest(tmp_path, capsys):
    path = write(
        tmp_path,
        """
[grid]
placement = ["memory", "l2"]
ring = [256, 0, 128]
""",
    )
    out = tmp_path / "out"
    # Every point is validated first: an invalid one stops the sweep before anything runs.
    refused = subprocess.run([*STEER, "sweep", str(path), "-o", str(out), "--quiet"], capture_output=True, text=True)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert (
        "grid.ring = 0: devices.0.queues.0.ring_entries: must be at least 1" in refused.stderr
        and "(2 of 6 points are invalid; --keep-going runs the others)" in refused.stderr
    )
    assert not out.exists()
    assert steer_main(["sweep", str(path), "-o", str(out), "--workers", "2", "--quiet", "--keep-going"]) == 1
    printed = capsys.readouterr().out
    assert "6 runs: 4 finished now, 0 already done, 2 failed" in printed
    assert "ring_entries: must be at least 1" in printed
    store = Store(out)
    assert len(store.finished_ids()) == 4 and len(store.failed_ids()) == 2
    failed = [r for r in store.records() if r["status"] == "failed"]
    assert {r["point"]["ring"] for r in failed} == {0}
    assert all("devices.0.queues.0.ring_entries: must be at least 1" in r["error"] for r in failed)
    assert all(r["result"] is None for r in failed)
    df = steer.load(out)
    assert list(df["status"]).count("failed") == 2 and df[df["status"] == "failed"]["dram.read_gbps"].isna().all()
    # Again: the finished runs are skipped; failures are retried unless --skip-failed.
    summary = steer.run_sweep(path, out, workers=2, keep_going=True)
    assert summary.skipped == 4 and len(summary.ran) == 2 and len(summary.failed) == 2
    summary = steer.run_sweep(path, out, workers=2, retry_failed=False, keep_going=True)
    assert summary.skipped == 6 and summary.ran == [] and len(summary.failed) == 2
    assert all("ring_entries: must be at least 1" in error for error in summary.failed.values())
    assert no_partial_files(out)


def test_a_run_that_fails_in_the_worker_becomes_a_record():
    task = sweeps.Task(0, "0" * 16, {"x": 1}, [], "broken", resolved="[sim]\nmeasure_us = -5.0\n")
    record = sweeps.execute(task)
    assert record["status"] == "failed" and record["result"] is None
    assert record["error"] == "broken (resolved):2:1: sim.measure_us: must be at least 0.001 µs (got -5)"

    def boom(resolved, name):
        raise ValueError(f"{name} broke")

    assert sweeps.execute(task, boom)["error"] == "ValueError: broken broke"


def test_a_record_holds_what_was_run_where_and_how_long_it_took(monkeypatch):
    clock = iter([10.0, 11.23456789, 20.0, 22.5, 30.0])
    fake_time = SimpleNamespace(
        perf_counter=lambda: next(clock), time=lambda: 86400.0 * 365, strftime=time.strftime, gmtime=time.gmtime
    )
    monkeypatch.setattr(sweeps, "time", fake_time)
    task = sweeps.Task(3, "a" * 16, {"ring": 64}, ["ring=64"], "probe", resolved="[sim]\n")
    record = sweeps.execute(task, lambda resolved, name: {"ran": [resolved, name]})
    assert record == {
        "format": 1,
        "run_id": "a" * 16,
        "status": "ok",
        "index": 3,
        "point": {"ring": 64},
        "overrides": ["ring=64"],
        "steer_version": steer.__version__,
        "host": socket.gethostname(),
        "started_at": "1971-01-01T00:00:00Z",
        "wall_seconds": 1.234568,
        "resolved": "[sim]\n",
        "result": {"ran": ["[sim]\n", "probe"]},
        "error": None,
    }

    def boom(resolved, name):
        raise ValueError("no")

    assert sweeps.execute(task, boom)["wall_seconds"] == 2.5, "a failed run is timed too"
    # A point the scenario rejected is recorded without running.
    rejected = sweeps.Task(4, "b" * 16, {"ring": 0}, ["ring=0"], "probe", error="ring: must be at least 1")
    record = sweeps.execute(rejected)
    assert (record["status"], record["wall_seconds"], record["error"]) == ("failed", 0.0, "ring: must be at least 1")


def numbered_tasks(count: int, **point) -> list:
    """Tasks x = 0, 1, ... with ids to match, for the executors alone (nothing to resolve)."""
    return [sweeps.Task(i, f"{i:016d}", {"x": i, **point}, [], "t", resolved="") for i in range(count)]


def die_on_three(task):
    """The work of spawned workers: the point x=3 kills its worker."""
    if task.point["x"] == 3:
        os._exit(7)
    return sweeps.record_for(task, "ok", time.time(), 0.0, result={"x": task.point["x"]})


def test_a_worker_that_dies_fails_only_its_point():
    tasks = numbered_tasks(8)
    records = []
    sweeps.run_local(tasks, 3, records.append, die_on_three)
    by_x = {r["point"]["x"]: r for r in records}
    assert sorted(by_x) == list(range(8)) and len(records) == 8
    assert (by_x[3]["status"], by_x[3]["error"]) == ("failed", "the worker process died while running this point")
    assert by_x[3]["wall_seconds"] == 0.0
    assert all(by_x[x]["status"] == "ok" for x in by_x if x != 3)


def logged(task):
    """The work of spawned workers: logs each run in the point's `log` directory; x=2 kills its
    worker; the points in `meet` wait (up to 20 s) until all of them have started."""
    log, x, meet = Path(task.point["log"]), task.point["x"], task.point["meet"]
    start = time.time()
    (log / f"{x}.{os.getpid()}.start").touch()
    if x == 2:
        os._exit(7)
    deadline = start + (20.0 if x in meet else 0.2)
    while time.time() < deadline and not (x in meet and all(list(log.glob(f"{m}.*.start")) for m in meet)):
        time.sleep(0.01)
    # Renamed into place: a worker killed while writing (its pool broke) leaves no empty log.
    part = log / f"{x}.{os.getpid()}.part"
    part.write_text(json.dumps([start, time.time()]))
    part.replace(log / f"{x}.{os.getpid()}.json")
    return sweeps.record_for(task, "ok", start, 0.0, result={"x": x})


def test_the_suspects_of_a_worker_death_run_again_alone_and_the_others_together(tmp_path):
    point = {"log": str(tmp_path), "meet": [6, 7]}
    tasks = numbered_tasks(8, **point)
    records = []
    sweeps.run_local(tasks, 3, records.append, logged)
    assert sorted(r["point"]["x"] for r in records) == list(range(8))
    assert [r["point"]["x"] for r in records if r["status"] == "failed"] == [2]
    runs = {int(p.name.split(".")[0]): json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert sorted(runs) == [0, 1, 3, 4, 5, 6, 7], "each finished once"

    def overlap(a, b):
        return runs[a][0] < runs[b][1] and runs[b][0] < runs[a][1]

    def starts(x):
        return len(list(tmp_path.glob(f"{x}.*.start")))

    # The points in flight with 2 when its worker died ran again, alone, and so did 2, which died
    # again alone. Which points those were depends on the host's timing: 0 and 1, or later ones
    # where slow-starting workers let 0 or 1 finish first; a point handed to the pool but not yet
    # started shows one start, a point that had started two. Where every other point finished
    # before the pool noticed the death (on a loaded host it may notice only when the other runs
    # end), 2 was the one suspect and ran once.
    retried = [x for x in runs if starts(x) == 2]
    assert all(starts(x) == 1 for x in runs if x not in retried)
    assert starts(2) == 2 or (starts(2) == 1 and not retried)
    assert not any(overlap(x, other) for x in retried for other in runs if other != x)
    assert overlap(6, 7), "the others share the pool"


def sleepy(task):
    """The work of spawned workers: half a second."""
    time.sleep(0.5)
    return sweeps.record_for(task, "ok", 0.0, 0.0, result={"x": task.point["x"]})


def test_ctrl_c_keeps_the_runs_that_finish_while_the_pool_winds_down(monkeypatch):
    import concurrent.futures

    def interrupted(futures, **kwargs):
        # Ctrl-C once both runs are handed to the workers: one the pool has not yet handed over
        # is cancelled by the interrupt, rightly, and is then not in flight.
        deadline = time.time() + 20.0
        while not all(f.running() or f.done() for f in futures) and time.time() < deadline:
            time.sleep(0.005)
        raise KeyboardInterrupt

    monkeypatch.setattr(concurrent.futures, "wait", interrupted)
    tasks = numbered_tasks(3)
    records = []
    with pytest.raises(KeyboardInterrupt):
        sweeps.run_local(tasks, 2, records.append, sleepy)
    assert sorted(r["point"]["x"] for r in records) == [0, 1], "the two in flight, not the one never started"


def test_one_sweep_at_a_time_per_results_directory(tmp_path):
    store = Store(tmp_path / "out")
    with (
        store.lock(),
        pytest.raises(steer.ScenarioError, match="another sweep is writing into this results directory"),
        Store(tmp_path / "out").lock(),
    ):
        pass
    with Store(tmp_path / "out").lock():
        pass


def test_resume_after_sigkill_completes_exactly_the_missing_runs(tmp_path):
    # Runs long enough (tens of ms each) that the sweep can be caught part-way.
    loads = ", ".join(str(g) for g in range(50, 98, 2))
    path = tmp_path / "kill.toml"
    path.write_text(
        f'scenario = "rx-default"\n[set]\n"sim.measure_us" = 3000\n"sim.warmup_us" = 50\n'
        f"[grid]\noffered_gbps = [{loads}]\n"
    )
    out = tmp_path / "out"
    expected = {t.run_id for t in sweeps.plan(sweeps.load_sweep(path))}
    assert len(expected) == 24
    process = subprocess.Popen(
        [*STEER, "sweep", str(path), "-o", str(out), "--workers", "2", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            written = list((out / "runs").glob("*.json")) if (out / "runs").is_dir() else []
            if len(written) >= 3 or process.poll() is not None:
                break
            time.sleep(0.005)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        before = {p.stem: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
        assert 3 <= len(before) < len(expected), f"killed too late: {len(before)} runs written"
        # The workers notice and end by themselves.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("worker processes outlived the killed sweep")
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    for path_written in (out / "runs").glob("*.json"):
        assert json.loads(path_written.read_text())["status"] == "ok"

    summary = steer.run_sweep(path, out, workers=2)
    assert summary.skipped == len(before)
    assert sorted(summary.ran) == sorted(expected - set(before))
    assert len(summary.ran) == len(set(summary.ran)) and summary.ok
    files = sorted((out / "runs").glob("*.json"))
    assert {p.stem for p in files} == expected and len(files) == len(expected)
    assert {p.stem: p.stat().st_mtime_ns for p in files if p.stem in before} == before
    for file in files:
        record = json.loads(file.read_text())
        assert record["run_id"] == file.stem and record["status"] == "ok"
        assert record["result"]["devices"]["nic0"]["offered_gbps"] == record["point"]["offered_gbps"]
    assert not (out / "failed").exists() or not list((out / "failed").iterdir())
    assert no_partial_files(out)


def where_run(task):
    """The work of a test's tasks: which process ran it, and how it was started."""
    import multiprocessing

    where = {"pid": os.getpid(), "start": multiprocessing.get_start_method(allow_none=True)}
    return sweeps.record_for(task, "ok", 0.0, 0.0, result=where)


def test_one_worker_or_one_task_runs_here_and_more_in_spawned_processes():
    for count, workers in ((2, 1), (1, 2)):
        records = []
        sweeps.run_local(
            numbered_tasks(count), workers, records.append, lambda task: where_run(task)
        )  # a lambda: no pickling
        assert [r["result"]["pid"] for r in records] == [os.getpid()] * count
    records = []
    sweeps.run_local(numbered_tasks(2), 2, records.append, where_run)
    assert len(records) == 2 and all(r["result"]["pid"] != os.getpid() for r in records)
    assert {r["result"]["start"] for r in records} == {"spawn"}


def test_run_tasks_uses_the_workers_asked_for_else_every_core(tmp_path, monkeypatch):
    """...and checks the main script's guard only where worker processes would start."""
    asked, guarded = [], []
    monkeypatch.setattr(sweeps, "run_local", lambda tasks, workers, on_record, work: asked.append(workers))
    monkeypatch.setattr(sweeps, "check_main_guard", lambda: guarded.append(True))
    monkeypatch.setattr(sweeps.os, "cpu_count", lambda: 7)
    for count, workers, used, guard in ((2, 1, 1, False), (2, 3, 3, True), (2, None, 7, True), (1, 3, 3, False)):
        asked.clear()
        guarded.clear()
        summary = sweeps.run_tasks(
            numbered_tasks(count), Store(tmp_path / f"{count}-{workers}"), {}, "t", workers=workers
        )
        assert (asked, guarded) == ([used], [True] if guard else [])
        assert 0 <= summary.seconds < 60


def test_local_pool_matches_a_serial_run(tmp_path):
    path = write(tmp_path, '[grid]\nplacement = ["memory", "l2"]\noffered_gbps = [10.0, 60.0]\n')
    steer.run_sweep(path, tmp_path / "serial", workers=1)
    steer.run_sweep(path, tmp_path / "pool", workers=2)
    serial = results_by_id(tmp_path / "serial")
    assert len(serial) == 4 and serial == results_by_id(tmp_path / "pool")


def test_ray_executor_matches_the_local_one(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    path = write(tmp_path, '[grid]\nplacement = ["memory", "l2"]\noffered_gbps = [10.0, 60.0]\n')
    local = steer.run_sweep(path, tmp_path / "local", workers=2)
    ray = steer.run_sweep(path, tmp_path / "ray", executor="ray", workers=2)
    assert local.ok and ray.ok and sorted(ray.ran) == sorted(local.ran)
    assert results_by_id(tmp_path / "ray") == results_by_id(tmp_path / "local")
    import ray as ray_module

    assert not ray_module.is_initialized()  # the local instance was shut down
    again = steer.run_sweep(path, tmp_path / "ray", executor="ray", workers=2)
    assert again.skipped == 4 and again.ran == []


def test_an_address_nobody_listens_on_is_one_line_and_others_are_left_to_ray():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]  # bound, not listening: refused
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(steer.ScenarioError) as raised:
                sweeps.check_reachable(address)
            assert str(raised.value) == f"--address {address}: no Ray cluster reachable there (Connection refused)"
        server.listen()
        sweeps.check_reachable(f"ray://[127.0.0.1]:{port}")
    for address in ("auto", "localhost", "host:port"):
        sweeps.check_reachable(address)


def test_ray_failing_to_start_is_one_line_naming_the_option(monkeypatch):
    def no_ray(name):
        raise ImportError(name)

    monkeypatch.setattr(steer.optional.importlib, "import_module", no_ray)
    with pytest.raises(steer.ScenarioError) as raised:
        sweeps.run_ray([], None, None, print)
    assert str(raised.value) == "--executor ray needs ray: pip install 'steer[ray]'"
    started, says = [], {}

    def init(**options):
        started.append(options)
        raise RuntimeError(says["message"])

    fake_ray = SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setattr(steer.optional.importlib, "import_module", lambda name: fake_ray)
    task = sweeps.Task(0, "0" * 16, {}, [], "t", resolved="")
    for text, workers, expected in (
        ("no cluster\ndetails", 3, "--executor ray: cannot start or connect to Ray: no cluster"),
        ("", None, "--executor ray: cannot start or connect to Ray: RuntimeError"),
    ):
        says["message"] = text
        with pytest.raises(steer.ScenarioError) as raised:
            sweeps.run_ray([task], workers, None, print)
        assert str(raised.value) == expected
    # A local instance of the given CPUs (default: all), quiet, without its dashboard.
    quiet = {"address": None, "logging_level": 30, "log_to_driver": False, "include_dashboard": False}
    assert started == [{**quiet, "num_cpus": 3}, {**quiet, "num_cpus": os.cpu_count()}]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        says["message"] = "refused"
        with pytest.raises(steer.ScenarioError) as raised:
            sweeps.run_ray([task], None, address, print)
    assert str(raised.value) == f"--address {address}: cannot start or connect to Ray: refused"
    assert started[-1] == {"address": address, "logging_level": 30, "log_to_driver": False}


@pytest.mark.parametrize("cpus, expected", [({"CPU": 2}, [4, 4, 4, 3, 2, 1]), ({}, [2, 2, 2, 2, 2, 1])])
def test_ray_tasks_are_kept_two_per_cpu_in_flight_and_a_lost_one_is_a_failed_record(
    tmp_path, monkeypatch, cpus, expected
):
    in_flight = []

    def wait(refs, num_returns):
        assert num_returns == 1
        in_flight.append(len(refs))
        return refs[:1], refs[1:]

    def get(ref):
        if ref == 2:
            raise RuntimeError("the worker was lost\ntraceback")
        return {"run_id": f"{ref}", "status": "ok"}

    fake_ray = SimpleNamespace(
        is_initialized=lambda: True,  # connected already: neither started nor shut down here
        remote=lambda num_cpus: (
            (lambda work: SimpleNamespace(remote=lambda task: task.index)) if num_cpus == 1 else None
        ),
        cluster_resources=lambda: cpus,
        wait=wait,
        get=get,
    )
    monkeypatch.setattr(steer.optional.importlib, "import_module", lambda name: fake_ray)
    tasks = numbered_tasks(6)
    summary = sweeps.run_tasks(tasks, Store(tmp_path), {}, "t", executor="ray")
    assert in_flight == expected
    records = Store(tmp_path).records(every_sweep=True)
    assert summary.ran == [f"{i}" for i in (0, 1)] + [f"{2:016d}"] + [f"{i}" for i in (3, 4, 5)]
    assert [r["status"] for r in records].count("failed") == 1
    records = [r for r in records if r["status"] == "failed"]
    assert (records[0]["run_id"], records[0]["error"], records[0]["wall_seconds"]) == (
        f"{2:016d}",
        "RuntimeError: the worker was lost",
        0.0,
    )


def test_sweep_progress_prints_a_line_per_tenth_without_a_terminal(monkeypatch, capsys):
    now = [100.0]
    monkeypatch.setattr(sweeps, "time", SimpleNamespace(monotonic=lambda: now[0]))
    progress = sweeps.SweepProgress("sweep rx", 20, quiet=False)
    for i in range(20):
        now[0] = 101.0 + i
        progress({"status": "failed" if i in (2, 3) else "ok"})
    progress.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines[:3] == [
        "steer sweep rx: 2/20 runs, 0 failed, 2.0 s, eta 18.0 s",
        "steer sweep rx: 4/20 runs, 2 failed, 4.0 s, eta 16.0 s",
        "steer sweep rx: 6/20 runs, 2 failed, 6.0 s, eta 14.0 s",  # 6/20 is 0.3: not 0.1 + 0.1 + 0.1
    ]
    assert len(lines) == 10 and lines[-1] == "steer sweep rx: 20/20 runs, 2 failed, 20.0 s, eta 0.0 s"
    assert progress.bar.label == "steer sweep rx: 20/20 runs, 2 failed"  # what a terminal's bar shows
    # Whole tenths: of 15 runs, the 3rd is the second tenth reached (2.0 counted in tenths), though
    # it is less than a tenth after the 2nd (1.33).
    uneven = sweeps.SweepProgress("sweep rx", 15, quiet=False)
    for _ in range(15):
        uneven({"status": "ok"})
    printed = [int(line.split(": ")[1].split("/")[0]) for line in capsys.readouterr().err.splitlines()]
    assert printed == [2, 3, 5, 6, 8, 9, 11, 12, 14, 15]
    # A step past several tenths prints once; quiet prints nothing.
    coarse = sweeps.SweepProgress("fit x", 1, quiet=False)
    coarse({"status": "ok"})
    assert capsys.readouterr().err == "steer fit x: 1/1 run, 0 failed, 0.0 s, eta 0.0 s\n"
    quiet = sweeps.SweepProgress("sweep rx", 2, quiet=True)
    quiet({"status": "ok"})
    assert capsys.readouterr().err == ""


def test_a_script_without_a_main_guard_is_refused_before_anything_runs(tmp_path):
    script = tmp_path / "noguard.py"
    results = tmp_path / "results"
    script.write_text(
        "import steer\n"
        f"steer.run_sweep({{'scenario': 'rx-default', 'set': {{'sim.measure_us': 50, 'sim.warmup_us': 20}}, "
        f"'grid': {{'placement': ['memory', 'l2']}}}}, {str(results)!r}, workers=2, quiet=True)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert 'call run_sweep under `if __name__ == "__main__":` (or pass workers=1)' in done.stderr
    assert not results.exists()
    # One worker never re-runs the script.
    script.write_text(script.read_text().replace("workers=2", "workers=1"))
    assert subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120).returncode == 0
    assert len(steer.load(results)) == 2
    # Under the guard, two workers run.
    lines = script.read_text().replace("workers=1", "workers=2").splitlines()
    script.write_text(f'{lines[0]}\nif __name__ == "__main__":\n    {lines[1]}\n')
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_reused_results_directory_loads_the_last_sweep_unless_asked_for_every_one(tmp_path):
    base = {"scenario": "rx-default", "set": {"sim.measure_us": 50, "sim.warmup_us": 20}}
    steer.run_sweep({**base, "grid": {"placement": ["memory", "l2"]}}, tmp_path, workers=1, quiet=True)
    steer.run_sweep({**base, "grid": {"placement": ["l2"], "offered_gbps": [10.0]}}, tmp_path, workers=1, quiet=True)
    last = steer.load(tmp_path)
    assert len(last) == 1 and last["param.offered_gbps"].tolist() == [10.0]
    assert len(steer.load(tmp_path, every_sweep=True)) == 3
    assert len(Store(tmp_path).records()) == 1


def test_one_point_is_one_run_its_progress_is_named_by_the_file_and_steer_plot_needs_no_import(tmp_path, capsys):
    path = write(tmp_path, "")
    assert steer_main(["sweep", str(path), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("1 run: 1 finished now, 0 already done, 0 failed")
    assert printed.err.startswith(f"steer sweep {path.stem}: 1/1 run, 0 failed, "), printed.err
    done = subprocess.run(
        [sys.executable, "-c", "import steer; print(steer.plot.__name__, 'plot' in dir(steer))"],
        capture_output=True,
        text=True,
    )
    assert done.stdout.split() == ["steer.plot", "True"], done.stderr


def test_a_sweep_takes_the_sdci_alias_as_steer_compare_does():
    sweep = sweeps.sweep_from_dict({"scenario": "rx-default", "grid": {"placement": ["sdci", "l2"]}})
    sdci, l2 = sweeps.plan(sweep)
    policies = [tomllib.loads(t.resolved)["devices"][0]["placement"]["policy"] for t in (sdci, l2)]
    assert policies == ["l2", "l2"]
    with pytest.raises(steer.ScenarioError, match=r"unknown placement policy `sdcj` \(known: .*; sdci is l2\)$"):
        sweeps.plan(sweeps.sweep_from_dict({"scenario": "rx-default", "grid": {"placement": ["sdcj"]}}))


def test_ray_that_cannot_start_leaves_no_results_directory(tmp_path, monkeypatch):
    def init(**options):
        raise RuntimeError("no cluster")

    fake_ray = SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setattr(steer.optional.importlib, "import_module", lambda name: fake_ray)
    results = tmp_path / "results"
    with pytest.raises(steer.ScenarioError, match=r"^--executor ray: cannot start or connect to Ray: no cluster$"):
        sweeps.run_sweep(write(tmp_path, ""), results, executor="ray")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.toml"]


def test_a_long_value_is_shortened_in_a_sweep_s_errors_and_records():
    long = "x" * 100_000
    sweep = sweeps.sweep_from_dict({"scenario": "rx-default", "grid": {"placement": [long, "l2"]}})
    with pytest.raises(steer.ScenarioError) as raised:
        sweeps.plan(sweep)
    message = str(raised.value)
    assert message.startswith(f'sweep: grid.placement = "{"x" * 79}…[99903 characters]…') and len(message) < 400
    bad, _ = sweeps.plan(sweep, keep_going=True)
    assert bad.error.startswith('sweep: grid.placement = "x') and len(bad.error) < 400
    with pytest.raises(steer.ScenarioError) as raised:
        steer.api.toml_literal({None: long})
    assert len(str(raised.value)) < 200

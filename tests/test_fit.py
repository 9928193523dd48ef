"""`steer fit`: the search, its records, the overlay it writes, and its refusals of bad files."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import steer
from steer import api, fit_search, reproduce
from steer import fit as fits

QUICK_SETS = ["sim.measure_us=100", "sim.warmup_us=10"]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def own_row_fit(tmp_path: Path, measured: float, extra: str = "") -> Path:
    """offered_gbps fitted on rx-default's DRAM write bandwidth (each packet is written once)."""
    return write(
        tmp_path / "load.toml",
        f"""
[parameters]
offered_gbps = [10, 20, 30]

[[rows]]
name = "dram write"
scenario = "rx-default"
set = {{ "sim.measure_us" = 100, "sim.warmup_us" = 10 }}
key = "dram.write_gbps"
measured = {measured}
tolerance = 0.05
{extra}
""",
    )


def simulated(offered: int, key: str = "write_gbps") -> float:
    return api.run("rx-default", [*QUICK_SETS, f"offered_gbps={offered}"])["dram"][key]


def test_the_best_point_is_the_one_whose_row_matches(tmp_path):
    target = simulated(20)
    result = fits.run_fit(own_row_fit(tmp_path, target), tmp_path / "out", workers=1, method="grid")
    assert result.best.point == {"offered_gbps": 20}
    (row,) = result.best.rows
    assert row.simulated == target and row.error == 0.0 and row.within is True
    assert result.best.cost() == 0.0
    # Every point is there, each with its squared error in tolerances.
    costs = {p.point["offered_gbps"]: p.cost() for p in result.points}
    assert costs[10] == pytest.approx(((simulated(10) - target) / 0.05) ** 2)
    assert costs[30] == pytest.approx(((simulated(30) - target) / 0.05) ** 2)


def test_validation_rows_check_the_best_point_but_do_not_choose_it(tmp_path):
    # The validation row wants 30; the calibration row (20) decides.
    extra = f"""
[[rows]]
name = "dram read"
scenario = "rx-default"
set = {{ "sim.measure_us" = 100, "sim.warmup_us" = 10 }}
key = "dram.read_gbps"
measured = {simulated(30, "read_gbps")}
tolerance_percent = 1
role = "validation"
"""
    result = fits.run_fit(own_row_fit(tmp_path, simulated(20), extra), tmp_path / "out", workers=1, method="grid")
    assert result.best.point == {"offered_gbps": 20}
    assert result.best.score("calibration") == (1, 1)
    assert result.best.score("validation") == (0, 1)
    validation = result.best.rows[1]
    assert validation.tolerance == pytest.approx(0.01 * simulated(30, "read_gbps"))


def test_a_fit_called_from_python_is_quiet_unless_asked_even_on_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    path = own_row_fit(tmp_path, 1.0)
    fits.run_fit(path, tmp_path / "quiet", workers=1)
    assert capsys.readouterr().err == ""
    fits.run_fit(path, tmp_path / "shown", workers=1, quiet=False)
    assert "fit " in capsys.readouterr().err


def test_a_fit_resumes_and_the_overlay_applies_the_best_values(tmp_path):
    path = own_row_fit(tmp_path, simulated(30))
    first = fits.run_fit(path, tmp_path / "out", workers=1, method="grid")
    again = fits.run_fit(path, tmp_path / "out", workers=1, method="grid")
    assert (first.ran, first.skipped) == (3, 0)
    assert (again.ran, again.skipped) == (0, 3)
    overlay = fits.overlay_toml(again)
    assert tomllib.loads(overlay) == {"offered_gbps": 30}
    assert "offered_gbps = 30  # calibrated by steer fit on dram write" in overlay
    best = write(tmp_path / "best.toml", overlay)
    assert api.overrides_from_file(best) == ["offered_gbps=30"]


def test_a_resumed_fit_runs_again_only_the_point_that_failed(tmp_path, monkeypatch):
    # One worker runs the points in this process, so the simulation can be made to fail once.
    path = own_row_fit(tmp_path, simulated(20))
    simulate = fits.simulate_rows
    calls: list[list[str]] = []

    def fails_at_20_once(rows, overrides):
        calls.append(overrides)
        if "offered_gbps=20" in overrides and len(calls) <= 3:
            raise RuntimeError("the machine went away")
        return simulate(rows, overrides)

    monkeypatch.setattr(fits, "simulate_rows", fails_at_20_once)
    first = fits.run_fit(path, tmp_path / "out", workers=1, method="grid")
    assert (first.ran, first.skipped) == (3, 0)
    assert list(first.failed.values()) == ["RuntimeError: the machine went away"]
    assert sorted(p.point["offered_gbps"] for p in first.points) == [10, 30]
    again = fits.run_fit(path, tmp_path / "out", workers=1, method="grid")
    assert (again.ran, again.skipped, again.failed) == (1, 2, {})
    assert calls[3:] == [["offered_gbps=20"]]
    assert again.best.point == {"offered_gbps": 20}
    assert sorted(p.point["offered_gbps"] for p in again.points) == [10, 20, 30]


def test_reproduce_rows_take_their_published_value_and_target():
    fit = fits.fit_from_dict(
        {
            "parameters": {"platform.memory.write_queue_latency_ns": [50.0, 58.0, 66.0]},
            "rows": [{"reproduce": "seed004/eflatency-avg"}, {"reproduce": "seed004/onload-udp-avg"}],
        }
    )
    assert [(r.name, r.role) for r in fit.rows] == [
        ("seed004/eflatency-avg", "calibration"),
        ("seed004/onload-udp-avg", "validation"),
    ]
    values = fits.simulate_rows([r.to_spec() for r in fit.rows], ["platform.memory.write_queue_latency_ns=56.0"])
    avg = values["seed004/eflatency-avg"]
    assert (avg["measured"], avg["tolerance"], avg["unit"]) == (55.0, 20.0, "ns")
    assert avg["simulated"] == pytest.approx(55.2, abs=0.05)
    assert list(values) == ["seed004/eflatency-avg", "seed004/onload-udp-avg"]
    assert values["seed004/onload-udp-avg"]["measured"] == 76.0
    # A point's rows take the record's published value, target and unit where it has them.
    point = fits.point_from(fit, {"point": {"p": 1}, "result": values})
    assert [(r.measured, r.tolerance, r.unit) for r in point.rows] == [(55.0, 20.0, "ns"), (76.0, 20.0, "ns")]
    own = fits.FitRow("own", "calibration", measured=2.0, tolerance=0.5, unit="GB/s")
    mine = fits.point_from(fits.Fit({"p": [1]}, [own]), {"point": {"p": 1}, "result": {"own": {"simulated": 3.0}}})
    assert [(r.measured, r.simulated, r.tolerance, r.unit) for r in mine.rows] == [(2.0, 3.0, 0.5, "GB/s")]


@pytest.mark.parametrize("key", ["scenario", "devices.nic0.dma_read_hit_rate"])
def test_a_result_key_that_is_not_a_number_is_refused_by_name(key):
    spec = {"name": "r", "reproduce": None, "scenario": "rx-default", "overrides": QUICK_SETS, "key": key}
    with pytest.raises(steer.ScenarioError, match=rf"^rows: r: result key `{key}` is not a number$"):
        fits.simulate_rows([spec], [])


def test_ranges_are_evenly_spaced_and_whole_numbers_stay_whole():
    assert fits.parameter_values("f", "k", {"min": 30.0, "max": 90.0, "steps": 4}) == [30.0, 50.0, 70.0, 90.0]
    assert fits.parameter_values("f", "k", {"min": 1, "max": 9, "steps": 5}) == [1, 3, 5, 7, 9]
    assert fits.parameter_values("f", "k", {"min": 1, "max": 2, "steps": 3}) == [1.0, 1.5, 2.0]
    nested = fits.fit_from_dict(
        {
            "parameters": {"platform": {"l2": {"latency_cycles": [14, 16]}}},
            "rows": [{"reproduce": "seed004/eflatency-avg"}],
        }
    )
    assert nested.parameters == {"platform.l2.latency_cycles": [14, 16]}


ROW = {"scenario": "rx-default", "key": "dram.read_gbps", "measured": 1.0, "tolerance": 0.1}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"parameters": {"a": [1]}, "rows": [ROW], "extra": 1}, "extra: unknown key"),
        ({"rows": [ROW]}, "parameters: expected a table with at least one parameter"),
        ({"parameters": {}, "rows": [ROW]}, "parameters: expected a table with at least one parameter"),
        ({"parameters": [1], "rows": [ROW]}, "parameters: expected a table with at least one parameter"),
        ({"parameters": {"a": []}, "rows": [ROW]}, "parameters.a: expected at least one value"),
        ({"parameters": {"a": {"min": 1, "max": 2}}, "rows": [ROW]}, "parameters.a: missing `steps`"),
        ({"parameters": {"a": {"min": 2, "max": 1, "steps": 3}}, "rows": [ROW]}, "min must be less than max"),
        ({"parameters": {"a": {"min": 1, "max": 2, "steps": 1}}, "rows": [ROW]}, "steps: expected a whole number"),
        ({"parameters": {"a": {"min": "x", "max": 2, "steps": 3}}, "rows": [ROW]}, "a.min: expected a finite number"),
        ({"parameters": {"a": {"min": 1, "max": 2, "steps": 3}}, "rows": [{**ROW, "measured": math.nan}]}, "(got nan)"),
        (
            {"parameters": {"a": {"min": 1, "max": 2, "steps": 3}}, "rows": [{**ROW, "measured": -math.inf}]},
            "(got -inf)",
        ),
        ({"parameters": {"a": {"min": 1, "max": 2, "steps": 3}}, "rows": [{**ROW, "measured": [1]}]}, "(got a list)"),
        ({"parameters": {"a": {"min": 1, "max": 2, "step": 3}}, "rows": [ROW]}, "parameters.a.step: unknown key"),
        (
            {"parameters": {"a": list(range(101)), "b": list(range(100))}, "rows": [ROW]},
            "10100 points, more than 10000",
        ),
        ({"parameters": {"a": [1]}}, "rows: expected at least one [[rows]] table"),
        ({"parameters": {"a": [1]}, "rows": []}, "rows: expected at least one [[rows]] table"),
        ({"parameters": {"a": [1]}, "rows": ROW}, "rows: expected at least one [[rows]] table"),
        ({"parameters": {"a": [1]}, "rows": [{**ROW, "tolerance_percent": 5}]}, "give one of `tolerance`"),
        ({"parameters": {"a": [1]}, "rows": [{**ROW, "tolerance": 0}]}, "the tolerance must be more than 0"),
        ({"parameters": {"a": [1]}, "rows": [{**ROW, "role": "both"}]}, "rows[0].role: expected calibration"),
        ({"parameters": {"a": [1]}, "rows": [{**ROW, "role": "validation"}]}, "no calibration row to fit on"),
        ({"parameters": {"a": [1]}, "rows": [{**ROW, "measured": "3"}]}, "rows[0].measured: expected a finite"),
        ({"parameters": {"a": [1]}, "rows": [{"reproduce": "seed9/x"}]}, "rows[0].reproduce: expected"),
        ({"parameters": {"a": [1]}, "rows": [{"reproduce": "seed004/x", "key": "k"}]}, "rows[0].key: unknown key"),
        ({"parameters": {"a": [1]}, "rows": [{"scenario": "rx-default"}]}, "rows[0]: missing `key`"),
        ({"parameters": {"a": [1]}, "rows": [ROW, ROW]}, "two rows are named"),
    ],
)
def test_bad_fit_files_are_refused_naming_the_key(data, message):
    with pytest.raises(steer.ScenarioError) as error:
        fits.fit_from_dict(data, "f.toml")
    assert message in str(error.value) and str(error.value).startswith("f.toml: ")


def test_a_result_key_that_does_not_exist_fails_every_point_with_one_reason(tmp_path):
    path = write(
        tmp_path / "f.toml",
        '[parameters]\noffered_gbps = [10]\n[[rows]]\nscenario = "rx-default"\nkey = "dram.nope"\n'
        "measured = 1\ntolerance = 1\n",
    )
    with pytest.raises(steer.ScenarioError, match=r"no result key `dram.nope` \(see `steer stats`\)"):
        fits.run_fit(path, tmp_path / "out", workers=1)


def steer_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "steer", *args], capture_output=True, text=True, cwd=cwd)


def test_steer_fit_writes_the_overlay_and_json(tmp_path):
    path = own_row_fit(tmp_path, simulated(10))
    done = steer_cli(
        "fit",
        str(path),
        "-r",
        "out",
        "--workers",
        "1",
        "--method",
        "grid",
        "--json",
        "fit.json",
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "best point: offered_gbps = 10" in done.stdout
    assert "calibration: 1 of 1 rows within tolerance" in done.stdout
    assert tomllib.loads((tmp_path / "out" / "best.toml").read_text()) == {"offered_gbps": 10}
    data = json.loads((tmp_path / "fit.json").read_text())
    assert data["best"] == {"offered_gbps": 10} and data["scores"]["calibration"] == [1, 1]
    assert [p["point"] for p in data["points"]] == [{"offered_gbps": v} for v in (10, 20, 30)]
    # The overlay applies to any command taking --set.
    done = steer_cli("resolve", "rx-default", "--set-file", "out/best.toml", cwd=tmp_path)
    assert done.returncode == 0 and "offered_gbps = 10" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fit", "missing.toml"], "steer: error: missing.toml: cannot read fit file: No such file or directory"),
        (["fit", "bad.toml"], "steer: error: bad.toml: invalid TOML"),
        (["fit", "."], "steer: error: .: cannot read fit file: Is a directory\n"),
        (["run", "rx-default", "--set-file", "missing.toml"], "--set-file: missing.toml: cannot read: No such file"),
        (["run", "rx-default", "--set-file", "bad.toml"], "--set-file: bad.toml: invalid TOML"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(tmp_path, args, message):
    write(tmp_path / "bad.toml", "[parameters\n")
    done = steer_cli(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


FITS = Path(__file__).resolve().parent.parent / "fits"


@pytest.mark.parametrize("path", sorted(FITS.glob("*.toml")), ids=lambda path: path.name)
def test_the_committed_fit_files_are_valid(path):
    fit = fits.load_fit(path)
    assert fit.description and any(row.role == "calibration" for row in fit.rows)


@pytest.mark.parametrize("name", ["dsa-port", "dsa-descriptor"])
def test_the_dsa_kinds_calibrated_defaults_are_the_best_points_of_their_fits(tmp_path, name):
    # Each parameter's grid narrowed to the kind's default and its neighbours on the fit's own
    # step: the default must be the best point, so a changed default or fit shows here.
    (dsa,) = [e for e in api.catalog("device") if e["name"] == "dsa"]
    fit = fits.load_fit(FITS / f"{name}.toml")
    defaults = {f"devices.0.{key}": value for key, value, _ in dsa["params"]}
    defaults = {key: float(defaults[key]) for key in fit.parameters}
    for key, values in fit.parameters.items():
        i = min(range(len(values)), key=lambda k: abs(values[k] - defaults[key]))
        assert values[i] == pytest.approx(defaults[key]), key
        fit.parameters[key] = values[i - 1 : i + 2]
    result = fits.run_fit(fit, tmp_path / "out", workers=1, method="grid")
    assert result.best.point == pytest.approx(defaults)
    assert all(row.within for row in result.best.rows)


def hand_made_result() -> fits.FitResult:
    """Three points of two parameters, one outside any table: the first two tie on the
    calibration rows, and the validation rows part them."""
    rows = [
        fits.FitRow("bw", "calibration", measured=10.0, tolerance=1.0, unit="GB/s"),
        fits.FitRow("lat", "calibration", measured=50.0, tolerance=5.0, unit="ns"),
        fits.FitRow("check", "validation", measured=2.0, tolerance=0.5),
        fits.FitRow("far", "validation", measured=100.0, tolerance=10.0),
        fits.FitRow("info", "validation", measured=1.0),
    ]
    parameters = {"platform.memory.channel_gbs": [40, 45, 50], "offered_gbps": [10.0]}
    fit = fits.Fit(parameters, rows, "bandwidth against load", "load.toml")

    def point(channel_gbs, simulated):
        results = [
            fits.RowResult(row, row.measured, value, None if row.name == "info" else row.tolerance, row.unit)
            for row, value in zip(rows, simulated, strict=True)
        ]
        return fits.Point({"platform.memory.channel_gbs": channel_gbs, "offered_gbps": 10.0}, results)

    points = [
        point(40, [11.0, 50.0, 3.0, 150.0, 7.0]),  # calibration cost 1 + 0, validation 4 + 25
        point(45, [9.0, 50.0, 2.25, 150.0, 7.0]),  # calibration cost 1 + 0, validation 0.25 + 25
        point(50, [13.0, 55.0, 2.0, 150.0, 7.0]),  # calibration cost 9 + 1
    ]
    return fits.FitResult(fit, points, {"run-x": "boom"}, ran=2, skipped=1)


def test_the_report_overlay_and_json_of_a_hand_made_result():
    result = hand_made_result()
    assert result.best is result.points[1]
    assert fits.report(result) == "\n".join(
        [
            "best point: platform.memory.channel_gbs = 45, offered_gbps = 10.0",
            "",
            "row    role         measured  simulated  error  tolerance  within",
            "bw     calibration  10 GB/s   9 GB/s     -1     1          yes",
            "lat    calibration  50 ns     50 ns      +0     5          yes",
            "check  validation   2         2.25       +0.25  0.5        yes",
            "far    validation   100       150        +50    10         no",
            "info   validation   1         7          +6     -          -",
            "calibration: 2 of 2 rows within tolerance (cost 1)",
            "validation: 1 of 2 rows within tolerance (cost 25.25)",
            "",
            "lowest calibration costs:",
            "           1  platform.memory.channel_gbs = 40, offered_gbps = 10.0",
            "           1  platform.memory.channel_gbs = 45, offered_gbps = 10.0",
            "          10  platform.memory.channel_gbs = 50, offered_gbps = 10.0",
            "3 points: 2 simulated now, 1 done before, 1 failed",
            "  failed at run-x: boom",
        ]
    )
    # Two points are ranked; one has no ranking to show.
    two = fits.FitResult(result.fit, result.points[:2], {}, ran=2, skipped=0)
    assert "lowest calibration costs:" in fits.report(two)
    alone = fits.FitResult(result.fit, result.points[1:2], {}, ran=1, skipped=0)
    assert "lowest calibration costs" not in fits.report(alone)
    assert fits.report(alone).endswith(
        "validation: 1 of 2 rows within tolerance (cost 25.25)\n1 point: 1 simulated now, 0 done before, 0 failed"
    )
    # A key outside any table goes before the first header, or TOML would put it in that table.
    overlay = fits.overlay_toml(result)
    assert overlay == "\n".join(
        [
            "# steer fit load.toml: the best of 3 points (calibration cost 1; validation cost 25.25).",
            "# Apply with --set-file FILE (steer run, reproduce, sweep, ...).",
            "# bandwidth against load",
            "",
            "offered_gbps = 10.0  # calibrated by steer fit on bw, lat",
            "",
            "[platform.memory]",
            "channel_gbs = 45  # calibrated by steer fit on bw, lat",
            "",
        ]
    )
    assert tomllib.loads(overlay) == {"offered_gbps": 10.0, "platform": {"memory": {"channel_gbs": 45}}}
    data = result.to_dict()
    assert data["rows"][0] == {
        "row": "bw",
        "role": "calibration",
        "unit": "GB/s",
        "measured": 10.0,
        "simulated": 9.0,
        "error": -1.0,
        "tolerance": 1.0,
        "within": True,
    }
    assert [(r["row"], r["within"]) for r in data["rows"]] == [
        ("bw", True),
        ("lat", True),
        ("check", True),
        ("far", False),
        ("info", None),
    ]
    del data["rows"]
    assert data == {
        "fit": "load.toml",
        "best": {"platform.memory.channel_gbs": 45, "offered_gbps": 10.0},
        "calibration_cost": 1.0,
        "validation_cost": 25.25,
        "scores": {"calibration": [2, 2], "validation": [1, 2]},
        "points": [
            {"point": {"platform.memory.channel_gbs": c, "offered_gbps": 10.0}, "calibration_cost": cost}
            for c, cost in ((40, 1.0), (45, 1.0), (50, 10.0))
        ],
        "method": "grid",
        "failed": [{"point": "run-x", "error": "boom"}],
    }


def test_a_row_exactly_at_its_tolerance_is_within_and_costs_one():
    row = fits.FitRow("r", "calibration", measured=2.0, tolerance=0.5)
    assert fits.RowResult(row, 2.0, 2.5, 0.5, "").within is True
    assert fits.RowResult(row, 2.0, 2.5, 0.5, "").cost() == 1.0
    assert fits.RowResult(row, 2.0, 1.0, 0.5, "").cost() == 4.0
    assert fits.RowResult(row, 2.0, 2.5000001, 0.5, "").within is False
    assert fits.RowResult(row, 2.0, 9.0, None, "").cost() == 0.0


def test_a_range_takes_2_to_1000_steps_rounds_away_float_noise_and_keeps_integers_whole():
    values = fits.parameter_values
    assert values("f", "k", {"min": 1, "max": 2, "steps": 2}) == [1, 2]
    assert len(values("f", "k", {"min": 0, "max": 999, "steps": fits.MAX_STEPS})) == 1000
    too_many = r"^f: parameters.k.steps: expected a whole number from 2 to 1000 \(got 1001\)$"
    with pytest.raises(steer.ScenarioError, match=too_many):
        values("f", "k", {"min": 0, "max": 1, "steps": 1001})
    with pytest.raises(steer.ScenarioError, match=r"^f: parameters.k: min must be less than max \(got 3 and 3\)$"):
        values("f", "k", {"min": 3, "max": 3, "steps": 2})
    # 0.1 + 0.2 is 0.30000000000000004 in binary; twelve digits are kept.
    assert values("f", "k", {"min": 0.1, "max": 0.3, "steps": 3}) == [0.1, 0.2, 0.3]
    # Whole values from integer bounds stay integers; from a float bound they stay floats.
    assert [type(v) for v in values("f", "k", {"min": 0, "max": 4, "steps": 3})] == [int] * 3
    assert [type(v) for v in values("f", "k", {"min": 0.0, "max": 4, "steps": 3})] == [float] * 3


def test_a_tolerance_in_percent_is_of_the_measured_values_size():
    fit = fits.fit_from_dict(
        {
            "parameters": {"a": [1]},
            "rows": [{"scenario": "rx-default", "key": "k", "measured": -40.0, "tolerance_percent": 5}],
        }
    )
    assert fit.rows[0].tolerance == 2.0
    assert fit.rows[0].name == "rx-default: k" and fit.rows[0].role == "calibration"


def test_a_grid_of_exactly_the_most_points_is_accepted_and_own_scenarios_are_found_beside_the_fit(tmp_path):
    grid = {"parameters": {"a": list(range(100)), "b": list(range(100))}, "rows": [ROW]}
    assert len(fits.fit_from_dict(grid).points()) == fits.MAX_POINTS
    own = {**ROW, "scenario": "mine.toml"}
    fit = fits.fit_from_dict({"parameters": {"a": [1]}, "rows": [own]}, "f.toml", base=tmp_path)
    assert fit.rows[0].scenario == str(tmp_path / "mine.toml")


def test_the_report_ranks_at_most_five_points():
    result = hand_made_result()
    result.points *= 3
    ranked = fits.report(result).split("lowest calibration costs:\n")[1].splitlines()[:-2]
    assert len(ranked) == 5 and all(line.startswith("           1  ") for line in ranked[:4])


BOM = b"\xef\xbb\xbf"
# Each TOML input file that is not a scenario, with the command that reads it.
INPUT_FILES = {
    "sweep": (
        ["sweep", "in.toml", "--dry-run"],
        'scenario = "rx-default"\n[grid]\noffered_gbps = [10]\n',
        "sweep file",
    ),
    "fit": (
        ["fit", "in.toml", "--workers", "1", "--quiet"],
        '[parameters]\n"sim.measure_us" = [20]\n[[rows]]\nscenario = "rx-default"\nset = { "sim.warmup_us" = 10 }\n'
        'key = "dram.read_gbps"\nmeasured = 1.0\ntolerance = 0.1\n',
        "fit file",
    ),
    "set-file": (["resolve", "rx-default", "--set-file", "in.toml"], "offered_gbps = 12\n", ""),
}


@pytest.mark.parametrize("kind", INPUT_FILES)
def test_sweep_fit_and_set_files_are_read_as_scenario_files_are_with_or_without_a_byte_order_mark(tmp_path, kind):
    args, text, what = INPUT_FILES[kind]
    (tmp_path / "in.toml").write_bytes(BOM + text.encode())
    done = steer_cli(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # Not UTF-8 (a Windows-1252 quote): said so, as the scenario loader says it, without the codec's words.
    (tmp_path / "in.toml").write_bytes(b"#\x91\n" + text.encode())
    done = steer_cli(*args, cwd=tmp_path)
    assert done.returncode == 2
    prefix = "--set-file: " if kind == "set-file" else ""
    cannot = f"cannot read {what}" if what else "cannot read"
    assert f"{prefix}in.toml: {cannot}: not UTF-8 text" in done.stderr
    assert len(done.stderr.splitlines()) == 1


# ----------------------------------------------------------------------------- the search


def linear_fit(tmp_path: Path, extra: str = "") -> Path:
    """offered_gbps as a range, one own row whose simulated value (stubbed: offered / 10) is
    measured at 4.2: the best point is 42 exactly."""
    return write(
        tmp_path / "linear.toml",
        f"""
[parameters]
offered_gbps = {{ min = 10.0, max = 90.0, steps = 9 }}
{extra}
[[rows]]
name = "row"
scenario = "rx-default"
key = "dram.write_gbps"
measured = 4.2
tolerance = 0.1
""",
    )


def stub_simulation(monkeypatch, interrupt_at: int | None = None) -> list[str]:
    """Rows simulated as offered_gbps / 10 (in this process: one worker); records each point's
    overrides; Ctrl-C at call ``interrupt_at``."""
    calls: list[str] = []

    def simulate(rows, overrides):
        if len(calls) + 1 == interrupt_at:
            raise KeyboardInterrupt
        calls.append(" ".join(overrides))
        values = dict(item.split("=") for item in overrides)
        return {row["name"]: {"simulated": float(values["offered_gbps"]) / 10} for row in rows}

    monkeypatch.setattr(fits, "simulate_rows", simulate)
    return calls


def test_the_search_solves_a_linear_row_in_three_points_and_stops_at_a_cost_of_0(tmp_path, monkeypatch):
    calls = stub_simulation(monkeypatch)
    result = fits.run_fit(linear_fit(tmp_path), tmp_path / "out", workers=1)
    # The start's two strata centres (30 and 70), then the root of the line through them.
    assert calls == ["offered_gbps=30.0", "offered_gbps=70.0", "offered_gbps=42.0"]
    assert result.best.point == {"offered_gbps": 42.0} and result.best.cost() == 0.0
    assert (result.method, result.ran, result.skipped) == ("search", 3, 0)
    assert "3 points (searched; the grid has 9): 3 simulated now" in fits.report(result)


def test_an_interrupted_search_resumes_with_the_same_points_under_the_same_ids_as_the_grid(tmp_path, monkeypatch):
    stub_simulation(monkeypatch, interrupt_at=3)
    with pytest.raises(KeyboardInterrupt):
        fits.run_fit(linear_fit(tmp_path), tmp_path / "out", workers=1)
    assert len(list((tmp_path / "out" / "runs").glob("*.json"))) == 2
    calls = stub_simulation(monkeypatch)
    again = fits.run_fit(linear_fit(tmp_path), tmp_path / "out", workers=1)
    assert calls == ["offered_gbps=42.0"] and (again.ran, again.skipped) == (1, 2)
    assert [p.point["offered_gbps"] for p in again.points] == [30.0, 70.0, 42.0]
    # The grid's 30 and 70 are the search's: the grid runs only its seven others.
    grid = fits.run_fit(linear_fit(tmp_path), tmp_path / "out", workers=1, method="grid")
    assert (grid.ran, grid.skipped) == (7, 2)
    assert calls[1:] == [f"offered_gbps={v:.1f}" for v in (10, 20, 40, 50, 60, 80, 90)]


def test_the_search_takes_a_list_as_neighbours_and_stops_when_none_is_left_to_try(tmp_path, monkeypatch):
    # A second parameter, a list, that the stubbed row ignores; the row's best offered load,
    # 42.053, is between two values of the range's resolution (0.01).
    calls = stub_simulation(monkeypatch)
    path = linear_fit(tmp_path, '"sim.measure_us" = [100, 200, 300]')
    path.write_text(path.read_text().replace("measured = 4.2", "measured = 4.2053"))
    result = fits.run_fit(path, tmp_path / "out", workers=1, budget=10)
    assert calls == [
        # The start: three points, one in each third of both parameters.
        "offered_gbps=50.0 sim.measure_us=100",
        "offered_gbps=23.33 sim.measure_us=300",
        "offered_gbps=76.67 sim.measure_us=200",
        # The least-squares step, at the resolution.
        "offered_gbps=42.05 sim.measure_us=100",
        # Its neighbours, the model's most promising first: none is better.
        "offered_gbps=42.05 sim.measure_us=200",
        "offered_gbps=42.06 sim.measure_us=100",
        "offered_gbps=42.04 sim.measure_us=100",
        # The list's values beside the next best combination of list values (200): then every
        # value of the list has run beside one run, and the search stops.
        "offered_gbps=42.05 sim.measure_us=300",
    ]
    assert result.best.point == {"offered_gbps": 42.05, "sim.measure_us": 100}


def test_the_default_budget_is_a_fifth_of_the_grid_and_at_least_two_points_per_parameter_and_two():
    fit = fits.fit_from_dict({"parameters": {"a": {"min": 1.0, "max": 2.0, "steps": 31}}, "rows": [ROW]})
    assert fits.default_budget(fit) == 6
    fit = fits.fit_from_dict({"parameters": {"a": [1, 2, 3], "b": [1, 2], "c": [5]}, "rows": [ROW]})
    assert fits.default_budget(fit) == 6  # a fifth of 6 is 1; two parameters searched
    with pytest.raises(steer.ScenarioError, match=r"^--budget: expected a whole number of points, at least 1"):
        fits.run_fit(fit, "unused", budget=0)
    with pytest.raises(
        steer.ScenarioError, match=r"^--budget: only for --method search \(the grid runs every point\)$"
    ):
        fits.run_fit(fit, "unused", budget=3, method="grid")
    with pytest.raises(steer.ScenarioError, match=r"^unknown method `best` \(expected search or grid\)$"):
        fits.run_fit(fit, "unused", method="best")


def test_the_start_is_a_latin_hypercube_of_one_point_more_than_parameters():
    for dimensions in range(1, 7):
        design = fit_search.start_design(dimensions)
        assert len(design) == dimensions + 1
        for j in range(dimensions):
            # Each parameter's range in dimensions + 1 strata, one point at the middle of each.
            assert sorted(point[j] for point in design) == [(s + 0.5) / (dimensions + 1) for s in range(dimensions + 1)]
    assert fit_search.start_design(2) == [[0.5, 1 / 6], [1 / 6, 5 / 6], [5 / 6, 0.5]]


def test_a_ranges_resolution_is_a_power_of_ten_at_most_a_thousandth_of_it_and_whole_for_whole_grids():
    axis = fit_search.Axis("k", low=30.0, high=90.0)
    assert (axis.resolution, axis.value(0.4321), axis.value(-1.0), axis.value(2.0)) == (0.01, 55.93, 30.0, 90.0)
    assert fit_search.Axis("k", low=0.19, high=0.215).value(0.5) == 0.2025  # resolution 1e-5
    assert fit_search.Axis("k", low=1e-10, high=2e-10).value(0.123) == 1.123e-10  # 1e-13
    whole = fit_search.Axis("k", low=0, high=100, whole=True)
    assert (whole.resolution, whole.value(0.333)) == (1.0, 33)
    listed = fit_search.Axis("k", values=("a", "b", "c"))
    assert (listed.step, listed.value(0.2), listed.value(0.3), listed.coordinate("c")) == (0.5, "a", "b", 1.0)


def test_a_fit_file_makes_a_range_continuous_and_a_list_of_one_value_fixed():
    fit = fits.fit_from_dict(
        {
            "parameters": {"a": {"min": 1, "max": 9, "steps": 5}, "b": [7], "c": {"min": 0.5, "max": 1.0, "steps": 3}},
            "rows": [ROW],
        }
    )
    assert fit.axes() == [
        fit_search.Axis("a", low=1.0, high=9.0, whole=True),
        fit_search.Axis("c", low=0.5, high=1.0, whole=False),
    ]
    assert fit.point([3, 0.75]) == {"a": 3, "b": 7, "c": 0.75}
    assert fit.corners() == [{"a": a, "b": 7, "c": c} for a in (1, 9) for c in (0.5, 1.0)]


# ----------------------------------------------------------------------------- checked before anything runs

DOCS = Path(__file__).resolve().parent.parent / "docs"


def docs_fit_file() -> str:
    """The fit file docs/fit.md shows."""
    (block,) = re.findall(r"```toml\n(.*?)```", (DOCS / "fit.md").read_text(), re.S)
    return block


def test_the_fit_file_of_the_docs_runs_as_the_readme_runs_it(tmp_path):
    write(tmp_path / "my-fit.toml", docs_fit_file())
    done = steer_cli("fit", "my-fit.toml", "--workers", "2", "--json", "fit.json", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    best = tomllib.loads((tmp_path / "results" / "fit-my-fit" / "best.toml").read_text())
    assert set(best["platform"]) == {"memory", "l2"}
    assert json.loads((tmp_path / "fit.json").read_text())["scores"]["calibration"] == [1, 1]
    done = steer_cli("run", "rx-default", "--set-file", "results/fit-my-fit/best.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_parameter_a_rows_scenario_lacks_is_refused_before_any_point_runs_naming_the_row(tmp_path, monkeypatch):
    calls = stub_simulation(monkeypatch)
    # The docs' earlier example: the offered load is not a parameter of eflatency, which the row runs.
    text = docs_fit_file().replace('"platform.l2.latency_cycles" = [14, 16]', "offered_gbps = [10, 20, 30]")
    path = write(tmp_path / "f.toml", text)
    for method in fits.METHODS:
        with pytest.raises(steer.ScenarioError) as error:
            fits.run_fit(path, tmp_path / "out", workers=1, method=method)
        message = str(error.value)
        assert message.startswith(
            f"{path}: platform.memory.write_queue_latency_ns = 30.0, offered_gbps = 10: rows[0] "
            '(seed004/eflatency-avg): eflatency read_data=true payload_bytes=0 tph_mode="off": '
            "--set offered_gbps: not a parameter (declared: copy, payload_bytes, placement, read_data,"
        )
        checked = 93 if method == "grid" else 6  # the search checks its box's corners
        assert message.endswith(f"({checked} of {checked} points checked are invalid)")
    assert calls == [] and not (tmp_path / "out").exists()


def bad_point_fit(tmp_path: Path) -> Path:
    return write(
        tmp_path / "bad.toml",
        """
[parameters]
offered_gbps = [10, 200]

[[rows]]
scenario = "rx-default"
set = { "sim.measure_us" = 100, "sim.warmup_us" = 10 }
key = "dram.write_gbps"
measured = 1.0
tolerance = 1.0
""",
    )


REFUSED = (
    "rows[0] (rx-default: dram.write_gbps): rx-default sim.measure_us=100 sim.warmup_us=10: "
    "--set offered_gbps: devices.0.queues: offered load 200 Gb/s exceeds the 100 Gb/s link"
)


def test_an_invalid_point_is_refused_before_any_runs_or_with_keep_going_run_around_and_named(tmp_path, monkeypatch):
    calls = stub_simulation(monkeypatch)
    path = bad_point_fit(tmp_path)
    for method in fits.METHODS:
        with pytest.raises(steer.ScenarioError) as error:
            fits.run_fit(path, tmp_path / "out", workers=1, method=method)
        assert str(error.value) == f"{path}: offered_gbps = 200: {REFUSED}"
    assert calls == []
    result = fits.run_fit(path, tmp_path / "out", workers=1, method="grid", keep_going=True)
    assert calls == ["offered_gbps=10"] and [p.point for p in result.points] == [{"offered_gbps": 10}]
    assert result.failed == {"offered_gbps = 200": REFUSED}
    assert fits.report(result).endswith(
        f"1 point: 2 simulated now, 0 done before, 1 failed\n  failed at offered_gbps = 200: {REFUSED}"
    )
    assert result.to_dict()["failed"] == [{"point": "offered_gbps = 200", "error": REFUSED}]


def test_steer_fit_exits_1_naming_the_points_that_failed(tmp_path):
    bad_point_fit(tmp_path)
    done = steer_cli("fit", "bad.toml", "--method", "grid", "--quiet", "--workers", "1", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"steer: error: bad.toml: offered_gbps = 200: {REFUSED}\n"
    done = steer_cli("fit", "bad.toml", "--method", "grid", "--quiet", "--workers", "1", "--keep-going", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"  failed at offered_gbps = 200: {REFUSED}\n" in done.stdout


def test_the_runs_a_reproduce_row_is_checked_on_are_exactly_those_its_experiment_runs():
    stored = json.loads((Path(__file__).parent / "fixtures" / "reproduce" / "runs.json").read_text())
    planned = set()
    for name, ids in reproduce.ROW_IDS.items():
        runs = fits.row_runs(fits.FitRow(ids[0], "calibration", reproduce=ids[0]))
        assert len(runs) == reproduce.RUNS[name], name
        planned |= {" ".join((scenario, *overrides)) for scenario, overrides in runs}
    assert planned == set(stored)


# ----------------------------------------------------------------------------- the plot


def test_the_plot_draws_each_points_cost_in_order_the_least_so_far_and_the_grids_beside_the_search(
    tmp_path, monkeypatch
):
    stub_simulation(monkeypatch)
    path = linear_fit(tmp_path)
    search = fits.run_fit(path, tmp_path / "out", workers=1)
    store = fits.Store(tmp_path / "out")
    # Without the grid's every point in the results directory, the search's points alone.
    (alone,) = fits.cost_curves(search, store)
    costs = [((30 / 10 - 4.2) / 0.1) ** 2, ((70 / 10 - 4.2) / 0.1) ** 2, 0.0]
    assert (alone.method, alone.costs, alone.best_so_far) == (
        "search",
        pytest.approx(costs),
        pytest.approx([144, 144, 0]),
    )
    fits.run_fit(path, tmp_path / "out", workers=1, method="grid")
    mine, grid = fits.cost_curves(search, store)
    assert mine == alone and grid.method == "grid"
    grid_costs = [((v / 10 - 4.2) / 0.1) ** 2 for v in range(10, 100, 10)]
    assert grid.costs == pytest.approx(grid_costs)
    assert grid.best_so_far == pytest.approx([1024, 484, 144, 4, 4, 4, 4, 4, 4])

    ax = fits.cost_figure(search, store).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines) == [
        "search: each point",
        "search: least so far (0 after 3 points)",
        "grid: each point",
        "grid: least so far (4 after 9 points)",
    ]
    # A cost of 0 sits at a tenth of the least cost above 0, the axis being logarithmic.
    assert list(lines["search: each point"].get_xdata()) == [1, 2, 3]
    assert list(lines["search: each point"].get_ydata()) == pytest.approx([144, 784, 0.4])
    assert list(lines["search: least so far (0 after 3 points)"].get_ydata()) == pytest.approx([144, 144, 0.4])
    assert list(lines["grid: least so far (4 after 9 points)"].get_ydata()) == pytest.approx(grid.best_so_far)
    assert ax.get_yscale() == "log"
    assert ax.get_title() == "steer fit linear: calibration cost by point (search)"
    assert ax.get_xlabel() == "point, in the order run"


def test_steer_fit_writes_the_plot_it_is_asked_for_and_refuses_a_format_it_cannot_before_running(tmp_path):
    path = own_row_fit(tmp_path, 1.0)
    done = steer_cli("fit", str(path), "--plot", "costs.bmp", "--workers", "1", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        2,
        "steer: error: --plot costs.bmp: unknown image format (use .png or .svg)\n",
    )
    assert not (tmp_path / "results").exists()
    done = steer_cli("fit", str(path), "--plot", "costs.png", "--workers", "1", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "costs.png").read_bytes().startswith(b"\x89PNG")


def test_a_search_on_ray_starts_ray_once_for_all_its_steps(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    starts = []
    init = ray.init
    monkeypatch.setattr(ray, "init", lambda **options: starts.append(options) or init(**options))
    # The start (20 and 30), then a step to 10 (the row's best): two steps of the executor.
    result = fits.run_fit(own_row_fit(tmp_path, simulated(10)), tmp_path / "out", executor="ray", workers=2)
    assert [p.point["offered_gbps"] for p in result.points] == [20, 30, 10]
    assert len(starts) == 1 and not ray.is_initialized()


def test_past_a_local_minimum_the_search_walks_the_lists_from_the_next_best_values_while_the_budget_lasts():
    # Two lists; along b = 0 the cost falls to a local minimum at a = 4 (1.5); its least (0.5) is
    # at (0, 1), beside only (0, 0) and (1, 1), which cost more.
    costs = dict(zip([(a, 0) for a in range(5)], [5, 4, 3, 2, 1.5])) | dict(
        zip([(a, 1) for a in range(5)], [0.5, 6, 6, 6, 6])
    )
    axes = [fit_search.Axis("a", values=(0, 1, 2, 3, 4)), fit_search.Axis("b", values=(0, 1))]

    def run(points):
        return [(math.sqrt(costs[p]),) for p in points]

    history = fit_search.Search(axes, run, budget=12).run()
    assert [e.values for e in history] == [
        (2, 0), (1, 1), (3, 1),  # the start
        (1, 0), (3, 0), (4, 0),  # steps of the trust region to the local minimum
        (4, 1),  # its one neighbour not run: not better
        (2, 1), (0, 0),  # the neighbours of the next best values: (2, 0)'s, then (1, 0)'s
        (0, 1),  # (0, 0)'s: the least; every point has run
    ]  # fmt: skip
    assert fit_search.Search(axes, run, budget=6).run()[-1].values == (4, 0)  # the budget stops it

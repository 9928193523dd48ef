"""`steer sweep`, `fit`, `plot`, `report` and `export` as commands, in process: what each passes on
to the library (mocked here, tested in test_sweep, test_fit, test_plot, test_report) and exactly
what it prints and writes."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from steer import fit, plot, report, store, sweep
from steer.cli import main
from steer.sweep import SweepSummary

SWEEP = """scenario = "rx-default"
[set]
sim.measure_us = 100
[grid]
placement = ["memory", "l2"]
ring = [256, 0, 128]
"""


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(SWEEP)
    return path


def fake_run_sweep(monkeypatch, summary):
    calls = []

    def run_sweep(sweep_file, results, **options):
        calls.append((sweep_file, results, options))
        return summary

    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    return calls


def test_sweep_passes_its_options_on_and_prints_what_ran(monkeypatch, capsys, sweep_file):
    summary = SweepSummary(Path("r"), total=5, skipped=2, ran=["a", "b", "c"], failed={}, seconds=1.25)
    calls = fake_run_sweep(monkeypatch, summary)
    assert main(["sweep", str(sweep_file), "--executor", "local"]) == 0
    assert calls.pop()[2]["executor"] == "local"
    capsys.readouterr()
    argv = ["sweep", str(sweep_file), "--executor", "ray", "--workers", "3", "--address", "auto", "--quiet"]
    assert main([*argv, "--skip-failed", "--keep-going", "--set", "x=1"]) == 0
    assert calls == [
        (
            str(sweep_file),
            Path("results/grid"),
            {
                "executor": "ray",
                "workers": 3,
                "address": "auto",
                "overrides": ["x=1"],
                "retry_failed": False,
                "quiet": True,
                "keep_going": True,
            },
        )
    ]
    assert (
        capsys.readouterr().out == "5 runs: 3 finished now, 2 already done, 0 failed (1.2 s); results in results/grid\n"
    )
    assert main(["sweep", str(sweep_file), "-o", "elsewhere"]) == 0
    assert calls[-1][1] == Path("elsewhere")
    assert calls[-1][2]["retry_failed"] is True and calls[-1][2]["keep_going"] is False
    assert capsys.readouterr().out.endswith("results in elsewhere\n")


def test_a_sweep_with_failures_lists_the_first_five_and_exits_1(monkeypatch, capsys, sweep_file, tmp_path):
    failed = {f"id{i}": f"error {i}\nmore detail" for i in range(6)}
    summary = SweepSummary(tmp_path, total=8, skipped=0, ran=["id0", "id1", "ok"], failed=failed, seconds=0.0)
    fake_run_sweep(monkeypatch, summary)
    assert main(["sweep", str(sweep_file), "-o", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"8 runs: 1 finished now, 0 already done, 6 failed (0.0 s); results in {tmp_path}",
        "  failed id0: error 0",
        "  failed id1: error 1",
        "  failed id2: error 2",
        "  failed id3: error 3",
        "  failed id4: error 4",
        f"  ... 1 more in {tmp_path / 'failed'}",
    ]
    del failed["id5"]
    failed["id4"] = ""
    assert main(["sweep", str(sweep_file), "-o", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "  failed id4: ?"


def test_a_dry_run_lists_every_point_with_its_state_and_runs_nothing(monkeypatch, capsys, sweep_file, tmp_path):
    tasks = sweep.plan(sweep.load_sweep(sweep_file), keep_going=True)
    ids = [t.run_id for t in tasks]
    monkeypatch.setattr(store.Store, "finished_ids", lambda self: {ids[0]})
    monkeypatch.setattr(store.Store, "failed_ids", lambda self: {ids[2]})
    monkeypatch.setattr(sweep, "run_sweep", None)
    assert main(["sweep", str(sweep_file), "-o", str(tmp_path / "out"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines[:7]] == [
        ["point", "run", "id", "placement", "ring", "state"],
        ["0", ids[0], '"memory"', "256", "done"],
        ["1", ids[1], '"memory"', "0", "invalid"],
        ["2", ids[2], '"memory"', "128", "failed"],
        ["3", ids[3], '"l2"', "256", "pending"],
        ["4", ids[4], '"l2"', "0", "invalid"],
        ["5", ids[5], '"l2"', "128", "pending"],
    ]
    assert lines[7] == f"6 runs; 1 done in {tmp_path / 'out'}"
    assert not (tmp_path / "out").exists()


def test_a_dry_run_applies_set_to_every_point(capsys, sweep_file, tmp_path):
    assert main(["sweep", str(sweep_file), "-o", str(tmp_path), "--dry-run", "--set", "ring=128"]) == 2
    assert capsys.readouterr().err == f"steer: error: --set ring: already swept in {sweep_file}\n"
    plain = main(["sweep", str(sweep_file), "-o", str(tmp_path), "--dry-run"])
    ids = capsys.readouterr().out
    assert plain == 0
    assert main(["sweep", str(sweep_file), "-o", str(tmp_path), "--dry-run", "--set", "sim.warmup_us=77"]) == 0
    assert capsys.readouterr().out != ids


def fake_plot(monkeypatch):
    calls = {}
    monkeypatch.setattr(plot, "as_frame", lambda results: ("frame", results))
    monkeypatch.setattr(plot, "where", lambda df, where: (df, tuple(where)))
    monkeypatch.setattr(plot, "figure", lambda df, kind, **options: calls.setdefault("figure", (df, kind, options)))
    monkeypatch.setattr(plot, "save", lambda figure, path: calls.setdefault("save", (figure, path)))
    return calls


@pytest.mark.parametrize(
    "argv, options",
    [
        (["--kind", "dram"], {"by": None}),
        (["--kind", "fills", "--dc-fills", "--by", "ring"], {"by": "ring", "counters": "dc_fills"}),
        (["--kind", "latency", "--field", "f", "--by", "ring"], {"field": "f"}),
        (["--kind", "metric"], {"by": None, "y": ["dram.read_gbps", "dram.write_gbps"], "x": None}),
        (["--kind", "metric", "--x", "ring", "--y", "a", "--y", "b"], {"by": None, "y": ["a", "b"], "x": "ring"}),
    ],
)
def test_plot_passes_each_kind_its_options_and_writes_under_the_results(monkeypatch, capsys, tmp_path, argv, options):
    calls = fake_plot(monkeypatch)
    assert main(["plot", str(tmp_path), *argv, "--where", "a=1", "--where", "b=2"]) == 0
    kind = argv[1]
    frame = (("frame", str(tmp_path)), ("a=1", "b=2"))
    assert calls["figure"] == (frame, kind, options)
    assert calls["save"] == (calls["figure"], tmp_path / "plots" / f"{kind}.png")
    assert capsys.readouterr().out == f"wrote {tmp_path / 'plots' / f'{kind}.png'}\n"


def test_plot_of_an_export_file_writes_beside_it_or_where_told(monkeypatch, capsys, tmp_path):
    calls = fake_plot(monkeypatch)
    export = tmp_path / "runs.parquet"
    export.write_bytes(b"")
    assert main(["plot", str(export), "--kind", "dram"]) == 0
    assert calls["save"][1] == tmp_path / "plots" / "dram.png"
    calls.clear()
    assert main(["plot", str(export), "--kind", "dram", "-o", "x.svg"]) == 0
    assert calls["save"][1] == Path("x.svg")
    assert capsys.readouterr().out.splitlines()[-1] == "wrote x.svg"


@pytest.mark.parametrize(
    "argv, error",
    [
        (["--kind", "dram", "--x", "ring"], "--x and --y are for --kind metric"),
        (["--kind", "fills", "--y", "a"], "--x and --y are for --kind metric"),
        (["--kind", "dram", "--field", "f"], "--field is for --kind latency"),
        (["--kind", "latency", "--dc-fills"], "--dc-fills is for --kind fills"),
    ],
)
def test_plot_refuses_options_of_another_kind(monkeypatch, capsys, tmp_path, argv, error):
    calls = fake_plot(monkeypatch)
    assert main(["plot", str(tmp_path), *argv]) == 2
    assert capsys.readouterr().err == f"steer: error: {error}\n"
    assert calls == {}


def test_report_and_export_print_what_they_wrote(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(report, "write", lambda results, output, title: Path(f"{results}|{output}|{title}"))
    monkeypatch.setattr(store, "export", lambda results, output: Path(f"{results}->{output}"))
    assert main(["report", "r", "-o", "page.html", "--title", "T"]) == 0
    assert main(["report", "r"]) == 0
    assert main(["export", "r", "-o", "t.csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["wrote r|page.html|T", "wrote r|None|None", "wrote r->t.csv"]


def fake_fit(monkeypatch):
    calls = []
    result = SimpleNamespace(to_dict=lambda: {"best": {"a": 1}}, failed={})
    monkeypatch.setattr(fit, "load_fit", lambda path: ("spec", path))
    monkeypatch.setattr(
        fit, "run_fit", lambda spec, results, **options: calls.append((spec, results, options)) or result
    )
    monkeypatch.setattr(fit, "overlay_toml", lambda r: "a = 1\n")
    monkeypatch.setattr(fit, "report", lambda r: "the fit's report")
    return calls


def test_fit_writes_the_overlay_into_its_results_and_reports(monkeypatch, capsys, tmp_path):
    calls = fake_fit(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "dir/my.toml", "--quiet", "--workers", "2"]) == 0
    assert calls == [
        (
            ("spec", "dir/my.toml"),
            Path("results/fit-my"),
            {
                "executor": "local",
                "workers": 2,
                "address": None,
                "quiet": True,
                "method": "search",
                "budget": None,
                "keep_going": False,
            },
        )
    ]
    assert capsys.readouterr().out == "the fit's report\nwrote results/fit-my/best.toml\n"
    assert (tmp_path / "results/fit-my/best.toml").read_text() == "a = 1\n"


def test_fit_json_goes_to_a_file_beside_the_overlay_or_to_stdout_alone(monkeypatch, capsys, tmp_path):
    calls = fake_fit(monkeypatch)
    overlay, rows = tmp_path / "o.toml", tmp_path / "fit.json"
    assert main(["fit", "f.toml", "-r", str(tmp_path / "r"), "-o", str(overlay), "--json", str(rows)]) == 0
    assert calls[0][1] == tmp_path / "r"
    assert capsys.readouterr().out == f"the fit's report\nwrote {overlay} and {rows}\n"
    assert json.loads(rows.read_text()) == {"best": {"a": 1}} and overlay.read_text() == "a = 1\n"
    overlay.unlink()
    assert main(["fit", "f.toml", "-o", str(overlay), "--json"]) == 0
    assert capsys.readouterr().out == json.dumps({"best": {"a": 1}}, indent=2) + "\n"
    assert overlay.read_text() == "a = 1\n"


@pytest.mark.parametrize("argv", [["plot", "r"], ["export", "r"], ["sweep", "s.toml", "--executor", "dask"]])
def test_a_required_option_missing_or_an_unknown_choice_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"steer {argv[0]}: error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "option"), [(["sweep", "s.toml", "-o"], "-o/--results"), (["fit", "f.toml", "-r"], "-r/--results")]
)
def test_an_empty_results_directory_is_refused_as_an_empty_json_file_is(argv, option, monkeypatch, capsys, tmp_path):
    """Not the default results directory, silently."""
    monkeypatch.chdir(tmp_path)
    for empty in ("", " "):
        with pytest.raises(SystemExit) as exit:
            main([*argv, empty])
        assert exit.value.code == 2
        assert capsys.readouterr().err == (
            f"steer {argv[0]}: error: argument {option}: empty directory name (leave the option out for the default) "
            f"(see steer {argv[0]} -h)\n"
        )
    assert list(tmp_path.iterdir()) == []

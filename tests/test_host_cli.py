"""`steer calibrate` as a command, in process, with the measuring and fitting mocked (they are
tested in test_calibrate): which plan it asks for, where it writes, what it prints. `steer
validate` is tested the same way in test_validate."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from steer import calibrate, cli, host_cli, validate
from steer.calibrate import Value
from steer.output import MIB

VALUES = [Value("l2.latency_cycles", 14, "measured"), Value("core.clock_ghz", 3.5, "preset")]


@pytest.fixture
def calibration(monkeypatch, tmp_path):
    """Mocks of the measuring steps; returns the plans asked for and the default output path."""
    plans = []
    default = tmp_path / "host.toml"
    monkeypatch.setattr(calibrate, "sysfs_platform", lambda: {"l3.size_kib": 32768})
    monkeypatch.setattr(calibrate, "calibration_path", lambda: default)
    monkeypatch.setattr(host_cli._core, "probe_allowed_cpus", lambda: [0, 1, 2])
    monkeypatch.setattr(calibrate, "parse_cpus", lambda text: (int(text),))

    def plan_for(mode, geometry, cpus, max_bytes, min_ms):
        plans.append((mode, geometry, cpus, max_bytes, min_ms))
        return "plan"

    monkeypatch.setattr(calibrate, "plan_for", plan_for)
    monkeypatch.setattr(calibrate, "measure", lambda plan, geometry, progress: f"measured {plan}")
    monkeypatch.setattr(calibrate, "fit", lambda measured, geometry: VALUES[:1])
    monkeypatch.setattr(calibrate, "fit_streamer", lambda measured, values, vendor: VALUES[1:])
    monkeypatch.setattr(calibrate, "cpu_vendor", lambda: "GenuineIntel")
    monkeypatch.setattr(calibrate, "translation_values", lambda measured, vendor, guest, cpuid: [])
    monkeypatch.setattr(calibrate, "warnings", lambda measured, values, streamer: [])
    monkeypatch.setattr(calibrate, "calibration_toml", lambda measured, values: f"{measured} {len(values)}\n")
    monkeypatch.setattr(calibrate, "plot", lambda measured, values: b"\x89PNG")
    monkeypatch.setattr(calibrate, "as_json", lambda measured, values, out: f'{{"out": "{out}"}}\n')
    # Validate's check of the core-to-core read times the machine: here nothing moved.
    monkeypatch.setattr(validate, "peer_moved", lambda repeats, min_ms, cpus: None)
    return SimpleNamespace(plans=plans, default=default)


def test_calibrate_writes_the_host_calibration_and_prints_each_value(calibration, capsys):
    assert cli.main(["calibrate", "--quiet"]) == 0
    assert calibration.plans == [("default", {"l3.size_kib": 32768}, (0, 1, 2), None, None)]
    assert calibration.default.read_text() == "measured plan 2\n"
    assert capsys.readouterr().out.splitlines() == [
        "key                value  source",
        "l2.latency_cycles     14  measured",
        "core.clock_ghz       3.5  preset",
        f"wrote {calibration.default}",
    ]


def test_calibrate_lays_the_tlb_over_the_fit_and_refits_the_memory_latency_with_it(calibration, monkeypatch):
    tlb = Value("core.tlb.entries", 2048, "assumed")
    monkeypatch.setattr(calibrate, "translation_values", lambda measured, vendor, guest, cpuid: [tlb])
    refits = []

    def refit(measured, values, geometry):
        refits.append((measured, [v.key for v in values], geometry))
        return values

    monkeypatch.setattr(calibrate, "refit_memory_latency", refit)
    assert cli.main(["calibrate", "--quiet"]) == 0
    assert refits == [("measured plan", ["l2.latency_cycles", "core.tlb.entries"], {"l3.size_kib": 32768})]
    assert calibration.default.read_text() == "measured plan 3\n"


@pytest.mark.parametrize(
    "argv, plan",
    [
        (["--quick"], ("quick", (0, 1, 2), None, None)),
        (["--full", "--cpus", "1", "--max-bytes", "2MiB", "--min-ms", "5"], ("full", (1,), 2 * MIB, 5.0)),
    ],
)
def test_calibrate_asks_for_the_plan_of_its_mode_and_options(calibration, argv, plan):
    assert cli.main(["calibrate", "--quiet", *argv]) == 0
    mode, _, cpus, max_bytes, min_ms = calibration.plans[0]
    assert (mode, cpus, max_bytes, min_ms) == plan


def test_calibrate_writes_json_and_a_plot_beside_the_calibration_or_json_alone_to_stdout(calibration, capsys, tmp_path):
    out, image, rows = tmp_path / "c.toml", tmp_path / "c.png", tmp_path / "c.json"
    assert cli.main(["calibrate", "--quiet", "--out", str(out), "--plot", str(image), "--json", str(rows)]) == 0
    assert capsys.readouterr().out.splitlines()[-3:] == [f"wrote {out}", f"wrote {image}", f"wrote {rows}"]
    assert image.read_bytes() == b"\x89PNG" and rows.read_text() == f'{{"out": "{out}"}}\n'
    assert cli.main(["calibrate", "--quiet", "--json"]) == 0
    assert capsys.readouterr().out == f'{{"out": "{calibration.default}"}}\n'
    assert calibration.default.exists()


def test_quick_and_full_are_exclusive(calibration, capsys):
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--quick", "--full"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert calibration.plans == [] and not calibration.default.exists()


def test_a_calibration_that_cannot_be_written_leaves_nothing(calibration, capsys, tmp_path):
    (tmp_path / "dir").mkdir()
    assert cli.main(["calibrate", "--quiet", "--out", str(tmp_path / "dir")]) == 2
    assert capsys.readouterr().err == f"steer: error: {tmp_path / 'dir'}: cannot write there: a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]
    assert list(Path(tmp_path / "dir").iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "--json", "dir"],
        ["calibrate", "--plot", "dir"],
        ["calibrate", "--out", "dir"],
        ["validate", "--json", "dir"],
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_measured(
    argv, calibration, monkeypatch, capsys, tmp_path
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    monkeypatch.setattr(calibrate, "measure", lambda *args: pytest.fail("measured"))
    monkeypatch.setattr(validate, "validate", lambda *args: pytest.fail("measured"))
    assert cli.main([*argv, "--quiet"]) == 2
    assert capsys.readouterr().err == "steer: error: dir: cannot write there: a directory\n"
    assert calibration.plans == [] and sorted(p.name for p in tmp_path.iterdir()) == ["dir"]


def test_a_calibration_path_that_cannot_be_written_is_refused_before_anything_is_measured(
    calibration, monkeypatch, capsys
):
    """STEER_HOST_CALIBRATION naming a directory, say."""
    calibration.default.mkdir()
    monkeypatch.setattr(calibrate, "measure", lambda *args: pytest.fail("measured"))
    assert cli.main(["calibrate", "--quick", "--quiet"]) == 2
    assert capsys.readouterr().err == f"steer: error: {calibration.default}: cannot write there: a directory\n"
    assert calibration.plans == []


class Bars:
    """`output.Progress` as a record of the labels of the bars made."""

    def __init__(self, made):
        self.made = made

    def __call__(self, label, quiet=False):
        self.made.append(label)
        return SimpleNamespace(close=lambda: None, __call__=lambda fraction: None)


def test_each_command_names_its_progress_bar(calibration, monkeypatch, tmp_path):
    made = []
    monkeypatch.setattr(host_cli.output, "Progress", Bars(made))
    monkeypatch.setattr(validate, "validate", lambda *args: [])
    assert cli.main(["calibrate"]) == 0
    assert cli.main(["validate"]) == 0
    assert made == ["calibrate", "validate"]


def test_json_on_stdout_writes_no_file_named_dash(calibration, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(validate, "validate", lambda *args: [])
    monkeypatch.setattr(validate, "as_json", lambda rows, path, host: "[]\n")
    assert cli.main(["calibrate", "--quiet", "--json", "-"]) == 0
    assert cli.main(["validate", "--quiet", "--json", "-"]) == 0
    assert capsys.readouterr().out == f'{{"out": "{calibration.default}"}}\n[]\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host.toml"]


def test_validate_measures_first_only_where_there_is_no_calibration(calibration, monkeypatch, capsys):
    monkeypatch.setattr(validate, "validate", lambda *args: [])
    assert cli.main(["validate", "--quiet"]) == 0
    assert capsys.readouterr().err == (
        f"steer: no calibration of this machine yet: measuring first ({calibration.default})\n"
    )
    assert calibration.plans[0][0] == "quick" and calibration.default.read_text() == "measured plan 2\n"
    monkeypatch.setattr(host_cli, "calibrate_and_write", lambda *args: pytest.fail("calibrated again"))
    assert cli.main(["validate", "--quiet"]) == 0
    assert capsys.readouterr().err == ""

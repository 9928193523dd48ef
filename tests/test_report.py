"""The HTML report (steer.report) from hand-made run records: its cells and tables, which figures
a sweep supports, and the whole page of one sweep as a golden file. No simulation runs here; the
figures are not rendered (test_plot_report renders them), so the page does not depend on
matplotlib's version. `STEER_BLESS=1` rewrites the golden page; review its diff."""

import base64
import json
import math
import os
import time
from pathlib import Path

import pandas
import pytest

pytest.importorskip("matplotlib")

from steer import fit as report_fit
from steer import plot, report
from steer import sweep as sweeps
from steer.store import Store, load

GOLDEN = Path(__file__).parent / "fixtures" / "report"


def result(read: float, rx: float, p50: float | None = None, roles=("napi", "app")) -> dict:
    """A run's result: DRAM, one NIC, and two cores with roles and fill fractions."""
    nic = {"rx_gbps": rx, "drops": 3}
    if p50 is not None:
        nic["latency_ns"] = {"p50": p50, "p99": 2 * p50}
    cores = {
        str(cpu): {"role": role, "fills": {"l1": 0.5, "l2": 0.25 + 0.125 * cpu, "dram": 0.25 - 0.125 * cpu}}
        for cpu, role in enumerate(roles)
    }
    return {
        "dram": {"read_gbps": read, "write_gbps": read / 2, "total_gbps": 1.5 * read},
        "devices": {"nic0": nic},
        "cores": cores,
    }


def record(index: int, point: dict, status: str = "ok", **fields) -> dict:
    task = sweeps.Task(index, f"{index:x}" * 16, point, [], "rx-default", resolved="[sim]\n")
    made = sweeps.record_for(task, status, 0.0, 1.25 + index, **fields)
    made["steer_version"] = "9.9.9"
    return made


def sweep_directory(root: Path) -> Path:
    """Four runs of placement x offered load, one failed run, and one point not run yet."""
    store = Store(root)
    records = [
        record(0, {"placement": "memory", "offered_gbps": 10.0}, result=result(2.0, 9.5, 800.0)),
        record(1, {"placement": "memory", "offered_gbps": 40.0}, result=result(8.125, 38.0, 900.0)),
        record(2, {"placement": "l2", "offered_gbps": 10.0}, result=result(0.5, 9.75, 500.0)),
        record(3, {"placement": "l2", "offered_gbps": 40.0}, result=result(1.0, 39.0, 550.0)),
        record(4, {"placement": "l2", "offered_gbps": 1e9}, "failed", error="offered_gbps: must be <= 400 (<b>)"),
    ]
    for made in records:
        store.write(made)
    points = [{"run_id": r["run_id"]} for r in records] + [{"run_id": "f" * 16}]
    store.write_manifest(
        {"sweep": "sweeps/load & placement.toml", "scenario": "rx-default", "description": "load <b>", "points": points}
    )
    return root


def plot_figure():
    """An empty matplotlib figure of one axes."""
    fig = plot.new_figure(2.0, 2.0)
    fig.add_subplot()
    return fig


@pytest.fixture
def unrendered(monkeypatch):
    """Figures stand in as their format, resolution and number of axes; the clock is fixed."""
    monkeypatch.setattr(report, "image_bytes", lambda fig, kind, dpi: f"{kind} {dpi} {len(fig.axes)}".encode())
    real = time.strftime
    noon = time.gmtime(1795867200)  # 2026-11-28 12:00:00 UTC
    monkeypatch.setattr(report.time, "strftime", lambda pattern, when=None: real(pattern, when or noon))


def test_the_page_of_a_sweep_is_its_golden_file(tmp_path, unrendered):
    page = report.build(sweep_directory(tmp_path / "results"))
    golden = GOLDEN / "sweep.html"
    if os.environ.get("STEER_BLESS"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(page)
    assert page == golden.read_text()
    assert report.build(sweep_directory(tmp_path / "again"), title="Mine").count("Mine") == 2


def reproduce_rows() -> list:
    """Rows of `steer reproduce`: a calibration row within its target, a validation row missing
    it, one without a target."""
    from steer.reproduce import Row

    return [
        Row("seed000/1q/dram-read-change", "seed 000", "UMC read BW change with SDCI, 1q", "%", -85.0, -86.0),
        Row("seed001/brute-0-15", "seed 001", "brute force, node 0 to 15 <cross>", "GiB/s", 96.0, 54.5),
        Row("seed000/4q/dram-read-sdci-off", "seed 000", "UMC est read BW, SDCI off, 4q", "GB/s", 13.87, 11.9),
    ]


def write_rows(directory: Path, rows: list) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "reproduce.json").write_text(json.dumps([r.to_dict() for r in rows]))


def test_the_page_of_reproduce_rows_alone_is_its_golden_file(tmp_path, unrendered, monkeypatch):
    monkeypatch.setattr(report, "__version__", "9.9.9")
    write_rows(tmp_path / "repro", reproduce_rows())
    page = report.build(tmp_path / "repro")
    golden = GOLDEN / "reproduce.html"
    if os.environ.get("STEER_BLESS"):
        golden.write_text(page)
    assert page == golden.read_text()
    # Every row is there, the misses apart; the parity figure has a panel per unit (and one unused).
    assert "<title>steer reproduce: repro</title>" in page
    assert page.count("seed001/brute-0-15") == 2 and page.count("seed000/1q/dram-read-change") == 1
    assert f'src="data:image/png;base64,{base64.b64encode(b"png 110 3").decode()}"' in page
    write_rows(tmp_path / "none-missed", reproduce_rows()[:1])
    assert "<p>No row misses its target.</p>" in report.build(tmp_path / "none-missed")


def test_a_sweeps_page_ends_with_the_reproduce_rows_beside_it_and_bad_rows_are_one_line(tmp_path, unrendered):
    root = sweep_directory(tmp_path / "results")
    alone = report.build(root)
    write_rows(root, reproduce_rows())
    page = report.build(root)
    section = report.reproduce_section(root)
    assert section and page == alone.replace("</body></html>", section + "\n</body></html>")
    (root / "reproduce.json").write_text("[{}]")
    with pytest.raises(report.ScenarioError) as raised:
        report.build(root)
    assert str(raised.value) == f"{root / 'reproduce.json'}: not the rows of steer reproduce: 'id'"
    assert report.reproduce_section(tmp_path) == ""


def write_validation(directory: Path) -> None:
    from steer import validate
    from steer.calibrate import Figure

    rows = [
        validate.Row("ring copy <L1>", "ring_copy.l1", "ns/buffer", Figure(10.0, 9.0, 12.0, [10.0, 9.0, 12.0]), 11.0),
        validate.Row("handoff", "handoff", "ns/round trip", Figure(100.0, 100.0, 100.0, [100.0]), 50.0),
    ]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "validate.json").write_text(validate.as_json(rows, Path("host.toml"), "box"))


def test_validates_rows_get_their_own_section_and_page_title(tmp_path, unrendered):
    write_validation(tmp_path / "checks")
    page = report.build(tmp_path / "checks")
    assert "<title>steer validate: checks</title>" in page
    assert "<h2>This machine against the model (<code>steer validate</code> on box)</h2>" in page
    assert "<figcaption>Simulated against measured: 1 of 2 within 15% of the measured median</figcaption>" in page
    assert f'src="data:image/png;base64,{base64.b64encode(b"png 110 2").decode()}"' in page
    assert "<td>ring copy &lt;L1&gt;</td><td>ns/buffer</td><td>10</td><td>9-12</td><td>11</td><td>+10%</td>" in page
    assert "<td>handoff</td><td>ns/round trip</td><td>100</td><td>100-100</td><td>50</td><td>-50%</td>" in page
    # Beside reproduce's rows, after them; in a sweep's directory, after the sweep.
    write_rows(tmp_path / "checks", reproduce_rows())
    both = report.build(tmp_path / "checks")
    assert "<title>steer reproduce and validate: checks</title>" in both
    assert both.index("<code>steer reproduce</code>") < both.index("<code>steer validate</code>")
    root = sweep_directory(tmp_path / "results")
    write_validation(root)
    assert report.build(root).endswith(report.validate_section(root) + "\n</body></html>\n")
    (root / "validate.json").write_text('{"host": "box", "rows": [{"workload": "w"}]}')
    with pytest.raises(report.ScenarioError) as raised:
        report.build(root)
    assert str(raised.value) == f"{root / 'validate.json'}: not the output of steer validate --json: 'metric'"


def test_a_fits_result_gets_its_section_with_the_cost_of_each_point(tmp_path, unrendered, monkeypatch):
    drawn = []
    monkeypatch.setattr(
        report_fit, "curves_figure", lambda curves, name, method: drawn.append((curves, name, method)) or plot_figure()
    )
    body = {
        "fit": "fits/turin-write-queue.toml",
        "best": {"platform.memory.write_queue_latency_ns": 55.92},
        "calibration_cost": 2e-8,
        "validation_cost": 0.6,
        "scores": {"calibration": [1, 1], "validation": [2, 3]},
        "method": "search",
        "points": [{"point": {}, "calibration_cost": c} for c in (0.5, 0.01, 2e-8)],
        "failed": [],
    }
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "fit.json").write_text(json.dumps(body))
    page = report.build(tmp_path / "fit")
    assert "<title>steer fit: fit</title>" in page
    assert "<h2>Fit (<code>steer fit</code> turin-write-queue)</h2>" in page
    assert "calibration cost 2e-08; calibration 1 of 1 within tolerance; validation 2 of 3 within tolerance." in page
    assert "<td>platform.memory.write_queue_latency_ns</td><td>55.92</td>" in page
    [(curves, name, method)] = drawn
    assert (name, method, curves[0].method, curves[0].costs) == (
        "turin-write-queue",
        "search",
        "search",
        [0.5, 0.01, 2e-8],
    )
    (tmp_path / "fit" / "fit.json").write_text('{"fit": "f", "points": [{}]}')
    with pytest.raises(report.ScenarioError) as raised:
        report.build(tmp_path / "fit")
    assert str(raised.value).startswith(f"{tmp_path / 'fit' / 'fit.json'}: not the output of steer fit --json")


def test_a_report_is_written_beside_the_results_unless_a_path_is_given(tmp_path, unrendered):
    root = sweep_directory(tmp_path / "results")
    assert report.write(root) == root / "report.html"
    assert (root / "report.html").read_text() == report.build(root)
    assert report.write(root, tmp_path / "r.html", "T") == tmp_path / "r.html"
    assert "<title>T</title>" in (tmp_path / "r.html").read_text()
    with pytest.raises(report.ScenarioError) as raised:
        report.write(pandas.DataFrame({"run_id": ["a"], "status": ["ok"]}))
    assert str(raised.value) == "a report of a DataFrame needs an output path"


def test_a_frame_of_runs_is_reported_as_runs_with_this_steers_version(unrendered, tmp_path):
    runs = load(sweep_directory(tmp_path / "results"))
    page = report.build(runs.drop(columns=["steer_version"]))
    assert "<title>steer sweep: runs</title>" in page
    assert f"steer {report.__version__}; report written" in page
    assert "in the sweep" not in page and "4 finished, " in page


def test_a_users_own_frame_is_of_successful_runs_named_by_position(unrendered):
    own = pandas.DataFrame({"param.ring": [64, 128], "dram.read_gbps": [1.0, 2.0], "dram.write_gbps": [0.5, 1.0]})
    page = report.build(own)
    assert "<p>2 finished, 0 failed.</p>" in page and "Failures" not in page and "Fill sources" not in page
    assert '<tr><td>1</td><td class="num">128</td><td>ok</td><td class="num">2</td>' in page


def test_the_page_names_every_steer_version_and_a_manifest_without_a_scenario(tmp_path, unrendered):
    root = sweep_directory(tmp_path / "results")
    store = Store(root)
    older = record(0, {"placement": "memory", "offered_gbps": 10.0}, result=result(2.0, 9.5))
    older["steer_version"] = "10.0.0"
    store.write(older)
    manifest = store.manifest()
    del manifest["scenario"]
    store.write_manifest(manifest)
    page = report.build(root)
    assert "scenario <code></code>, sweep file" in page
    assert "steer 10.0.0, 9.9.9; report written 2026-11-28 12:00:00" in page


def test_a_figure_is_an_inlined_png_with_its_caption_escaped(unrendered):
    fig = plot.new_figure(4)
    fig.add_subplot()
    data = base64.b64encode(b"png 110 1").decode()
    assert report.image_tag(fig, 'a "b" <c>') == (
        f'<figure><img alt="a &quot;b&quot; &lt;c&gt;" src="data:image/png;base64,{data}">'
        "<figcaption>a &quot;b&quot; &lt;c&gt;</figcaption></figure>"
    )


@pytest.mark.parametrize(
    ("value", "html"),
    [
        (None, "<td></td>"),
        (math.nan, "<td></td>"),
        (7, '<td class="num">7</td>'),
        (3.14159265, '<td class="num">3.142</td>'),
        (True, "<td>True</td>"),
        ("<a&b>", "<td>&lt;a&amp;b&gt;</td>"),
    ],
)
def test_a_cell_aligns_numbers_with_four_digits_and_escapes_text(value, html):
    assert report.cell(value) == html


def test_a_table_has_a_header_row_and_a_row_a_line():
    assert report.html_table(["a<", "b"], [[1, "x"], [None, 2.5]]) == (
        "<table>\n<tr><th>a&lt;</th><th>b</th></tr>\n"
        '<tr><td class="num">1</td><td>x</td></tr>\n<tr><td></td><td class="num">2.5</td></tr>\n</table>'
    )


def frame(runs: int, **columns) -> pandas.DataFrame:
    """`runs` successful runs with DRAM columns and the given ones."""
    base = {"run_id": [f"{i:016x}" for i in range(runs)], "status": ["ok"] * runs}
    base.update({"dram.read_gbps": [1.0] * runs, "dram.write_gbps": [0.5] * runs})
    return pandas.DataFrame({**base, **columns})


def captions(df) -> list[str]:
    return [caption for caption, _ in report.figures(df)]


def test_the_figures_are_one_per_numeric_swept_value_up_to_three_then_bars_and_latency():
    # Eight runs over three bits and their parity: no value decides another's.
    bits = [[float(run >> bit & 1) for run in range(8)] for bit in range(3)]
    numbers = {f"param.p{i}": values for i, values in enumerate([*bits, [sum(b) % 2 for b in zip(*bits)]])}
    found = captions(frame(8, **numbers, **{"param.flag": [True, False] * 4, "param.placement": ["a", "b"] * 4}))
    assert found == [
        "DRAM read and write bandwidth against p0",
        "DRAM read and write bandwidth against p1",
        "DRAM read and write bandwidth against p2",
        "DRAM read and write bandwidth per run",
    ]
    devices = {"devices.nic0.rx_gbps": [9.0, 8.0], "devices.nic0.latency_ns.p50": [100.0, 200.0]}
    assert captions(frame(2, **{"param.ring": [64, 128]}, **devices)) == [
        "DRAM read and write bandwidth against ring",
        "Device receive throughput against ring",
        "DRAM read and write bandwidth per run",
        "Latency CDF",
    ]
    # A latency column with no value gives no CDF; no successful run gives no figure.
    assert captions(frame(2, **{"devices.nic0.latency_ns.p50": [math.nan, math.nan]})) == [
        "DRAM read and write bandwidth per run"
    ]
    assert report.figures(frame(2).assign(status="failed")) == []
    # Swept names and flags are not axes.
    assert captions(frame(4, **{"param.mode": ["a", "b"] * 2, "param.flag": [True, False] * 2})) == [
        "DRAM read and write bandwidth per run"
    ]


def roles(runs: int, per_run: int) -> dict:
    return {
        f"cores.{cpu}.{key}": [value] * runs
        for cpu in range(per_run)
        for key, value in (("role", f"role{cpu}"), ("fills.l1", 1.0))
    }


@pytest.mark.parametrize(
    ("runs", "per_run", "bars", "fills"),
    [
        (1, 1, True, True),
        (48, 1, True, True),
        (49, 1, False, False),
        (24, 2, True, True),
        (25, 2, True, False),
        (3, 0, True, False),
    ],
)
def test_bars_are_drawn_for_at_most_48_runs_and_fills_for_at_most_48_roles(runs, per_run, bars, fills):
    found = captions(frame(runs, **roles(runs, per_run)))
    assert ("DRAM read and write bandwidth per run" in found) == bars
    assert ("Where each core role's demand accesses were satisfied" in found) == fills

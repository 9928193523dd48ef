"""Figures render to PNG and SVG files that load as images; the HTML report is self-contained."""

import base64
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import matplotlib.image

import steer
from steer import plot, report
from steer.cli import main as steer_main
from steer.store import Store


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A finished sweep: placement x offered load, plus one point that fails."""
    directory = tmp_path_factory.mktemp("sweep")
    sweep = directory / "placements.toml"
    sweep.write_text("""scenario = "rx-default"
description = "placement against offered load"
[set]
"sim.measure_us" = 100
"sim.warmup_us" = 50
[grid]
placement = ["memory", "l2"]
offered_gbps = [10.0, 40.0, 70.0]
ring = [256, 0]
""")
    # ring = 0 is invalid: those points are kept as failed runs, which the figures must show.
    steer.run_sweep(sweep, directory / "out", workers=2, keep_going=True)
    return directory / "out"


@pytest.fixture
def with_latency(results, tmp_path) -> Path:
    """The sweep's runs with synthetic latencies: samples for memory, percentiles for l2."""
    copy = tmp_path / "latency"
    store = Store(copy)
    for record in Store(results).records():
        if record["status"] != "ok":
            continue
        nic = record["result"]["devices"]["nic0"]
        base = record["point"]["offered_gbps"]
        if record["point"]["placement"] == "memory":
            nic["latency_ns"] = [base * 10 + i * 3.0 for i in range(200)]
        else:
            nic["latency_ns"] = {
                "p50": base * 5,
                "p90": base * 6,
                "p99": base * 8,
                "p999": base * 12,
                "mean": base * 5.5,
            }
        store.write(record)
    return copy


def check_png(path: Path) -> None:
    assert path.stat().st_size > 10_000, path
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert height > 300 and width > 500
    assert image.std() > 0.01  # not a blank canvas


def check_svg(path: Path) -> None:
    assert path.stat().st_size > 10_000, path
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert len(list(root.iter())) > 100


@pytest.mark.parametrize(
    "kind, options",
    [
        ("dram", {}),
        ("fills", {}),
        ("fills", {"counters": "dc_fills"}),
        ("metric", {"y": ["dram.read_gbps", "dram.write_gbps"], "x": "offered_gbps"}),
        ("metric", {"y": "devices.nic0.rx_gbps"}),
    ],
)
def test_plots_render_to_png_and_svg(results, tmp_path, kind, options):
    fig = plot.figure(results, kind, **options)
    check_png(plot.save(fig, tmp_path / f"{kind}.png"))
    check_svg(plot.save(fig, tmp_path / f"{kind}.svg"))


def test_figures_show_what_they_claim(results):
    dram = plot.dram_bars(results)
    ax = dram.axes[0]
    assert len(ax.patches) == 2 * 6  # read and write for each successful run
    assert [t.get_text() for t in ax.get_xticklabels()] == ["memory", "l2"] * 3
    ax = plot.metric(results, y=["dram.read_gbps", "dram.write_gbps"]).axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2 * 2  # two placements, two metrics
    # One legend entry per run's colour and one per metric's line style, not one per line.
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["memory", "l2", "dram.read_gbps", "dram.write_gbps"]
    memory_write = lines[1]
    assert (memory_write.get_color(), memory_write.get_linestyle()) == ("C0", "--")
    assert list(memory_write.get_xdata()) == [10.0, 40.0, 70.0]
    assert memory_write.get_ydata()[0] < memory_write.get_ydata()[-1]  # more load, more DRAM traffic
    fills = plot.fill_bars(results).axes[0]
    tops = {}
    for patch in fills.patches:
        x = round(patch.get_x(), 3)
        tops[x] = max(tops.get(x, 0.0), patch.get_y() + patch.get_height())
    assert len(tops) == 6 and all(top == pytest.approx(1.0) for top in tops.values())


def test_latency_cdf_from_samples_and_percentiles(with_latency, tmp_path):
    fig = plot.latency_cdf(with_latency)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 6
    samples = next(line for line in lines if line.get_label() == "placement=memory, offered_gbps=10")
    assert len(samples.get_xdata()) == 200 and samples.get_ydata()[-1] == pytest.approx(1.0)
    summary = next(line for line in lines if line.get_label() == "placement=l2, offered_gbps=10")
    # A summary's percentiles as a step CDF from zero.
    assert list(summary.get_xdata()) == [50.0, 50.0, 60.0, 80.0, 120.0]
    assert list(summary.get_ydata()) == pytest.approx([0.0, 0.5, 0.9, 0.99, 0.999])
    assert summary.get_drawstyle() == "steps-post"
    check_png(plot.save(fig, tmp_path / "latency.png"))
    check_svg(plot.save(fig, tmp_path / "latency.svg"))
    one = plot.latency_cdf(with_latency, field="devices.nic0.latency_ns")
    assert len(one.axes[0].get_lines()) == 6


def test_latency_without_data_is_a_clear_error(results):
    with pytest.raises(steer.ScenarioError, match="no latency data"):
        plot.latency_cdf(results)
    with pytest.raises(steer.ScenarioError, match="nope: no such field"):
        plot.latency_cdf(results, field="nope")


@pytest.mark.parametrize(
    "key, percentile",
    [
        ("p50", 50.0),
        ("p99", 99.0),
        ("p999", 99.9),
        ("p99_9", 99.9),
        ("p99.99", 99.99),
        ("p100", 100.0),
        ("min", 0.0),
        ("max", 100.0),
        ("median", 50.0),
        ("mean", None),
        ("count", None),
    ],
)
def test_percentile_keys(key, percentile):
    assert plot.percentile_of(key) == percentile


def test_single_results_plot_too(tmp_path):
    runs = [steer.run("rx-default", ["sim.measure_us=100", "sim.warmup_us=50"], placement=p) for p in ("memory", "l2")]
    fig = plot.dram_bars(runs)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["memory", "l2"]
    check_png(plot.save(fig, tmp_path / "two.png"))


def test_plot_command(results, tmp_path, capsys):
    out = tmp_path / "m.svg"
    argv = ["plot", str(results), "--kind", "metric", "--x", "offered_gbps", "--y", "dram.write_gbps", "-o", str(out)]
    assert steer_main(argv) == 0
    check_svg(out)
    assert steer_main(["plot", str(results), "--kind", "fills", "--where", "placement=l2"]) == 0
    check_png(results / "plots" / "fills.png")
    capsys.readouterr()
    for argv, expected in [
        (
            ["--kind", "metric", "--y", "dram.raed_gbps"],
            "dram.raed_gbps: no such column in the results (did you mean dram.read_gbps",
        ),
        (["--kind", "dram", "-o", str(tmp_path / "x.gif")], "x.gif: unknown image format `.gif` (use .png or .svg)"),
        (["--kind", "dram", "--where", "placement=ddio"], "no run matches"),
        (["--kind", "dram", "--x", "ring"], "--x and --y are for --kind metric"),
        (
            ["--kind", "metric", "--by", "offered_gbps"],
            "choose the x axis with --x (swept parameters: placement, offered_gbps)",
        ),
        (["--kind", "latency"], "no latency data"),
    ]:
        assert steer_main(["plot", str(results), *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, err
    assert steer_main(["plot", str(tmp_path / "nothing"), "--kind", "dram"]) == 2
    assert "no such results directory" in capsys.readouterr().err
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    assert steer_main(["plot", str(tmp_path / "empty"), "--kind", "fills"]) == 2
    assert capsys.readouterr().err.strip() == "steer: error: no successful runs to plot"


def test_report_is_one_self_contained_page(results, tmp_path, capsys):
    path = tmp_path / "report.html"
    assert steer_main(["report", str(results), "-o", str(path)]) == 0
    page = path.read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "placement against offered load" in page
    assert "12 runs in the sweep, 6 finished" in page and "6 failed" in page
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)"', page)
    assert len(images) >= 4
    for data in images:
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
    # Nothing is fetched from elsewhere.
    assert not re.search(r'(src|href)="(?!data:)', page)
    for record in Store(results).records():
        assert record["run_id"][:8] in page
    assert "<h2>Failures</h2>" in page and "ring_entries: must be at least 1" in page
    assert "<h2>Fill sources</h2>" in page
    assert steer_main(["report", str(results)]) == 0
    assert (results / "report.html").is_file()


def test_report_includes_latency_when_present(with_latency, tmp_path):
    page = report.build(with_latency)
    assert "Latency CDF" in page
    assert json.loads((with_latency / "runs").glob("*.json").__next__().read_text())["status"] == "ok"


def test_zipped_parameters_share_an_axis_and_many_runs_put_the_legend_beside(tmp_path):
    sweep = tmp_path / "zip.toml"
    sweep.write_text("""scenario = "rx-default"
[set]
"sim.measure_us" = 50
"sim.warmup_us" = 20
[grid]
placement = ["memory", "l2"]
offered_gbps = [10.0, 20.0, 40.0]
[zip]
ring = [128, 256, 512]
packet_bytes = [1500, 1500, 1024]
""")
    steer.run_sweep(sweep, tmp_path / "out", workers=1, quiet=True)
    df = steer.load(tmp_path / "out")
    assert plot.tied_to(df, "param.ring") == ["param.packet_bytes"]
    assert plot.tied_to(df, "param.packet_bytes") == []  # 1500 goes with two rings
    assert plot.tied_to(df, "param.offered_gbps") == []
    captions = [caption for caption, _ in report.figures(df)]
    assert "DRAM read and write bandwidth against ring" in captions
    assert not any("against packet_bytes" in c for c in captions), captions
    fig = plot.metric(df, y=["dram.read_gbps", "dram.write_gbps"], x="ring")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "ring (with packet_bytes)"
    legend = ax.get_legend()
    # 6 runs (placement x load) and 2 metrics: beside the axes, not over them.
    assert len(legend.get_texts()) == 8 and legend._loc == 2 and fig.get_figwidth() > 7.5


def test_a_workload_latency_summary_draws_a_cdf(tmp_path):
    sweep = tmp_path / "efl.toml"
    sweep.write_text('scenario = "eflatency"\n[set]\n"sim.measure_us" = 300\n[grid]\ntph_mode = ["off", "iv"]\n')
    steer.run_sweep(sweep, tmp_path / "out", workers=1, quiet=True)
    df = steer.load(tmp_path / "out")
    assert plot.latency_fields(df, None) == ["cores.2.workload.half_rtt_ns"]
    lines = plot.latency_cdf(df).axes[0].get_lines()
    assert len(lines) == 2
    # The summary's percentiles as steps: from 0 at its least value up to 1 at its greatest.
    xs, ys = list(lines[0].get_xdata()), list(lines[0].get_ydata())
    first = df.iloc[0]
    assert (
        xs[0] == xs[1] == first["cores.2.workload.half_rtt_ns.min"]
        and xs[-1] == first["cores.2.workload.half_rtt_ns.max"]
    )
    assert xs == sorted(xs) and ys[0] == 0.0 and ys[-1] == 1.0 and ys == sorted(ys)
    # The report's table of runs gives each run's median.
    table = report.runs_table(df)
    assert "<th>cores.2.workload.half_rtt_ns.p50</th>" in table
    assert f'<td class="num">{df["cores.2.workload.half_rtt_ns.p50"].iloc[0]:.4g}</td>' in table

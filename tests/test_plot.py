"""The figures (steer.plot) from hand-made frames of runs: each helper worked by hand (columns,
units, the split column, filters, slots and their positions, labels), and what each figure draws
(bar heights and places, stacked fills, CDF steps, lines and their legend). No simulation runs
here; test_plot_report draws a real sweep."""

import math

import matplotlib.colors
import pandas
import pytest

pytest.importorskip("matplotlib")

import steer
from steer import plot


def runs(**columns) -> pandas.DataFrame:
    """Successful runs with the given columns (lists of equal length)."""
    count = len(next(iter(columns.values())))
    base = {"run_id": [f"{i:016x}" for i in range(count)], "status": ["ok"] * count}
    return pandas.DataFrame({**base, **columns})


def error(call) -> str:
    with pytest.raises(steer.ScenarioError) as raised:
        call()
    return str(raised.value)


def test_a_column_is_named_as_given_or_as_a_swept_parameter_else_close_names_are_offered():
    df = runs(**{"dram.read_gbps": [1.0], "param.ring": [64], "param.rings": [2]})
    assert (plot.column(df, "dram.read_gbps"), plot.column(df, "ring")) == ("dram.read_gbps", "param.ring")
    assert error(lambda: plot.column(df, "rng")) == "rng: no such column in the results (did you mean ring, rings?)"
    assert error(lambda: plot.column(df, "zzz")) == "zzz: no such column in the results"
    many = runs(**{f"param.ab{i}": [1] for i in range(6)})
    assert error(lambda: plot.column(many, "ab")).endswith("(did you mean ab5, ab4, ab3, ab2?)")


@pytest.mark.parametrize(
    ("name", "unit", "label"),
    [
        ("dram.read_gbps", "GB/s", "dram.read_gbps (GB/s)"),
        ("devices.nic0.rx_gbps", "Gb/s", "devices.nic0.rx_gbps (Gb/s)"),
        ("dram_gbps", "Gb/s", "dram_gbps (Gb/s)"),
        ("dram.channels", "", "dram.channels"),
        ("cores.0.workload.half_rtt_ns", "ns", "cores.0.workload.half_rtt_ns (ns)"),
        ("cores.1.fills.l2", "fraction", "cores.1.fills.l2 (fraction)"),
        ("cores.1.dc_fills.l2", "fraction", "cores.1.dc_fills.l2 (fraction)"),
        ("param.offered_gbps", "Gb/s", "offered_gbps (Gb/s)"),
        ("param.ring", "", "ring"),
    ],
)
def test_units_follow_the_readme(name, unit, label):
    assert (plot.unit(name), plot.labelled(name)) == (unit, label)


def test_runs_are_split_by_the_column_asked_for_else_the_swept_placement_else_a_devices():
    df = runs(**{"param.placement": ["a", "b"], "devices.nic0.placement": ["x", "y"], "param.ring": [1, 2]})
    assert plot.placement_column(df, "ring") == "param.ring"
    assert plot.placement_column(df, None) == "param.placement"
    devices = runs(**{"devices.nic0.placement": ["x", "x"], "devices.nic1.placement": ["x", "y"]})
    assert plot.placement_column(devices, None) == "devices.nic1.placement"
    assert plot.placement_column(devices.drop(columns="devices.nic1.placement"), None) == "devices.nic0.placement"
    assert plot.placement_column(runs(a=[1]), None) is None


def test_where_keeps_the_runs_whose_values_show_as_given():
    df = runs(**{"param.ring": [64, 128, 64], "param.load": [10.0, 10.0, 40.0]})
    assert list(plot.where(df, ["ring = 64", "load=40"]).index) == [2]
    assert list(plot.where(df).index) == [0, 1, 2]
    assert error(lambda: plot.where(df, ["ring"])) == "--where ring: expected KEY=VALUE"
    assert error(lambda: plot.where(df, ["ring=64", "load=99"])) == "--where ring=64 load=99: no run matches"


def test_slots_group_runs_by_the_other_swept_values():
    df = runs(**{"param.placement": ["m", "l2", "m", "l2"], "param.load": [10.0, 10.0, 40.0, 40.0]})
    laid_out, title = plot.slots(df, "param.placement")
    assert [(g, s) for g, s, _ in laid_out] == [("10", "m"), ("10", "l2"), ("40", "m"), ("40", "l2")]
    assert title == "load"
    two = df.assign(**{"param.ring": [1, 1, 2, 2]}, **{"param.load": [10.0, 10.0, 10.0, 40.0]})
    laid_out, title = plot.slots(two, "param.placement")
    assert [g for g, _, _ in laid_out] == ["load=10\nring=1", "load=10\nring=1", "load=10\nring=2", "load=40\nring=2"]
    assert title == ""
    # Without a split column each run is a slot named by its values (a title=value pair alone).
    assert [s for _, s, _ in plot.slots(df.drop(columns="param.placement"), None)[0]] == ["load=10"] * 2 + [
        "load=40"
    ] * 2
    assert [s for _, s, _ in plot.slots(two.drop(columns="param.placement"), None)[0]][-1] == "load=40, ring=2"
    assert plot.slots(df.drop(columns="param.placement"), None)[1] == ""
    # Nothing swept: the scenario's name, else the run id.
    single = runs(scenario=["rx", ""])
    assert [(g, s) for g, s, _ in plot.slots(single, None)[0]] == [("", "rx"), ("", "0000000000000001")]


def test_a_run_is_labelled_by_its_swept_values_else_its_scenario_or_id():
    row = pandas.Series({"param.ring": 64, "param.load": 10.0, "scenario": "rx", "run_id": "ab"})
    assert plot.run_label(row, ["param.ring", "param.load"]) == "ring=64, load=10"
    assert plot.run_label(row, []) == "rx"
    assert plot.run_label(pandas.Series({"run_id": "ab"}), []) == "ab"
    assert plot.run_label(pandas.Series({"run_id": ""}), []) == "run"


def test_slots_sit_one_apart_with_a_gap_between_groups_and_groups_are_labelled_at_their_centre():
    laid_out = [("a", "", None), ("a", "", None), ("b", "", None)]
    assert plot.positions(laid_out) == ([0.0, 1.0, 2.6], [("a", 0.5), ("b", 2.6)])
    assert plot.positions(laid_out, per_slot=2) == ([0.0, 2.0, 5.2], [("a", 1.0), ("b", 5.2)])
    assert plot.positions([("a", "", None), ("b", "", None), ("b", "", None)]) == (
        [0.0, 1.6, 2.6],
        [("a", 0.0), ("b", 2.1)],
    )
    assert plot.positions([]) == ([], [])
    # 0.08 inch a character of a group's longest line, and 0.3 more, for each group.
    assert plot.labels_width([("ab\ncdef", 0.0), ("x", 1.0)]) == pytest.approx(2 * (0.08 * 4 + 0.3))
    assert plot.labels_width([]) == 0.0


def test_a_figure_is_at_least_6_and_at_most_24_inches_wide():
    assert tuple(plot.new_figure(1.0).get_size_inches()) == (6.0, 4.5)
    assert tuple(plot.new_figure(30.0, 3.0).get_size_inches()) == (24.0, 3.0)


def test_long_slot_labels_turn_and_groups_get_a_second_axis_with_their_title():
    ax = plot.new_figure(6).subplots()
    plot.label_axis(ax, [0.0, 1.0], ["12345678", "x"], [("", 0.5)])
    assert [t.get_rotation() for t in ax.get_xticklabels()] == [0.0, 0.0] and not ax.child_axes
    plot.label_axis(ax, [0.0, 1.0], ["123456789", "x"], [("g", 0.0), ("h", 1.0)], "load")
    assert [(t.get_rotation(), t.get_ha()) for t in ax.get_xticklabels()] == [(30.0, "right")] * 2
    (groups,) = ax.child_axes
    assert [t.get_text() for t in groups.get_xticklabels()] == ["g", "h"] and groups.get_xlabel() == "load"
    one = plot.new_figure(6).subplots()
    plot.label_axis(one, [0.0], ["x"], [("g", 0.0)])
    assert len(one.child_axes) == 1 and one.child_axes[0].get_xlabel() == ""


def heights(ax) -> list[tuple[float, float, float]]:
    """Each bar as (centre, bottom, height)."""
    return [(round(p.get_x() + p.get_width() / 2, 3), p.get_y(), p.get_height()) for p in ax.patches]


def test_dram_bars_put_read_and_write_side_by_side_per_run():
    df = runs(
        **{"param.placement": ["m", "l2"], "dram.read_gbps": [4.0, 1.0], "dram.write_gbps": [3.0, 0.5]},
    )
    ax = plot.dram_bars(df).axes[0]
    assert heights(ax) == [(-0.19, 0.0, 4.0), (0.81, 0.0, 1.0), (0.19, 0.0, 3.0), (1.19, 0.0, 0.5)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["m", "l2"]
    assert (ax.get_title(), ax.get_ylabel()) == ("DRAM read and write bandwidth by placement", "DRAM bandwidth (GB/s)")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["read", "write"]
    assert plot.dram_bars(df.drop(columns="param.placement")).axes[0].get_title() == "DRAM read and write bandwidth"
    assert error(lambda: plot.dram_bars(df.drop(columns="dram.write_gbps"))).startswith(
        "dram.write_gbps: no such column"
    )
    assert error(lambda: plot.dram_bars(df.assign(status="failed"))) == "no successful runs to plot"


def fills(**per_core) -> dict:
    """Result columns of cores: `per_core` maps a CPU to (role, {source: fraction}, {source: count})."""
    columns = {}
    for cpu, (role, fractions, counts) in per_core.items():
        columns[f"cores.{cpu}.role"] = [role]
        columns.update({f"cores.{cpu}.fills.{s}": [v] for s, v in fractions.items()})
        columns.update({f"cores.{cpu}.fill_counts.{s}": [v] for s, v in counts.items()})
    return columns


def test_a_roles_fills_are_pooled_by_counts_where_every_source_has_one_else_averaged():
    counted = runs(
        **fills(**{"0": ("rx", {"l1": 0.5, "dram": 0.5}, {"l1": 10, "dram": 10}), "1": ("rx", {"l1": 1.0}, {"l1": 30})})
    )
    assert plot.role_fills(counted.iloc[0]) == {"rx": {"l1": 0.8, "dram": 0.2}}
    # A count missing for a source: fractions, averaged.
    averaged = runs(**fills(**{"0": ("rx", {"l1": 0.5, "dram": 0.5}, {"l1": 10}), "1": ("rx", {"l1": 1.0}, {})}))
    assert plot.role_fills(averaged.iloc[0]) == {"rx": {"l1": 0.75, "dram": 0.25}}
    # A CPU without a role is left out; nothing counted stays as it is.
    idle = runs(**fills(**{"0": ("app", {"l1": 0.0}, {})}), **{"cores.1.role": [math.nan]})
    assert plot.role_fills(idle.iloc[0]) == {"app": {"l1": 0.0}}
    dc = runs(**{"cores.0.role": ["rx"], "cores.0.dc_fills.l2": [0.25], "cores.0.dc_fills.dram": [0.75]})
    assert plot.role_fills(dc.iloc[0], "dc_fills") == {"rx": {"l2": 0.25, "dram": 0.75}}
    assert plot.role_fills(dc.iloc[0]) == {"rx": {}}


def test_fill_bars_stack_each_roles_sources_nearest_first_leaving_out_those_never_used():
    df = runs(
        **{"param.placement": ["m"]},
        **fills(**{"0": ("rx", {"l1": 0.5, "l3": 0.0, "dram": 0.5}, {}), "1": ("app", {"l2": 1.0, "weird": 0.0}, {})}),
    )
    ax = plot.fill_bars(df).axes[0]
    # Slots: rx then app; sources used: l1, l2, dram (l3 and weird never are).
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["dram", "l2", "l1"]
    assert heights(ax) == [
        (0.0, 0.0, 0.5),
        (1.0, 0.0, 0.0),
        (0.0, 0.5, 0.0),
        (1.0, 0.0, 1.0),
        (0.0, 0.5, 0.5),
        (1.0, 1.0, 0.0),
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["m\nrx", "m\napp"]
    assert ax.get_title() == "Where demand accesses were satisfied, by placement"
    assert ax.get_ylim() == (0.0, 1.0) and ax.get_ylabel() == "demand accesses by source"
    one = runs(**{"cores.0.role": ["rx"], "cores.0.dc_fills.l2": [1.0]})
    ax = plot.fill_bars(one, counters="dc_fills").axes[0]
    assert ax.get_title() == "Where L1D fills were satisfied (rx)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0000000000000000"]
    assert error(lambda: plot.fill_bars(one, counters="l2")) == "counters: expected fills or dc_fills (got l2)"
    assert error(lambda: plot.fill_bars(runs(**{"dram.read_gbps": [1.0]}))) == "no run has cores with fills to plot"
    # Nothing used at all: every source is drawn, at zero.
    none = runs(**{"cores.0.role": ["rx"], "cores.0.fills.l1": [0.0]})
    assert len(plot.fill_bars(none).axes[0].get_legend().get_texts()) == 6


def test_latency_points_come_from_samples_or_a_summary_and_fields_are_named_short():
    row = pandas.Series({"a": [3.0, 1.0, 2.0, 2.0], "b.p50": 5.0, "b.p99": 9.0, "b.mean": 6.0, "b.p90": math.nan})
    assert plot.latency_points(row, "a") == ([1.0, 2.0, 2.0, 3.0], [0.25, 0.5, 0.75, 1.0], True)
    assert plot.latency_points(row, "b") == ([5.0, 9.0], [0.5, 0.99], False)
    assert plot.latency_points(pandas.Series({"a": []}), "a") is None
    assert plot.field_label("devices.nic0.latency_ns") == "nic0"
    assert plot.field_label("cores.2.workload.half_rtt_ns") == "cpu 2 half_rtt_ns"
    df = runs(**{"devices.nic0.latency_ns.p50": [1.0], "cores.2.workload.half_rtt_ns.p50": [2.0], "x_ns.p50": [3.0]})
    assert plot.latency_fields(df, None) == ["devices.nic0.latency_ns", "cores.2.workload.half_rtt_ns"]
    assert plot.latency_fields(df, "x_ns") == ["x_ns"]


def test_a_latency_cdf_draws_a_step_line_per_run_and_field():
    df = runs(
        **{
            "param.load": [10.0, 40.0],
            "devices.nic0.latency_ns.p50": [100.0, 200.0],
            "devices.nic0.latency_ns.p99": [150.0, 400.0],
            "cores.1.workload.half_rtt_ns.p50": [50.0, math.nan],
        }
    )
    ax = plot.latency_cdf(df).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines) == ["load=10: nic0", "load=10: cpu 1 half_rtt_ns", "load=40: nic0"]
    assert list(lines["load=40: nic0"].get_xdata()) == [200.0, 200.0, 400.0]
    assert list(lines["load=40: nic0"].get_ydata()) == [0.0, 0.5, 0.99]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "latency (ns)",
        "fraction of samples at or below",
        "Latency CDF",
    )
    one = plot.latency_cdf(df, field="devices.nic0.latency_ns").axes[0]
    assert [line.get_label() for line in one.get_lines()] == ["load=10", "load=40"]


def test_metric_lines_per_split_value_with_a_style_per_metric():
    df = runs(
        **{
            "param.placement": ["m", "m", "l2", "l2"],
            "param.load": [40.0, 10.0, 40.0, 10.0],
            "param.mode": ["a", "a", "a", "a"],
            "dram.read_gbps": [4.0, 1.0, 2.0, 0.5],
            "dram.write_gbps": [2.0, 0.5, 1.0, 0.25],
        }
    )
    ax = plot.metric(df, y=["dram.read_gbps", "dram.write_gbps"]).axes[0]
    lines = ax.get_lines()
    assert [(list(line.get_xdata()), list(line.get_ydata())) for line in lines] == [
        ([10.0, 40.0], [1.0, 4.0]),
        ([10.0, 40.0], [0.5, 2.0]),
        ([10.0, 40.0], [0.5, 2.0]),
        ([10.0, 40.0], [0.25, 1.0]),
    ]
    assert [(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines] == [
        ("C0", "-", "o"),
        ("C0", "--", "s"),
        ("C1", "-", "o"),
        ("C1", "--", "s"),
    ]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["m", "l2", "dram.read_gbps", "dram.write_gbps"]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("load", "dram.read_gbps, dram.write_gbps (GB/s)")
    assert ax.get_title() == "dram.read_gbps, dram.write_gbps against load"
    one = plot.metric(df, y="dram.read_gbps", x="load", by="mode").axes[0]
    # Split by mode (one value); placement then names each line as placement=value.
    assert [t.get_text() for t in one.get_legend().get_texts()] == ["a, placement=m", "a, placement=l2"]
    assert one.get_ylabel() == "dram.read_gbps (GB/s)"
    mixed = plot.metric(df.assign(**{"x_ns": [1.0] * 4}), y=["dram.read_gbps", "x_ns"]).axes[0]
    assert mixed.get_ylabel() == "dram.read_gbps, x_ns"


def test_metric_takes_text_values_as_categories_and_asks_for_x_when_it_cannot_choose():
    df = runs(**{"param.mode": ["b", "a", "b"], "param.ring": [1, 1, 2], "dram.read_gbps": [1.0, 2.0, 3.0]})
    ax = plot.metric(df, x="mode").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["b", "a"]
    assert [list(line.get_xdata()) for line in ax.get_lines()] == [[0, 1], [0]]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ring=1", "ring=2"]
    assert plot.metric(df).axes[0].get_xlabel() == "ring"
    both = df.assign(**{"param.load": [1.0, 2.0, 3.0]})
    assert error(lambda: plot.metric(both)) == "choose the x axis with --x (swept parameters: mode, ring, load)"
    assert error(lambda: plot.metric(runs(**{"dram.read_gbps": [1.0]}))).endswith("(swept parameters: none)")
    alone = plot.metric(runs(**{"param.ring": [1, 2], "dram.read_gbps": [1.0, 2.0]})).axes[0]
    assert alone.get_legend() is None


def test_a_figure_is_chosen_by_kind_and_saved_as_png_or_svg(tmp_path):
    df = runs(**{"dram.read_gbps": [1.0], "dram.write_gbps": [1.0]})
    assert plot.KINDS == ("dram", "fills", "latency", "metric")
    assert plot.figure(df, "dram", by=None).axes[0].get_title() == "DRAM read and write bandwidth"
    assert (
        error(lambda: plot.figure(df, "pie"))
        == "unknown plot kind `pie` (expected one of: dram, fills, latency, metric)"
    )
    assert error(lambda: plot.save(plot.new_figure(6), tmp_path / "f.jpg")) == (
        f"{tmp_path / 'f.jpg'}: unknown image format `.jpg` (use .png or .svg)"
    )
    assert plot.save(plot.new_figure(6), tmp_path / "f.SVG").read_bytes().startswith(b"<?xml")


def test_results_become_runs_named_in_order():
    df = plot.as_frame([{"dram": {"read_gbps": 1.0}}, {"dram": {"read_gbps": 2.0}}])
    assert list(df["run_id"]) == ["run0", "run1"] and list(df["index"]) == [0, 1]
    assert list(df["dram.read_gbps"]) == [1.0, 2.0] and list(df["status"]) == ["ok", "ok"]
    assert list(plot.as_frame({"dram": {"read_gbps": 3.0}})["dram.read_gbps"]) == [3.0]


def test_group_labels_sit_below_each_line_of_the_slot_labels_on_a_frameless_axis():
    ax = plot.new_figure(6).subplots()
    plot.label_axis(ax, [0.0, 1.0], ["a\nb\nc", "x"], [("", 0.0), ("", 1.0)])
    (groups,) = ax.child_axes  # two groups, even unnamed
    tick = groups.xaxis.get_major_ticks()[0]
    assert (tick.get_pad(), tick.tick1line.get_markersize()) == (6 + 12 * 3, 0)
    assert not groups.spines["bottom"].get_visible()
    turned = plot.new_figure(6).subplots()
    plot.label_axis(turned, [0.0], ["ab\ncdefgh"], [("g", 0.0)])
    assert turned.get_xticklabels()[0].get_rotation() == 0.0, "the longest line counts, not the label"
    plot.label_axis(turned, [0.0], ["123456789\nx"], [("g", 0.0)])
    assert turned.child_axes[-1].xaxis.get_major_ticks()[0].get_pad() == 40 + 12 * 2


def test_figures_widen_with_their_slots():
    ten = runs(**{"param.placement": [f"p{i}" for i in range(10)], "dram.read_gbps": [1.0] * 10})
    ten["dram.write_gbps"] = 1.0
    assert plot.dram_bars(ten).get_figwidth() == pytest.approx(0.6 * 10 + 2.5)
    ten["cores.0.role"], ten["cores.0.fills.l1"] = "rx", 1.0
    assert plot.fill_bars(ten).get_figwidth() == pytest.approx(0.6 * 10 + 3.5)
    assert plot.latency_cdf(runs(**{"devices.nic0.latency_ns.p50": [1.0]})).get_figwidth() == 7.5
    assert plot.metric(runs(**{"param.ring": [1, 2], "dram.read_gbps": [1.0, 2.0]})).get_figwidth() == 7.5


def test_fill_bars_colour_each_source_and_read_as_percentages():
    sources = {s: 1 / 6 for s in ("l1", "l2", "peer_l2", "l3", "remote_cache", "dram")}
    ax = plot.fill_bars(runs(**fills(**{"0": ("rx", sources, {})}))).axes[0]
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    assert colours == ["#4c72b0", "#55a868", "#8fd18f", "#ccb974", "#dd8452", "#c44e52"]
    assert [p.get_width() for p in ax.patches] == [pytest.approx(0.7)] * 6
    assert ax.yaxis.get_major_formatter()(0.5, 0) == "50%"
    assert beside(ax) == pytest.approx((1.01, 1.0))


def test_a_roles_fills_skip_cpus_without_one_and_dc_fills_pool_by_their_own_counts():
    first_idle = runs(**{"cores.0.role": [math.nan]}, **fills(**{"1": ("app", {"l1": 0.25, "dram": 0.25}, {})}))
    # Fractions that do not add up to one are scaled to.
    assert plot.role_fills(first_idle.iloc[0]) == {"app": {"l1": 0.5, "dram": 0.5}}
    dc = runs(
        **{
            "cores.0.role": ["rx"],
            "cores.0.dc_fills.l2": [0.5],
            "cores.0.dc_fills.dram": [0.5],
            "cores.0.dc_fill_counts.l2": [3],
            "cores.0.dc_fill_counts.dram": [1],
            "cores.0.fill_counts.l2": [1],
            "cores.0.fill_counts.dram": [1],
        }
    )
    assert plot.role_fills(dc.iloc[0], "dc_fills") == {"rx": {"l2": 0.75, "dram": 0.25}}


@pytest.mark.parametrize(("key", "percentile"), [("p0", 0.0), ("p101", None), ("p100", 100.0)])
def test_percentiles_lie_between_0_and_100(key, percentile):
    assert plot.percentile_of(key) == percentile


def test_latency_summaries_sort_by_percentile_then_latency_and_every_field_of_a_run_is_drawn():
    row = pandas.Series({"f.median": 7.0, "f.p50": 5.0, "f.min": 1.0})
    assert plot.latency_points(row, "f") == ([1.0, 5.0, 7.0], [0.0, 0.5, 0.5], False)
    df = runs(**{"devices.nic0.latency_ns.p50": [math.nan], "cores.1.workload.half_rtt_ns.p50": [9.0]})
    ax = plot.latency_cdf(df).axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["0000000000000000: cpu 1 half_rtt_ns"]
    assert ax.get_ylim() == (0.0, 1.02)
    assert error(lambda: plot.latency_cdf(df, field="nope")) == "nope: no such field in the results"
    none = runs(**{"devices.nic0.latency_ns.p50": [math.nan]})
    assert error(lambda: plot.latency_cdf(none)) == (
        "no latency data in the results (no devices.NAME.latency_ns; choose a field with --field)"
    )


def beside(ax) -> tuple[float, float]:
    """Where the legend is anchored, in axes coordinates."""
    return tuple(ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted()).bounds[:2])


def split(lines: int) -> pandas.DataFrame:
    """Runs over two rings, split into `lines` placements: one legend entry a placement."""
    placements = [f"p{i // 2}" for i in range(2 * lines)]
    return runs(**{"param.ring": [1, 2] * lines, "param.placement": placements, "dram.read_gbps": [1.0] * 2 * lines})


def test_metric_styles_cycle_every_four_metrics_and_colours_every_ten_lines():
    values = {f"m{i}_ns": [1.0, 2.0] for i in range(5)}
    ax = plot.metric(runs(**{"param.ring": [1, 2]}, **values), y=list(values)).axes[0]
    assert [(line.get_linestyle(), line.get_marker()) for line in ax.get_lines()] == [
        ("-", "o"),
        ("--", "s"),
        (":", "^"),
        ("-.", "D"),
        ("-", "o"),
    ]
    # Up to five entries stay inside the axes; more go beside them, 16 to a column, each column
    # widening the figure.
    for lines, columns in ((5, 0), (6, 1), (11, 1), (16, 1), (17, 2)):
        ax = plot.metric(split(lines)).axes[0]
        legend = ax.get_legend()
        assert ax.figure.get_figwidth() == pytest.approx(7.5 + 3.2 * columns), lines
        if columns:
            assert beside(ax) == pytest.approx((1.01, 1.0)) and legend._loc == 2  # upper left
        else:
            assert legend._loc == 0  # best
        assert legend._ncols == max(columns, 1)
    eleven = plot.metric(split(11)).axes[0]
    assert [line.get_color() for line in eleven.get_lines()] == [f"C{i % 10}" for i in range(11)]
    assert [h.get_color() for h in eleven.get_legend().legend_handles] == [f"C{i % 10}" for i in range(11)]


def test_metric_names_the_parameters_tied_to_x():
    df = runs(**{"param.ring": [1, 2], "param.a": [3, 4], "param.b": [5, 6], "dram.read_gbps": [1.0, 2.0]})
    assert plot.metric(df, x="ring").axes[0].get_xlabel() == "ring (with a, b)"


def test_an_unnamed_run_is_an_unlabelled_slot():
    df = pandas.DataFrame({"dram.read_gbps": [1.0]})
    assert [s for _, s, _ in plot.slots(df, None)[0]] == [""]


def test_images_are_png_at_150_dpi_by_default_and_svg_without_a_date():
    fig = plot.new_figure(6)
    fig.add_subplot().plot([0, 1])
    png = plot.image_bytes(fig)
    assert png.startswith(b"\x89PNG") and png == plot.image_bytes(fig, "png", 150) != plot.image_bytes(fig, "png", 151)
    svg = plot.image_bytes(fig, "svg")
    assert b"<dc:date>" not in svg and b"<svg" in svg

"""How `steer reproduce` judges a row: targets per unit, relations, roles and both scores, on
hand-made rows (the rows' simulated values come from runs tested elsewhere)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from steer import reproduce
from steer.reproduce import Row


def row(unit: str, published: float, simulated: float, relation: str = "", id: str = "seed000/4q/x") -> Row:
    return Row(id, "source", "metric", unit, published, simulated, relation)


@pytest.mark.parametrize(
    ("unit", "published", "simulated", "within"),
    [
        # Percentages: 10 points either way, the boundary included.
        ("%", 51.0, 61.0, True),
        ("%", 51.0, 41.0, True),
        ("%", 51.0, 61.01, False),
        # Latencies: 20 ns.
        ("ns", 55.0, 75.0, True),
        ("ns", 76.0, 55.2, False),
        # Copy throughputs: 10% of the published value, but at least 3 GiB/s.
        ("GiB/s", 96.0, 86.4, True),
        ("GiB/s", 96.0, 86.3, False),
        ("GiB/s", 18.0, 15.0, True),
        ("GiB/s", 18.0, 14.9, False),
        ("GiB/s", -40.0, -44.0, True),
        # A ratio published as equal: 0.1 either way (the 10 points of a percentage as a ratio).
        ("x", 1.0, 1.09, True),
        ("x", 1.0, 0.89, False),
        # DRAM bandwidths carry no target.
        ("GB/s", 11.5, 8.75, None),
    ],
)
def test_a_rows_target_depends_on_its_unit(unit, published, simulated, within):
    assert row(unit, published, simulated).within_target is within


@pytest.mark.parametrize(
    ("relation", "simulated", "within"),
    [(">", 1.0, False), (">", 1.01, True), (">=", 1.0, True), (">=", 0.99, False), ("<", 1.0, False), ("<", 0.5, True)]
    + [("<=", 1.0, True), ("<=", 1.01, False)],
)
def test_a_relation_row_holds_when_simulated_stands_in_it_to_published(relation, simulated, within):
    # A relation decides even where the unit has a target, and leaves the row no tolerance.
    assert row("%", 1.0, simulated, relation).within_target is within
    assert row("x", 1.0, simulated, relation).within_target is within
    assert row("x", 1.0, simulated, relation).tolerance is None


@pytest.mark.parametrize(
    ("id", "role"),
    [
        ("seed000/1q/dram-read-change", "calibration"),
        ("seed000/1q/fills-irq-memory-sdci-off", "calibration"),
        ("seed004/eflatency-avg", "calibration"),
        ("seed000/4q/dram-read-change", "validation"),
        ("seed004/eflatency-256b", "validation"),
        ("seed002/96c-1q/dram-total-change", "validation"),
        ("leon/prefetch-time", "validation"),
        ("seed001/dsa-ceiling", "validation"),
    ],
)
def test_only_seed_000s_one_queue_rows_and_the_eflatency_mean_calibrate(id, role):
    assert row("%", 0.0, 0.0, id=id).role == role


def test_scores_count_judged_rows_per_role_and_the_summary_says_so():
    rows = [
        row("%", 50.0, 55.0, id="seed000/1q/a"),  # calibration, within
        row("%", 50.0, 70.0, id="seed000/1q/b"),  # calibration, miss
        row("GB/s", 1.0, 9.0, id="seed000/1q/c"),  # calibration, no target
        row("ns", 55.0, 60.0, id="seed004/onload-tcp-avg"),  # validation, within
        row("x", 1.0, 1.5, ">", id="seed001/batch-small"),  # validation, within
        row("x", 1.0, 0.5, ">", id="seed001/threads-1mib"),  # validation, miss
    ]
    assert reproduce.scores(rows) == {"calibration": (1, 2), "validation": (2, 3)}
    assert reproduce.summary(rows) == (
        "calibration: 1 of 2 within target; validation: 2 of 3 within target\n"
        "targets: % ±10 pt; GB/s none (shown, not judged); ns ±20 ns; x the published relation (>, <, ...),\n"
        "  or ±0.1 where published as equal"
    )
    # Only the units of the rows given, wrapped to the width given.
    assert reproduce.summary(rows[3:4], 30).splitlines()[1:] == ["targets: ns ±20 ns"]
    assert reproduce.summary([row("GiB/s", 1.0, 1.0)], 40).splitlines()[1:] == [
        "targets: GiB/s ±10%, at least ±3 GiB/s"
    ]
    assert reproduce.scores([]) == {"calibration": (0, 0), "validation": (0, 0)}


def test_the_table_shows_each_rows_difference_in_its_own_terms_and_the_json_its_judgement():
    rows = [
        row("%", -85.0, -100.0, id="seed000/1q/dram-read-change"),
        row("ns", 76.0, 55.2, id="seed004/onload-udp-avg"),
        row("x", 1.0, 1.08, ">", id="seed001/batch-small"),
        row("GB/s", 11.54, 8.75, id="seed000/1q/dram-read-sdci-off"),
    ]
    assert reproduce.table_rows(rows) == [
        ["seed000/1q/dram-read-change", "-85.0%", "-100.0%", "-15.0 pt", "miss", "metric"],
        ["seed004/onload-udp-avg", "76.0ns", "55.2ns", "-20.80 ns", "miss", "metric"],
        ["seed001/batch-small", "> 1.00x", "1.08x", "+0.08", "within", "metric"],
        ["seed000/1q/dram-read-sdci-off", "11.5GB/s", "8.8GB/s", "-2.79 GB/s", "-", "metric"],
    ]
    assert rows[0].to_dict() == {
        "id": "seed000/1q/dram-read-change",
        "source": "source",
        "metric": "metric",
        "unit": "%",
        "published": -85.0,
        "simulated": -100.0,
        "relation": "",
        "role": "calibration",
        "within": False,
    }
    assert rows[3].to_dict()["within"] is None


def test_a_row_without_a_relation_is_judged_on_its_target_and_only_picks_rows_by_pattern_or_part():
    assert Row("seed004/x", "s", "m", "ns", 55.0, 70.0).within_target is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        Row("seed004/x", "s", "m", "ns", 55.0, 70.0).simulated = 55.0  # a row is what was simulated
    assert reproduce.matches("seed000/1q/dram-read-change", "seed000/1q/*")
    assert reproduce.matches("seed000/4q/dram-read-change", "4q/dram")
    assert not reproduce.matches("seed001/dsa-ceiling", "seed000")


def test_the_runner_runs_each_scenario_and_overrides_once_with_the_common_overrides_last(monkeypatch):
    calls = []
    monkeypatch.setattr(reproduce.api, "run", lambda scenario, overrides: calls.append((scenario, overrides)) or {})
    said = []
    runner = reproduce.Runner(said.append, common=iter(["queues=2"]))
    first = runner.run("iperf-rx", "offered_gbps=70.0", 'tph_mode="iv"')
    assert runner.run("iperf-rx", "offered_gbps=70.0", 'tph_mode="iv"') is first
    runner.run("iperf-rx", "offered_gbps=70.0")
    runner.run("eflatency")
    assert calls == [
        ("iperf-rx", ["offered_gbps=70.0", 'tph_mode="iv"', "queues=2"]),
        ("iperf-rx", ["offered_gbps=70.0", "queues=2"]),
        ("eflatency", ["queues=2"]),
    ]
    assert said == ['iperf-rx offered_gbps=70.0 tph_mode="iv"', "iperf-rx offered_gbps=70.0", "eflatency "]
    assert set(runner.cache) == {
        ("iperf-rx", ("offered_gbps=70.0", 'tph_mode="iv"')),
        ("iperf-rx", ("offered_gbps=70.0",)),
        ("eflatency", ()),
    }
    # Without a progress callback it runs silently.
    reproduce.Runner().run("eflatency")


@pytest.mark.parametrize(
    ("off", "on", "percent"), [(10.0, 5.0, -50.0), (0.5, 1.0, 100.0), (8.0, 0.0, -100.0), (0.0, 3.0, 0.0)]
)
def test_a_change_is_in_percent_of_the_value_without_sdci_and_none_from_nothing(off, on, percent):
    assert reproduce.change(off, on) == percent


class FakeRunner(reproduce.Runner):
    """Answers every run from `answer(scenario, {key: value})` and records what was asked."""

    def __init__(self, answer) -> None:
        super().__init__()
        self.answer = answer
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def run(self, scenario: str, *overrides: str) -> dict:
        self.asked.append((scenario, overrides))
        return self.answer(scenario, dict(o.split("=", 1) for o in overrides))


# Per Leon configuration, memory reads (GB/s) and time per message (ns) at 4, 16, 64, 256 KiB.
LEON_READS = {
    "base": [0.0, 0.5, 4.0, 8.0],
    "prefetch": [0.0, 0.5, 4.0, 6.0],
    "inject-l3": [0.0, 1.0, 0.5, 0.4],
    "inject-l2": [0.0, 1.0, 0.5, 0.4],
}
LEON_EXEC_NS = {
    "base": [100.0, 200.0, 400.0, 800.0],
    "prefetch": [100.0, 150.0, 300.0, 640.0],
    "inject-l3": [90.0, 180.0, 300.0, 560.0],
    "inject-l2": [50.0, 200.0, 400.0, 800.0],
}


def leon_answer(scenario: str, o: dict[str, str]) -> dict:
    assert scenario == "leon-reduce"
    config = {'"l3"': "inject-l3", '"l2"': "inject-l2"}.get(o.get("level", ""), "base")
    if "prefetch_distance" in o:
        config = "prefetch"
    i = reproduce.PUBLISHED["leon"]["message_bytes"].index(int(o["message_bytes"]))
    workload = {"exec_ns_per_message": LEON_EXEC_NS[config][i]}
    return {"dram": {"read_gbps": LEON_READS[config][i]}, "cores": {"0": {"workload": workload}}}


def test_every_published_row_is_of_its_experiment_once_with_a_known_unit_and_relation():
    ids = [row["id"] for name in reproduce.EXPERIMENTS for row in reproduce.PUBLISHED[name]["rows"]]
    assert len(ids) == len(set(ids)) == 81
    for name in reproduce.EXPERIMENTS:
        for row in reproduce.PUBLISHED[name]["rows"]:
            assert row["id"].startswith(f"{name}/"), row["id"]
            assert set(row) <= {"id", "metric", "unit", "published", "relation"}, row["id"]
            assert row["unit"] in reproduce.TARGETS, row["id"]
            assert row.get("relation", "") in ("", *reproduce.RELATIONS), row["id"]
            assert isinstance(row["published"], float), row["id"]


def test_rows_take_the_published_file_s_order_source_and_relation_and_the_simulated_values_by_id():
    simulated = {
        f"seed002/{s}/dram-total-change": float(i) for i, s in enumerate(("160c-2q", "96c-2q", "96c-1q", "160c-1q"))
    }
    rows = reproduce.rows_of("seed002", simulated)
    assert [(r.id, r.simulated, r.published) for r in rows] == [
        ("seed002/96c-1q/dram-total-change", 2.0, -55.0),
        ("seed002/96c-2q/dram-total-change", 1.0, -22.0),
        ("seed002/160c-1q/dram-total-change", 3.0, -79.0),
        ("seed002/160c-2q/dram-total-change", 0.0, -80.0),
    ]
    assert {r.source for r in rows} == {"seed 002 (SDCI white paper)"}
    seed001 = reproduce.rows_of("seed001", dict.fromkeys(reproduce.ROW_IDS["seed001"], 1.0))
    assert {r.id: r.relation for r in seed001}["seed001/software-vs-dsa"] == "<"


def test_a_row_the_code_and_the_published_file_do_not_share_is_one_line_naming_it():
    simulated = dict.fromkeys(reproduce.ROW_IDS["seed002"], 0.0)
    del simulated["seed002/96c-2q/dram-total-change"]
    simulated["seed002/96c-3q/dram-total-change"] = 0.0
    with pytest.raises(
        reproduce.ScenarioError,
        match=r"listed only \['seed002/96c-2q/dram-total-change'\], "
        r"simulated only \['seed002/96c-3q/dram-total-change'\]",
    ):
        reproduce.rows_of("seed002", simulated)


def test_leons_rows_take_the_best_saving_over_sizes_and_skip_sizes_that_read_nothing():
    runner = FakeRunner(leon_answer)
    rows = {r.id: r.simulated for r in reproduce.leon_rows(runner)}
    assert rows == pytest.approx(
        {
            # Prefetching reads as much as the base: 1, 1 and 0.75 where the base reads anything
            # (half a GB/s too).
            "leon/prefetch-reads": (1 + 1 + 0.75) / 3,
            "leon/inject-l3-reads": 95.0,  # 0.4 of 8 at 256 KiB
            "leon/prefetch-time": 25.0,  # 150 of 200 and 300 of 400
            "leon/inject-l3-time": 30.0,  # 560 of 800
            "leon/inject-l2-time": 50.0,  # 50 of 100 at 4 KiB
        }
    )
    assert len(runner.asked) == 16 and len(set(runner.asked)) == 16
    # A base that reads no memory at any size: nothing saved, reads equal.
    nothing = FakeRunner(lambda scenario, o: {**leon_answer(scenario, o), "dram": {"read_gbps": 0.0}})
    assert {r.id: r.simulated for r in reproduce.leon_rows(nothing)}["leon/prefetch-reads"] == 1.0
    assert {r.id: r.simulated for r in reproduce.leon_rows(nothing)}["leon/inject-l3-reads"] == 0.0
    assert ("leon-reduce", ("message_bytes=65536", 'policy="inject"', 'level="l2"')) in runner.asked


def test_fill_shares_sum_the_counts_of_every_core_in_the_role_and_a_core_may_have_two():
    result = {
        "cores": {
            "0": {"role": "irq", "dc_fill_counts": {"dram": 2, "l2": 6, "l3": 1, "peer_l2": 1}},
            # Keys a core never filled from may be missing; they count as none.
            "1": {"role": "irq+iperf", "dc_fill_counts": {"dram": 1, "l2": 3}},
            "2": {"role": "iperf", "dc_fill_counts": {"dram": 0, "l2": 0, "l3": 0, "peer_l2": 0}},
        }
    }
    irq = {"memory": 300 / 14, "local-l2": 900 / 14, "other-cache": 200 / 14}
    assert reproduce.role_fills(result, "irq") == pytest.approx(irq)
    assert reproduce.role_fills(result, "iperf") == pytest.approx(
        {"memory": 25.0, "local-l2": 75.0, "other-cache": 0.0}
    )
    assert reproduce.role_fills(result, "combined") == pytest.approx(irq)
    assert reproduce.role_fills(result, "ping") == {"memory": 0.0, "local-l2": 0.0, "other-cache": 0.0}


def dsa_answer(scenario: str, o: dict[str, str]) -> dict:
    """Throughputs that tell every run apart: the node for brute force, half of it for smart,
    node + threads for the software path, and for copies within node 0 the transfer's bit length,
    +1 for a batch, +0.1 a thread."""
    assert scenario == "dsa-copy"
    threads = int(o.get("threads", 1))
    if o.get("path") == '"software"':
        gibps = int(o["dst_node"]) + threads
    elif "copy_policy" in o:
        gibps = int(o["dst_node"]) / (1 if o["copy_policy"] == '"brute"' else 2)
    else:
        gibps = int(o["transfer_bytes"]).bit_length() + ("batch" in o) + 0.1 * threads
    return {"copy": {"gibps": gibps}}


def test_seed_001s_rows_compare_the_runs_the_seed_compares():
    rows = {r.id: r.simulated for r in reproduce.seed001_rows(FakeRunner(dsa_answer))}
    assert rows == pytest.approx(
        {
            "seed001/dsa-ceiling": 21.1,
            "seed001/methods-1mib": 22.2 / 21.1,
            "seed001/batch-small": 20.1 / 19.1,  # the least of 4, 64 and 256 KiB
            "seed001/threads-no-slower": 31.2 / 31.1,  # 2 threads at 1 GiB
            "seed001/threads-1mib": 22.2 / 21.1,
            "seed001/threads-1mib-above-1gib": 21.1 / 31.1,  # one thread
            "seed001/brute-0-15": 15.0,
            "seed001/brute-cross-above-intra": 15 / 11,
            "seed001/brute-minus-smart-8": 4.0,
            "seed001/brute-minus-smart-11": 5.5,
            "seed001/brute-minus-smart-12": 6.0,
            "seed001/brute-minus-smart-15": 7.5,
            "seed001/software-vs-dsa": 16 / 7.5,
            "seed001/cpu-cross-slower": 27 / 20,  # node 15 over node 8, 12 threads
        }
    )


def test_seed_001s_figures_draw_every_size_that_fits_and_every_hbm_node():
    runner = FakeRunner(dsa_answer)
    curves = reproduce.seed001_transfer_curves(runner)
    sizes = [1024 << (2 * i) for i in range(11)]  # 1 KiB to 1 GiB
    assert {label: [s for s, _ in points] for label, points in curves.items()} == {
        "single": sizes,
        "batch of 32": sizes[:8],  # 32 transfers of at most 16 MiB fit in 1 GiB
        "12 threads": sizes,
    }
    assert curves["batch of 32"][0] == (1024, 11 + 1 + 0.1)
    assert curves["12 threads"][-1] == pytest.approx((1 << 30, 31 + 1.2))
    # Each point copies 1024 transfers, at most 1 GiB.
    last = (
        "dsa-copy",
        ("dst_node=0", "transfer_bytes=1073741824", "total_bytes=1073741824", "buffer_bytes=1073741824"),
    )
    assert (
        "dsa-copy",
        ("dst_node=0", "transfer_bytes=1024", "total_bytes=1048576", "buffer_bytes=1024"),
    ) in runner.asked
    assert last in runner.asked
    assert reproduce.seed001_hbm_bars(runner) == {
        "brute force": [8, 9, 10, 11, 12, 13, 14, 15],
        "smart": [4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5],
        "CPU, 12 threads": [20, 21, 22, 23, 24, 25, 26, 27],
    }
    figures = reproduce.seed001_figures(runner)
    assert set(figures) == {"seed001-transfer-size.png", "seed001-ddr-to-hbm.png"}
    assert all(f[:8] == b"\x89PNG\r\n\x1a\n" for f in figures.values())


def test_the_table_heads_each_source_and_role_and_wraps_the_metric_to_the_width():
    rows = [
        Row("seed000/1q/a", "seed 000", "UMC read BW change with SDCI, 1q", "%", -85.0, -86.0),
        Row("seed000/1q/bb", "seed 000", "DC fills", "%", 2.0, 2.7),
        Row("seed000/4q/a", "seed 000", "UMC read BW change with SDCI, 4q", "%", -66.0, -63.2),
        Row("leon/prefetch-reads", "seed 003", "memory reads, prefetch / base (published: equal)", "x", 1.0, 1.0),
    ]
    # 13 + 9 + 9 + 10 + 6 columns and their gaps leave 24 of 81 for the metric; a group's own
    # columns are as wide as its own cells.
    assert reproduce.table(rows[:3], 81).splitlines() == [
        "seed 000, calibration rows:",
        "id             published  simulated  difference  target  metric",
        "seed000/1q/a      -85.0%     -86.0%     -1.0 pt  within  UMC read BW change with",
        "                                                         SDCI, 1q",
        "seed000/1q/bb       2.0%       2.7%     +0.7 pt  within  DC fills",
        "",
        "seed 000, validation rows:",
        "id            published  simulated  difference  target  metric",
        "seed000/4q/a     -66.0%     -63.2%     +2.8 pt  within  UMC read BW change with",
        "                                                        SDCI, 4q",
    ]
    assert reproduce.table(rows[2:3], 90).splitlines()[2] == (
        "seed000/4q/a     -66.0%     -63.2%     +2.8 pt  within  UMC read BW change with SDCI, 4q"
    )
    # With less room the metric goes under its row, indented, wrapped to the width.
    assert reproduce.table(rows[3:], 50).splitlines() == [
        "seed 003, validation rows:",
        "id                   published  simulated  difference  target",
        "leon/prefetch-reads      1.00x      1.00x       +0.00  within",
        "    memory reads, prefetch / base (published:",
        "    equal)",
    ]


@pytest.mark.parametrize(("panels", "grid"), [(1, (1, 1)), (2, (1, 2)), (6, (1, 6)), (7, (2, 6)), (13, (3, 6))])
def test_the_rows_figure_has_at_most_six_panels_a_line(panels, grid):
    assert reproduce.panel_grid(panels) == grid


def test_a_rows_target_interval_is_its_tolerance_about_the_published_value_or_its_relations_side():
    assert reproduce.target_interval(row("%", -85.0, 0.0)) == (-95.0, -75.0)
    assert reproduce.target_interval(row("GiB/s", 96.0, 0.0)) == pytest.approx((86.4, 105.6))
    assert reproduce.target_interval(row("GiB/s", 2.0, 0.0)) == (-1.0, 5.0)
    assert reproduce.target_interval(row("x", 1.0, 0.0)) == (0.9, 1.1)
    assert reproduce.target_interval(row("x", 1.0, 0.0, ">")) == (1.0, math.inf)
    assert reproduce.target_interval(row("x", 0.5, 0.0, "<=")) == (-math.inf, 0.5)
    assert reproduce.target_interval(row("GB/s", 1.0, 0.0)) is None


def test_the_score_text_says_both_scores_or_only_the_judged_roles():
    rows = [row("%", 50.0, 55.0, id="seed000/1q/a"), row("%", 50.0, 70.0, id="seed004/x"), row("GB/s", 1.0, 2.0)]
    assert reproduce.score_text(rows) == "calibration 1 of 1, validation 0 of 1 within target"
    assert reproduce.score_text(rows[1:], every_role=False) == "validation 0 of 1 within target"
    assert reproduce.score_text(rows[2:]) == "calibration 0 of 0, validation 0 of 0 within target"
    assert reproduce.score_text(rows[2:], every_role=False) == "1 row, no target"


# Rows of four units: a calibration row within, validation rows within and missing on either side
# of the diagonal, a row without a target, relations.
PARITY_ROWS = [
    row("%", -85.0, -86.0, id="seed000/1q/dram-read-change"),
    row("%", 28.0, 48.2, id="seed000/4q/fills-iperf-memory-sdci-off"),
    row("%", -22.0, -44.4, id="seed002/96c-2q/dram-total-change"),
    row("%", 2.0, 4.9, id="seed000/4q/fills-irq-memory-sdci-off"),
    row("GB/s", 11.54, 8.75, id="seed000/1q/dram-read-sdci-off"),
    row("GiB/s", 96.0, 54.5, id="seed001/brute-0-15"),
    row("GiB/s", 2.0, 0.3, id="seed001/brute-minus-smart-8"),
    row("x", 1.0, 1.0, ">", id="seed001/brute-cross-above-intra"),
    row("x", 0.5, 0.11, "<", id="seed001/software-vs-dsa"),
]
GREEN, RED, GREY = "#55a868", "#c44e52", "#8c8c8c"


def points(ax) -> dict[str, list]:
    """Each role's points in a panel: (x, y, colour)."""
    import matplotlib.colors

    return {
        c.get_label(): [
            (x, y, matplotlib.colors.to_hex(f))
            for (x, y), f in zip(c.get_offsets().tolist(), c.get_facecolors(), strict=True)
        ]
        for c in ax.collections
        if c.get_label() in reproduce.ROLES
    }


def markers(ax) -> dict[str, str]:
    """Each role's marker in a panel, of a square and a circle."""
    import matplotlib.markers

    def marker(path) -> str:
        for name in "so":
            style = matplotlib.markers.MarkerStyle(name)
            drawn = style.get_path().transformed(style.get_transform()).vertices
            if drawn.shape == path.vertices.shape and abs(drawn - path.vertices).max() < 1e-9:
                return name
        return "?"

    return {c.get_label(): marker(c.get_paths()[0]) for c in ax.collections if c.get_label() in reproduce.ROLES}


def test_the_parity_figure_has_a_panel_per_unit_with_each_rows_point_target_and_the_misses_named():
    fig = reproduce.parity_figure(PARITY_ROWS)
    assert fig._suptitle.get_text() == "steer reproduce: calibration 1 of 1, validation 3 of 7 within target"
    percent, dram, copy, ratios, unused = fig.axes[:5]
    assert not unused.get_visible() and len(fig.axes) == 6  # three panels a line
    assert [ax.get_title() for ax in (percent, dram, copy, ratios)] == [
        "percentages: calibration 1 of 1, validation 1 of 3 within target\ntarget: ±10 pt",
        "DRAM bandwidth: 1 row, no target\ntarget: none (shown, not judged)",
        "copy throughput: validation 1 of 2 within target\ntarget: ±10%, at least ±3 GiB/s",
        "ratios: validation 1 of 2 within target\n"
        "target: the published relation (>, <, ...), or ±0.1 where published as equal",
    ]
    # Published across, simulated up; calibration rows squares, validation rows circles; by verdict.
    assert points(percent) == {
        "calibration": [(-85.0, -86.0, GREEN)],
        "validation": [(28.0, 48.2, RED), (-22.0, -44.4, RED), (2.0, 4.9, GREEN)],
    }
    assert markers(percent) == {"calibration": "s", "validation": "o"}
    assert points(dram) == {"calibration": [(11.54, 8.75, GREY)]}
    assert points(ratios) == {"validation": [(1.0, 1.0, RED), (0.5, 0.11, GREEN)]}
    # Percentages on linear axes from every value and every target's edge, with a 5% margin; the
    # other units on log axes over their values and the positive edges, a factor 1.5 beyond.
    assert percent.get_xlim() == percent.get_ylim() == pytest.approx((-95 - 7.16, 48.2 + 7.16))
    assert (percent.get_xscale(), copy.get_xscale(), copy.get_yscale(), ratios.get_yscale()) == (
        "linear",
        "log",
        "log",
        "log",
    )
    assert copy.get_xlim() == pytest.approx((0.3 / 1.5, 105.6 * 1.5))
    # The diagonal across the panel, each target at its published value up to the panel's edges.
    diagonal = [line for line in percent.lines if line.get_label() == "simulated = published"]
    assert [list(diagonal[0].get_xdata()), list(diagonal[0].get_ydata())] == [list(percent.get_xlim())] * 2
    low, high = ratios.get_ylim()
    # Per panel the bands on their points, those of relations above and below (drawn beside).
    bands = {ax: [c for c in ax.collections if c.get_label() == "target"] for ax in (percent, dram, copy, ratios)}
    segments = {ax: [[s.tolist() for s in c.get_segments()] for c in found] for ax, found in bands.items()}
    assert segments[percent] == [
        [
            [[-85.0, -95.0], [-85.0, -75.0]],
            [[28.0, 18.0], [28.0, 38.0]],
            [[-22.0, -32.0], [-22.0, -12.0]],
            [[2.0, -8.0], [2.0, 12.0]],
        ],
        [],
        [],
    ]
    assert segments[ratios] == [[], [[[1.0, 1.0], [1.0, high]]], [[[0.5, low], [0.5, 0.5]]]]
    assert [s[0][1] for s in segments[copy][0]] == [pytest.approx(86.4), copy.get_ylim()[0]]
    assert segments[dram] == [[], [], []]
    # 3 points right, 3 points left, in pixels at the figure's resolution.
    shifts = [
        c.get_transform().transform((1.0, 1.0))[0] - ratios.transData.transform((1.0, 1.0))[0] for c in bands[ratios]
    ]
    assert shifts == pytest.approx([0.0, 3 * fig.dpi / 72, -3 * fig.dpi / 72])
    assert [c.get_linewidth()[0] for c in bands[ratios]] == [7, 4, 4]
    # Every miss named at its point: above the diagonal from the top left, below it from the right.
    labels = {ax: [(t.get_text(), t.xy, t.xyann, t.get_ha()) for t in ax.texts] for ax in (percent, copy, ratios)}
    assert labels[percent] == [
        ("seed000/4q/fills-iperf-memory-sdci-off", (28.0, 48.2), (0.03, 0.95), "left"),
        ("seed002/96c-2q/dram-total-change", (-22.0, -44.4), (0.97, 0.45), "right"),
    ]
    assert labels[copy] == [("seed001/brute-0-15", (96.0, 54.5), (0.97, 0.45), "right")]
    assert labels[ratios] == [("seed001/brute-cross-above-intra", (1.0, 1.0), (0.03, 0.95), "left")]
    assert not dram.texts
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["calibration row", "validation row", "within target", "miss (labelled)", "no target", "target"]


def test_misses_on_one_side_are_labelled_in_a_column_top_to_bottom_as_their_points_are():
    rows = [row("ns", 10.0, 40.0, id="seed004/a"), row("ns", 20.0, 70.0, id="seed004/b")]
    rows += [row("ns", 90.0, 20.0, id="seed004/c"), row("ns", 80.0, 10.0, id="seed004/d")]
    [ax] = [ax for ax in reproduce.parity_figure(rows).axes if ax.get_visible()]
    assert [(t.get_text(), t.xyann) for t in ax.texts] == [
        ("seed004/b", (0.03, 0.95)),
        ("seed004/a", (0.03, pytest.approx(0.89))),
        ("seed004/c", (0.97, 0.45)),
        ("seed004/d", (0.97, pytest.approx(0.39))),
    ]
    # A single unit: one panel; linear axes for latencies.
    assert ax.get_xscale() == "linear" and ax.get_xlabel() == "published (ns)" and ax.get_ylabel() == "simulated (ns)"


def test_each_rows_panel_shades_its_target_and_says_within_or_miss():
    import matplotlib.colors

    rows = [PARITY_ROWS[1], PARITY_ROWS[0], PARITY_ROWS[4], PARITY_ROWS[7]]
    fig = reproduce.rows_figure(rows)
    miss, within, none, relation = fig.axes[:4]
    assert fig._suptitle.get_text() == (
        "calibration 1 of 1, validation 0 of 2 within target (shaded, between dashed lines: the target)"
    )
    assert [ax.get_title() for ax in (miss, within, none, relation)] == [
        "seed000/4q/fills-iperf-\nmemory-sdci-off\nMISS",
        "seed000/1q/dram-read-change\nwithin target",
        "seed000/1q/dram-read-sdci-\noff\nno target",
        "seed001/brute-cross-above-\nintra\nMISS",
    ]
    assert [matplotlib.colors.to_hex(ax.title.get_color()) for ax in (miss, within, none)] == [RED, GREEN, GREY]
    # The simulated bar in the verdict's colour, beside the published one.
    assert [[b.get_height() for b in ax.patches if b.get_width() < 1] for ax in (miss, within)] == [
        [28.0, 48.2],
        [-85.0, -86.0],
    ]
    assert matplotlib.colors.to_hex(miss.patches[1].get_facecolor()) == RED

    def band(ax):
        [span] = [p for p in ax.patches if p.get_width() >= 1]
        return span.get_y(), span.get_y() + span.get_height()

    # The band between the target's edges, dashed; a relation's open side up to the panel's top.
    assert band(miss) == pytest.approx((18.0, 38.0))
    assert [s.tolist() for s in miss.collections[0].get_segments()] == [[[-0.5, 18.0], [1.5, 18.0]]] + [
        [[-0.5, 38.0], [1.5, 38.0]]
    ]
    # A band beyond the bars with a margin of 5% of the panel's span: -95 to 0 here.
    assert within.get_ylim() == pytest.approx((-95.0 - 4.75, 0.0))
    assert band(within) == pytest.approx((-95.0, -75.0))
    assert band(relation) == pytest.approx((1.0, relation.get_ylim()[1]))
    assert [s.tolist() for s in relation.collections[0].get_segments()] == [[[-0.5, 1.0], [1.5, 1.0]]]
    assert not [p for p in none.patches if p.get_width() >= 1] and not none.collections


def test_rows_written_as_json_read_back_and_a_file_that_is_not_rows_is_one_line(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([r.to_dict() for r in PARITY_ROWS]))
    assert reproduce.load_rows(path) == PARITY_ROWS
    for text, why in [
        ("{", "not the rows of steer reproduce: Expecting property name"),
        ("[{}]", "not the rows of steer reproduce: 'id'"),
        ("[1]", "not the rows of steer reproduce: 'int' object is not subscriptable"),
        (json.dumps([{**PARITY_ROWS[0].to_dict(), "simulated": "1"}]), "published and simulated must be numbers"),
    ]:
        path.write_text(text)
        with pytest.raises(reproduce.ScenarioError) as raised:
            reproduce.load_rows(path)
        assert str(raised.value).startswith(f"{path}: ") and why in str(raised.value)
    with pytest.raises(reproduce.ScenarioError, match="No such file"):
        reproduce.load_rows(tmp_path / "none.json")

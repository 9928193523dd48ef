"""How `steer reproduce` judges a row: targets per unit, relations, roles and both scores, on
hand-made rows (the rows' simulated values come from runs tested elsewhere)."""

from __future__ import annotations

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
        # Other units carry no target.
        ("GB/s", 11.5, 8.75, None),
        ("x", 1.0, 5.0, None),
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
    # A relation decides even where the unit has a target.
    assert row("%", 1.0, simulated, relation).within_target is within


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
        "calibration: 1 of 2 within target; validation: 2 of 3 within target (percentages ±10 pt, latencies ±20 ns)"
    )
    assert reproduce.scores([]) == {"calibration": (0, 0), "validation": (0, 0)}


def test_the_table_shows_each_rows_difference_in_its_own_terms_and_the_json_its_judgement():
    rows = [
        row("%", -85.0, -100.0, id="seed000/1q/dram-read-change"),
        row("ns", 76.0, 55.2, id="seed004/onload-udp-avg"),
        row("x", 1.0, 1.08, ">", id="seed001/batch-small"),
        row("GB/s", 11.54, 8.75, id="seed000/1q/dram-read-sdci-off"),
    ]
    assert reproduce.table_rows(rows) == [
        ["seed000/1q/dram-read-change", "calibration", "source", "metric", "-85.0%", "-100.0%", "-15.0 pt", "miss"],
        ["seed004/onload-udp-avg", "validation", "source", "metric", "76.0ns", "55.2ns", "-20.80 ns", "miss"],
        ["seed001/batch-small", "validation", "source", "metric", "> 1.00x", "1.08x", "+0.08", "within"],
        ["seed000/1q/dram-read-sdci-off", "calibration", "source", "metric", "11.5GB/s", "8.8GB/s", "-2.79 GB/s", ""],
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
    assert reproduce.matches("seed000/1q/dram-read-change", "seed000/1q/*")
    assert reproduce.matches("seed000/4q/dram-read-change", "4q/dram")
    assert not reproduce.matches("seed001/dsa-ceiling", "seed000")

import json

from steer import api, reproduce
from steer.sensitivity import (
    HEADERS,
    ChangedRunner,
    Parameter,
    Sensitivity,
    changes,
    kind_defaults,
    marked_parameters,
    sensitivity,
    table_rows,
)

PRESET = """
name = "p"   # assumed: not a number, skipped
[core]
freq_ghz = 5.0           # published
outstanding_misses = 24  # assumed: as Zen 4
[memory]
idle_latency_ns = 130.0  # calibrated on some rows
write_queue_ns = 0.0     # assumed, but zero: nothing to scale
smt = true               # assumed, but not a number
"""


def test_only_marked_non_zero_numbers_are_varied_and_integers_stay_integers():
    found = marked_parameters("p", PRESET)
    assert found == [
        Parameter("p", "core.outstanding_misses", 24, "assumed"),
        Parameter("p", "memory.idle_latency_ns", 130.0, "calibrated"),
    ]
    assert [found[0].scaled(f) for f in (0.8, 1.2)] == [
        "platform.core.outstanding_misses=19",
        "platform.core.outstanding_misses=29",
    ]
    assert found[1].scaled(0.8) == "platform.memory.idle_latency_ns=104"
    assert Parameter("p", "memory.nodes_per_socket", 1, "assumed").scaled(0.8).endswith("=1")


def test_sensitivity_moves_only_the_rows_of_the_parameters_platform(steer_cli):
    done = steer_cli("reproduce", "--sensitivity", "--only", "seed004/eflatency-avg", "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    results = {r["key"]: r for r in json.loads(done.stdout)}
    calibrated = results["memory.write_queue_latency_ns"]
    assert (calibrated["preset"], calibrated["mark"]) == ("turin-9575f", "calibrated")
    # The saving is the write queue's answer minus an L2 hit: it moves with the value, 1:1.
    move = calibrated["moves"]["1.2"]["seed004/eflatency-avg"]
    assert abs(move - 0.2 * calibrated["value"]) < 0.5
    assert results["memory.interleave_bytes"]["moves"]["0.8"] is None, "no valid value 20% off a power of two"
    bad = steer_cli("reproduce", "--sensitivity", "--set", "queues=2")
    assert bad.returncode == 2 and "not with --set" in bad.stderr
    none = steer_cli("reproduce", "--sensitivity", "--only", "seed999/*")
    assert (none.returncode, none.stdout, none.stderr) == (2, "", "steer: error: --only seed999/*: no row matches\n")


SCENARIO = """
[params]
queues = 1            # assumed: a parameter of the scenario's own, not a key path
[[devices]]
name = "nic0"
dma_latency_ns = 400.0   # assumed
[[devices.queues]]
pool_buffers = 4088      # assumed: per queue
[[devices]]
name = "nic1"
[[devices.queues]]
ring_entries = 64        # published
[[devices.queues]]
ring_entries = 32        # calibrated on rows
[[workloads]]
kind = "tcp_rx"
kernel_lines = 500       # calibrated on rows
"""


def test_a_scenarios_marked_values_are_named_by_their_array_element_and_set_without_platform():
    found = marked_parameters("", SCENARIO, "s")
    assert [(p.key, p.value, p.mark) for p in found] == [
        ("queues", 1, "assumed"),
        ("devices.0.dma_latency_ns", 400.0, "assumed"),
        ("devices.0.queues.0.pool_buffers", 4088, "assumed"),
        ("devices.1.queues.1.ring_entries", 32, "calibrated"),
        ("workloads.0.kernel_lines", 500, "calibrated"),
    ]
    assert found[4].scaled(1.2) == "workloads.0.kernel_lines=600"
    assert (found[4].owner, found[4].to_dict()["scenario"]) == ("s", "s")


KINDS = {
    ("device", "nic"): [
        ("dma_latency_ns", "400.0", "DMA latency (ns): Assumed, as a PCIe round trip."),
        ("link_gbps", "100.0", "Link rate (Gb/s)."),
    ],
    ("workload", "tcp_rx"): [
        ("napi_cycles_per_page", "150.0", "Cycles per page: assumed."),
        ("kernel_lines", "250", "Lines per sk_buff: calibrated on rows."),
        ("spin", "0.0", "Zero: assumed, but nothing to scale."),
        ("mode", '"copy"', "A name: assumed, not a number."),
        ("cpus", "Cpus(0)", "Not TOML at all: assumed."),
    ],
}

KIND_SCENARIO = """
[[devices]]
name = "nic0"
[[workloads]]
kind = "tcp_rx"
kernel_lines = 500
"""


def test_marked_defaults_of_a_scenarios_kinds_are_varied_unless_the_scenario_sets_them():
    found = kind_defaults(KIND_SCENARIO, "s", KINDS)
    # The device names no kind: a NIC. kernel_lines is the scenario's own value, not the default.
    assert found == [
        Parameter("", "devices.0.dma_latency_ns", 400.0, "assumed", "s"),
        Parameter("", "workloads.0.napi_cycles_per_page", 150.0, "assumed", "s"),
    ]
    assert found[1].scaled(0.8) == "workloads.0.napi_cycles_per_page=120"


def test_the_table_gives_each_parameters_largest_move_either_way_and_the_json_every_move():
    write_queue = Parameter("turin-9575f", "memory.write_queue_latency_ns", 58.0, "calibrated")
    kernel = Parameter("", "workloads.0.kernel_lines", 250, "calibrated", "iperf-rx")
    results = [
        # The largest move is the largest in size, whatever its sign.
        Sensitivity(write_queue, {0.8: {"a": 3.0, "b": -11.6, "c": 0.1}, 1.2: {"a": 0.004, "b": -0.004}}),
        # No valid value 20% down; no row at all up (a move of nothing).
        Sensitivity(kernel, {0.8: None, 1.2: {}}),
    ]
    assert HEADERS[4:] == ["largest move at -20%", "largest move at +20%"]
    assert table_rows(results) == [
        ["turin-9575f", "memory.write_queue_latency_ns", "58", "calibrated", "-11.60 b", "0"],
        ["iperf-rx", "workloads.0.kernel_lines", "250", "calibrated", "not a valid value", "0"],
    ]
    assert results[0].largest(0.8) == ("b", -11.6) and results[1].largest(1.2) == ("", 0.0)
    assert results[1].to_dict() == {
        "scenario": "iperf-rx",
        "key": "workloads.0.kernel_lines",
        "value": 250,
        "mark": "calibrated",
        "moves": {"0.8": None, "1.2": {}},
    }
    assert results[0].to_dict()["preset"] == "turin-9575f" and "scenario" not in results[0].to_dict()


def test_only_the_runs_of_the_parameters_platform_or_scenario_run_again(monkeypatch):
    ran = []
    monkeypatch.setattr(reproduce.api, "run", lambda scenario, overrides: ran.append((scenario, overrides)) or {})
    base = reproduce.Runner()
    base.cache = {("s", ("a=1",)): {"platform": "p"}, ("t", ()): {"platform": "q"}}
    preset = Parameter("p", "core.x", 2, "assumed")
    scenario = Parameter("", "workloads.0.k", 3, "calibrated", "t")
    assert changes(preset, "t", {"platform": "p"}) and not changes(preset, "s", {"platform": "q"})
    assert changes(scenario, "t", {"platform": "p"}) and not changes(scenario, "s", {"platform": "q"})
    for parameter in (preset, scenario):
        changed = ChangedRunner(base, parameter, [parameter.scaled(1.2)])
        assert changed.run("s", "a=1") == ({} if parameter is preset else {"platform": "p"})
        assert changed.run("t") == ({"platform": "q"} if parameter is preset else {})
    assert ran == [("s", ["a=1", "platform.core.x=2"]), ("t", ["workloads.0.k=4"])]


def test_each_marked_value_moves_the_rows_of_its_runs_and_the_progress_counts_each_stage(monkeypatch):
    """Two made-up runs: `s` on preset `p` (its `core.x = 10`, assumed, gives row a, a quarter of it), `t` on
    preset `q` (its own `k = 50`, calibrated, gives row b); `k = 40` is not a valid value."""
    sources = {"p": "[core]\nx = 10  # assumed\n", "q": "[core]\ny = 5  # published\n"}
    monkeypatch.setattr(api, "preset_source", sources.__getitem__)
    monkeypatch.setattr(api, "scenario_source", lambda name: ({"s": "", "t": "k = 50  # calibrated\n"}[name], "", ""))
    monkeypatch.setattr(api, "catalog", lambda: [])
    monkeypatch.setattr(reproduce, "planned_runs", lambda only: 2)

    def run(scenario, overrides):
        values = dict(o.split("=") for o in overrides)
        if values.get("k") == "40":
            raise api.ScenarioError("k: 40 is not a valid value")
        value = float(values.get("platform.core.x", 10)) / 4 if scenario == "s" else float(values.get("k", 50))
        return {"platform": {"s": "p", "t": "q"}[scenario], "v": value}

    monkeypatch.setattr(reproduce.api, "run", run)

    def rows(only, runner):
        assert only == "x/*"
        a, b = runner.run("s", "n=1"), runner.run("t")
        return [reproduce.Row(name, "", "", "", 0.0, r["v"]) for name, r in (("a", a), ("b", b))]

    monkeypatch.setattr(reproduce, "reproduce", rows)
    seen = []
    base, results = sensitivity("x/*", lambda stage, done: seen.append((stage, done)))
    assert [(r.id, r.simulated) for r in base] == [("a", 2.5), ("b", 50.0)]
    assert [(s.parameter, s.moves) for s in results] == [
        (Parameter("p", "core.x", 10, "assumed"), {0.8: {"a": -0.5, "b": 0.0}, 1.2: {"a": 0.5, "b": 0.0}}),
        (Parameter("", "k", 50, "calibrated", "t"), {0.8: None, 1.2: {"a": 0.0, "b": 10.0}}),
    ]
    # Two base runs; then each of the four changed runs (two values of two parameters, one run each).
    assert seen == [
        ("base rows", 0.5),
        ("base rows", 0.99),
        ("changes", 0.25),
        ("changes", 0.5),
        ("changes", 0.75),
        ("changes", 0.99),
    ]
    assert table_rows(results) == [
        ["p", "core.x", "10", "assumed", "-0.50 a", "+0.50 a"],
        ["t", "k", "50", "calibrated", "not a valid value", "+10.00 b"],
    ]
    assert HEADERS == [
        "preset or scenario",
        "parameter",
        "value",
        "mark",
        "largest move at -20%",
        "largest move at +20%",
    ]

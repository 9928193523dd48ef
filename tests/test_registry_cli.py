"""`steer kinds`, `steer stats` and stall warnings: what the command line reads from the core's
registries and declarations."""

import json

import steer


def test_kinds_lists_every_registry_from_the_core(steer_cli):
    listing = steer_cli("kinds", "--json")
    assert listing.returncode == 0
    entries = json.loads(listing.stdout)
    assert [(e["registry"], e["name"]) for e in entries] == [(e["registry"], e["name"]) for e in steer.catalog()]
    one = steer_cli("kinds", "workload", "tcp_rx")
    assert one.returncode == 0 and "napi_budget" in one.stdout and "64" in one.stdout
    unknown = steer_cli("kinds", "workload", "bogus")
    assert unknown.returncode == 2 and "no entry `bogus` (known: example, l2fwd" in unknown.stderr
    markdown = steer_cli("kinds", "--markdown")
    assert "| `tph` |" in markdown.stdout and "**replacement**" in markdown.stdout


def test_stats_lists_every_key_with_its_unit_and_meaning(steer_cli):
    listed = steer_cli("stats", "eflatency", "--json")
    assert listed.returncode == 0
    keys = {entry["key"]: (entry["unit"], entry["meaning"]) for entry in json.loads(listed.stdout)}
    assert keys["dram.read_gbps"][0] == "GB/s"
    assert keys["cores.*.workload.half_rtt_ns"][0] == "ns"
    assert "half round-trip" in keys["cores.*.workload.half_rtt_ns"][1]
    assert steer_cli("stats", "no-such-scenario").returncode == 2


def test_a_stalled_run_warns_on_stderr(steer_cli):
    stalled = steer_cli(
        "run",
        "eflatency",
        "--set",
        'tph_mode="iv"',
        "--set",
        "devices.0.tph.affinity_changes=[{ queue = 0, at_us = 300.0, cpu = 3 }]",
        "--set",
        "devices.0.tph.restart_us=50.0",
        "--set",
        "sim.measure_us=600",
    )
    assert stalled.returncode == 0
    assert "steer: warning: nothing was left to happen after 3" in stalled.stderr
    assert "steer: warning: cpu 2 (pingpong) stalled at" in stalled.stderr
    quiet = steer_cli("run", "eflatency", "--set", "sim.measure_us=100")
    assert "warning" not in quiet.stderr

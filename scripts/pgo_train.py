#!/usr/bin/env python3
"""The workload steer's extension is trained on in its profile-guided build (scripts/setup.sh).

What it runs matters, not how fast: the compiler lays out and inlines the code by the counts this
run leaves, and treats code it never reached as cold. So it reaches every built-in scenario (each
DMA placement its devices accept), the three benchmark scenarios for longer, and trace replays
through each of the replayer's paths (din text and binary; the LRU fast path and the general one).

    python scripts/pgo_train.py
"""

from __future__ import annotations

import sys
import tempfile
import tomllib
from pathlib import Path

import steer

# The benchmark's mixed trace and its writer (din text and binary).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402

BENCHMARK_SCENARIOS = ("rx-default", "iperf-rx", "ddio-l2fwd")
REPLACEMENT_POLICIES = ("lru", "tree_plru", "srrip", "drrip", "random")


def nic_devices(scenario: str) -> list[int]:
    devices = tomllib.loads(steer.resolve(scenario)).get("devices", [])
    return [index for index, device in enumerate(devices) if "placement" in device]


def run_scenarios() -> None:
    placements = [entry["name"] for entry in steer.catalog("placement")]
    for scenario, _ in steer.scenarios():
        window = "3000" if scenario in BENCHMARK_SCENARIOS else "500"
        steer.run(scenario, [f"sim.measure_us={window}", "sim.warmup_us=100"])
        for policy in placements:
            overrides = [f'devices.{i}.placement.policy="{policy}"' for i in nic_devices(scenario)]
            if not overrides:
                break
            try:
                steer.run(scenario, ["sim.measure_us=300", "sim.warmup_us=0", *overrides])
            except steer.ScenarioError:
                continue  # a placement this platform does not offer (DDIO without DDIO ways)


def replay_traces() -> None:
    with tempfile.TemporaryDirectory() as directory:
        for path in bench.write_traces(Path(directory), bench.generate(200_000)):
            steer.trace(path)
            for policy in REPLACEMENT_POLICIES:
                steer.trace(path, overrides=[f"{level}.replacement={policy}" for level in ("l2", "l3")])


def main() -> None:
    run_scenarios()
    replay_traces()


if __name__ == "__main__":
    main()

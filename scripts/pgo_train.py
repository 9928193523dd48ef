#!/usr/bin/env python3
"""The workload steer's extension is trained on in its profile-guided build (scripts/setup.sh).

What it runs matters, not how fast: the compiler lays out and inlines the code by the counts this
run leaves, and treats code it never reached as cold. So it reaches every built-in scenario (each
DMA placement its devices accept), the three benchmark scenarios for longer, and trace replays
through each of the replayer's paths (din text and binary; the LRU fast path and the general one).

    python scripts/pgo_train.py
"""

from __future__ import annotations

import random
import struct
import tempfile
import tomllib
from pathlib import Path

import steer

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


def write_traces(directory: Path, count: int = 200_000) -> list[Path]:
    """A mixed trace (a hot set, a stream, random lines; 30% writes) as din text and binary."""
    rng = random.Random(1)
    accesses = []
    for step in range(count):
        pick = rng.random()
        if pick < 0.5:
            address = 0x1000_0000 + rng.randrange(256 << 10)
        elif pick < 0.8:
            address = 0x2000_0000 + step * 8
        else:
            address = 0x4000_0000 + rng.randrange(1 << 30)
        accesses.append((rng.random() < 0.3, address & ~7))
    din, binary = directory / "train.din", directory / "train.trace"
    din.write_text("".join(f"{int(write)} {address:x}\n" for write, address in accesses))
    binary.write_bytes(b"STEERTR1" + b"".join(struct.pack("<Q", int(w) << 62 | a) for w, a in accesses))
    return [din, binary]


def replay_traces() -> None:
    with tempfile.TemporaryDirectory() as directory:
        for path in write_traces(Path(directory)):
            steer.trace(path)
            for policy in REPLACEMENT_POLICIES:
                steer.trace(path, overrides=[f"{level}.replacement={policy}" for level in ("l2", "l3")])


def main() -> None:
    run_scenarios()
    replay_traces()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How results change with the run-ahead bound `sim.max_runahead_ns`.

Runs every `steer reproduce` row and the DDIO/SDCI forwarding scenarios at each bound and prints,
per bound, the largest change of any row against the tightest bound (0: agents interleave exactly
at the granularity they step at), the rows that move most, and the host time. The table in
docs/engine.md comes from this script:

    .venv/bin/python scripts/runahead.py [--bounds 0,10,50,100,500,2000,20000,1e9]
"""

from __future__ import annotations

import argparse
import time

from steer import api, reproduce

SCENARIO_METRICS = {
    "ddio-l2fwd": [
        ("dram.read_gbps", "GB/s"),
        ("dram.write_gbps", "GB/s"),
        ("devices.nic0.dma_write_hit_rate", "fraction"),
        ("devices.nic0.dma_read_hit_rate", "fraction"),
        ("devices.nic0.latency_ns.p50", "ns"),
        ("devices.nic0.latency_ns.p99", "ns"),
    ],
    "sdci-l2fwd": [
        ("dram.read_gbps", "GB/s"),
        ("dram.write_gbps", "GB/s"),
        ("devices.nic0.latency_ns.p50", "ns"),
        ("devices.nic0.latency_ns.p99", "ns"),
    ],
}


def dig(result: dict, key: str) -> float:
    value = result
    for part in key.split("."):
        value = value[part]
    return float(value)


class BoundRunner(reproduce.Runner):
    """A reproduce runner that adds the run-ahead bound to every run."""

    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound

    def run(self, scenario: str, *overrides: str) -> dict:
        return super().run(scenario, *overrides, f"sim.max_runahead_ns={self.bound}")


def measure(bound: float) -> tuple[dict[str, tuple[float, str]], float]:
    """Every row and scenario metric at `bound`, and the host seconds it took."""
    started = time.perf_counter()
    runner = BoundRunner(bound)
    values = {
        row.id: (row.simulated, row.unit)
        for name in reproduce.EXPERIMENTS
        for row in reproduce.EXPERIMENTS[name](runner)
    }
    for scenario, metrics in SCENARIO_METRICS.items():
        result = api.run(scenario, [f"sim.max_runahead_ns={bound}"])
        for key, unit in metrics:
            values[f"{scenario}/{key}"] = (dig(result, key), unit)
    return values, time.perf_counter() - started


def change(new: float, reference: float, unit: str) -> float:
    """Points for percentages and fractions (as percentages), relative % otherwise."""
    if unit == "%":
        return new - reference
    if unit == "fraction":
        return 100 * (new - reference)
    return 100 * (new - reference) / abs(reference) if reference else (0.0 if new == 0 else float("inf"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bounds", default="0,10,50,100,500,2000,20000,1e9")
    args = parser.parse_args()
    bounds = [float(b) for b in args.bounds.split(",")]
    measured = {bound: measure(bound) for bound in bounds}
    reference, _ = measured[bounds[0]]
    print(f"Against max_runahead_ns = {bounds[0]:g}: largest change of any row (points for % and fractions, else %)\n")
    print("| max_runahead_ns | largest change | rows changed > 1 | host s | most changed |")
    print("|---|---|---|---|---|")
    for bound in bounds:
        values, seconds = measured[bound]
        changes = {key: change(values[key][0], reference[key][0], unit) for key, (_, unit) in reference.items()}
        worst = max(changes, key=lambda k: abs(changes[k]))
        over = sum(abs(c) > 1 for c in changes.values())
        print(f"| {bound:g} | {changes[worst]:+.2f} | {over} | {seconds:.1f} | {worst} |")


if __name__ == "__main__":
    main()

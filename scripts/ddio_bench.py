"""ddio-l2fwd against ddio-bench's measurements on a Xeon Gold 6140 (docs/ddio.md).

scripts/data/ddio-bench.csv holds the means of ten runs of each point of ddio-bench's sample
results (github.com/aliireza/ddio-bench, commit 55d0542, experiments/*/sample-results):
FastClick forwarding on one to eighteen cores, PCIe write (ItoM) and read (PCIRdCur) hit rates
from pcm-pcie, rates as FastClick's link rate (24 B of preamble, gap and FCS per packet counted).
Each point runs with its packet size, descriptors per queue, cores, DDIO ways and offered load.

Prints, per point: measured and simulated write hit, read hit (%) and forwarded Gb/s of packet
bytes; then the mean distance per experiment. Arguments are further KEY=VALUE settings applied to
every point (e.g. devices.0.pcie.read_completion_boundary_bytes=64).
"""

import csv
import statistics
from pathlib import Path

import steer
from point_settings import settings_for_every_point

ETHERNET_OVERHEAD_BYTES = 24

extra_settings = settings_for_every_point("ddio-l2fwd", __doc__.split("\n\n")[0])

with open(Path(__file__).parent / "data" / "ddio-bench.csv") as measurements:
    rows = list(csv.DictReader(measurements))
print("experiment     bytes  ring cores ways | write hit meas sim | read hit meas sim | Gb/s meas sim")
gaps: dict[str, list[tuple[float, float]]] = {}
for row in rows:
    packet = int(row["packet_bytes"])
    on_wire = packet / (packet + ETHERNET_OVERHEAD_BYTES)
    settings = [f"{key}={row[key]}" for key in ("packet_bytes", "rx_ring", "cores", "ddio_ways")]
    offered = float(row["offered_link_gbps"]) * on_wire
    # The LLC's DRRIP keeps some stretches of a ring that overflows DDIO's ways, so the hit rates
    # change with the part of the ring a window sees: the window covers two passes over every ring
    # at the offered rate, after three.
    ring_pass_us = int(row["rx_ring"]) * int(row["cores"]) * packet * 8 / (offered * 1e3)
    warmup_us, measure_us = max(15000, 3 * ring_pass_us), max(2000, 2 * ring_pass_us)
    result = steer.run(
        "ddio-l2fwd",
        [
            *settings,
            f"offered_gbps={offered:.3f}",
            f"sim.warmup_us={warmup_us:.0f}",
            f"sim.measure_us={measure_us:.0f}",
            *extra_settings,
        ],
    )
    nic = result["devices"]["nic0"]
    write, read = 100 * nic["dma_write_hit_rate"], 100 * nic["dma_read_hit_rate"]
    measured_write, measured_read = float(row["write_hit_pct"]), float(row["read_hit_pct"])
    gaps.setdefault(row["experiment"], []).append((abs(write - measured_write), abs(read - measured_read)))
    print(
        f"{row['experiment']:13s} {packet:6d} {row['rx_ring']:>5s} {row['cores']:>5s} {row['ddio_ways']:>4s} |"
        f" {measured_write:14.1f} {write:5.1f} | {measured_read:13.1f} {read:5.1f} |"
        f" {float(row['forwarded_link_gbps']) * on_wire:9.1f} {nic['tx_gbps']:5.1f}",
        flush=True,
    )
for experiment, distances in gaps.items():
    write_gap = statistics.mean(w for w, _ in distances)
    read_gap = statistics.mean(r for _, r in distances)
    points = len(distances)
    print(f"{experiment}: mean distance, write hit {write_gap:.1f} pt, read hit {read_gap:.1f} pt ({points} points)")

"""Regenerates the figures in docs/img that steer's own simulations draw, and prints beside each
the numbers the docs quote from it, so that a change to the model refreshes both in one command:

    .venv/bin/python scripts/figures.py [FIGURE ...]    # every figure, or the ones named

- rx-placement-dram.png (README.md, docs/sweeps.md): examples/rx-placement-sweep.toml's sweep, as
  `steer plot RESULTS --kind metric --x offered_gbps --y dram.read_gbps --y dram.write_gbps`
  draws it. Prints each run's DRAM traffic, throughput and drops, then docs/sweeps.md's table of
  rx-default with DMA to memory below, at and past the load its loop keeps up with.
- tcp-rx-per-core.png (docs/tcp.md): examples/tcp-rx-per-core-sweep.toml's sweep: the CPU time of
  iperf-rx (cores busy, NAPI's and recv's added) and the rate received against the offered load,
  on one core and on two, SDCI off and on. Prints each run's numbers.
- seed001-transfer-size.png and seed001-ddr-to-hbm.png (docs/dsa.md): seed 001's two curves, as
  `steer reproduce --only seed001 --plot DIR` draws them. Prints their points.
- dsa-latency-by-size.png and dsa-throughput-by-size.png (docs/dsa.md): the DSA latency-by-size
  and fault experiment, `steer run dsa-copy` within DDR node 0 at each transfer size with the
  settings `DSA_CURVES` and `DSA_LATENCY` list. Prints their points.
- reproduce-parity.png and reproduce-rows.png (docs/reproduce.md): `steer reproduce --plot DIR`'s
  parity figure of every row, and its row panels of `--only seed004 --only leon`. Prints the scores.
- ddio-rate.png (docs/ddio.md): examples/ddio-rate-sweep.toml's sweep (ddio-l2fwd at ddio-bench's
  offered rates, a window of whole ring passes), the same rates in the scenario's own window, and
  ddio-bench's measurements (scripts/data/ddio-bench.csv). Prints the three side by side.
- nvme-read-placement.png (docs/storage.md): the built-in nvme-read under memory, ddio and l2
  (SDCI), scanning each block or looking a key up in it, completions polled or interrupt-driven:
  the reading core's cycles per block and the DRAM bytes per byte read. Prints docs/storage.md's
  table of the same runs.
- fit-turin-write-queue.png (docs/fit.md): `steer fit fits/turin-write-queue.toml --plot FILE`'s
  cost of each point the search ran. Prints the fit's result.

Not drawn here: calibrate-vm.png, validate-vm.png and validate-parity.png (docs/calibrate.md) are
measurements of the host they were taken on (`steer calibrate --plot`, `steer validate --plot`, a
2-vCPU VM); another machine gives other figures, so only measuring that machine again refreshes
them.

About a minute of simulation. The figures are written into docs/img, each atomically.
"""

import argparse
import csv
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import steer
import steer.plot
from steer import reproduce
from steer.output import fmt_bytes, table, write_atomically

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
# The figures of docs/img that are measurements of a host, not simulations.
HOST_MEASURED = ("calibrate-vm.png", "validate-vm.png", "validate-parity.png")

# docs/sweeps.md's table: rx-default with DMA to memory over the sweep's window, from a load at
# which the prefetcher's run into the next buffer misses the controller's write queue, through
# the loop's edge, to overload; then one buffer to a page, and one completion per line.
WINDOW_US = 10000
LOADS = (10.0, 40.0, 54.0, 60.0, 100.0)
VARIANTS = {
    "40, buffer_bytes=4096": {"devices.0.queues.0.buffer_bytes": 4096, "offered_gbps": 40.0},
    "100, completion_bytes=64": {"devices.0.queues.0.completion_bytes": 64, "offered_gbps": 100.0},
}


def rx_placement() -> dict[str, bytes]:
    """The sweep's DRAM traffic against offered load, per placement."""
    with tempfile.TemporaryDirectory() as results:
        steer.run_sweep(ROOT / "examples" / "rx-placement-sweep.toml", results)
        runs = steer.load(results)
    print("rx-placement-dram.png: examples/rx-placement-sweep.toml")
    rates = ("dram.read_gbps", "dram.write_gbps", "devices.nic0.rx_gbps")
    rows = [
        [
            run["param.placement"],
            f"{run['param.offered_gbps']:g}",
            *(f"{run[c]:.2f}" for c in rates),
            run["devices.nic0.drops"],
        ]
        for _, run in runs.sort_values(["param.placement", "param.offered_gbps"]).iterrows()
    ]
    print(table(["placement", "offered Gb/s", "DRAM read GB/s", "DRAM write GB/s", "received Gb/s", "drops"], rows))
    print(steering_limit())
    print()
    print(
        "docs/sweeps.md: steer run rx-default --set placement=memory --set offered_gbps=G"
        f" --set sim.measure_us={WINDOW_US}"
    )
    print(memory_table())
    figure = steer.plot.metric(runs, y=["dram.read_gbps", "dram.write_gbps"], x="offered_gbps")
    return {"rx-placement-dram.png": steer.plot.image_bytes(figure)}


def cores_busy(run) -> float:
    """The cores' worth of CPU time a run's programs took (each role's busy share, added)."""
    # A run's frame has every run's columns: another layout's cores are empty (NaN) in it.
    busy = (value for name, value in run.items() if re.fullmatch(r"cores\.\d+\.workload(_\w+)?\.busy", name))
    return sum(value for value in busy if value == value)


def tcp_rx_per_core() -> dict[str, bytes]:
    """iperf-rx's cores busy and received rate against offered load, one core or two, SDCI off and on."""
    with tempfile.TemporaryDirectory() as results:
        steer.run_sweep(ROOT / "examples" / "tcp-rx-per-core-sweep.toml", results)
        runs = steer.load(results)
    runs = runs.assign(cores_busy=[cores_busy(run) for _, run in runs.iterrows()])
    print("tcp-rx-per-core.png: examples/tcp-rx-per-core-sweep.toml")
    keys = ["param.app_offset", "param.tph_mode", "param.offered_gbps"]
    rows = [
        [
            "one" if run["param.app_offset"] == 0 else "two",
            run["param.tph_mode"],
            f"{run['param.offered_gbps']:g}",
            f"{run['devices.nic0.rx_gbps']:.1f}",
            run["devices.nic0.drops"],
            f"{run['cores_busy']:.2f}",
        ]
        for _, run in runs.sort_values(keys).iterrows()
    ]
    print(table(["cores", "tph_mode", "offered Gb/s", "received Gb/s", "drops", "cores busy"], rows))
    fig = steer.plot.new_figure(11.0)
    busy_ax, rx_ax = fig.subplots(1, 2)
    for index, ((offset, mode), line) in enumerate(runs.sort_values(keys).groupby(keys[:2], sort=False)):
        label = f"{'one core' if offset == 0 else 'two cores'}, SDCI {'on' if mode == 'iv' else 'off'}"
        style = "-" if offset == 0 else "--"
        busy_ax.plot(line["param.offered_gbps"], line["cores_busy"], style, marker="o", color=f"C{index}", label=label)
        rx_ax.plot(line["param.offered_gbps"], line["devices.nic0.rx_gbps"], style, marker="o", color=f"C{index}")
    busy_ax.axhline(1.0, color="grey", linewidth=0.8)
    busy_ax.set(xlabel="offered Gb/s", ylabel="cores busy (NAPI + recv)", title="CPU time of TCP receive")
    busy_ax.legend(fontsize="small")
    # Published single-flow rates, for scale (docs/tcp.md says where each comes from).
    for rate, source in ((70.0, "seed 002: one Turin core"), (42.0, "Cai et al.: one Skylake core")):
        rx_ax.axhline(rate, color="grey", linestyle=":", linewidth=0.8)
        rx_ax.annotate(source, (10.0, rate), fontsize="x-small", color="grey", va="bottom")
    rx_ax.set(xlabel="offered Gb/s", ylabel="received Gb/s", title="rate received")
    for ax in (busy_ax, rx_ax):
        ax.grid(alpha=0.3)
    return {"tcp-rx-per-core.png": steer.plot.image_bytes(fig)}


def steering_limit() -> str:
    """The rate past which placement l2 sends lines by way of memory, as packets of rx-default."""
    scenario = tomllib.loads(steer.resolve("rx-default"))
    platform, queue = scenario["platform"], scenario["devices"][0]["queues"][0]
    ccx_gbs = (
        platform["io"]["steer_bytes_per_cycle"] * platform["topology"]["cores_per_ccx"] * platform["core"]["freq_ghz"]
    )
    line_bytes = platform["l2"]["line_bytes"]
    # The packet's lines, and its completion's line (a partial write, steered as a line).
    lines = -(-queue["packet_bytes"] // line_bytes) + 1
    packets_gbps = ccx_gbs * 8 * queue["packet_bytes"] / (lines * line_bytes)
    return (
        f"steering limit: {ccx_gbs:.2f} GB/s per CCX = {packets_gbps:.1f} Gb/s of {queue['packet_bytes']} B packets"
        f" ({lines} line writes each)"
    )


def memory_row(label: str, settings: dict) -> list:
    """One line of docs/sweeps.md's table: rx-default with DMA to memory under `settings`."""
    result = steer.run("rx-default", {"placement": "memory", "sim.measure_us": WINDOW_US, **settings})
    nic, core = result["devices"]["nic0"], result["cores"]["1"]
    packets = core["workload"]["packets"]
    per_packet = (core["fill_counts"]["dram"], core["fill_counts"]["l1"], result["dram"]["write_queue_reads"])
    queue = nic["queues"][0]
    return [
        label,
        f"{nic['rx_gbps']:.1f}",
        nic["drops"],
        round(queue["in_flight_bytes_end"] / (queue["arrived_bytes"] / queue["arrived_packets"])),
        f"{core['workload']['cycles_per_packet']:.0f}",
        f"{result['dram']['read_gbps']:.2f} / {result['dram']['write_gbps']:.2f}",
        " / ".join(f"{count / packets:.2f}" for count in per_packet),
    ]


def memory_table() -> str:
    """docs/sweeps.md's table, in markdown."""
    rows = [memory_row(f"{load:g}", {"offered_gbps": load}) for load in LOADS]
    rows += [memory_row(label, settings) for label, settings in VARIANTS.items()]
    headers = [
        "offered Gb/s",
        "received Gb/s",
        "drops",
        "packets in flight at the end",
        "cycles per packet",
        "DRAM read / write GB/s",
        "per packet: DRAM fills / L1 hits / write-queue reads",
    ]
    return markdown(headers, rows)


def markdown(headers: list[str], rows: list[list]) -> str:
    """A table as the docs write it, numbers right-aligned."""
    lines = [headers, ["---:"] * len(headers), *rows]
    return "\n".join("| " + " | ".join(str(cell) for cell in line) + " |" for line in lines)


def seed001() -> dict[str, bytes]:
    """Seed 001's transfer-size curves and DDR-to-HBM bars, as `steer reproduce --plot` draws them."""
    runner = reproduce.Runner()
    figures = reproduce.seed001_figures(runner)
    # The runs are shared: these read back what the figures ran.
    print("seed001-transfer-size.png: one DSA, node 0 to 0, GiB/s by transfer size")
    for label, points in reproduce.seed001_transfer_curves(runner).items():
        print(f"  {label}: " + ", ".join(f"{fmt_bytes(size)} {gibps:.2f}" for size, gibps in points))
    print("seed001-ddr-to-hbm.png: 1 GiB from node 0 into HBM nodes 8-15, GiB/s")
    for label, values in reproduce.seed001_hbm_bars(runner).items():
        print(f"  {label}: " + ", ".join(f"{v:.2f}" for v in values))
    return figures


# docs/dsa.md's experiment: DDR node 0 to node 0, every byte copied once (no reused buffers), at
# each transfer size; one descriptor's latency (synchronous, by page fault mode) and throughput
# (32 descriptors in flight: one engine or four, with block-on-fault, and the CPU's copy).
DSA_SIZES = tuple(256 << (2 * i) for i in range(7))
DSA_COMMON = ("dst_node=0",)
DSA_LATENCY = {
    "no fault": ("queue_depth=1",),
    "partial completion": ("queue_depth=1", 'faults="partial"'),
    "block on fault": ("queue_depth=1", 'faults="block_on_fault"'),
}
DSA_CURVES = {
    "one engine": ("engines=1", "queue_depth=32"),
    "four engines": ("engines=4", "queue_depth=32"),
    "four engines, block on fault": ("engines=4", "queue_depth=32", 'faults="block_on_fault"'),
    "CPU (software path)": ('path="software"',),
}


def dsa_copy(runner: reproduce.Runner, size: int, settings: tuple[str, ...]) -> dict:
    """One `dsa-copy` job of 64 transfers of `size` bytes with `settings`: its `copy` figures."""
    sizes = (f"transfer_bytes={size}", f"total_bytes={64 * size}")
    return runner.run("dsa-copy", *DSA_COMMON, *sizes, *settings)["copy"]


def dsa_curves(runner: reproduce.Runner, settings: dict, key: str) -> dict[str, list[float]]:
    """Each setting's figure `key` at every size of `DSA_SIZES`."""
    return {label: [dsa_copy(runner, size, extra)[key] for size in DSA_SIZES] for label, extra in settings.items()}


def dsa_sizes() -> dict[str, bytes]:
    """One descriptor's latency by page fault mode and the copy's throughput by engines, against
    transfer size."""
    runner = reproduce.Runner()
    plt = reproduce.pyplot()
    figures = {}
    drawings = (
        # Synchronous: the wall time per descriptor is its latency, with what the CPU finishes
        # after a partial completion.
        ("dsa-latency-by-size.png", DSA_LATENCY, "per_descriptor_us", "time per descriptor, synchronous (µs)", "log"),
        ("dsa-throughput-by-size.png", DSA_CURVES, "gibps", "GiB/s", "linear"),
    )
    for name, settings, key, label, yscale in drawings:
        curves = dsa_curves(runner, settings, key)
        print(f"{name}: dsa-copy {' '.join(DSA_COMMON)}, {label} by transfer size")
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for curve, ys in curves.items():
            print(f"  {curve}: " + ", ".join(f"{fmt_bytes(s)} {y:.3g}" for s, y in zip(DSA_SIZES, ys, strict=True)))
            ax.plot(DSA_SIZES, ys, marker="o", label=curve)
        ax.set_xscale("log", base=2)
        ax.set_yscale(yscale)
        ax.set_xticks(DSA_SIZES, [fmt_bytes(s) for s in DSA_SIZES], fontsize=7)
        ax.set_xlabel("transfer size (bytes per descriptor)")
        ax.set_ylabel(label)
        ax.set_title("one DSA, DDR node 0 to node 0 (simulated)", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        figures[name] = reproduce.png(fig)
    return figures


def ddio_rate() -> dict[str, bytes]:
    """DDIO write and read hit rates against offered rate: simulated and measured."""
    sweep = ROOT / "examples" / "ddio-rate-sweep.toml"
    with tempfile.TemporaryDirectory() as results:
        steer.run_sweep(sweep, results)
        runs = steer.load(results).sort_values("param.offered_gbps")
    rates = list(runs["param.offered_gbps"])
    fixed = tomllib.loads(sweep.read_text())["set"]
    shape = [f"{key}={value}" for key, value in fixed.items() if not key.startswith("sim.")]
    # The scenario's own window (its sim.warmup_us and sim.measure_us) at the same points.
    own_window = [
        steer.run("ddio-l2fwd", [*shape, f"offered_gbps={rate}"])["devices"]["nic0"]["dma_write_hit_rate"]
        for rate in rates
    ]
    with open(ROOT / "scripts" / "data" / "ddio-bench.csv") as data:
        measured = [row for row in csv.DictReader(data) if row["experiment"] == "pkt-rate"]
    # ddio-bench gives link rates (24 B of preamble, gap and FCS a packet); the sweep packet bytes.
    measured_rates = [float(row["offered_link_gbps"]) * 1500 / 1524 for row in measured]
    write, read = runs["devices.nic0.dma_write_hit_rate"] * 100, runs["devices.nic0.dma_read_hit_rate"] * 100
    print("ddio-rate.png: examples/ddio-rate-sweep.toml, hit rates in %")
    rows = [
        [f"{rate:g}", f"{w:.1f}", f"{100 * o:.1f}", row["write_hit_pct"], f"{r:.1f}", row["read_hit_pct"]]
        for rate, w, o, r, row in zip(rates, write, own_window, read, measured, strict=True)
    ]
    headers = ["offered Gb/s", "write, passes", "write, 4+2 ms", "write, measured", "read", "read, measured"]
    print(table(headers, rows))
    fig = steer.plot.new_figure(7.5)
    ax = fig.subplots()
    ax.plot(rates, write, "-o", color="C0", label="write hit, simulated (window of ring passes)")
    ax.plot(rates, [100 * o for o in own_window], ":", marker="x", color="C0", label="write hit, scenario's 4 + 2 ms")
    ax.plot(rates, read, "-o", color="C1", label="read hit, simulated")
    measured_write = [float(row["write_hit_pct"]) for row in measured]
    measured_read = [float(row["read_hit_pct"]) for row in measured]
    ax.plot(measured_rates, measured_write, "s", mfc="none", color="C0", label="write hit, ddio-bench")
    ax.plot(measured_rates, measured_read, "s", mfc="none", color="C1", label="read hit, ddio-bench")
    ax.set(xlabel="offered Gb/s (packet bytes)", ylabel="DMA hit rate (%)", ylim=(-2, 102))
    ax.set_title("ddio-l2fwd: 2 cores, 4096 descriptors each, 1500 B, 2 DDIO ways")
    ax.legend(fontsize="small", loc="center right")
    return {"ddio-rate.png": steer.plot.image_bytes(fig)}


# docs/storage.md's runs: nvme-read under each placement, each use of a block and each way the
# host learns of completions.
STORAGE_PLACEMENTS = ("memory", "ddio", "l2")
STORAGE_CASES = (("scan", "polled"), ("scan", "interrupt"), ("get", "polled"), ("get", "interrupt"))


def storage_runs() -> dict[tuple[str, str, str], dict]:
    """nvme-read's result for each (access, completions, placement)."""
    return {
        (access, completions, placement): steer.run(
            "nvme-read", [f"placement={placement}", f"access={access}", f"completions={completions}"]
        )
        for access, completions in STORAGE_CASES
        for placement in STORAGE_PLACEMENTS
    }


def storage_row(key: tuple[str, str, str], result: dict) -> list:
    """One line of docs/storage.md's table."""
    device, core = result["devices"]["nvme0"], result["cores"]["0"]
    read_gbytes = device["rx_gbps"] / 8
    fills = core["fills"]
    return [
        *key,
        f"{device['iops'] / 1000:.0f}",
        f"{device['latency_ns']['p50'] / 1000:.2f}",
        f"{core['workload']['cycles_per_block']:.0f}",
        f"{100 * core['workload']['busy']:.1f}",
        " / ".join(f"{100 * fills[source]:.0f}" for source in ("l2", "l3", "dram")),
        f"{result['dram']['read_gbps'] / read_gbytes:.2f} / {result['dram']['write_gbps'] / read_gbytes:.2f}",
    ]


def storage_table(runs: dict | None = None) -> str:
    """docs/storage.md's table, in markdown."""
    runs = runs or storage_runs()
    headers = [
        "access",
        "completions",
        "placement",
        "reads/s (k)",
        "latency p50 µs",
        "cycles per block",
        "core busy %",
        "fills % L2 / L3 / DRAM",
        "DRAM read / write B per B read",
    ]
    return markdown(headers, [storage_row(key, result) for key, result in runs.items()])


def storage() -> dict[str, bytes]:
    """The reading core's cycles per block and the DRAM bytes per byte read, by placement."""
    runs = storage_runs()
    print("nvme-read-placement.png: nvme-read by placement, access and completions")
    print(storage_table(runs))
    fig = steer.plot.new_figure(10.0, 4.0)
    cycles_ax, dram_ax = fig.subplots(1, 2)
    width = 0.8 / len(STORAGE_CASES)
    for i, (access, completions) in enumerate(STORAGE_CASES):
        xs = [p + (i - (len(STORAGE_CASES) - 1) / 2) * width for p in range(len(STORAGE_PLACEMENTS))]
        results = [runs[(access, completions, placement)] for placement in STORAGE_PLACEMENTS]
        cycles = [r["cores"]["0"]["workload"]["cycles_per_block"] for r in results]
        cycles_ax.bar(xs, cycles, width, label=f"{access}, {completions}", color=f"C{i}")
        per_byte = [
            (r["dram"]["read_gbps"] + r["dram"]["write_gbps"]) / (r["devices"]["nvme0"]["rx_gbps"] / 8) for r in results
        ]
        dram_ax.bar(xs, per_byte, width, label=f"{access}, {completions}", color=f"C{i}")
    names = [{"l2": "l2 (SDCI)"}.get(p, p) for p in STORAGE_PLACEMENTS]
    for ax in (cycles_ax, dram_ax):
        ax.set_xticks(range(len(STORAGE_PLACEMENTS)), names)
        ax.grid(axis="y", alpha=0.3)
    cycles_ax.set(ylabel="reading core's cycles per 4 KiB block", title="the core's time per block")
    dram_ax.set(ylabel="DRAM bytes (read + written) per byte read", title="DRAM traffic per byte read")
    cycles_ax.legend(fontsize="small")
    fig.suptitle("nvme-read: an SSD (85 µs, 32 reads outstanding) read by one EPYC 9655 core", fontsize=10)
    return {"nvme-read-placement.png": steer.plot.image_bytes(fig)}


def steer_command(*args: str) -> str:
    """Runs `steer ARGS` as a user would; its standard output."""
    return subprocess.run([sys.executable, "-m", "steer", *args], check=True, capture_output=True, text=True).stdout


def reproduce_figures() -> dict[str, bytes]:
    """`steer reproduce --plot`'s parity figure of every row, and the row panels of two sources."""
    with tempfile.TemporaryDirectory() as every, tempfile.TemporaryDirectory() as some:
        summary = steer_command("reproduce", "--quiet", "--plot", every).strip().splitlines()
        steer_command("reproduce", "--quiet", "--only", "seed004", "--only", "leon", "--plot", some)
        print(
            "reproduce-parity.png, reproduce-rows.png: "
            + next(line for line in summary if line.startswith("calibration:"))
        )
        return {
            "reproduce-parity.png": (Path(every) / "reproduce-parity.png").read_bytes(),
            "reproduce-rows.png": (Path(some) / "reproduce.png").read_bytes(),
        }


def fit_costs() -> dict[str, bytes]:
    """`steer fit fits/turin-write-queue.toml --plot`: the cost of each point the search ran."""
    with tempfile.TemporaryDirectory() as results:
        image = Path(results) / "fit.png"
        out = steer_command(
            "fit", str(ROOT / "fits" / "turin-write-queue.toml"), "--quiet", "-r", results, "--plot", str(image)
        )
        print("fit-turin-write-queue.png: " + " ".join(out.split()[:40]))
        return {"fit-turin-write-queue.png": image.read_bytes()}


# Each drawing, with the files of docs/img it writes.
DRAWINGS = {
    rx_placement: ("rx-placement-dram.png",),
    tcp_rx_per_core: ("tcp-rx-per-core.png",),
    ddio_rate: ("ddio-rate.png",),
    seed001: ("seed001-transfer-size.png", "seed001-ddr-to-hbm.png"),
    dsa_sizes: ("dsa-latency-by-size.png", "dsa-throughput-by-size.png"),
    reproduce_figures: ("reproduce-parity.png", "reproduce-rows.png"),
    fit_costs: ("fit-turin-write-queue.png",),
    storage: ("nvme-read-placement.png",),
}
FIGURES = tuple(name for names in DRAWINGS.values() for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("figures", nargs="*", metavar="FIGURE", help=", ".join(FIGURES))
    args = parser.parse_args()
    unknown = set(args.figures) - set(FIGURES)
    if unknown:
        parser.error(f"not a figure of steer's simulations: {', '.join(sorted(unknown))} (one of {', '.join(FIGURES)})")
    wanted = set(args.figures or FIGURES)
    for draw, names in DRAWINGS.items():
        if wanted & set(names):
            write_atomically({IMG / name: image for name, image in draw().items()})
            print()


if __name__ == "__main__":
    main()

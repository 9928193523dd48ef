#!/usr/bin/env python3
"""Host-speed benchmarks of steer, printed as a table.

(a) Trace replay: one generated trace (default 2M accesses; ``--pattern`` picks the mixed one or
    a streaming sweep) replayed by ``steer.trace`` from din text and from the binary format, and
    by pycachesim's bulk ``loadstore`` on the same hierarchy (turin-9655's cache geometry, every
    level non-inclusive LRU, which is where the two count alike); then the same addresses as
    loads only, by steer and by pycachesim's bulk ``load()`` (its fastest path, which takes no
    stores). Prints accesses per second, the ratios, and whether the counts agree. steer's time
    includes reading the trace file and building its caches; pycachesim's excludes building its
    input list and its caches. Each time is the best of ``--repeat`` replays (as ``timeit``
    advises: the others only add the host's noise), each from empty caches.
    Last, the same addresses as loads on the default platform as shipped (turin-9655, with its
    L1D and L2 stream prefetchers), by ``steer trace`` as a process of its own (interpreter
    start-up included, as a user runs it) and by ``steer.trace`` in process, against
    pycachesim's bulk ``load()``.
(b) Scenarios: every built-in scenario as built in, each run in a process of its own; prints the
    simulated line operations (cache-hierarchy accesses by cores and devices) per host second, the
    ratio of host time to simulated time, and the process's peak resident memory (and which
    scenario's is the largest).

The first line names the machine (CPU model, CPUs, whether it has AVX-512).

    python scripts/bench.py [--accesses N] [--pattern mixed|streaming|reads] [--repeat N] [--skip-scenario]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import struct
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import steer
from steer.output import table

# The pycachesim chain steer is compared with lives beside the tests that check the equality.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pycachesim_chain import PYCACHESIM_LIKE, build_chain, counts_agree, requests  # noqa: E402

# turin-9655's published geometry: (KiB, ways).
GEOMETRY = {"l1d": (48, 12), "l2": (1024, 16), "l3": (32768, 16)}


def generate(count: int, seed: int = 1) -> list[tuple[bool, int]]:
    """(is_write, address) pairs: 50% a hot 256 KiB set, 30% a sequential 8-byte stream through
    256 MiB, 20% random over 1 GiB; 30% writes. Addresses stay below 2**32 for pycachesim."""
    rng = random.Random(seed)
    stream = 0
    accesses = []
    for _ in range(count):
        pick = rng.random()
        if pick < 0.5:
            addr = 0x1000_0000 + (rng.randrange(256 << 10) & ~7)
        elif pick < 0.8:
            stream = (stream + 8) % (256 << 20)
            addr = 0x2000_0000 + stream
        else:
            addr = 0x4000_0000 + (rng.randrange(1 << 30) & ~7)
        accesses.append((rng.random() < 0.3, addr))
    return accesses


def generate_streaming(count: int, seed: int = 1) -> list[tuple[bool, int]]:
    """(is_write, address) pairs of a sequential 8-byte sweep through 64 MiB (7 of 8 accesses
    reuse the line before), 30% writes."""
    rng = random.Random(seed)
    return [(rng.random() < 0.3, 0x1000_0000 + i * 8 % (64 << 20)) for i in range(count)]


def generate_reads(count: int, seed: int = 1) -> list[tuple[bool, int]]:
    """(is_write, address) pairs, every one a read: 60% a sequential 8-byte stream through 64 MiB,
    30% random in 8 MiB, 10% in a hot 256 KiB."""
    rng = random.Random(seed)
    stream = 0
    accesses = []
    for _ in range(count):
        pick = rng.random()
        if pick < 0.6:
            stream = (stream + 8) % (64 << 20)
            addr = 0x1000_0000 + stream
        elif pick < 0.9:
            addr = 0x4000_0000 + (rng.randrange(8 << 20) & ~7)
        else:
            addr = 0x8000_0000 + (rng.randrange(256 << 10) & ~7)
        accesses.append((False, addr))
    return accesses


PATTERNS = {
    "mixed": (generate, "50% hot 256 KiB, 30% streaming, 20% random over 1 GiB; 30% writes"),
    "streaming": (generate_streaming, "8-byte sweep through 64 MiB; 30% writes"),
    "reads": (generate_reads, "60% streaming through 64 MiB, 30% random in 8 MiB, 10% hot 256 KiB; reads only"),
}


def write_traces(directory: Path, accesses: list[tuple[bool, int]]) -> tuple[Path, Path]:
    """Writes the accesses as din text and as a binary trace, flushed to the disk: otherwise the
    host writes them back while they are replayed, on the replay's time."""
    din = directory / "bench.din"
    with din.open("w") as out:
        out.writelines(f"{int(write)} {addr:x}\n" for write, addr in accesses)
        out.flush()
        os.fsync(out.fileno())
    binary = directory / "bench.trace"
    with binary.open("wb") as out:
        out.write(b"STEERTR1")
        out.write(b"".join(struct.pack("<Q", int(write) << 62 | addr) for write, addr in accesses))
        out.flush()
        os.fsync(out.fileno())
    return din, binary


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def best_of(repeat: int, replay):
    """Runs ``replay()`` (which returns ``(result, seconds)``) ``repeat`` times; returns the last
    result and the shortest time."""
    runs = [replay() for _ in range(repeat)]
    return runs[-1][0], min(seconds for _, seconds in runs)


def pycachesim_replay(accesses: list[tuple[bool, int]]):
    """Replays through pycachesim, by bulk ``load()`` if every access is a read, else by
    ``loadstore``; returns ((caches, memory), seconds of the replay itself, excluding building the
    input list and the caches)."""
    simulator, caches, memory = build_chain(GEOMETRY)
    if any(write for write, _ in accesses):
        bulk, given = simulator.loadstore, requests(accesses)
    else:
        bulk, given = simulator.load, [addr for _, addr in accesses]
    _, seconds = timed(bulk, given, length=1)
    return (caches, memory), seconds


def compare(accesses: list[tuple[bool, int]], steer_files: list[str], pycachesim_name: str, repeat: int) -> None:
    """Replays the accesses by steer from each of its trace files (din text, binary) and by
    pycachesim; prints the table and whether the counts agree."""
    rows, reports = [], []
    with tempfile.TemporaryDirectory(prefix="steer-bench-") as directory:
        din, binary = write_traces(Path(directory), accesses)
        for name, path in (("steer.trace, din text", din), ("steer.trace, binary", binary)):
            if name.rsplit(" ", 1)[-1] in steer_files:
                trace = partial(timed, steer.trace, str(path), platform="turin-9655", cpu=0, overrides=PYCACHESIM_LIKE)
                report, seconds = best_of(repeat, trace)
                reports.append(report)
                rows.append([name, seconds])
    try:
        (caches, memory), seconds = best_of(repeat, partial(pycachesim_replay, accesses))
        rows.append([f"pycachesim {pycachesim_name} (in memory)", seconds])
        agree = all(counts_agree(report, caches, memory) for report in reports)
    except ImportError:
        agree = None
        print("pycachesim is not installed: `pip install pycachesim` to compare", file=sys.stderr)
    print_speeds(rows, len(accesses), rows[-1][1] if agree is not None else None)
    if agree is not None:
        print(f"\ncounts agree with pycachesim at every level and in memory: {'yes' if agree else 'NO'}")


def print_speeds(rows: list[list], accesses: int, reference: float | None) -> None:
    """A table of replays (name, seconds): their rate, and their speed against ``reference``
    seconds (pycachesim's) where there is one."""
    printed = [
        [
            name,
            f"{seconds:.3f}",
            f"{accesses / seconds / 1e6:.2f} M",
            f"{reference / seconds:.2f}x" if reference else "-",
        ]
        for name, seconds in rows
    ]
    print(table(["replay", "seconds", "accesses/s", "speed vs pycachesim"], printed))


def whole_process(path: Path) -> float:
    """Seconds of ``steer trace PATH`` run as its own process on the default platform (its
    prefetchers and level relations as shipped), interpreter start-up and reading the file included."""
    command = [sys.executable, "-m", "steer", "trace", str(path), "--json"]
    _, seconds = timed(subprocess.run, command, check=True, capture_output=True)
    return seconds


def compare_default_platform(accesses: list[tuple[bool, int]], repeat: int) -> None:
    """Replays the accesses on the default platform as shipped, whole process and in process, from
    din text and from the binary format, against pycachesim's bulk ``load()`` of the same addresses
    (which models no prefetcher: the counts differ, only the speeds compare)."""
    loads = [(False, addr) for _, addr in accesses]
    rows = []
    with tempfile.TemporaryDirectory(prefix="steer-bench-") as directory:
        din, binary = write_traces(Path(directory), loads)
        for name, path in (("din text", din), ("binary", binary)):
            rows.append([f"steer trace, {name}, whole process", min(whole_process(path) for _ in range(repeat))])
            in_process = partial(timed, steer.trace, str(path))
            rows.append([f"steer.trace, {name}, in process", best_of(repeat, in_process)[1]])
    try:
        rows.append(["pycachesim bulk load() (in memory)", best_of(repeat, partial(pycachesim_replay, loads))[1]])
    except ImportError:
        print("pycachesim is not installed: `pip install pycachesim` to compare", file=sys.stderr)
    print_speeds(rows, len(loads), rows[-1][1] if rows[-1][0].startswith("pycachesim") else None)


def bench_trace(count: int, pattern: str, repeat: int) -> None:
    generator, description = PATTERNS[pattern]
    accesses, generate_s = timed(generator, count)
    print(
        f"\n(a) trace replay: {count:,} accesses ({pattern}: {description}), turin-9655 geometry, "
        f"non-inclusive LRU (trace generated in {generate_s:.1f} s); best of {repeat}\n"
    )
    bulk = "loadstore" if any(write for write, _ in accesses) else "bulk load()"
    compare(accesses, ["text", "binary"], bulk, repeat)
    print("\nthe same addresses, every access a load:\n")
    compare([(False, addr) for _, addr in accesses], ["binary"], "bulk load()", repeat)
    print("\nthe same addresses as loads on the default platform (turin-9655 as shipped: L1D and L2 stream")
    print("prefetchers; pycachesim has none, so only the speeds compare):\n")
    compare_default_platform(accesses, repeat)


# One scenario's run in a process of its own: its `sim` figures and the process's peak resident set.
RUN_ONE = """
import json, resource, sys
import steer
sim = steer.run(sys.argv[1]).sim
print(json.dumps({**sim, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_one(name: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN_ONE, name], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def bench_scenarios(repeat: int) -> None:
    rows = []
    for name, _ in steer.scenarios():
        runs = [run_one(name) for _ in range(repeat)]
        sim = min(runs, key=lambda s: s["host_seconds"])
        seconds, simulated_ms = sim["host_seconds"], sim["simulated_ns"] / 1e6
        # Line operations are counted in the measured window; the warm-up does the same work.
        line_ops = sim["line_ops"] * sim["simulated_ns"] / sim["measured_ns"] if sim["measured_ns"] else 0
        rows.append(
            [
                name,
                f"{simulated_ms:.1f}",
                f"{line_ops:,.0f}",
                f"{seconds:.3f}",
                f"{line_ops / seconds / 1e6:.2f}",
                f"{seconds / (simulated_ms / 1e3):.1f}",
                f"{max(r['peak_kib'] for r in runs) / 1024:.0f}",
            ]
        )
    print(f"\n(b) scenarios as built in, each in a process of its own, best of {repeat} (host time excludes")
    print("    reading the scenario; line operations of the measured window scaled to the whole run)\n")
    header = [
        "scenario",
        "simulated ms",
        "line operations (est.)",
        "host s",
        "M line ops / host s",
        "host s / simulated s",
        "peak MiB",
    ]
    print(table(header, rows))
    largest = max(rows, key=lambda row: float(row[6]))
    print(f"\nlargest peak resident memory: {largest[0]}, {largest[6]} MiB")


def machine() -> str:
    """The CPU model, how many CPUs this process may use, and whether the CPU has AVX-512."""
    model, flags = platform.processor() or "unknown CPU", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = value
                break
    except OSError:
        pass
    avx512 = "with AVX-512" if " avx512f" in f" {flags}" else "without AVX-512"
    return f"machine: {model}, {len(os.sched_getaffinity(0))} CPUs, {avx512}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=int, default=2_000_000, help="trace length (default 2,000,000)")
    parser.add_argument("--pattern", choices=sorted(PATTERNS), default="mixed", help="trace to replay (default mixed)")
    parser.add_argument("--repeat", type=int, default=5, help="replays timed, the best kept (default 5)")
    parser.add_argument("--skip-scenario", action="store_true", help="only benchmark trace replay")
    args = parser.parse_args()
    print(machine())
    bench_trace(args.accesses, args.pattern, args.repeat)
    if not args.skip_scenario:
        bench_scenarios(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())

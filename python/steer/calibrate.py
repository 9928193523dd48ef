"""``steer calibrate``: measure this machine with small native kernels (crate ``steer-probe``:
pinned threads, transparent huge pages where the kernel allows them) and write the ``host``
preset's calibration, the values the model takes from measurement, each saying ``measured on
HOST at DATE`` or, when fitted, ``calibrated on`` the figures it was fitted to. Read-only on the
host apart from that one file (see ``docs/calibrate.md``)."""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import socket
import statistics
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from steer import _core, api
from steer._core import ScenarioError
from steer.output import GIB, KIB, MIB, fmt_bytes

LINE = 64
ACCESSES = ("read", "write", "copy")
# Independent chases in flight when measuring miss parallelism: more than any core keeps.
PARALLEL_CHAINS = 32
# DRAM latency is taken at this many times the L3.
DRAM_LLC_MULTIPLE = 16


@dataclass(frozen=True)
class Plan:
    """How much to measure: working sets from 4 KiB to ``max_bytes`` (``per_octave`` sizes per
    doubling), each figure the median of ``repeats`` timings of at least ``min_ms`` each."""

    max_bytes: int
    min_ms: float
    repeats: int
    per_octave: int
    cpus: tuple[int, ...]


# --quick, default, --full: the default stays under two minutes on a 2-core machine.
MODES = {
    "quick": {"llc_multiple": 2, "cap": 512 * MIB, "min_ms": 10.0, "repeats": 3, "per_octave": 1},
    "default": {"llc_multiple": 4, "cap": 1 * GIB, "min_ms": 20.0, "repeats": 3, "per_octave": 2},
    "full": {"llc_multiple": 8, "cap": 4 * GIB, "min_ms": 50.0, "repeats": 5, "per_octave": 4},
}


@dataclass
class Figure:
    """The median of repeated measurements and their spread."""

    median: float
    low: float
    high: float
    samples: list[float] = field(default_factory=list)

    @staticmethod
    def of(samples: list[float]) -> Figure:
        return Figure(statistics.median(samples), min(samples), max(samples), samples)

    def spread(self) -> str:
        return f"{self.low:.4g}-{self.high:.4g}, n={len(self.samples)}"


@dataclass
class Measurements:
    """What ``measure`` found on this machine."""

    host: str
    date: str
    cpus: list[int]
    huge_pages: str
    clock_ghz: Figure | None
    latency_ns: dict[int, Figure]
    # ns per load of PARALLEL_CHAINS chases through the largest working set.
    parallel_ns: Figure
    bandwidth_gbs: dict[str, dict[int, Figure]]
    all_cores_gbs: dict[str, Figure]
    dram_bytes: int
    # One core loading one word of each line through the largest working set, in order: GB/s of
    # lines. The model's core issues one access per line, so the streamer is fitted on this rather
    # than on the summing read (which issues a load per 16 bytes and reads DRAM slower here).
    line_read_gbs: Figure
    # ns per read, by the first CPU, of lines the second just wrote; None with one CPU.
    peer_read_ns: Figure | None = None
    # Whether those two CPUs share an L3 (a CCX): the transfer is then a peer L2's.
    peers_share_l3: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([kmg])(?:i?b)?|b)?", re.IGNORECASE)


def parse_bytes(text: str, what: str = "--max-bytes") -> int:
    """``64MiB``, ``1g``, ``4096``: a byte count; a one-line ScenarioError otherwise."""
    match = SIZE.fullmatch(text.strip())
    if not match:
        raise ScenarioError(f"{what} {text!r}: expected a size such as 64MiB or 1GiB")
    number, unit = match.groups()
    return int(float(number) * {None: 1, "k": KIB, "m": MIB, "g": GIB}[unit and unit.lower()])


def check_working_set(size: int) -> None:
    """The largest working set must be 4 KiB to 64 GiB and, since every kernel touches all of
    it, at most three quarters of the memory available here."""
    if not 4 * KIB <= size <= 64 * GIB:
        raise ScenarioError(f"--max-bytes {size}: must be 4 KiB to 64 GiB")
    available = available_memory()
    if available is not None and size > available * 3 // 4:
        raise ScenarioError(
            f"--max-bytes {size}: more than three quarters of the {fmt_bytes(available)} of memory available here"
        )


def available_memory() -> int | None:
    """The kernel's estimate of the memory available without swapping (MemAvailable), in bytes;
    None where /proc/meminfo does not give it."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        pass
    return None


def parse_cpus(text: str) -> tuple[int, ...]:
    """A CPU list such as ``0-3,8``."""
    cpus: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    except ValueError:
        cpus = []
    if not cpus:  # not numbers, or a range such as 3-2
        raise ScenarioError(f"--cpus {text!r}: expected a list such as 0-3,8")
    outside = sorted(set(cpus) - set(_core.probe_allowed_cpus()))
    if outside:
        raise ScenarioError(f"--cpus {text!r}: CPUs {outside} are not ones this process may run on")
    return tuple(sorted(set(cpus)))


@contextmanager
def sysfs_only() -> Iterator[None]:
    """The ``host`` preset without any calibration (an empty file is no calibration)."""
    saved = os.environ.get("STEER_HOST_CALIBRATION")
    os.environ["STEER_HOST_CALIBRATION"] = os.devnull
    try:
        yield
    finally:
        if saved is None:
            del os.environ["STEER_HOST_CALIBRATION"]
        else:
            os.environ["STEER_HOST_CALIBRATION"] = saved


def platform_values(name: str = "host") -> dict[str, object]:
    """Every parameter of a preset, by dotted key, as Python values."""
    return {key: tomllib.loads(f"v = {value}")["v"] for key, value, _ in api.describe_platform(name)}


def sysfs_platform() -> dict[str, object]:
    with sysfs_only():
        return platform_values("host")


def plan_for(
    mode: str, geometry: dict[str, object], cpus: tuple[int, ...], max_bytes: int | None, min_ms: float | None
) -> Plan:
    settings = MODES[mode]
    llc = int(geometry["l3.size_kib"]) * KIB
    largest = max_bytes if max_bytes is not None else min(settings["cap"], settings["llc_multiple"] * llc)
    check_working_set(largest)
    if min_ms is not None and not 0 < min_ms <= 10_000:
        raise ScenarioError(f"--min-ms {min_ms}: must be above 0 and at most 10000")
    return Plan(largest, min_ms or settings["min_ms"], settings["repeats"], settings["per_octave"], cpus)


def sizes(plan: Plan) -> list[int]:
    """Working sets from 4 KiB to the largest, ``per_octave`` a doubling, line-aligned."""
    steps = max(1, round(math.log2(plan.max_bytes / (4 * KIB)) * plan.per_octave))
    return sorted({int(4 * KIB * (plan.max_bytes / (4 * KIB)) ** (i / steps)) // LINE * LINE for i in range(steps + 1)})


def bandwidth_sizes(geometry: dict[str, object], plan: Plan) -> list[int]:
    """One working set inside each level (half of it) and one in DRAM."""
    levels = [int(geometry[f"{level}.size_kib"]) * KIB // 2 for level in ("l1d", "l2", "l3")]
    return sorted({min(size, plan.max_bytes) for size in levels} | {plan.max_bytes})


def measure(plan: Plan, geometry: dict[str, object], progress: Callable[[float], None] | None = None) -> Measurements:
    """Times the calibration kernels: clock, pointer chase per working set, many chases at once
    in DRAM, bandwidth per level on one core and in DRAM on all of ``plan.cpus``."""
    min_ns = int(plan.min_ms * 1e6)
    chase = sizes(plan)
    per_level = bandwidth_sizes(geometry, plan)
    cpu = plan.cpus[0]
    jobs: list[tuple[str, object, Callable[[], float | None]]] = [
        ("clock", None, lambda: _core.probe_clock_ghz(cpu, min_ns))
    ]
    jobs += [("latency", ws, lambda ws=ws: _core.probe_chase_ns(cpu, ws, min_ns)) for ws in chase]
    jobs.append(("parallel", None, lambda: _core.probe_chase_ns(cpu, plan.max_bytes, min_ns, PARALLEL_CHAINS)))
    first = [cpu]
    jobs += [
        ("bandwidth", (access, ws), lambda a=access, ws=ws: _core.probe_bandwidth_gbs(a, ws, first, min_ns))
        for access in ACCESSES
        for ws in per_level
    ]
    # Each core streams its own share of the largest working set.
    share = max(4 * KIB, plan.max_bytes // len(plan.cpus)) // LINE * LINE
    jobs += [
        ("all", access, lambda a=access: _core.probe_bandwidth_gbs(a, share, list(plan.cpus), min_ns))
        for access in ACCESSES
    ]
    jobs.append(("line read", None, lambda: LINE / _core.probe_strided_scan_ns(cpu, plan.max_bytes, LINE, 0, min_ns)))
    if len(plan.cpus) > 1:
        jobs.append(("peer", None, lambda: _core.probe_peer_read_ns(cpu, plan.cpus[1], min_ns)))
    found: dict[tuple[str, object], list[float]] = {}
    total = len(jobs) * plan.repeats
    for done, (kind, key, job) in enumerate((j for _ in range(plan.repeats) for j in jobs), start=1):
        value = job()
        if value is not None:
            found.setdefault((kind, key), []).append(value)
        if progress:
            progress(done / total)
    clock = found.get(("clock", None))
    return Measurements(
        host=socket.gethostname(),
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        cpus=list(plan.cpus),
        huge_pages=_core.probe_huge_pages(),
        clock_ghz=Figure.of(clock) if clock else None,
        latency_ns={ws: Figure.of(found[("latency", ws)]) for ws in chase},
        parallel_ns=Figure.of(found[("parallel", None)]),
        bandwidth_gbs={a: {ws: Figure.of(found[("bandwidth", (a, ws))]) for ws in per_level} for a in ACCESSES},
        all_cores_gbs={a: Figure.of(found[("all", a)]) for a in ACCESSES},
        dram_bytes=plan.max_bytes,
        line_read_gbs=Figure.of(found[("line read", None)]),
        peer_read_ns=Figure.of(found[("peer", None)]) if ("peer", None) in found else None,
        peers_share_l3=len(plan.cpus) < 2 or share_l3(plan.cpus[0], plan.cpus[1]),
    )


def share_l3(a: int, b: int) -> bool:
    """Whether CPUs ``a`` and ``b`` share the last-level cache, as sysfs says (yes if it does not)."""
    from steer.doctor import cpu_lists

    path = Path(f"/sys/devices/system/cpu/cpu{a}/cache/index3/shared_cpu_list")
    try:
        return b in cpu_lists(path.read_text())
    except (OSError, ValueError):
        return True


@dataclass
class Value:
    """One value of the calibration: its key, value, and where it came from."""

    key: str
    value: float | int | str
    source: str


def latency_at(m: Measurements, size: int) -> tuple[int, Figure]:
    """The chase measured at the largest working set not above ``size`` (else the smallest)."""
    below = [ws for ws in m.latency_ns if ws <= size]
    ws = max(below) if below else min(m.latency_ns)
    return ws, m.latency_ns[ws]


def fit(m: Measurements, geometry: dict[str, object]) -> list[Value]:
    """The calibration from the measurements: the issue cost from one core's L1 read bandwidth;
    each level's latency from a pointer chase inside it and DRAM's at 16 times the L3 (the
    model's chase costs an issue plus the latency, so the issue is taken off); the L3's
    capacity where the chase leaves it (only when sysfs is off by more than 2x); miss parallelism
    from many independent chases through DRAM (Little's law: no prefetcher helps them, unlike a
    sequential read); channel bandwidth from all cores' DRAM reads; the core-to-core transfer from
    reads of lines another core just wrote."""
    measured = f"measured on {m.host} at {m.date}"
    ghz = m.clock_ghz.median if m.clock_ghz else float(geometry["core.freq_ghz"])
    values = []
    if m.clock_ghz:
        values.append(Value("core.freq_ghz", round(ghz, 3), f"{measured}: dependent adds ({m.clock_ghz.spread()})"))
    l1_ws = min(m.bandwidth_gbs["read"])
    l1_read = m.bandwidth_gbs["read"][l1_ws]
    issue = LINE / l1_read.median * ghz
    values.append(
        Value(
            "core.issue_cycles_per_line",
            round(issue, 3),
            f"{measured}: one core reading {fmt_bytes(l1_ws)} at {l1_read.median:.1f} GB/s ({l1_read.spread()})",
        )
    )
    l1, l2, l3 = (int(geometry[f"{level}.size_kib"]) * KIB for level in ("l1d", "l2", "l3"))
    values += port_values(m, ghz, measured, l1_ws, l2)
    level_ns = {}
    # Half of each private level; the L3 just past the L2 (wherever it ends, it holds that).
    for level, size in {"l1d": l1 // 2, "l2": l2 // 2, "l3": 2 * l2}.items():
        ws, chase = latency_at(m, size)
        level_ns[level] = chase.median
        cycles = max(0.0, chase.median * ghz - issue)
        how = f"{measured}: pointer chase over {fmt_bytes(ws)}, {chase.median:.2f} ns ({chase.spread()})"
        values.append(Value(f"{level}.latency_cycles", round(cycles, 1), how))
    largest_ws, largest = latency_at(m, m.dram_bytes)
    knee = l3_knee(
        m, level_ns["l3"], largest.median, int(geometry.get("l3.ways", 16)), int(geometry.get("l3.line_bytes", 64))
    )
    if knee and not l3 / 2 <= knee <= 2 * l3:
        how = f"{measured}: the chase leaves the L3 above {fmt_bytes(knee)} (sysfs says {fmt_bytes(l3)})"
        values.append(Value("l3.size_kib", knee // KIB, how))
        l3 = knee
    # DRAM well past the L3 but no further: larger working sets add more page walks (two-dimensional
    # in a VM); with the TLB modelled, refit_memory_latency takes this chase's walks off.
    dram_ws, dram = latency_at(m, DRAM_LLC_MULTIPLE * l3)
    dram_ns = max(0.0, dram.median - issue / ghz)
    how = f"{measured}: pointer chase over {fmt_bytes(dram_ws)}, huge pages {m.huge_pages} ({dram.spread()})"
    values.append(Value("memory.idle_latency_ns", round(dram_ns, 1), how))
    parallel = m.parallel_ns
    how = (
        f"calibrated on {m.host} at {m.date}: {PARALLEL_CHAINS} independent chases through DRAM, a load every "
        f"{parallel.median:.2f} ns ({parallel.spread()}) against {largest.median:.1f} ns each over "
        f"{fmt_bytes(largest_ws)} (Little's law)"
    )
    values.append(Value("core.outstanding_misses", max(1, round(largest.median / parallel.median)), how))
    channels = int(geometry["memory.channels_per_node"]) * int(geometry["memory.nodes_per_socket"])
    everyone = m.all_cores_gbs["read"]
    how = (
        f"{measured}: {len(m.cpus)} cores reading DRAM at {everyone.median:.1f} GB/s over the {channels} "
        f"channels assumed ({everyone.spread()})"
    )
    values.append(Value("memory.channel_gbs", round(everyone.median / channels, 2), how))
    if m.peer_read_ns:
        # The model's read of a line another core holds costs an issue plus the transfer.
        key = "fabric.peer_l2_latency_ns" if m.peers_share_l3 else "fabric.remote_cache_latency_ns"
        where = "in the same L3" if m.peers_share_l3 else "in another L3"
        how = (
            f"{measured}: cpu {m.cpus[0]} reading lines cpu {m.cpus[1]} ({where}) had just written, "
            f"{m.peer_read_ns.median:.1f} ns each ({m.peer_read_ns.spread()})"
        )
        values.append(Value(key, round(max(0.0, m.peer_read_ns.median - issue / ghz), 1), how))
    return values


def port_values(m: Measurements, ghz: float, measured: str, l1_ws: int, l2: int) -> list[Value]:
    """The store port from one core's copy (memcpy) inside the L1D, and the L1D's fill path from its
    reads inside the L2 (every line an L1D miss, so the L2-to-L1D bandwidth bounds them). A copy
    loads and stores each line, its loads on their own port at least as fast as a read's: the
    stores bound it. (A loop storing one word at a time, the write figure, stores narrower than a
    copy and is no measure of the port.)"""
    copy = m.bandwidth_gbs["copy"][l1_ws]
    values = [
        Value(
            "core.store_issue_cycles_per_line",
            round(LINE / copy.median * ghz, 3),
            f"{measured}: one core copying {fmt_bytes(l1_ws)} (memcpy) at {copy.median:.1f} GB/s ({copy.spread()})",
        )
    ]
    inside_l2 = [ws for ws in m.bandwidth_gbs["read"] if l1_ws < ws <= l2 // 2]
    if inside_l2:
        ws = max(inside_l2)
        read = m.bandwidth_gbs["read"][ws]
        how = (
            f"{measured}: one core reading {fmt_bytes(ws)} (inside the L2) at {read.median:.1f} GB/s ({read.spread()})"
        )
        values.append(Value("core.fill_cycles_per_line", round(LINE / read.median * ghz, 3), how))
    return values


@dataclass(frozen=True)
class Streamer:
    """A vendor's L2 stream prefetcher as the model has it: a kind, its degree, the distances to
    fit among, and the document each comes from."""

    kind: str
    degree: int
    distances: tuple[int, ...]
    kind_source: str
    degree_source: str
    limit: str
    # The adjacent-line prefetcher beside it, where the vendor documents one (its source), else None.
    pair_line: str | None = None
    # Why its stream may run on across 4 KiB pages, where the vendor does not confine it to one
    # (else None: it stays within its page).
    crossing: str | None = None


INTEL_MANUAL = "Intel 64 and IA-32 Architectures Optimization Reference Manual, Data Prefetching"
AMD_GUIDE = "AMD Software Optimization Guide for the Zen 4 and Zen 5 microarchitectures, Prefetchers"
# Intel's L2 streamer follows ascending or descending lines within a 4 KiB page, issues up to two
# prefetches per L2 lookup, and runs up to 20 lines ahead: the `stride` prefetcher per 4 KiB region.
# AMD names an L2 stream prefetcher (and an up/down one) that fetches sequential lines ahead of
# the accesses but publishes neither its degree nor its distance: the `stream` kind of the Zen 5
# presets, with their degree (fitted there on seed 000's fill rows), and a distance fitted here.
STREAMERS = {
    "GenuineIntel": Streamer(
        "stride",
        2,
        (1, 2, 4, 6, 8, 12, 16, 20),
        f"assumed: the L2 streamer follows lines within a 4 KiB page ({INTEL_MANUAL})",
        f"assumed: up to two prefetches per L2 lookup ({INTEL_MANUAL})",
        f"at most 20, {INTEL_MANUAL}",
        f"the L2 spatial prefetcher completes each line fetched to the L2 to its 128-byte pair ({INTEL_MANUAL})",
    ),
    "AuthenticAMD": Streamer(
        "stream",
        2,
        (1, 2, 4, 8, 12, 16, 24, 32, 48, 64),
        f"assumed: the L2 stream prefetcher fetches sequential lines ahead, up or down ({AMD_GUIDE})",
        "assumed: the Zen 5 presets' degree (AMD publishes none; fitted there on seed 000's fill rows)",
        "AMD publishes no limit; the Zen 5 presets run 32 ahead",
        crossing=f"the guide names no page limit for its L2 stream prefetcher ({AMD_GUIDE})",
    ),
}


def cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU vendor /proc/cpuinfo names (`GenuineIntel`, `AuthenticAMD`), if it names one."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    found = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.MULTILINE)
    return found.group(1) if found else None


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU flags /proc/cpuinfo lists for the first CPU (empty if unreadable)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    found = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(found.group(1).split()) if found else set()


OPTIMIZATION_MANUAL = "Intel 64 and IA-32 Architectures Optimization Reference Manual"
# Page walks a core runs at once, which neither vendor's CPUID gives.
WALKERS = {
    "GenuineIntel": (4, f"assumed: four page walkers a core (Golden Cove; {OPTIMIZATION_MANUAL})"),
    "AuthenticAMD": (6, f"assumed: six page-table walkers a core (Zen 3 onwards; {AMD_GUIDE})"),
}
# The last-level data TLB where CPUID does not describe it (a hypervisor may hide the leaf).
TLB_FALLBACK = {
    "GenuineIntel": (2048, 16, f"the STLB of Sunny Cove and Golden Cove ({OPTIMIZATION_MANUAL})"),
    "AuthenticAMD": (2048, 16, f"the L2 DTLB of Zen 3 ({AMD_GUIDE})"),
}


def translation_values(m: Measurements, vendor: str | None, guest: bool, cpuid: tuple[int, int] | None) -> list[Value]:
    """The core's TLB and page walks: the last-level data TLB as CPUID describes it (``cpuid``:
    entries and ways, else the vendor's documented one), the vendor's walkers, and the page a TLB
    entry maps: inside a virtual machine a 4 KiB page walked in two dimensions (the host's pages
    behind the guest's memory are not visible from inside), on a bare machine the probes' huge
    pages where the kernel gives them, walked in one. Nothing for a vendor the model has no
    description of."""
    if vendor not in WALKERS:
        return []
    walkers, walkers_source = WALKERS[vendor]
    if cpuid:
        (entries, ways), how = cpuid, f"CPUID on {m.host}"
    else:
        entries, ways, documented = TLB_FALLBACK[vendor]
        how = f"assumed: {documented}; this CPU's CPUID does not describe its TLB"
    if guest:
        page_kib, page_how = (
            4,
            (
                "assumed: a virtual machine (the hypervisor flag) sees neither the host's pages behind its memory nor "
                "their size; 4 KiB, the smallest, for the translation the TLB caches"
            ),
        )
        reads, reads_how = 2, "nested paging: the guest's page-table entry, then the host's (upper levels cached)"
    else:
        huge = m.huge_pages in ("always", "madvise")
        page_kib, page_how = (2048, 4)[not huge], f"the probes' pages: transparent huge pages {m.huge_pages}"
        reads, reads_how = 1, "one page-table entry a walk (upper levels in the paging-structure caches)"
    return [
        Value("core.tlb.entries", entries, how),
        Value("core.tlb.ways", ways, how),
        Value("core.tlb.page_kib", page_kib, page_how),
        Value("core.tlb.walk_reads", reads, reads_how),
        Value("core.tlb.walkers", walkers, walkers_source),
    ]


def simulated_ns_per_load(values: list[Value], workload: str, warmup_us: float, extra: list[str] = ()) -> float:
    """ns per load of one probe ``workload`` (TOML lines) as the host preset with ``values``
    simulates it."""
    overrides = [f"platform.{v.key}={api.toml_literal(v.value)}" for v in values] + list(extra)
    text = (
        f'[platform]\npreset = "host"\n[sim]\nwarmup_us = {warmup_us}\nmeasure_us = 500.0\n'
        f'[[workloads]]\nkind = "probe"\ncpu = 0\n{workload}'
    )
    with sysfs_only():
        result, _ = _core.run_scenario(text, "calibrate", "calibrate", overrides, None)
    return json.loads(result)["cores"]["0"]["workload"]["exec_ns_per_load"]


def refit_memory_latency(m: Measurements, values: list[Value], geometry: dict[str, object]) -> list[Value]:
    """With page walks modelled, the DRAM chase's measured latency holds its walks too: the
    memory's latency is what makes the model's chase over the same working set take the measured
    time. Corrected step by step (a walk's reads that reach DRAM make the chase a little more than
    linear in it) until a step moves it less than REFIT_NS. Nothing changes without a fitted latency."""
    key = "memory.idle_latency_ns"
    old = next((v for v in values if v.key == key), None)
    if old is None:
        return values
    l3_kib = next((v.value for v in values if v.key == "l3.size_kib"), geometry["l3.size_kib"])
    dram_ws, dram = latency_at(m, DRAM_LLC_MULTIPLE * int(l3_kib) * KIB)
    chase = f'pattern = "chase"\nworking_set_bytes = {dram_ws}\n'
    latency = float(old.value)
    for _ in range(REFIT_STEPS):
        trial = [Value(key, latency, old.source) if v.key == key else v for v in values]
        simulated = simulated_ns_per_load(trial, chase, warmup_us=REFIT_WARMUP_US)
        step = dram.median - simulated
        latency = max(0.0, latency + step)
        if abs(step) < REFIT_NS:
            break
    how = (
        f"{old.source}; less its page walks: the model's chase over {fmt_bytes(dram_ws)} takes "
        f"{dram.median - step:.1f} ns a load at {latency - step:.1f} ns, the measured {dram.median:.1f}"
    )
    return [Value(key, round(latency, 1), how) if v.key == key else v for v in values]


# The refit's steps: at most this many, until one moves the latency less than REFIT_NS; each
# chase warmed up long enough (tens of thousands of loads) for the page-table lines to settle
# where a long chase keeps them.
REFIT_STEPS = 5
REFIT_NS = 0.5
REFIT_WARMUP_US = 20000.0


def sequential_read_gbs(
    values: list[Value], streamer: Streamer, distance: int, working_set: int, crossing: bool = False
) -> float:
    """One core's sequential read from DRAM as the host preset with ``values`` simulates it, with
    the streamer running ``distance`` lines ahead, across pages if ``crossing``."""
    prefetcher = [
        f"platform.l2.prefetcher.cross_pages={str(crossing).lower()}",
        f'platform.l2.prefetcher.kind="{streamer.kind}"',
        f"platform.l2.prefetcher.degree={streamer.degree}",
        f"platform.l2.prefetcher.distance={distance}",
        f"platform.l2.prefetcher.pair_line={str(streamer.pair_line is not None).lower()}",
    ]
    scan = f'pattern = "strided"\nworking_set_bytes = {working_set}\nstride_bytes = 64\nprefetch_distance = 0\n'
    return LINE / simulated_ns_per_load(values, scan, warmup_us=100.0, extra=prefetcher)


def fit_streamer(m: Measurements, values: list[Value], vendor: str | None) -> list[Value]:
    """The vendor's L2 streamer: how far ahead it runs, fitted so that the model's one-core
    sequential read from DRAM (a load per line) matches the measured one (with the other values
    already fitted). Simulates one read per candidate distance. The stream stays within 4 KiB
    pages unless no distance brings the read within ``CROSSING_BEYOND`` of the measured one there
    and the vendor does not confine it to a page: then it runs on across pages, at the distance
    that fits best so. Nothing for a vendor whose prefetchers the model has no description of:
    the preset's stay, and say so."""
    streamer = STREAMERS.get(vendor or "")
    if streamer is None:
        return []
    dram_ws = m.dram_bytes
    measured = m.line_read_gbs.median

    def fitted(crossing: bool) -> tuple[int, float]:
        simulated = {d: sequential_read_gbs(values, streamer, d, dram_ws, crossing) for d in streamer.distances}
        distance = min(streamer.distances, key=lambda d: (abs(simulated[d] - measured), d))
        return distance, simulated[distance]

    distance, gbs = fitted(False)
    crossing = []
    if streamer.crossing and abs(gbs - measured) > CROSSING_BEYOND * measured:
        within = f"within 4 KiB pages the model's streamer reads {gbs:.1f} GB/s at best ({distance} lines ahead)"
        distance, gbs = fitted(True)
        how = f"calibrated on {m.host} at {m.date}: {within}, {measured:.1f} measured; {streamer.crossing}"
        crossing = [Value("l2.prefetcher.cross_pages", True, how)]
    return [
        Value("l2.prefetcher.kind", streamer.kind, streamer.kind_source),
        Value("l2.prefetcher.degree", streamer.degree, streamer.degree_source),
        *([Value("l2.prefetcher.pair_line", True, streamer.pair_line)] if streamer.pair_line else []),
        *crossing,
        Value(
            "l2.prefetcher.distance",
            distance,
            f"calibrated on {m.host} at {m.date}: one core loading each line of {fmt_bytes(dram_ws)} in order at "
            f"{measured:.1f} GB/s ({m.line_read_gbs.spread()}); the model reads at {gbs:.1f} GB/s "
            f"with the streamer {distance} lines ahead{' across pages' if crossing else ''} ({streamer.limit})",
        ),
    ]


# How far from the measured read the best stream within pages may fall before a vendor's stream
# that no page confines is let cross pages: the tolerance `steer validate` judges by.
CROSSING_BEYOND = 0.15


# A figure whose repeats spread wider than this (highest over lowest) is noise, not a measurement.
NOISY_SPREAD = 1.5


def warnings(m: Measurements, values: list[Value], streamer: Streamer | None) -> list[str]:
    """What a reader of the calibration should not take on trust: a figure whose repeats spread
    wider than NOISY_SPREAD (a shared or throttling machine), and a fit that stopped at the end of
    its range (the model cannot reach the measurement there)."""
    figures = {"clock": m.clock_ghz, "cores reading DRAM": m.all_cores_gbs["read"], "line read": m.line_read_gbs}
    figures |= {f"pointer chase over {fmt_bytes(ws)}": f for ws, f in m.latency_ns.items()}
    figures |= {"independent chases": m.parallel_ns, "core-to-core read": m.peer_read_ns}
    for access, per_ws in m.bandwidth_gbs.items():
        figures |= {f"{access} over {fmt_bytes(ws)}": f for ws, f in per_ws.items()}
    found = [
        f"{name}: repeats spread {f.low:.4g}-{f.high:.4g} (more than {NOISY_SPREAD}x): the machine was busy or "
        "changing clock; measure again on a quiet machine"
        for name, f in figures.items()
        if f is not None and f.low > 0 and f.high / f.low > NOISY_SPREAD
    ]
    l3 = next((v for v in values if v.key == "l3.size_kib"), None)
    if l3:
        found.append(
            f"l3.size_kib: the chase sees an L3 of {fmt_bytes(int(l3.value) * KIB)}, not the size sysfs gives: a guest "
            "sees its share of the host's L3 (or another tenant uses the rest); the calibration takes the one measured"
        )
    distance = next((v for v in values if v.key == "l2.prefetcher.distance"), None)
    if distance and streamer and distance.value in (streamer.distances[0], streamer.distances[-1]):
        found.append(
            f"l2.prefetcher.distance: the fit stopped at the end of its range ({distance.value} lines); "
            "the model's streamer cannot reach the measured read there"
        )
    return found


def l3_knee(m: Measurements, l3_ns: float, dram_ns: float, ways: int = 16, line: int = 64) -> int | None:
    """The largest working set whose chase is still nearer the L3's latency than DRAM's
    (geometric midpoint), as a cache of ``ways`` ways of ``line``-byte lines holds it: rounded
    down to a power-of-two number of sets (a cache's sets are; its ways need not be)."""
    midpoint = math.sqrt(l3_ns * dram_ns)
    inside = [ws for ws, figure in m.latency_ns.items() if figure.median <= midpoint]
    if not inside or dram_ns < 1.5 * l3_ns:
        return None
    sets = max(inside) // (ways * line)
    return (1 << (sets.bit_length() - 1)) * ways * line if sets else None


def calibration_toml(m: Measurements, values: list[Value]) -> str:
    """The calibration file: a preset overlay, every value with its source."""
    lines = [
        "# This machine as `steer calibrate` measured it; the `host` preset lays it over the geometry",
        "# sysfs gives. Delete the file to go back to the assumed defaults.",
        f'description = "this machine ({m.host}): measured on {m.host} at {m.date} by steer calibrate"',
    ]
    sections: dict[str, list[Value]] = {}
    for value in values:
        sections.setdefault(value.key.split(".")[0], []).append(value)
    for section, entries in sections.items():
        lines += ["", f"[{section}]"]
        lines += [f"{v.key.split('.', 1)[1]} = {api.toml_literal(v.value)}  # {v.source}" for v in entries]
    return "\n".join(lines) + "\n"


def calibration_path() -> Path:
    path = _core.host_calibration_path()
    if path is None:
        raise ScenarioError("no place for the calibration: set STEER_HOST_CALIBRATION or HOME")
    return Path(path)


def plot(m: Measurements, values: list[Value]) -> bytes:
    """Latency and bandwidth against working set, with the model's levels, as PNG bytes."""
    from steer.reproduce import png, pyplot

    plt = pyplot()
    fitted = {v.key: v.value for v in values}
    ghz = float(fitted.get("core.freq_ghz", 1.0))
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(12, 4.5))
    xs = sorted(m.latency_ns)
    ys = [m.latency_ns[x].median for x in xs]
    errors = [
        [m.latency_ns[x].median - m.latency_ns[x].low for x in xs],
        [m.latency_ns[x].high - m.latency_ns[x].median for x in xs],
    ]
    lat.errorbar([x / KIB for x in xs], ys, yerr=errors, marker="o", ms=3, label="measured (median, spread)")
    # The model's chase: an issue, then the level's latency.
    issue = float(fitted["core.issue_cycles_per_line"])
    levels = [(f"{name} (model)", (fitted[f"{name}.latency_cycles"] + issue) / ghz) for name in ("l1d", "l2", "l3")]
    levels.append(("DRAM (model)", fitted["memory.idle_latency_ns"] + issue / ghz))
    for (label, ns), style in zip(levels, ("--", "-.", ":", "--")):
        lat.axhline(ns, linestyle=style, color="grey", linewidth=1)
        lat.annotate(f"{label} {ns:.1f} ns", (xs[0] / KIB, ns), fontsize=7, va="bottom")
    lat.set(
        xscale="log", yscale="log", xlabel="working set (KiB)", ylabel="load-to-use latency (ns)", title="Pointer chase"
    )
    lat.legend(fontsize=8, loc="lower right")
    for access, marker in zip(ACCESSES, "os^"):
        points = sorted(m.bandwidth_gbs[access])
        bw.plot(
            [p / KIB for p in points],
            [m.bandwidth_gbs[access][p].median for p in points],
            marker=marker,
            label=f"{access}, 1 core",
        )
        bw.plot(
            [m.dram_bytes / KIB],
            [m.all_cores_gbs[access].median],
            marker=marker,
            linestyle="none",
            markersize=9,
            markerfacecolor="none",
            label=f"{access}, {len(m.cpus)} cores",
        )
    bw.set(xscale="log", yscale="log", xlabel="working set (KiB)", ylabel="GB/s", title="Bandwidth")
    bw.legend(fontsize=8)
    fig.suptitle(f"{m.host}, {m.date}")
    fig.tight_layout()
    return png(fig)


def as_json(m: Measurements, values: list[Value], path: Path) -> str:
    import json

    return (
        json.dumps(
            {"calibration": str(path), "values": [asdict(v) for v in values], "measurements": m.to_dict()}, indent=2
        )
        + "\n"
    )

"""``steer validate``: run on this machine a few loops the simulator also models, not the ones
``steer calibrate`` fitted on, and the same loops in the simulator on the calibrated ``host``
preset: a receive-like copy from a ring of buffers as the ring outgrows each cache level, random
reads over a working set, a strided scan with and without software prefetch, memcpy of 4 KiB to
1 MiB from DRAM, two cores passing a line, and a producer core writing buffers a consumer core
reads (the pattern of every receive path). Each measured figure is the median of repeated timings,
with their spread, and each case names the model values it checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from steer import _core, api
from steer._core import ScenarioError
from steer.calibrate import NOISY_SPREAD, Figure, platform_values, share_l3
from steer.output import GIB, KIB, MIB, fmt_bytes

# Within this relative error a simulated figure agrees with the measured one.
TARGET = 0.15
BUFFER_BYTES = 2048
STRIDE_BYTES = 256
# A CPU copy of each size from DRAM (what a DSA copy is compared with).
MEMCPY_BYTES = (4 * KIB, 64 * KIB, MIB)
# A packet's buffer and a merged (GRO) receive's.
HANDED_BYTES = (2 * KIB, 64 * KIB)
PREFETCH_STRIDES = 16
MODES = {"quick": {"min_ms": 10.0, "repeats": 3}, "default": {"min_ms": 30.0, "repeats": 5}}


@dataclass
class Case:
    """One loop at one size: how to time it here and how to simulate it."""

    workload: str
    metric: str
    unit: str
    native: Callable[[int], float]
    # The scenario's workload table, the CPU whose result holds the figure, and its key.
    simulated: dict[str, object]
    cpu: int
    key: str
    # Simulated time before measuring: enough for one pass over the working set.
    warmup_us: float
    # The model values the figure depends on most.
    checks: tuple[str, ...] = ()


@dataclass
class Row:
    workload: str
    metric: str
    unit: str
    measured: Figure
    simulated: float
    checks: tuple[str, ...] = ()

    @property
    def error(self) -> float:
        return self.simulated / self.measured.median - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= TARGET

    def to_dict(self) -> dict:
        return {
            "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit,
            "measured": self.measured.median,
            "simulated": self.simulated,
            "error": self.error,
            "within_target": self.within,
            "spread": [self.measured.low, self.measured.high],
            "samples": self.measured.samples,
            "checks": list(self.checks),
        }


def pass_us(platform: dict[str, object], working_set: int) -> float:
    """Simulated time of a first pass of misses over a working set, as the model would take it
    with every miss overlapped: a warm-up that outlasts it starts the probe warm."""
    lines = working_set / 64
    per_line_ns = float(platform["memory.idle_latency_ns"]) / int(platform["core.outstanding_misses"])
    return min(50_000.0, 100.0 + 1.5 * lines * per_line_ns / 1000)


ISSUE = ("core.issue_cycles_per_line", "core.store_issue_cycles_per_line")
MISSES = ("core.outstanding_misses",)
DRAM = ("memory.idle_latency_ns", "core.outstanding_misses", "l2.prefetcher")
LEVEL_CHECKS = {
    "L1": ISSUE,
    "L2": (*ISSUE, "core.fill_cycles_per_line", "l2.latency_cycles"),
    "L3": ("core.fill_cycles_per_line", "l3.latency_cycles", "l3.size_kib", *MISSES),
    "DRAM": DRAM,
}
# Random and strided reads beyond the L2 reach pages the TLB may not hold.
TLB = ("core.tlb",)
RANDOM_CHECKS = {
    "L2": ("l2.latency_cycles", *MISSES),
    "L3": ("l3.latency_cycles", "l3.size_kib", *MISSES, *TLB),
    "DRAM": ("memory.idle_latency_ns", *MISSES, *TLB),
}
PEER = ("fabric.peer_l2_latency_ns",)


def cases(platform: dict[str, object], cpus: list[int], min_ns: int, dram_bytes: int) -> list[Case]:
    l1, l2, l3 = (int(platform[f"{level}.size_kib"]) * KIB for level in ("l1d", "l2", "l3"))
    # Half of each level, not beyond the DRAM working set (a small --max-bytes drops levels).
    levels = [(name, size) for name, size in (("L1", l1 // 2), ("L2", l2 // 2), ("L3", l3 // 2)) if size < dram_bytes]
    levels.append(("DRAM", dram_bytes))
    cpu = cpus[0]
    found: list[Case] = []
    for level, ring in levels:
        buffers = ring // BUFFER_BYTES
        found.append(
            Case(
                f"ring copy, {fmt_bytes(ring)} ring ({level})",
                f"ring_copy.{level.lower()}",
                "ns/buffer",
                lambda _, b=buffers: _core.probe_ring_copy_ns(cpu, b, BUFFER_BYTES, min_ns),
                {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": ring, "buffer_bytes": BUFFER_BYTES},
                cpu,
                "exec_ns_per_buffer",
                pass_us(platform, ring),
                LEVEL_CHECKS[level],
            )
        )
    # Each copy from a ring of at least two buffers, so that no copy finds its source cached.
    for size in (size for size in MEMCPY_BYTES if 2 * size <= dram_bytes):
        buffers = dram_bytes // size
        found.append(
            Case(
                f"memcpy {fmt_bytes(size)} from DRAM",
                f"memcpy.{size // KIB}k",
                "ns/copy",
                lambda _, b=buffers, s=size: _core.probe_ring_copy_ns(cpu, b, s, min_ns),
                {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": dram_bytes, "buffer_bytes": size},
                cpu,
                "exec_ns_per_buffer",
                pass_us(platform, dram_bytes),
                (*DRAM, "core.store_issue_cycles_per_line"),
            )
        )
    for level, size in levels[len(levels) > 1 :]:
        found.append(
            Case(
                f"random reads over {fmt_bytes(size)} ({level})",
                f"random.{level.lower()}",
                "ns/load",
                lambda _, s=size: _core.probe_random_reads_ns(cpu, s, min_ns),
                {"kind": "probe", "pattern": "random", "working_set_bytes": size},
                cpu,
                "exec_ns_per_load",
                pass_us(platform, size),
                RANDOM_CHECKS[level],
            )
        )
    for distance in (0, PREFETCH_STRIDES):
        what = f"software prefetch {distance} ahead" if distance else "no software prefetch"
        found.append(
            Case(
                f"strided scan, {STRIDE_BYTES} B stride over {fmt_bytes(dram_bytes)}, {what}",
                f"strided.prefetch{distance}",
                "ns/load",
                lambda _, d=distance: _core.probe_strided_scan_ns(cpu, dram_bytes, STRIDE_BYTES, d, min_ns),
                {
                    "kind": "probe",
                    "pattern": "strided",
                    "working_set_bytes": dram_bytes,
                    "stride_bytes": STRIDE_BYTES,
                    "prefetch_distance": distance,
                },
                cpu,
                "exec_ns_per_load",
                100.0,
                RANDOM_CHECKS["DRAM"],
            )
        )
    if len(cpus) >= 2:
        a, b = cpus[:2]
        found.append(
            Case(
                f"handoff of a line between CPUs {a} and {b}",
                "handoff",
                "ns/round trip",
                lambda _: _core.probe_handoff_ns(a, b, min_ns),
                {"kind": "handoff", "cpu": a, "peer_cpu": b},
                a,
                "ns_per_round_trip",
                100.0,
                PEER,
            )
        )
        for size in HANDED_BYTES:
            found.append(
                Case(
                    f"producer on CPU {a} writing {fmt_bytes(size)}, consumer on CPU {b} reading it",
                    f"producer_consumer.{size // KIB}k",
                    "ns/buffer",
                    lambda _, s=size: _core.probe_producer_consumer_ns(a, b, s, min_ns),
                    {"kind": "handoff", "cpu": a, "peer_cpu": b, "buffer_bytes": size},
                    a,
                    "ns_per_round_trip",
                    100.0,
                    (*PEER, *ISSUE, *MISSES),
                )
            )
    return found


def scenario_text(case: Case) -> str:
    fields = "\n".join(f"{key} = {api.toml_literal(value)}" for key, value in case.simulated.items())
    return (
        '[platform]\npreset = "host"\n'
        f"[sim]\nwarmup_us = {case.warmup_us:.1f}\nmeasure_us = 1000.0\n"
        f"[[workloads]]\n{fields}\n"
    )


def simulate(case: Case) -> float:
    result, _ = _core.run_scenario(scenario_text(case), "validate", "validate", [], None)
    return json.loads(result)["cores"][str(case.cpu)]["workload"][case.key]


def validate(
    repeats: int,
    min_ms: float,
    progress: Callable[[float], None] | None = None,
    cpus: list[int] | None = None,
    max_bytes: int | None = None,
) -> list[Row]:
    """Measures and simulates every case; the host preset must be calibrated already. The DRAM
    working set is ``max_bytes``, else four times the L3 within 256 MiB to 1 GiB."""
    platform = platform_values("host")
    cpus = cpus or _core.probe_allowed_cpus()
    l3 = int(platform["l3.size_kib"]) * KIB
    dram_bytes = max_bytes if max_bytes is not None else min(GIB, max(256 * MIB, 4 * l3))
    todo = cases(platform, cpus, int(min_ms * 1e6), dram_bytes)
    rows = []
    steps = len(todo) * (repeats + 1)
    for i, case in enumerate(todo):
        samples = []
        for k in range(repeats):
            samples.append(case.native(k))
            if progress:
                progress((i * (repeats + 1) + k + 1) / steps)
        rows.append(Row(case.workload, case.metric, case.unit, Figure.of(samples), simulate(case), case.checks))
        if progress:
            progress((i + 1) * (repeats + 1) / steps)
    return rows


def peer_moved(repeats: int, min_ms: float, cpus: list[int] | None = None) -> str | None:
    """The core-to-core read timed again, after the cross-core cases, against the one the
    calibration holds: a warning if they differ by more than NOISY_SPREAD. A hypervisor may have
    placed the two vCPUs elsewhere (another core's sibling, another CCX) since the calibration, and
    then the cross-core rows compare the model with a transfer that no longer holds."""
    cpus = cpus or _core.probe_allowed_cpus()
    if len(cpus) < 2:
        return None
    a, b = cpus[:2]
    platform = platform_values("host")
    key = "fabric.peer_l2_latency_ns" if share_l3(a, b) else "fabric.remote_cache_latency_ns"
    issue_ns = float(platform["core.issue_cycles_per_line"]) / float(platform["core.freq_ghz"])
    calibrated = float(platform[key]) + issue_ns
    now = Figure.of([_core.probe_peer_read_ns(a, b, int(min_ms * 1e6)) for _ in range(repeats)])
    if max(now.median, calibrated) <= NOISY_SPREAD * min(now.median, calibrated):
        return None
    return (
        f"{key}: cpu {a} reads lines cpu {b} just wrote in {now.median:.1f} ns now ({now.spread()}), "
        f"{calibrated:.1f} ns as calibrated: the CPUs are not where they were (a hypervisor moves vCPUs) or the "
        "machine is busy, so the cross-core rows compare with a transfer that no longer holds; calibrate again"
    )


def table_rows(rows: list[Row]) -> list[list[str]]:
    return [
        [
            r.workload,
            r.unit,
            f"{r.measured.median:.3g}",
            f"{r.measured.low:.3g}-{r.measured.high:.3g}",
            f"{r.simulated:.3g}",
            f"{100 * r.error:+.0f}%",
            "yes" if r.within else "NO",
        ]
        for r in rows
    ]


HEADERS = ["workload", "unit", "measured", "spread", "simulated", "error", f"within {TARGET:.0%}"]


def as_json(rows: list[Row], calibration: Path, host: str) -> str:
    body = {"host": host, "calibration": str(calibration), "target": TARGET, "rows": [r.to_dict() for r in rows]}
    return json.dumps(body, indent=2) + "\n"


# Where `steer report DIR` looks for `steer validate --json`'s output.
ROWS_FILE = "validate.json"


def load(path: Path) -> tuple[str, list[Row]]:
    """The host and the rows of `as_json`'s output."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        rows = [
            Row(
                r["workload"],
                r["metric"],
                r["unit"],
                Figure(r["measured"], *r["spread"], r["samples"]),
                r["simulated"],
                tuple(r.get("checks", ())),
            )
            for r in body["rows"]
        ]
        host = str(body["host"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ScenarioError(f"{path}: not the output of steer validate --json: {error}") from None
    for r in rows:
        numbers = (r.measured.median, r.measured.low, r.measured.high, r.simulated)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in numbers):
            raise ScenarioError(f"{path}: {r.metric}: measured, spread and simulated must be positive numbers")
    return host, rows


def plot(rows: list[Row]) -> bytes:
    """The figure below as PNG bytes."""
    from steer.reproduce import png

    return png(figure(rows))


# Markers of the probes' units in the parity panel.
UNIT_MARKERS = ("o", "^", "s", "D")


def score(rows: list[Row]) -> str:
    return f"{sum(r.within for r in rows)} of {len(rows)} within {TARGET:.0%} of the measured median"


def figure(rows: list[Row]):
    """Two panels: simulated against measured (log axes, the diagonal and the target band, the
    measured spread across, a marker per unit, misses named) and simulated over measured per row
    (the first row on top, with the target band and the spread); the score in the title. Every
    probe validates: none is a loop `steer calibrate` fits on."""
    from steer.reproduce import pyplot

    plt = pyplot()
    fig, (parity, ratio) = plt.subplots(
        1, 2, figsize=(15, max(5.5, 0.45 * len(rows) + 1.5)), gridspec_kw={"width_ratios": (1, 1.35)}
    )
    parity_panel(parity, rows)
    ratio_panel(ratio, rows)
    fig.suptitle(f"steer validate: {score(rows)} (every probe validates: none is fitted on)", fontsize=11)
    fig.tight_layout()
    return fig


def parity_panel(ax, rows: list[Row]) -> None:
    from steer.reproduce import VERDICT_COLOURS, label_misses, pyplot

    plt = pyplot()
    values = [v for r in rows for v in (r.measured.low, r.measured.high, r.simulated)]
    low, high = min(values) / 1.5, max(values) * 1.5
    ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high))
    ax.fill_between(
        [low, high],
        [low * (1 - TARGET), high * (1 - TARGET)],
        [low * (1 + TARGET), high * (1 + TARGET)],
        color="#dfe9df",
        label=f"within {TARGET:.0%}",
    )
    ax.plot([low, high], [low, high], color="grey", linewidth=1)
    markers = dict(zip(dict.fromkeys(r.unit for r in rows), UNIT_MARKERS * len(rows)))
    for unit, marker in markers.items():
        mine = [r for r in rows if r.unit == unit]
        ax.errorbar(
            [r.measured.median for r in mine],
            [r.simulated for r in mine],
            xerr=[
                [r.measured.median - r.measured.low for r in mine],
                [r.measured.high - r.measured.median for r in mine],
            ],
            fmt="none",
            ecolor="black",
            elinewidth=0.8,
        )
        ax.scatter(
            [r.measured.median for r in mine],
            [r.simulated for r in mine],
            marker=marker,
            c=[VERDICT_COLOURS[r.within] for r in mine],
            edgecolors="black",
            linewidths=0.4,
            zorder=3,
            label=unit,
        )
    label_misses(ax, [(r.metric, r.measured.median, r.simulated) for r in rows if not r.within])
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("measured (median; bars: the spread)")
    ax.set_ylabel("simulated")
    ax.set_title("simulated against measured (green: within, red: miss)", fontsize=9)
    # The units' markers in grey: their colours are the verdicts'.
    handles = [ax.collections[0]] + [
        plt.Line2D([], [], marker=marker, color="#555555", linestyle="none", label=unit)
        for unit, marker in markers.items()
    ]
    # Below the panel: both of its empty triangles hold the names of misses.
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=len(handles))
    ax.grid(alpha=0.3)


def ratio_panel(ax, rows: list[Row]) -> None:
    """Simulated over measured for each row, the first row on top."""
    from steer.reproduce import VERDICT_COLOURS

    ys = list(range(len(rows)))[::-1]
    ratios = [r.simulated / r.measured.median for r in rows]
    low = [r.simulated / r.measured.high for r in rows]
    high = [r.simulated / r.measured.low for r in rows]
    ax.axvspan(1 - TARGET, 1 + TARGET, color="#dfe9df", label=f"within {TARGET:.0%}")
    ax.axvline(1.0, color="grey", linewidth=1)
    colors = [VERDICT_COLOURS[r.within] for r in rows]
    ax.errorbar(
        ratios,
        ys,
        xerr=[[r - lo for r, lo in zip(ratios, low)], [hi - r for r, hi in zip(ratios, high)]],
        fmt="none",
        ecolor="black",
        capsize=3,
    )
    ax.scatter(ratios, ys, c=colors, zorder=3)
    ax.set_yticks(ys, [r.workload for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("simulated / measured (bars: the measured spread)")
    ax.legend(fontsize=8, loc="lower right")

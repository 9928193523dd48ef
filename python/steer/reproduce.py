"""`steer reproduce`: the seeds' published measurements beside what steer simulates.

Each experiment runs built-in scenarios and turns their results into rows, one per published
number. Nothing here is fitted to the published values: the rows only read what the model
produced, so a row the model misses stays visible as a miss.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from steer import api, output
from steer._core import ScenarioError
from steer.output import GIB, MIB, fmt_bytes


@dataclass(frozen=True)
class Row:
    """One published number and its simulated counterpart."""

    id: str
    source: str
    metric: str
    unit: str
    published: float
    simulated: float
    # For a row that checks a relation the seed states (`>`, `>=`, `<`, `<=`): it holds when
    # `simulated RELATION published`.
    relation: str = ""

    @property
    def difference(self) -> float:
        return self.simulated - self.published

    @property
    def tolerance(self) -> float | None:
        """How far the simulated value may be from the published one (TARGETS says it in words):
        the seeds' targets are 10 points for percentages and 20 ns for latencies; copy throughputs
        (seed 001, read off its figures) 10% or 3 GiB/s, whichever is larger; a ratio published as
        equal 0.1, the percentages' 10 points as a ratio; other rows have none, nor has a relation
        (it holds or not: `steer fit` gives such a row no cost)."""
        if self.relation:
            return None
        if self.unit == "GiB/s":
            return max(GIBPS_SHARE * abs(self.published), GIBPS_FLOOR)
        return TOLERANCE.get(self.unit)

    @property
    def within_target(self) -> bool | None:
        if self.relation:
            return RELATIONS[self.relation](self.simulated, self.published)
        return None if self.tolerance is None else abs(self.difference) <= self.tolerance

    @property
    def role(self) -> str:
        """`calibration` if a parameter marked `calibrated` in a preset may be fitted on this row,
        else `validation`: the row only checks the model."""
        return "calibration" if any(fnmatch.fnmatch(self.id, p) for p in CALIBRATION_ROWS) else "validation"

    def to_dict(self) -> dict:
        """The row's fields, its role and its judgement: `within` true or false, null without a target."""
        return {**asdict(self), "role": self.role, "within": self.within_target}


TOLERANCE = {"%": 10.0, "ns": 20.0, "x": 0.1}
GIBPS_SHARE, GIBPS_FLOOR = 0.1, 3.0
# Each unit's target in words, as the summary states it.
TARGETS = {
    "%": f"±{TOLERANCE['%']:g} pt",
    "GB/s": "none (shown, not judged)",
    "GiB/s": f"±{GIBPS_SHARE:.0%}, at least ±{GIBPS_FLOOR:g} GiB/s",
    "ns": f"±{TOLERANCE['ns']:g} ns",
    "x": f"the published relation (>, <, ...), or ±{TOLERANCE['x']:g} where published as equal",
}
RELATIONS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}
# Every published row, each experiment's source and setups (python/steer/published.toml).
PUBLISHED = tomllib.loads((Path(__file__).parent / "published.toml").read_text(encoding="utf-8"))
# The only rows calibrated parameters may be fitted on: seed 000's one-queue DRAM and fill rows
# and seed 004's eflatency mean. Every other row validates.
CALIBRATION_ROWS = tuple(PUBLISHED["calibration_rows"])
ROLES = ("calibration", "validation")
# Beside `steer reproduce --plot DIR`'s figures: the rows they were drawn from.
ROWS_FILE = "reproduce.json"


class Runner:
    """Runs scenarios once each (experiments share runs) and reports progress per run."""

    def __init__(self, progress: Callable[[str], None] | None = None, common: Iterable[str] = ()) -> None:
        self.cache: dict[tuple, dict] = {}
        self.progress = progress
        self.common = list(common)

    def run(self, scenario: str, *overrides: str) -> dict:
        """Runs `scenario` with the experiment's `overrides`, then the overrides common to every
        run (a parameter being fitted, say)."""
        key = (scenario, overrides)
        if key not in self.cache:
            if self.progress:
                self.progress(f"{scenario} {' '.join(overrides)}")
            self.cache[key] = api.run(scenario, [*overrides, *self.common])
        return self.cache[key]


def rows_of(experiment: str, simulated: dict[str, float]) -> list[Row]:
    """The experiment's rows as published.toml lists them, each with its simulated value."""
    spec = PUBLISHED[experiment]
    listed = [row["id"] for row in spec["rows"]]
    if set(listed) != set(simulated):
        raise ScenarioError(
            f"published.toml and reproduce.py disagree on {experiment}'s rows: "
            f"listed only {sorted(set(listed) - set(simulated))}, simulated only {sorted(set(simulated) - set(listed))}"
        )
    return [
        Row(
            row["id"],
            spec["source"],
            row["metric"],
            row["unit"],
            row["published"],
            simulated[row["id"]],
            row.get("relation", ""),
        )
        for row in spec["rows"]
    ]


def leon_rows(runner: Runner) -> list[Row]:
    """Memory reads and execution time of base, prefetching and injection, over message sizes;
    the seed reports the best case ("up to"), so the rows take the maximum over sizes."""
    configs = PUBLISHED["leon"]["configs"]
    reads: dict[str, list[float]] = {c: [] for c in configs}
    exec_ns: dict[str, list[float]] = {c: [] for c in configs}
    for size in PUBLISHED["leon"]["message_bytes"]:
        for config, overrides in configs.items():
            result = runner.run("leon-reduce", f"message_bytes={size}", *overrides)
            reads[config].append(result["dram"]["read_gbps"])
            exec_ns[config].append(result["cores"]["0"]["workload"]["exec_ns_per_message"])

    # Sizes where the base reads no memory at all save nothing and set no ratio.
    def saved(config: str, values: dict[str, list[float]]) -> float:
        return max((100 * (1 - new / old) for new, old in zip(values[config], values["base"]) if old > 0), default=0.0)

    ratios = [p / b for p, b in zip(reads["prefetch"], reads["base"]) if b > 0]
    return rows_of(
        "leon",
        {
            "leon/prefetch-reads": sum(ratios) / len(ratios) if ratios else 1.0,
            "leon/inject-l3-reads": saved("inject-l3", reads),
            "leon/prefetch-time": saved("prefetch", exec_ns),
            "leon/inject-l3-time": saved("inject-l3", exec_ns),
            "leon/inject-l2-time": saved("inject-l2", exec_ns),
        },
    )


# SDCI on: the driver enables PCIe TPH in interrupt-vector mode (bnxt_en's flow through the TPH
# stack) and the I/O die steers tagged writes; off: TPH stays disabled and DMA goes to memory.
SDCI = {"off": 'tph_mode="off"', "on": 'tph_mode="iv"'}


def sdci_pair(runner: Runner, *overrides: str) -> dict[str, dict]:
    """iperf-rx with SDCI off and on under the same overrides."""
    return {state: runner.run("iperf-rx", *overrides, flag) for state, flag in SDCI.items()}


def change(off: float, on: float) -> float:
    return 100 * (on / off - 1) if off > 0 else 0.0


# Seed 000's DC-fill table: the cores it groups, and AMD's source categories by steer's sources.
FILL_ROLES = ("irq", "iperf", "combined")
FILL_SOURCES = (("memory", ("dram",)), ("local-l2", ("l2",)), ("other-cache", ("peer_l2", "l3")))


def role_fills(result: dict, role: str) -> dict[str, float]:
    """DC-fill fractions (L1D fills, demand and prefetch) by AMD's source categories, for cores
    running `role` (`combined`: every core of the path), from the summed fill counts."""
    counts: dict[str, int] = {}
    for core in result["cores"].values():
        if role == "combined" or role in core["role"].split("+"):
            for source, count in core["dc_fill_counts"].items():
                counts[source] = counts.get(source, 0) + count
    total = sum(counts.values()) or 1
    return {name: 100 * sum(counts.get(s, 0) for s in sources) / total for name, sources in FILL_SOURCES}


def seed000_rows(runner: Runner) -> list[Row]:
    """Seed 000's DRAM bandwidth table (UMC read/write/total, SDCI off/on, % change) and DC-fill
    table, for each of its setups."""
    simulated = {}
    for setup, overrides in PUBLISHED["seed000"]["setups"].items():
        runs = sdci_pair(runner, *overrides)
        for metric in ("read", "write", "total"):
            gbps = {state: r["dram"][f"{metric}_gbps"] for state, r in runs.items()}
            for state, value in gbps.items():
                simulated[f"seed000/{setup}/dram-{metric}-sdci-{state}"] = value
            simulated[f"seed000/{setup}/dram-{metric}-change"] = change(gbps["off"], gbps["on"])
        for state, result in runs.items():
            for role in FILL_ROLES:
                for name, value in role_fills(result, role).items():
                    simulated[f"seed000/{setup}/fills-{role}-{name}-sdci-{state}"] = value
    return rows_of("seed000", simulated)


def seed002_rows(runner: Runner) -> list[Row]:
    """Seed 002's total memory bandwidth reduction with SDCI, per platform and queue count."""
    simulated = {}
    for setup, overrides in PUBLISHED["seed002"]["setups"].items():
        runs = sdci_pair(runner, *overrides, "app_offset=0")
        total = {state: r["dram"]["total_gbps"] for state, r in runs.items()}
        simulated[f"seed002/{setup}/dram-total-change"] = change(total["off"], total["on"])
    return rows_of("seed002", simulated)


def seed004_rows(runner: Runner) -> list[Row]:
    """Median half round-trip latency saved by SDCI, averaged over the payloads, and at 256 B."""
    spec = PUBLISHED["seed004"]
    saved: dict[str, dict[int, float]] = {}
    for mode, overrides in spec["modes"].items():
        saved[mode] = {}
        for payload in spec["payloads"]:
            runs = {
                state: runner.run("eflatency", *overrides, f"payload_bytes={payload}", flag)
                for state, flag in SDCI.items()
            }
            median = {state: r["cores"]["2"]["workload"]["half_rtt_ns"]["p50"] for state, r in runs.items()}
            saved[mode][payload] = median["off"] - median["on"]
    mean = {mode: sum(values.values()) / len(values) for mode, values in saved.items()}
    return rows_of(
        "seed004",
        {
            "seed004/eflatency-avg": mean["eflatency"],
            "seed004/eflatency-256b": saved["eflatency"][256],
            "seed004/onload-tcp-avg": mean["onload-tcp"],
            "seed004/onload-udp-avg": mean["onload-udp"],
        },
    )


def copy_gibps(runner: Runner, *overrides: str) -> float:
    """One `dsa-copy` job's throughput (GiB/s)."""
    return runner.run("dsa-copy", *overrides)["copy"]["gibps"]


def local_copy_gibps(runner: Runner, transfer: int, total: int, *more: str) -> float:
    """Seed 001's copies within node 0 (sections 3.1-3.2.2): each thread writes one source and one
    destination of the transfer size before timing, then copies the one into the other again and
    again."""
    return copy_gibps(
        runner, "dst_node=0", f"transfer_bytes={transfer}", f"total_bytes={total}", f"buffer_bytes={transfer}", *more
    )


def seed001_rows(runner: Runner) -> list[Row]:
    """Seed 001's DSA benchmarks (chapter 3): submission method, submitting threads, DDR to HBM
    with brute-force and smart device assignment, and the CPU's software path."""

    def gibps(*overrides: str) -> float:
        return copy_gibps(runner, *overrides)

    def local(transfer: int, total: int, *more: str) -> float:
        return local_copy_gibps(runner, transfer, total, *more)

    methods = {
        "single": local(MIB, GIB),
        "batch": local(MIB, GIB, "batch=32"),
        "threads": local(MIB, GIB, "threads=12"),
    }
    small = min(local(size, 1024 * size, "batch=32") / local(size, 1024 * size) for size in (4096, 65536, 262144))
    threads = {
        size: {n: local(size, tasks * size, f"threads={n}") for n in (1, 2, 12)}
        for size, tasks in ((MIB, 120), (GIB, 12))
    }
    brute = {dst: gibps('copy_policy="brute"', f"dst_node={dst}") for dst in (8, 11, 12, 15)}
    smart = {dst: gibps('copy_policy="smart"', f"dst_node={dst}") for dst in (8, 11, 12, 15)}
    software = gibps('copy_policy="smart"', "dst_node=15", 'path="software"')
    cpu12 = {dst: gibps('path="software"', "threads=12", f"dst_node={dst}") for dst in (8, 11, 12, 15)}
    return rows_of(
        "seed001",
        {
            "seed001/dsa-ceiling": methods["single"],
            "seed001/methods-1mib": max(methods.values()) / min(methods.values()),
            "seed001/batch-small": small,
            "seed001/threads-no-slower": min(t[n] / t[1] for t in threads.values() for n in (2, 12)),
            "seed001/threads-1mib": threads[MIB][12] / threads[MIB][1],
            "seed001/threads-1mib-above-1gib": min(threads[MIB][n] / threads[GIB][n] for n in (1, 2, 12)),
            "seed001/brute-0-15": brute[15],
            "seed001/brute-cross-above-intra": brute[15] / brute[11],
            **{f"seed001/brute-minus-smart-{dst}": brute[dst] - smart[dst] for dst in brute},
            "seed001/software-vs-dsa": software / smart[15],
            "seed001/cpu-cross-slower": max(cpu12[12], cpu12[15]) / min(cpu12[8], cpu12[11]),
        },
    )


# Every experiment, in the order rows are printed. Each takes a Runner and returns its rows.
EXPERIMENTS: dict[str, Callable[[Runner], list[Row]]] = {
    "seed000": seed000_rows,
    "seed001": seed001_rows,
    "seed002": seed002_rows,
    "seed004": seed004_rows,
    "leon": leon_rows,
}
# Distinct runs each experiment asks for (progress counts them; a test keeps them true).
RUNS = {name: PUBLISHED[name]["runs"] for name in EXPERIMENTS}
# The ids of each experiment's rows, in order, so that `--only` picks the experiments it needs
# before any run.
ROW_IDS = {name: tuple(row["id"] for row in PUBLISHED[name]["rows"]) for name in EXPERIMENTS}


Only = str | Iterable[str] | None


def reproduce(
    only: Only = None,
    progress: Callable[[str], None] | None = None,
    common: Iterable[str] = (),
    runner: Runner | None = None,
) -> list[Row]:
    """Runs the experiments and returns their rows; `only` (a glob or substring of row ids, e.g.
    `leon` or `leon/*time`, or several: a row any of them matches) keeps the matching rows and
    runs only the experiments they need; `common` overrides apply to every run
    (`platform.memory.idle_latency_ns=120`); a `runner` given runs them instead (and keeps them)."""
    runner = runner or Runner(progress, common)
    patterns = only_patterns(only)
    rows = [row for name in experiments(patterns) for row in EXPERIMENTS[name](runner)]
    return [row for row in rows if selected(row.id, patterns)]


def only_patterns(only: Only) -> list[str]:
    """`only` as a list of patterns: none selects every row."""
    return [only] if isinstance(only, str) else list(only or ())


def only_text(only: Only) -> str:
    """The patterns as the command line gives them, for messages."""
    return " ".join(f"--only {pattern}" for pattern in only_patterns(only))


def selected(row_id: str, patterns: list[str]) -> bool:
    return not patterns or any(matches(row_id, p) for p in patterns)


def experiments(only: Only) -> list[str]:
    """The experiments with a row `only` matches (every one without `only`; none if no row does)."""
    patterns = only_patterns(only)
    return [name for name, ids in ROW_IDS.items() if any(selected(i, patterns) for i in ids)]


def planned_runs(only: Only) -> int:
    """How many runs `reproduce(only)` makes."""
    return sum(RUNS[name] for name in experiments(only))


def matches(text: str, pattern: str) -> bool:
    return fnmatch.fnmatch(text, pattern) or pattern in text


def load_rows(path: Path) -> list[Row]:
    """Rows as `--json` (or `--plot DIR`) wrote them."""
    fields = [f.name for f in dataclasses.fields(Row)]
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
        rows = [Row(**{name: item[name] for name in fields}) for item in items]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ScenarioError(f"{path}: not the rows of steer reproduce: {error}") from None
    for row in rows:
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (row.published, row.simulated)):
            raise ScenarioError(f"{path}: {row.id}: published and simulated must be numbers")
    return rows


def format_value(value: float, unit: str) -> str:
    return f"{value:.2f}x" if unit == "x" else f"{value:.1f}{unit}"


def format_difference(row: Row) -> str:
    """Simulated minus published: points for percentages, the row's unit otherwise."""
    if row.unit == "%":
        return f"{row.difference:+.1f} pt"
    if row.unit == "x":
        return f"{row.difference:+.2f}"
    return f"{row.difference:+.2f} {row.unit}"


def verdict(row: Row) -> str:
    return {None: "-", True: "within", False: "miss"}[row.within_target]


HEADERS = ("id", "published", "simulated", "difference", "target", "metric")
# The narrowest the metric column is wrapped to; with less room left it goes on lines of its own.
METRIC_WIDTH = 24


def table_rows(rows: Iterable[Row]) -> list[list[str]]:
    """Each row's cells under HEADERS."""
    return [
        [
            r.id,
            f"{r.relation} {format_value(r.published, r.unit)}".strip(),
            format_value(r.simulated, r.unit),
            format_difference(r),
            verdict(r),
            r.metric,
        ]
        for r in rows
    ]


def table(rows: list[Row], width: int) -> str:
    """The rows as text within `width` columns where the ids allow: a heading per source and role,
    then each row's id, values, difference and verdict, and its metric wrapped to the room left
    (under the row, indented, where that is less than METRIC_WIDTH). `--json` has every field."""
    import textwrap

    blocks = []
    for (source, role), group in itertools.groupby(rows, key=lambda r: (r.source, r.role)):
        cells = [list(HEADERS), *table_rows(group)]
        widths = [max(len(cell[i]) for cell in cells) for i in range(len(HEADERS) - 1)]
        room = width - sum(widths) - 2 * len(widths)
        lines = [f"{source}, {role} rows:"]
        for cell in cells:
            # The id and the verdict read left to right; the numbers line up on their right.
            values = "  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(cell, widths)))
            if room >= METRIC_WIDTH:
                first, *more = textwrap.wrap(cell[-1], room) or [""]
                lines.append(f"{values}  {first}".rstrip())
                lines += [" " * (width - room) + line for line in more]
            else:
                lines.append(values.rstrip())
                if cell is not cells[0]:
                    lines += ["    " + line for line in textwrap.wrap(cell[-1], width - 4)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def scores(rows: list[Row]) -> dict[str, tuple[int, int]]:
    """Per role: (rows within target, rows with a target)."""
    judged = [r for r in rows if r.within_target is not None]
    return {
        role: (sum(r.within_target for r in judged if r.role == role), sum(r.role == role for r in judged))
        for role in ROLES
    }


def summary(rows: list[Row], width: int = 100) -> str:
    """How many rows with a target are within it, calibration and validation apart, and the target
    of every unit the rows have, wrapped to `width`."""
    import textwrap

    parts = [f"{role}: {within} of {judged} within target" for role, (within, judged) in scores(rows).items()]
    return "; ".join(parts) + "\n" + textwrap.fill(targets(rows), width, subsequent_indent="  ")


def targets(rows: list[Row]) -> str:
    """`targets: ` and the target of every unit the rows have, in TARGETS' order."""
    units = {r.unit for r in rows}
    return "targets: " + "; ".join(f"{unit} {text}" for unit, text in TARGETS.items() if unit in units)


def png(fig) -> bytes:
    """A figure as PNG bytes (the figure is closed)."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# Panels per line of the rows' figure.
PANELS_PER_LINE = 6


def panel_grid(panels: int) -> tuple[int, int]:
    """Lines and columns for `panels` panels, at most six a line."""
    return -(-panels // PANELS_PER_LINE), min(panels, PANELS_PER_LINE)


# Colours of a row's verdict and markers of its role, in every figure.
VERDICT_COLOURS = {True: "#55a868", False: "#c44e52", None: "#8c8c8c"}
ROLE_MARKERS = {"calibration": "s", "validation": "o"}
BAND_COLOUR = "#dfe9df"
# Between the labels of misses, in fractions of a parity panel's height.
LABEL_STEP = 0.06
# Each unit's panel of the parity figure, in this order; throughputs and ratios on log axes.
UNIT_NAMES = {"%": "percentages", "GB/s": "DRAM bandwidth", "GiB/s": "copy throughput", "ns": "latency", "x": "ratios"}
LOG_UNITS = ("GB/s", "GiB/s", "x")


def target_interval(row: Row) -> tuple[float, float] | None:
    """The simulated values within the row's target (infinite on a relation's open side); None
    without a target. A strict relation's bound is drawn as if included."""
    if row.relation:
        return (row.published, math.inf) if row.relation.startswith(">") else (-math.inf, row.published)
    tolerance = row.tolerance
    return None if tolerance is None else (row.published - tolerance, row.published + tolerance)


def score_text(rows: list[Row], every_role: bool = True) -> str:
    """The scores in a few words: `calibration 22 of 22, validation 35 of 46 within target`; not
    `every_role`, only those of roles with a judged row (`12 rows, no target` if none has)."""
    parts = [f"{role} {within} of {judged}" for role, (within, judged) in scores(rows).items() if judged or every_role]
    return ", ".join(parts) + " within target" if parts else f"{output.count(len(rows), 'row')}, no target"


def plot(rows: list[Row]) -> bytes:
    """Published vs simulated for every row, one panel per row, six panels a line, as PNG bytes."""
    return png(rows_figure(rows))


def rows_figure(rows: list[Row]):
    """One panel per row: the published and simulated bars, the row's target shaded about the
    published value (a relation: its side of it), the verdict in the title and the bar's colour."""
    import textwrap

    plt = pyplot()
    lines, columns = panel_grid(len(rows))
    fig, axes = plt.subplots(lines, columns, figsize=(2.6 * columns, 3.0 * lines), squeeze=False)
    for ax in axes.flat[len(rows) :]:
        ax.set_visible(False)
    for ax, row in zip(axes.flat, rows):
        colour = VERDICT_COLOURS[row.within_target]
        ax.bar(["published", "simulated"], [row.published, row.simulated], color=["#bbbbbb", colour])
        interval = target_interval(row)
        if interval:
            # The panel shows the whole target, a relation's open side to the panel's edge.
            low, high = interval
            bottom, top = ax.get_ylim()
            # A finite edge beyond the bars gets a margin, so that its dashed line shows.
            span = max(top, high if math.isfinite(high) else top) - min(bottom, low if math.isfinite(low) else bottom)
            bottom = low - 0.05 * span if math.isfinite(low) and low <= bottom else bottom
            top = high + 0.05 * span if math.isfinite(high) and high >= top else top
            ax.set_ylim(bottom, top)
            ax.axhspan(max(low, bottom), min(high, top), color=BAND_COLOUR, zorder=0)
            # Its finite edges over the bars, which would hide the band.
            edges = [end for end in interval if math.isfinite(end)]
            ax.hlines(edges, -0.5, 1.5, colors=VERDICT_COLOURS[True], linestyles="dashed", linewidth=1, zorder=3)
        ax.set_title("\n".join([*textwrap.wrap(row.id, 28), verdict_words(row)]), fontsize=8, color=colour)
        ax.set_ylabel(row.unit)
        ax.tick_params(labelsize=7)
    fig.suptitle(score_text(rows) + " (shaded, between dashed lines: the target)", fontsize=10)
    # Half an inch at the top for the title.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    return fig


def verdict_words(row: Row) -> str:
    return {None: "no target", True: "within target", False: "MISS"}[row.within_target]


def parity(rows: list[Row]) -> bytes:
    """The parity figure (below) as PNG bytes."""
    return png(parity_figure(rows))


def parity_figure(rows: list[Row]):
    """Simulated against published, a panel per unit on shared axes: the diagonal, each row's
    target as a band at its published value, calibration and validation rows in their own
    markers, coloured by verdict, each miss labelled with its id; both scores in the title."""
    plt = pyplot()
    units = [unit for unit in UNIT_NAMES if any(r.unit == unit for r in rows)]
    columns = min(len(units), 3)
    lines = -(-len(units) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5.2 * columns, 5.2 * lines), squeeze=False)
    for ax in axes.flat[len(units) :]:
        ax.set_visible(False)
    for ax, unit in zip(axes.flat, units):
        parity_panel(ax, unit, [r for r in rows if r.unit == unit])
    handles = [
        plt.Line2D([], [], marker=ROLE_MARKERS[role], color="#555555", linestyle="none", label=f"{role} row")
        for role in ROLES
    ]
    handles += [
        plt.Line2D([], [], marker="o", color=VERDICT_COLOURS[verdict], linestyle="none", label=words)
        for verdict, words in ((True, "within target"), (False, "miss (labelled)"), (None, "no target"))
    ]
    handles.append(plt.Line2D([], [], color=BAND_COLOUR, linewidth=6, label="target"))
    fig.legend(handles=handles, loc="lower center", ncols=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"steer reproduce: {score_text(rows)}", fontsize=11)
    # Half an inch under the panels for the legend, a third above them for the title.
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0.5 / height, 1, 1 - 0.33 / height))
    return fig


def label_misses(ax, misses: list[tuple[str, float, float]]) -> None:
    """Names each miss `(label, x, y)` of a parity panel in its empty triangles, with a line to its
    point: those at or above the diagonal in a column down from the top left, those below it in a
    column down the right from under the middle (the bottom is where points far below the diagonal
    are)."""
    # Top to bottom in both columns, as their points are, so that the lines do not cross.
    above = sorted((m for m in misses if m[2] >= m[1]), key=lambda m: -m[2])
    below = sorted((m for m in misses if m[2] < m[1]), key=lambda m: -m[2])
    for side, (x, y, align) in ((above, (0.03, 0.95, "left")), (below, (0.97, 0.45, "right"))):
        for i, (label, at_x, at_y) in enumerate(side):
            ax.annotate(
                label,
                (at_x, at_y),
                xytext=(x, y - i * LABEL_STEP),
                textcoords="axes fraction",
                ha=align,
                va="center",
                fontsize=7,
                color=VERDICT_COLOURS[False],
                arrowprops={"arrowstyle": "-", "color": VERDICT_COLOURS[False], "linewidth": 0.5},
            )


def band_side(row: Row) -> int | None:
    """Where a row's band is drawn beside its point: 1 right (a relation above), -1 left (below), 0
    on it (a tolerance); None without a target."""
    if row.relation:
        return 1 if row.relation.startswith(">") else -1
    return None if row.tolerance is None else 0


def parity_limits(rows: list[Row], log: bool) -> tuple[float, float]:
    """Both axes' limits: every value and every finite end of a target, with a margin."""
    values = [v for r in rows for v in (r.published, r.simulated)]
    values += [end for r in rows for end in target_interval(r) or () if math.isfinite(end)]
    if log:
        positive = [v for v in values if v > 0]
        return min(positive) / 1.5, max(positive) * 1.5
    low, high = min(values), max(values)
    margin = 0.05 * (high - low) or 1.0
    return low - margin, high + margin


def parity_panel(ax, unit: str, rows: list[Row]) -> None:
    from matplotlib import transforms

    log = unit in LOG_UNITS and all(v > 0 for r in rows for v in (r.published, r.simulated))
    low, high = parity_limits(rows, log)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.plot([low, high], [low, high], color="grey", linewidth=1, label="simulated = published")
    # A relation's band is drawn a little to its side of the point (above: right, below: left), so
    # that rows of opposite relations at one published value stay apart.
    for shift in (0, 1, -1):
        bands = [(r, target_interval(r)) for r in rows if band_side(r) == shift]
        ax.vlines(
            [r.published for r, _ in bands],
            [max(band[0], low) for _, band in bands],
            [min(band[1], high) for _, band in bands],
            color=BAND_COLOUR,
            linewidth=7 if shift == 0 else 4,
            label="target",
            transform=transforms.offset_copy(ax.transData, ax.figure, x=3 * shift, units="points"),
        )
    for role in ROLES:
        mine = [r for r in rows if r.role == role]
        if mine:
            ax.scatter(
                [r.published for r in mine],
                [r.simulated for r in mine],
                marker=ROLE_MARKERS[role],
                c=[VERDICT_COLOURS[r.within_target] for r in mine],
                edgecolors="black",
                linewidths=0.4,
                zorder=3,
                label=role,
            )
    label_misses(ax, [(r.id, r.published, r.simulated) for r in rows if r.within_target is False])
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel(f"published ({unit})")
    ax.set_ylabel(f"simulated ({unit})")
    ax.set_title(f"{UNIT_NAMES[unit]}: {score_text(rows, every_role=False)}\ntarget: {TARGETS[unit]}", fontsize=9)
    ax.grid(alpha=0.3)


# Seed 001's transfer sizes (figure 3.2: 1 KiB to 1 GiB) and its DDR-to-HBM destinations.
SEED001_SIZES = tuple(1024 << (2 * i) for i in range(11))
SEED001_HBM_NODES = tuple(range(8, 16))


def seed001_transfer_curves(runner: Runner) -> dict[str, list[tuple[int, float]]]:
    """One DSA's throughput (node 0 to 0) against transfer size, per submission method: each point
    moves 1024 transfers, at most 1 GiB, each thread copying one buffer of the transfer size again
    and again; a batch of 32 only where it fits in 1 GiB."""
    methods = {"single": (), "batch of 32": ("batch=32",), "12 threads": ("threads=12",)}
    return {
        label: [
            (size, local_copy_gibps(runner, size, min(1024 * size, GIB), *extra))
            for size in SEED001_SIZES
            if size * (32 if "batch=32" in extra else 1) <= GIB
        ]
        for label, extra in methods.items()
    }


def seed001_hbm_bars(runner: Runner) -> dict[str, list[float]]:
    """1 GiB from node 0 (DDR) into each HBM node, per way: brute force, smart, 12 CPU threads."""
    ways = {
        "brute force": ('copy_policy="brute"',),
        "smart": ('copy_policy="smart"',),
        "CPU, 12 threads": ('path="software"', "threads=12"),
    }
    return {
        label: [copy_gibps(runner, *extra, f"dst_node={dst}") for dst in SEED001_HBM_NODES]
        for label, extra in ways.items()
    }


def seed001_figures(runner: Runner) -> dict[str, bytes]:
    """Seed 001's two figures as the simulator draws them: the transfer-size curves and the
    DDR-to-HBM bars (above)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, points in seed001_transfer_curves(runner).items():
        ax.plot([size for size, _ in points], [gibps for _, gibps in points], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(SEED001_SIZES, [fmt_bytes(s) for s in SEED001_SIZES], fontsize=7)
    ax.set_xlabel("transfer size (bytes per descriptor)")
    ax.set_ylabel("GiB/s")
    ax.set_title("one DSA, node 0 to 0, by submission method (simulated)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    figures = {"seed001-transfer-size.png": png(fig)}

    bars = seed001_hbm_bars(runner)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    width = 0.8 / len(bars)
    for i, (label, ys) in enumerate(bars.items()):
        ax.bar([n + (i - 1) * width for n in SEED001_HBM_NODES], ys, width, label=label)
    # Room above the bars for the legend.
    ax.set_ylim(0, max(max(ys) for ys in bars.values()) * 1.25)
    ax.set_xticks(SEED001_HBM_NODES)
    ax.set_xlabel("destination node (HBM; 8-11 this socket, 12-15 the other)")
    ax.set_ylabel("GiB/s")
    ax.set_title("1 GiB from node 0 (DDR) into HBM (simulated)", fontsize=9)
    ax.legend(fontsize=8, ncols=3, loc="upper center")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    figures["seed001-ddr-to-hbm.png"] = png(fig)
    return figures

"""`steer reproduce`: the seeds' published measurements beside what steer simulates.

Each experiment runs built-in scenarios and turns their results into rows, one per published
number. Nothing here is fitted to the published values: the rows only read what the model
produced, so a row the model misses stays visible as a miss.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from steer import api


@dataclass(frozen=True)
class Row:
    """One published number and its simulated counterpart."""

    id: str
    source: str
    metric: str
    unit: str
    published: float
    simulated: float

    @property
    def difference(self) -> float:
        return self.simulated - self.published

    def to_dict(self) -> dict:
        return asdict(self)


class Runner:
    """Runs scenarios once each (experiments share runs) and reports progress per run."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.cache: dict[tuple, dict] = {}
        self.progress = progress

    def run(self, scenario: str, *overrides: str) -> dict:
        key = (scenario, overrides)
        if key not in self.cache:
            if self.progress:
                self.progress(f"{scenario} {' '.join(overrides)}")
            self.cache[key] = api.run(scenario, list(overrides))
        return self.cache[key]


LEON = "seed 003 (Leon & Maccabe, POWER5)"
LEON_SIZES = (4096, 16384, 65536, 262144)
# The seed's four ways of delivering incoming data (see the leon-reduce scenario).
LEON_CONFIGS = {
    "base": (),
    "prefetch": ("prefetch_distance=32",),
    "inject-l3": ('policy="inject"', 'level="l3"'),
    "inject-l2": ('policy="inject"', 'level="l2"'),
}


def leon_rows(runner: Runner) -> list[Row]:
    """Memory reads and execution time of base, prefetching and injection, over message sizes;
    the seed reports the best case ("up to"), so the rows take the maximum over sizes."""
    reads: dict[str, list[float]] = {c: [] for c in LEON_CONFIGS}
    exec_ns: dict[str, list[float]] = {c: [] for c in LEON_CONFIGS}
    for size in LEON_SIZES:
        for config, overrides in LEON_CONFIGS.items():
            result = runner.run("leon-reduce", f"message_bytes={size}", *overrides)
            reads[config].append(result["dram"]["read_gbps"])
            exec_ns[config].append(result["cores"]["0"]["workload"]["exec_ns_per_message"])

    def saved(config: str, values: dict[str, list[float]]) -> float:
        return max(100 * (1 - new / old) for new, old in zip(values[config], values["base"]) if old > 0)

    ratio = sum(p / b for p, b in zip(reads["prefetch"], reads["base"]) if b > 0) / len(LEON_SIZES)
    return [
        Row("leon/prefetch-reads", LEON, "memory reads, prefetch / base (published: equal)", "x", 1.0, ratio),
        Row("leon/inject-l3-reads", LEON, "memory reads saved by L3 injection, up to", "%", 96.0, saved("inject-l3", reads)),
        Row("leon/prefetch-time", LEON, "execution time saved by prefetching, up to", "%", 37.0, saved("prefetch", exec_ns)),
        Row("leon/inject-l3-time", LEON, "execution time saved by L3 injection, up to", "%", 30.0, saved("inject-l3", exec_ns)),
        Row("leon/inject-l2-time", LEON, "execution time saved by L2 injection, up to (seed expects: as prefetching)", "%", 37.0, saved("inject-l2", exec_ns)),
    ]


# Every experiment, in the order rows are printed. Each takes a Runner and returns its rows.
EXPERIMENTS: dict[str, Callable[[Runner], list[Row]]] = {"leon": leon_rows}


def reproduce(only: str | None = None, progress: Callable[[str], None] | None = None) -> list[Row]:
    """Runs the experiments and returns their rows; `only` (a glob or substring of row ids, e.g.
    `leon` or `leon/*time`) keeps the matching rows and runs only the experiments they need."""
    runner = Runner(progress)
    head = (only or "").split("/")[0]
    chosen = [name for name in EXPERIMENTS if head and matches(name, head)] or list(EXPERIMENTS)
    rows = [row for name in chosen for row in EXPERIMENTS[name](runner)]
    return [row for row in rows if not only or matches(row.id, only)]


def matches(text: str, pattern: str) -> bool:
    return fnmatch.fnmatch(text, pattern) or pattern in text


def format_value(value: float, unit: str) -> str:
    return f"{value:.2f}x" if unit == "x" else f"{value:.1f}{unit}"


def table_rows(rows: Iterable[Row]) -> list[list[str]]:
    return [
        [r.id, r.source, r.metric, format_value(r.published, r.unit), format_value(r.simulated, r.unit),
         f"{r.difference:+.2f}" if r.unit == "x" else f"{r.difference:+.1f} pt"]
        for r in rows
    ]


def plot(rows: list[Row]) -> bytes:
    """Published vs simulated for every row, one panel per row, as PNG bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(2.6 * len(rows), 3.2), squeeze=False)
    for ax, row in zip(axes[0], rows):
        ax.bar(["published", "simulated"], [row.published, row.simulated], color=["#888888", "#1f77b4"])
        ax.set_title(row.id, fontsize=8)
        ax.set_ylabel(row.unit)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()

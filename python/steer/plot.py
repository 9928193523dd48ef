"""Figures of runs and sweeps (matplotlib): DRAM bandwidth, fill sources, latency CDFs, metrics.

Every function takes runs as a results directory, a DataFrame from :func:`steer.load`, a
:class:`~steer.result.Result` or a list of them, and returns a matplotlib ``Figure`` (shown
inline in Jupyter); :func:`save` writes one to PNG or SVG.

>>> fig = steer.plot.metric("results/rx", y=["dram.read_gbps", "dram.write_gbps"], x="offered_gbps")
>>> steer.plot.save(fig, "dram.png")
"""

from __future__ import annotations

import io
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from steer._core import ScenarioError
from steer.optional import require
from steer.output import write_atomically
from steer.result import FILL_SOURCES
from steer.store import PARAM_PREFIX, load, record_row

KINDS = ("dram", "fills", "latency", "metric")
IMAGE_FORMATS = (".png", ".svg")
# One colour per fill source, nearest (cool) to farthest (warm), stable across figures.
SOURCE_COLORS = {
    "l1": "#4c72b0",
    "l2": "#55a868",
    "peer_l2": "#8fd18f",
    "l3": "#ccb974",
    "remote_cache": "#dd8452",
    "dram": "#c44e52",
}
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


# ----------------------------------------------------------------------------- runs as a frame


def as_frame(runs: Any):
    """Runs in any accepted form as a DataFrame with one row per run."""
    pandas = require("pandas", "plotting")
    if isinstance(runs, pandas.DataFrame):
        return runs
    if isinstance(runs, (str, Path)):
        return load(runs)
    if isinstance(runs, Mapping):
        runs = [runs]
    rows = [
        record_row({"run_id": f"run{i}", "status": "ok", "index": i, "result": dict(r)}) for i, r in enumerate(runs)
    ]
    return pandas.DataFrame(rows)


def successful(df):
    """The rows of runs that produced a result."""
    return df[df["status"] == "ok"] if "status" in df.columns else df


def runs_to_plot(runs: Any):
    """The successful runs as a DataFrame; ScenarioError if there are none."""
    df = successful(as_frame(runs))
    if df.empty:
        raise ScenarioError("no successful runs to plot")
    return df


def column(df, name: str) -> str:
    """The column a user means by ``name``: itself, or the swept parameter ``param.NAME``."""
    for candidate in (name, f"{PARAM_PREFIX}{name}"):
        if candidate in df.columns:
            return candidate
    import difflib

    close = difflib.get_close_matches(name, [short(c) for c in df.columns], n=4, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ScenarioError(f"{name}: no such column in the results{hint}")


def short(name: str) -> str:
    """A column name as shown on figures: swept parameters without their prefix."""
    return name.removeprefix(PARAM_PREFIX)


def is_number(value: Any) -> bool:
    """True for a real number that is not NaN (cells of missing values are NaN), numpy's too (a
    row taken with `df.iloc[i]` holds them)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value


def fmt(value: Any) -> str:
    """A cell value as a short label (10.0 shows as 10)."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def unit(name: str) -> str:
    """The unit of a result column, as the README defines it (DRAM in bytes, devices in bits)."""
    if name.startswith("dram.") and name.endswith("_gbps"):
        return "GB/s"
    if name.endswith("_gbps"):
        return "Gb/s"
    if name.endswith("_ns"):
        return "ns"
    if ".fills." in name or ".dc_fills." in name:
        return "fraction"
    return ""


def labelled(name: str) -> str:
    """A column name with its unit, for an axis."""
    return f"{short(name)} ({unit(name)})" if unit(name) else short(name)


def varying_params(df) -> list[str]:
    """Swept-parameter columns that take more than one value."""
    return [c for c in df.columns if c.startswith(PARAM_PREFIX) and df[c].map(fmt).nunique() > 1]


def placement_column(df, by: str | None) -> str | None:
    """The column bars and lines are split by: ``by``, else the swept placement, else a device's."""
    if by:
        return column(df, by)
    if f"{PARAM_PREFIX}placement" in df.columns:
        return f"{PARAM_PREFIX}placement"
    devices = [c for c in df.columns if re.fullmatch(r"devices\.[^.]+\.placement", c)]
    varying = [c for c in devices if df[c].map(fmt).nunique() > 1]
    return (varying or devices or [None])[0]


def where(df, conditions: Sequence[str] = ()):
    """Rows whose ``KEY`` column shows as ``VALUE`` for every ``KEY=VALUE`` condition."""
    for condition in conditions:
        key, sep, value = condition.partition("=")
        if not sep:
            raise ScenarioError(f"--where {condition}: expected KEY=VALUE")
        name = column(df, key.strip())
        df = df[df[name].map(fmt) == value.strip()]
    if conditions and df.empty:
        raise ScenarioError(f"--where {' '.join(conditions)}: no run matches")
    return df


def slots(df, by: str | None) -> tuple[list[tuple[str, str, Any]], str]:
    """Rows in plotting order as ``(group label, slot label, row)``, and the groups' title.

    Runs that differ only in ``by`` form a group and sit side by side, labelled by their ``by``
    value; groups are labelled by the other swept values (by the value alone, under a title,
    when only one other parameter varies).
    """
    others = [c for c in varying_params(df) if c != by]
    groups: dict[tuple, list] = {}
    for _, row in df.iterrows():
        groups.setdefault(tuple(fmt(row[c]) for c in others), []).append(row)
    title = short(others[0]) if len(others) == 1 else ""
    laid_out = []
    for key, rows in groups.items():
        group = key[0] if len(others) == 1 else "\n".join(f"{short(c)}={v}" for c, v in zip(others, key))
        for row in rows:
            if by:
                laid_out.append((group, fmt(row[by]), row))
            else:
                label = group.replace("\n", ", ") if len(others) != 1 else f"{title}={group}"
                laid_out.append(("", label or str(row.get("scenario", "") or row.get("run_id", "")), row))
    return laid_out, (title if by else "")


def run_label(row, params: Sequence[str]) -> str:
    """A run named by its swept values (or its id when nothing varies)."""
    if params:
        return ", ".join(f"{short(c)}={fmt(row[c])}" for c in params)
    return str(row.get("scenario") or row.get("run_id") or "run")


# ----------------------------------------------------------------------------- figure helpers


def new_figure(width: float, height: float = 4.5):
    """A figure not tied to any GUI backend (pyplot state is left alone)."""
    require("matplotlib", "plotting")
    from matplotlib.figure import Figure

    return Figure(figsize=(min(max(width, 6.0), 24.0), height), layout="constrained")


def positions(laid_out: list[tuple[str, str, Any]], per_slot: int = 1) -> tuple[list[float], list[tuple[str, float]]]:
    """x positions of slots, with a gap between groups, and the centre of each group."""
    xs, centres, x = [], [], 0.0
    current, members = None, []
    for group, _, _ in laid_out:
        if current is not None and group != current:
            centres.append((current, sum(members) / len(members)))
            x += 0.6 * per_slot
            members = []
        current = group
        xs.append(x)
        members.append(x)
        x += per_slot
    if members:
        centres.append((current, sum(members) / len(members)))
    return xs, centres


def labels_width(centres: list[tuple[str, float]]) -> float:
    """Inches the group labels need side by side (about 0.08 in per character at 10 pt)."""
    longest = max((len(line) for group, _ in centres for line in group.split("\n")), default=0)
    return len(centres) * (0.08 * longest + 0.3)


def label_axis(ax, xs: list[float], labels: list[str], centres: list[tuple[str, float]], title: str = "") -> None:
    """Slot labels on the x axis and, below them, one label per group (when there are groups)."""
    rotate = max((len(line) for s in labels for line in s.split("\n")), default=0) > 8
    ax.set_xticks(xs, labels, rotation=30 if rotate else 0, ha="right" if rotate else "center")
    if len(centres) > 1 or (centres and centres[0][0]):
        lines = max(s.count("\n") + 1 for s in labels)
        groups = ax.secondary_xaxis("bottom")
        groups.set_xticks([c for _, c in centres], [g for g, _ in centres])
        groups.tick_params(axis="x", length=0, pad=(40 if rotate else 6) + 12 * lines)
        groups.spines["bottom"].set_visible(False)
        if title:
            groups.set_xlabel(title)


# ----------------------------------------------------------------------------- the figures


def dram_bars(runs: Any, by: str | None = None):
    """DRAM read and write bandwidth (GB/s) as bars, placements side by side.

    ``by`` is the column runs are told apart by (default: the swept ``placement``); runs that
    differ in other swept values are grouped, the groups labelled below.
    """
    df = runs_to_plot(runs)
    for name in ("dram.read_gbps", "dram.write_gbps"):
        column(df, name)
    by = placement_column(df, by)
    laid_out, title = slots(df, by)
    xs, centres = positions(laid_out, per_slot=1)
    fig = new_figure(max(0.6 * len(xs), labels_width(centres)) + 2.5)
    ax = fig.subplots()
    width = 0.38
    reads = [row["dram.read_gbps"] for _, _, row in laid_out]
    writes = [row["dram.write_gbps"] for _, _, row in laid_out]
    ax.bar([x - width / 2 for x in xs], reads, width, label="read", color="#4c72b0")
    ax.bar([x + width / 2 for x in xs], writes, width, label="write", color="#dd8452")
    label_axis(ax, xs, [label for _, label, _ in laid_out], centres, title)
    ax.set_ylabel("DRAM bandwidth (GB/s)")
    ax.set_title("DRAM read and write bandwidth" + (f" by {short(by)}" if by else ""))
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return fig


def role_fills(row, counters: str = "fills") -> dict[str, dict[str, float]]:
    """Per core role, the fraction of accesses by source, pooled over the role's cores.

    With ``fill_counts`` (``dc_fill_counts`` for ``dc_fills``) in the result, cores are pooled by
    their counts (a busy core weighs more); otherwise their fractions are averaged.
    """
    cpus = sorted({m.group(1) for c in row.index if (m := re.fullmatch(r"cores\.([^.]+)\.role", c))})
    pooled: dict[str, dict[str, float]] = {}
    for cpu in cpus:
        role = row[f"cores.{cpu}.role"]
        if not isinstance(role, str):
            continue
        prefix = f"cores.{cpu}.{counters}."
        fractions = {c[len(prefix) :]: row[c] for c in row.index if c.startswith(prefix) and is_number(row[c])}
        counts_prefix = f"cores.{cpu}.{'dc_fill_counts' if counters == 'dc_fills' else 'fill_counts'}."
        counts = {
            c[len(counts_prefix) :]: row[c] for c in row.index if c.startswith(counts_prefix) and is_number(row[c])
        }
        weights = counts if counts and set(fractions) <= set(counts) else fractions
        totals = pooled.setdefault(role, {})
        for source in fractions:
            totals[source] = totals.get(source, 0.0) + float(weights[source])  # weights cover every source (above)
    for role, totals in pooled.items():
        total = sum(totals.values())
        if total > 0:
            pooled[role] = {s: v / total for s, v in totals.items()}
    return pooled


def fill_bars(runs: Any, by: str | None = None, counters: str = "fills"):
    """Where each core role's accesses were satisfied: one stacked bar per run and role.

    ``counters`` is ``"fills"`` (demand accesses, L1 hits included) or ``"dc_fills"`` (L1D
    fills only, as AMD's "DC fills by source" counters report). ``by`` as for :func:`dram_bars`.
    """
    if counters not in ("fills", "dc_fills"):
        raise ScenarioError(f"counters: expected fills or dc_fills (got {counters})")
    from matplotlib.ticker import PercentFormatter

    df = runs_to_plot(runs)
    by = placement_column(df, by)
    laid_out = []
    rows, title = slots(df, by)
    for group, label, row in rows:
        for role, fractions in role_fills(row, counters).items():
            laid_out.append((group, label, role, fractions))
    if not laid_out:
        raise ScenarioError(f"no run has cores with {counters} to plot")
    roles = {role for _, _, role, _ in laid_out}
    sources = list(FILL_SOURCES) + sorted({s for *_, f in laid_out for s in f} - set(FILL_SOURCES))
    sources = [s for s in sources if any(f.get(s, 0.0) > 0 for *_, f in laid_out)] or list(FILL_SOURCES)
    xs, centres = positions([(group, label, None) for group, label, _, _ in laid_out])
    fig = new_figure(max(0.6 * len(xs), labels_width(centres)) + 3.5)
    ax = fig.subplots()
    bottoms = [0.0] * len(xs)
    for source in sources:
        heights = [f.get(source, 0.0) for *_, f in laid_out]
        ax.bar(xs, heights, 0.7, bottom=bottoms, label=source, color=SOURCE_COLORS.get(source))
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    labels = [f"{label}\n{role}" if len(roles) > 1 else label for _, label, role, _ in laid_out]
    label_axis(ax, xs, labels, centres, title)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, 1)
    what = "demand accesses" if counters == "fills" else "L1D fills"
    ax.set_ylabel(f"{what} by source")
    only_role = f" ({next(iter(roles))})" if len(roles) == 1 else ""
    ax.set_title(f"Where {what} were satisfied{only_role}" + (f", by {short(by)}" if by else ""))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), reverse=True)
    return fig


def percentile_of(key: str) -> float | None:
    """The percentile a summary key stands for: p50 -> 50, p99_9 / p99.9 / p999 -> 99.9, min -> 0."""
    key = key.lower()
    named = {"min": 0.0, "median": 50.0, "max": 100.0}
    if key in named:
        return named[key]
    match = re.fullmatch(r"p(\d+)(?:[._](\d+))?", key)
    if not match:
        return None
    whole, fraction = match.groups()
    if fraction:
        value = float(f"{whole}.{fraction}")
    elif len(whole) > 2 and whole.startswith("99"):
        value = float(f"{whole[:2]}.{whole[2:]}")  # p999 is the 99.9th percentile
    else:
        value = float(whole)
    return value if 0.0 <= value <= 100.0 else None


def latency_fields(df, field: str | None) -> list[str]:
    """Result fields holding latencies: ``field``, or every ``devices.NAME.latency_ns`` and every
    workload latency summary (``cores.CPU.workload.NAME_ns``, as eflatency's ``half_rtt_ns``)."""
    if field:
        if field in df.columns or any(c.startswith(f"{field}.") for c in df.columns):
            return [field]
        raise ScenarioError(f"{field}: no such field in the results")
    found = []
    for c in df.columns:
        match = re.match(r"(devices\.[^.]+\.latency_ns|cores\.[^.]+\.workload\.[a-z_]+_ns)\.p50$", c)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


def latency_points(row, field: str) -> tuple[list[float], list[float], bool] | None:
    """``(latencies, cumulative fractions, from samples?)`` for one run, or None without data.

    A list of samples gives the empirical CDF; a ``{p50, p99, ...}`` summary gives one point per
    percentile.
    """
    value = row.get(field) if field in row.index else None
    if value is not None and hasattr(value, "__len__") and not isinstance(value, (str, Mapping)):
        samples = sorted(float(v) for v in value)
        if samples:
            n = len(samples)
            return samples, [(i + 1) / n for i in range(n)], True
    prefix = f"{field}."
    points = []
    for c in row.index:
        if c.startswith(prefix) and is_number(row[c]):
            percentile = percentile_of(c[len(prefix) :])
            if percentile is not None:
                points.append((float(row[c]), percentile / 100.0))
    if not points:
        return None
    points.sort(key=lambda p: (p[1], p[0]))
    return [p[0] for p in points], [p[1] for p in points], False


def field_label(name: str) -> str:
    """``devices.nic0.latency_ns`` -> ``nic0``; ``cores.2.workload.half_rtt_ns`` -> ``cpu 2 half_rtt_ns``."""
    core = re.fullmatch(r"cores\.([^.]+)\.workload\.(.+)", name)
    return f"cpu {core.group(1)} {core.group(2)}" if core else name.removesuffix(".latency_ns").removeprefix("devices.")


def latency_cdf(runs: Any, field: str | None = None):
    """Latency CDFs, one line per run (and device): from sample lists or percentile summaries.

    ``field`` is the result field to read (``devices.nic0.latency_ns``, or any field holding a
    list of samples or a ``{p50, p99, ...}`` dict); by default every ``devices.NAME.latency_ns``.
    """
    df = runs_to_plot(runs)
    fields = latency_fields(df, field)
    params = varying_params(df)
    fig = new_figure(7.5)
    ax = fig.subplots()
    lines = 0
    for _, row in df.iterrows():
        for name in fields:
            data = latency_points(row, name)
            if data is None:
                continue
            xs, ys, from_samples = data
            label = run_label(row, params)
            if len(fields) > 1:
                label = f"{label}: {field_label(name)}"
            if from_samples:
                ax.step(xs, ys, where="post", label=label)
            else:
                # Percentiles of a summary: the CDF steps up to each (a constant latency is one
                # vertical step, not a dot).
                ax.step([xs[0], *xs], [0.0, *ys], where="post", marker="o", label=label)
            lines += 1
    if not lines:
        raise ScenarioError("no latency data in the results (no devices.NAME.latency_ns; choose a field with --field)")
    ax.set_xlabel("latency (ns)")
    ax.set_ylabel("fraction of samples at or below")
    ax.set_ylim(0, 1.02)
    ax.set_title("Latency CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def metric(runs: Any, y: str | Sequence[str] = "dram.read_gbps", x: str | None = None, by: str | None = None):
    """Result metrics against a swept parameter, one line per placement (``by``).

    ``y`` is one column or several (``["dram.read_gbps", "dram.write_gbps"]``: one line style
    each); ``x`` a swept parameter (default: the only numeric one that varies). Runs that differ
    in other swept values get lines of their own.
    """
    df = runs_to_plot(runs)
    ys = [column(df, name) for name in ([y] if isinstance(y, str) else y)]
    by = placement_column(df, by)
    if x is None:
        numeric = [c for c in varying_params(df) if c != by and df[c].map(lambda v: isinstance(v, (int, float))).all()]
        if len(numeric) != 1:
            swept = ", ".join(short(c) for c in varying_params(df)) or "none"
            raise ScenarioError(f"choose the x axis with --x (swept parameters: {swept})")
        x = numeric[0]
    else:
        x = column(df, x)
    tied = tied_to(df, x)
    others = [c for c in varying_params(df) if c not in (x, by, *tied)]
    keys = [c for c in (by, *others) if c]
    numeric_x = df[x].map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)).all()
    categories = {v: i for i, v in enumerate(dict.fromkeys(df[x].map(fmt)))}
    fig = new_figure(7.5)
    ax = fig.subplots()
    lines = df.groupby([df[k].map(fmt) for k in keys], sort=False) if keys else [((), df)]
    # One legend entry per line colour (the runs) and one per line style (the metrics).
    from matplotlib.lines import Line2D

    handles = []
    for index, (key, rows) in enumerate(lines):
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{short(k)}={v}" if k != by else str(v) for k, v in zip(keys, key))
        rows = rows.sort_values(x) if numeric_x else rows
        xs = rows[x] if numeric_x else rows[x].map(fmt).map(categories)
        for number, column_name in enumerate(ys):
            ax.plot(xs, rows[column_name], LINE_STYLES[number % 4], marker=MARKERS[number % 4], color=f"C{index % 10}")
        if name:
            handles.append(Line2D([], [], color=f"C{index % 10}", marker="o", label=name))
    if len(ys) > 1:
        handles += [
            Line2D([], [], color="black", linestyle=LINE_STYLES[n % 4], marker=MARKERS[n % 4], label=short(c))
            for n, c in enumerate(ys)
        ]
    if not numeric_x:
        ax.set_xticks(list(categories.values()), list(categories))
    with_tied = f" (with {', '.join(short(c) for c in tied)})" if tied else ""
    ax.set_xlabel(labelled(x) + with_tied)
    ax.set_ylabel(
        labelled(ys[0])
        if len(ys) == 1
        else ", ".join(short(c) for c in ys)
        + (f" ({unit(ys[0])})" if len({unit(c) for c in ys}) == 1 and unit(ys[0]) else "")
    )
    ax.set_title(f"{', '.join(short(c) for c in ys)} against {short(x)}")
    ax.grid(alpha=0.3)
    if len(handles) > 5:
        # Beside the axes, in columns, so that the plot keeps its size.
        ax.legend(
            handles=handles,
            fontsize="small",
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            ncol=-(-len(handles) // 16),
        )
        fig.set_figwidth(7.5 + 3.2 * -(-len(handles) // 16))
    elif handles:
        ax.legend(handles=handles, fontsize="small")
    return fig


def tied_to(df, x: str) -> list[str]:
    """Swept parameters that move with ``x`` (a sweep's ``[zip]``): each value of ``x`` goes with
    one value of theirs, so they share ``x``'s axis instead of splitting its lines."""
    key = df[x].map(fmt)
    return [c for c in varying_params(df) if c != x and df[c].map(fmt).groupby(key).nunique().max() == 1]


# ----------------------------------------------------------------------------- files


def image_bytes(fig, image_format: str = "png", dpi: int = 150) -> bytes:
    """A figure rendered to PNG or SVG bytes."""
    buffer = io.BytesIO()
    metadata = {"Date": None} if image_format == "svg" else None
    fig.savefig(buffer, format=image_format, dpi=dpi, bbox_inches="tight", metadata=metadata)
    return buffer.getvalue()


def save(fig, path: str | Path) -> Path:
    """Writes a figure to ``path`` (``.png`` or ``.svg``) atomically; returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in IMAGE_FORMATS:
        raise ScenarioError(f"{path}: unknown image format `{path.suffix}` (use .png or .svg)")
    write_atomically({path: image_bytes(fig, suffix[1:])})
    return path


def figure(runs: Any, kind: str, **options: Any):
    """The figure of one ``kind``: dram, fills, latency or metric (options as for each function)."""
    functions = {"dram": dram_bars, "fills": fill_bars, "latency": latency_cdf, "metric": metric}
    if kind not in functions:
        raise ScenarioError(f"unknown plot kind `{kind}` (expected one of: {', '.join(KINDS)})")
    return functions[kind](runs, **{k: v for k, v in options.items() if v is not None})

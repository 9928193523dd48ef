"""One self-contained HTML page for a sweep: summary, figures (inlined PNG) and tables.

>>> steer.report.write("results/rx", "report.html")
"""

from __future__ import annotations

import base64
import contextlib
import html
import numbers
import re
import time
from pathlib import Path
from typing import Any

from steer import output
from steer._core import ScenarioError, __version__
from steer.plot import (
    as_frame,
    dram_bars,
    fill_bars,
    fmt,
    image_bytes,
    latency_cdf,
    latency_fields,
    metric,
    role_fills,
    run_label,
    short,
    successful,
    tied_to,
    varying_params,
)
from steer.result import FILL_SOURCES
from steer.store import FAILED, MANIFEST, RUNS, Store

# Bar charts beyond this many bars are unreadable; the tables still hold every run.
MAX_BARS = 48
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.meta { color: #555; } .failed { color: #b00020; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 13px; }
th, td { padding: 3px 9px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f5f5f5; position: sticky; top: 0; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; } figcaption { color: #555; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def cell(value: Any) -> str:
    """A table cell: numbers right-aligned with four significant digits, text escaped."""
    if value is None or (isinstance(value, numbers.Real) and value != value):
        return "<td></td>"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return f'<td class="num">{int(value)}</td>'
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f'<td class="num">{float(value):.4g}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def html_table(headers: list[str], rows: list[list[Any]]) -> str:
    """An HTML table of rows."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def figures(df) -> list[tuple[str, Any]]:
    """The figures a sweep's results support, as ``(caption, Figure)``."""
    ok = successful(df)
    if ok.empty:
        return []
    found = []
    # Placements, which the figures split runs by, are names, never numbers, so never an axis.
    numeric = [
        c
        for c in varying_params(ok)
        if ok[c].map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)).all()
    ]
    # Parameters zipped together share one axis: the first of them.
    axes = []
    for c in numeric:
        if not any(c in tied_to(ok, x) for x in axes):
            axes.append(c)
    devices = [c for c in ok.columns if re.fullmatch(r"devices\.[^.]+\.rx_gbps", c)]
    for x in axes[:3]:
        found.append(
            (
                f"DRAM read and write bandwidth against {short(x)}",
                metric(ok, y=["dram.read_gbps", "dram.write_gbps"], x=x),
            )
        )
        if devices:
            found.append((f"Device receive throughput against {short(x)}", metric(ok, y=devices, x=x)))
    if len(ok) <= MAX_BARS:
        found.append(("DRAM read and write bandwidth per run", dram_bars(ok)))
        roles = sum(len(role_fills(row)) for _, row in ok.iterrows())
        if 0 < roles <= MAX_BARS:
            found.append(("Where each core role's demand accesses were satisfied", fill_bars(ok)))
    if latency_fields(ok, None):
        # Latency columns whose every value is empty give no figure.
        with contextlib.suppress(ScenarioError):
            found.append(("Latency CDF", latency_cdf(ok)))
    return found


def image_tag(fig, caption: str) -> str:
    """A figure as an inlined PNG with its caption."""
    data = base64.b64encode(image_bytes(fig, "png", dpi=110)).decode("ascii")
    alt = html.escape(caption, quote=True)
    return (
        f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def runs_table(df) -> str:
    """One row per run: swept values, status, DRAM and device throughput, latency medians."""
    params = [c for c in df.columns if c.startswith("param.")]
    devices = sorted({m.group(1) for c in df.columns if (m := re.fullmatch(r"devices\.([^.]+)\.rx_gbps", c))})
    metrics = [c for c in ("dram.read_gbps", "dram.write_gbps", "dram.total_gbps") if c in df.columns]
    for name in devices:
        metrics += [c for c in (f"devices.{name}.rx_gbps", f"devices.{name}.drops") if c in df.columns]
    metrics += [f"{field}.p50" for field in latency_fields(df, None)]
    headers = ["run", *(short(c) for c in params), "status", *metrics, "host s"]
    rows = []
    # A frame without run ids or statuses (a user's own) is of successful runs, named by position.
    for position, (_, row) in enumerate(df.iterrows()):
        rows.append(
            [
                str(row.get("run_id", position))[:8],
                *(row[c] for c in params),
                row.get("status", "ok"),
                *(row[c] for c in metrics),
                row.get("wall_seconds"),
            ]
        )
    return html_table(headers, rows)


def fills_table(df) -> str:
    """Fill sources per run and core role, in percent."""
    ok = successful(df)
    params = varying_params(ok)
    rows = []
    for _, row in ok.iterrows():
        for role, fractions in role_fills(row).items():
            rows.append([run_label(row, params), role, *(f"{100 * fractions.get(s, 0.0):.1f}%" for s in FILL_SOURCES)])
    return html_table(["run", "role", *FILL_SOURCES], rows) if rows else ""


def reproduce_section(directory: Path) -> str:
    """The rows `steer reproduce --plot DIR` left in `directory`: both scores and every unit's
    target, the parity figure, the misses and every row; empty without them."""
    from steer import reproduce

    path = directory / reproduce.ROWS_FILE
    if not path.is_file():
        return ""
    rows = reproduce.load_rows(path)
    headers = ["id", "role", "published", "simulated", "difference", "target", "metric"]

    def table(chosen: list) -> str:
        return html_table(
            headers, [[r.id, r.role, *cells[1:]] for r, cells in zip(chosen, reproduce.table_rows(chosen))]
        )

    e = html.escape
    misses = [r for r in rows if r.within_target is False]
    caption = f"Simulated against published, a panel per unit: {reproduce.score_text(rows)}"
    parts = [
        "<h2>Published vs simulated (<code>steer reproduce</code>)</h2>",
        f"<p>{e(reproduce.score_text(rows))}; {e(reproduce.targets(rows))}.</p>",
        image_tag(reproduce.parity_figure(rows), caption),
        f"<h3>Misses</h3>{table(misses)}" if misses else "<p>No row misses its target.</p>",
        f"<details><summary>Every row ({len(rows)})</summary>{table(rows)}</details>",
    ]
    return "\n".join(parts)


def validate_section(directory: Path) -> str:
    """`steer validate --json DIR/validate.json`'s rows in `directory`: the score, its figure and
    every probe; empty without them."""
    from steer import validate

    path = directory / validate.ROWS_FILE
    if not path.is_file():
        return ""
    host, rows = validate.load(path)
    e = html.escape
    return "\n".join(
        [
            f"<h2>This machine against the model (<code>steer validate</code> on {e(host)})</h2>",
            image_tag(validate.figure(rows), f"Simulated against measured: {validate.score(rows)}"),
            html_table(validate.HEADERS, validate.table_rows(rows)),
        ]
    )


def fit_section(directory: Path) -> str:
    """`steer fit --json DIR/fit.json`'s result in `directory`: the cost of each point run, the
    best point and its scores; empty without it."""
    from steer import fit

    path = directory / fit.RESULT_FILE
    if not path.is_file():
        return ""
    name, curve, body = fit.load_curve(path)
    e = html.escape
    scores = "; ".join(
        f"{role} {within} of {total} within tolerance" for role, (within, total) in body["scores"].items()
    )
    best = [[e(key), e(str(value))] for key, value in body["best"].items()]
    caption = f"Calibration cost of each of {len(curve.costs)} points ({curve.method}), the least so far"
    return "\n".join(
        [
            f"<h2>Fit (<code>steer fit</code> {e(name)})</h2>",
            f"<p>Best point: calibration cost {body['calibration_cost']:.4g}; {e(scores)}.</p>",
            image_tag(fit.curves_figure([curve], name, curve.method), caption),
            html_table(["parameter", "best value"], best),
        ]
    )


def has_runs(directory: Path) -> bool:
    """Whether a sweep wrote into `directory`."""
    return any((directory / name).exists() for name in (MANIFEST, RUNS, FAILED))


def page(title: str, parts: list[str]) -> str:
    """A whole HTML page of `parts`."""
    e = html.escape
    head = [
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    return "\n".join([*head, *parts, "</body></html>\n"])


def written_line(versions: list[str]) -> str:
    return f"steer {html.escape(', '.join(versions))}; report written {time.strftime('%Y-%m-%d %H:%M:%S')}"


def build(results: Any, title: str | None = None) -> str:
    """The report of a results directory (or a DataFrame of runs) as one HTML page. A directory
    holding `steer reproduce --plot DIR`'s rows, `steer validate --json DIR/validate.json`'s or
    `steer fit --json DIR/fit.json`'s result gets their sections at the end; if no sweep wrote into
    it the page is those sections alone."""
    directory = Path(results) if isinstance(results, (str, Path)) else None
    found = {"reproduce": reproduce_section, "validate": validate_section, "fit": fit_section}
    found = {name: section(directory) for name, section in found.items()} if directory else {}
    checks = [section for section in found.values() if section]
    if checks and not has_runs(directory):
        meta = f'<p class="meta">{written_line([__version__])}</p>'
        names = " and ".join(name for name, section in found.items() if section)
        return page(title or f"steer {names}: {directory.name}", [meta, *checks])
    manifest = Store(results).manifest() if directory else None
    df = as_frame(results)
    ok = successful(df)
    failed = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    name = (
        Path(manifest["sweep"]).stem
        if manifest
        else (Path(results).name if isinstance(results, (str, Path)) else "runs")
    )
    title = title or f"steer sweep: {name}"
    e = html.escape
    parts = []
    meta = []
    if manifest and manifest.get("description"):
        meta.append(e(manifest["description"]))
    if manifest:
        meta.append(
            f"scenario <code>{e(str(manifest.get('scenario', '')))}</code>, sweep file "
            f"<code>{e(str(manifest.get('sweep', '')))}</code>"
        )
    versions = sorted({str(v) for v in df.get("steer_version", []) if isinstance(v, str)}) or [__version__]
    meta.append(written_line(versions))
    parts.append("".join(f'<p class="meta">{m}</p>' for m in meta))

    counts = [f"{len(ok)} finished", f'<span class="failed">{len(failed)} failed</span>' if len(failed) else "0 failed"]
    if manifest:
        pending = {p["run_id"] for p in manifest.get("points", [])} - set(df["run_id"])
        counts.insert(0, f"{output.count(len({p['run_id'] for p in manifest.get('points', [])}), 'run')} in the sweep")
        if pending:
            counts.append(f"{len(pending)} not run yet")
    parts.append(f"<h2>Summary</h2><p>{', '.join(counts)}.</p>")
    swept = varying_params(df)
    if swept:
        parts.append("<p>Swept: " + ", ".join(f"<code>{e(short(c))}</code>" for c in swept) + ".</p>")

    shown = figures(df)
    if shown:
        parts.append("<h2>Figures</h2>")
        parts += [image_tag(fig, caption) for caption, fig in shown]
    parts.append(f"<h2>Runs</h2>{runs_table(df)}")
    fills = fills_table(df)
    if fills:
        parts.append(
            f"<h2>Fill sources</h2><p>Fractions of demand accesses by where they were satisfied "
            f"(<code>l1</code> = hit), pooled over the cores of each role.</p>{fills}"
        )
    if len(failed):
        params = [c for c in df.columns if c.startswith("param.")]
        rows = [[str(r["run_id"])[:8], *(fmt(r[c]) for c in params), r["error"]] for _, r in failed.iterrows()]
        parts.append(f"<h2>Failures</h2>{html_table(['run', *(short(c) for c in params), 'error'], rows)}")
    return page(title, [*parts, *checks])


def write(results: Any, path: str | Path | None = None, title: str | None = None) -> Path:
    """Writes the report (default ``RESULTS/report.html``) atomically; returns its path."""
    if path is None:
        if not isinstance(results, (str, Path)):
            raise ScenarioError("a report of a DataFrame needs an output path")
        path = Path(results) / "report.html"
    path = Path(path)
    output.write_atomically({path: build(results, title)})
    return path

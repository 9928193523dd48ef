"""The ``steer sweep``, ``plot``, ``report`` and ``export`` commands.

``add_commands`` adds them to the ``steer`` command's subparsers; each sets ``handler`` to a
function taking the parsed arguments and returning the exit code. Bad input raises
ScenarioError, which the ``steer`` command prints as one line with exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from steer import output
from steer._core import ScenarioError


def default_results(sweep_file: str) -> Path:
    """Where a sweep's results go unless ``--results`` says otherwise: ``results/SWEEP_NAME``."""
    return Path("results") / Path(sweep_file).stem


def cmd_sweep(args: argparse.Namespace) -> int:
    """``steer sweep``: runs what is not yet done; exit code 1 if any run of the sweep failed."""
    from steer import sweep as sweeps
    from steer.store import Store

    results = Path(args.results) if args.results is not None else default_results(args.sweep_file)
    if args.dry_run:
        return dry_run(sweeps.load_sweep(args.sweep_file), args.set, results)
    summary = sweeps.run_sweep(
        args.sweep_file,
        results,
        executor=args.executor,
        workers=args.workers,
        address=args.address,
        overrides=args.set,
        retry_failed=not args.skip_failed,
        quiet=args.quiet,
        keep_going=args.keep_going,
    )
    ran_ok = len(summary.ran) - len([r for r in summary.ran if r in summary.failed])
    print(
        f"{output.count(summary.total, 'run')}: {ran_ok} finished now, {summary.skipped} already done, "
        f"{len(summary.failed)} failed ({summary.seconds:.1f} s); results in {results}"
    )
    if summary.failed:
        store = Store(results)
        for run_id, error in list(summary.failed.items())[:5]:
            print(f"  failed {run_id}: {error.splitlines()[0] if error else '?'}")
        if len(summary.failed) > 5:
            print(f"  ... {len(summary.failed) - 5} more in {store.failed}")
    return 1 if summary.failed else 0


def dry_run(sweep, overrides: list[str], results: Path) -> int:
    """Prints every point with its run id and whether it is done; runs nothing."""
    from steer import api
    from steer import sweep as sweeps
    from steer.store import Store

    tasks = sweeps.plan(sweep, overrides, keep_going=True)
    store = Store(results)
    done, failed = store.finished_ids(), store.failed_ids()
    keys = sweep.keys()
    rows = []
    for task in tasks:
        state = "done" if task.run_id in done else "failed" if task.run_id in failed else "pending"
        if task.resolved is None:
            state = "invalid"
        rows.append([task.index, task.run_id, *(api.toml_literal(task.point[k]) for k in keys), state])
    print(output.table(["point", "run id", *keys, "state"], rows))
    print(f"{output.count(len(tasks), 'run')}; {sum(r[-1] == 'done' for r in rows)} done in {results}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``steer plot``: one figure of a results directory to PNG or SVG."""
    from steer import plot

    df = plot.where(plot.as_frame(args.results), args.where)
    options = {"by": args.by}
    if args.kind == "metric":
        options.update(y=args.y or ["dram.read_gbps", "dram.write_gbps"], x=args.x)
    elif args.x or args.y:
        raise ScenarioError("--x and --y are for --kind metric")
    if args.kind == "latency":
        options = {"field": args.field}
    elif args.field:
        raise ScenarioError("--field is for --kind latency")
    if args.dc_fills:
        if args.kind != "fills":
            raise ScenarioError("--dc-fills is for --kind fills")
        options["counters"] = "dc_fills"
    results = Path(args.results)
    default_dir = results.parent if results.is_file() else results
    path = Path(args.output) if args.output else default_dir / "plots" / f"{args.kind}.png"
    plot.save(plot.figure(df, args.kind, **options), path)
    print(f"wrote {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``steer report``: the HTML report of a results directory."""
    from steer import report

    path = report.write(args.results, args.output, title=args.title)
    print(f"wrote {path}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``steer export``: every run of a results directory as one Parquet or CSV table."""
    from steer import store

    path = store.export(args.results, args.output)
    print(f"wrote {path}")
    return 0


def add_executor_options(parser: argparse.ArgumentParser, units: str) -> None:
    """``--executor``, ``--address`` and ``--workers``: where the sweep executor runs its work."""
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local: a process pool on this machine (default); ray: Ray tasks",
    )
    parser.add_argument(
        "--address",
        metavar="ADDR",
        help="Ray cluster to use (auto, HOST:PORT or ray://HOST:10001); "
        "without it --executor ray starts a local Ray instance",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=f"{units} at a time (default: every core; with Ray, CPUs of the local instance)",
    )


def cmd_fit(args: argparse.Namespace) -> int:
    """``steer fit``: searches the parameters, reports the best point and writes it as an overlay."""
    import json

    from steer import fit as fits
    from steer.optional import require
    from steer.store import Store

    image_format = Path(args.plot).suffix.lower().lstrip(".") if args.plot else ""
    if args.plot:
        if image_format not in ("png", "svg"):
            raise ScenarioError(f"--plot {args.plot}: unknown image format (use .png or .svg)")
        require("matplotlib", "--plot")  # before the fit runs, not after
    spec = fits.load_fit(args.fit_file)
    stem = Path(args.fit_file).stem
    results = Path(args.results) if args.results is not None else Path("results") / f"fit-{stem}"
    overlay = Path(args.output) if args.output else results / "best.toml"
    result = fits.run_fit(
        spec,
        results,
        executor=args.executor,
        workers=args.workers,
        address=args.address,
        quiet=args.quiet,
        method=args.method,
        budget=args.budget,
        keep_going=args.keep_going,
    )
    files: dict[Path, str | bytes] = {overlay: fits.overlay_toml(result)}
    if args.plot:
        files[Path(args.plot)] = fits.cost_plot(result, Store(results), image_format)
    status = 1 if result.failed else 0
    if args.json:
        text = json.dumps(result.to_dict(), indent=2) + "\n"
        if args.json == "-":
            output.write_atomically(files)
            print(text, end="")
            return status
        files[Path(args.json)] = text
    output.write_atomically(files)
    print(fits.report(result))
    names = [str(p) for p in files]
    print(f"wrote {' and '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)}")
    return status


def add_commands(commands, with_set: Callable[[argparse.ArgumentParser], None]) -> None:
    """Adds ``sweep``, ``plot``, ``report`` and ``export`` to the ``steer`` subparsers.

    ``with_set(parser)`` adds the standard ``--set KEY=VALUE`` option.
    """
    sweep = commands.add_parser(
        "sweep",
        help="run a scenario at every point of parameter grids; resumes where it stopped",
        description="Runs a scenario at every point of a sweep file's parameter grids. Each finished run is "
        "written to the results directory at once; running the sweep again skips finished runs.",
    )
    sweep.add_argument("sweep_file", help="sweep file (.toml): scenario, [set], [grid], [zip]")
    sweep.add_argument(
        "-o",
        "--results",
        type=output.directory_name,
        metavar="DIR",
        help="results directory (default results/SWEEP_NAME)",
    )
    add_executor_options(sweep, "runs")
    sweep.add_argument("--skip-failed", action="store_true", help="do not retry runs that failed before")
    sweep.add_argument(
        "--keep-going",
        action="store_true",
        help="run the valid points even if some are invalid (those are recorded as failed); "
        "without it an invalid point stops the sweep before anything runs (exit 2)",
    )
    sweep.add_argument("--dry-run", action="store_true", help="list the points and their state; run nothing")
    sweep.add_argument("--quiet", action="store_true", help="no progress display")
    with_set(sweep)
    sweep.set_defaults(handler=cmd_sweep)

    fit = commands.add_parser(
        "fit",
        help="search parameters so that simulated rows match measured ones; resumes where it stopped",
        description="Runs every row of a fit file at the points of its parameters a search chooses, or at every "
        "point of their grid (through the sweep executor), reports the point with the least calibration error and "
        "the validation rows there, and writes its values as an overlay for --set-file.",
    )
    fit.add_argument("fit_file", help="fit file (.toml): [parameters] and [[rows]] (docs/fit.md)")
    fit.add_argument(
        "-r",
        "--results",
        type=output.directory_name,
        metavar="DIR",
        help="results directory (default results/fit-NAME)",
    )
    fit.add_argument(
        "-o",
        "--output",
        type=output.file_name,
        metavar="FILE",
        help="the best values as TOML (default RESULTS/best.toml)",
    )
    fit.add_argument(
        "--method",
        choices=("search", "grid"),
        default="search",
        help="search: a space-filling start, then a trust region on ranges and neighbours in lists, "
        "at most --budget points (default); grid: every point",
    )
    fit.add_argument(
        "--budget",
        type=int,
        metavar="N",
        help="the search's most points (default: a fifth of the grid's, at least 2 per parameter and 2)",
    )
    fit.add_argument(
        "--keep-going",
        action="store_true",
        help="run the valid points even if some are invalid (those are recorded as failed); "
        "without it an invalid point stops the fit before anything runs (exit 2)",
    )
    fit.add_argument(
        "--plot",
        type=output.file_name,
        metavar="FILE",
        help="the calibration cost of each point in the order run, and the best so far (PNG or SVG)",
    )
    add_executor_options(fit, "points")
    output.add_json_option(fit, "best point, rows {row, role, measured, simulated, error, tolerance, within}, costs")
    fit.add_argument("--quiet", action="store_true", help="no progress display")
    fit.set_defaults(handler=cmd_fit)

    plot = commands.add_parser("plot", help="plot the runs of a results directory (PNG or SVG)")
    plot.add_argument("results", help="results directory of a sweep (or a .parquet export)")
    plot.add_argument(
        "--kind",
        required=True,
        choices=("dram", "fills", "latency", "metric"),
        help="dram: read/write bandwidth bars per placement; fills: fill sources per core "
        "role; latency: latency CDFs; metric: --y against the swept --x, a line per placement",
    )
    plot.add_argument(
        "-o",
        "--output",
        type=output.file_name,
        metavar="FILE",
        help="image file, .png or .svg (default RESULTS/plots/KIND.png)",
    )
    plot.add_argument("--x", metavar="PARAM", help="metric: swept parameter on the x axis")
    plot.add_argument(
        "--y",
        action="append",
        metavar="COLUMN",
        help="metric: result column (dram.read_gbps, devices.nic0.rx_gbps, ...); repeatable",
    )
    plot.add_argument("--by", metavar="COLUMN", help="split bars and lines by this column (default: placement)")
    plot.add_argument("--field", metavar="PATH", help="latency: result field with samples or percentiles")
    plot.add_argument("--dc-fills", action="store_true", help="fills: L1D fills only (AMD's DC fills by source)")
    plot.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs whose KEY shows as VALUE; repeatable",
    )
    plot.set_defaults(handler=cmd_plot)

    report = commands.add_parser(
        "report",
        help="one self-contained HTML page of a sweep's tables and figures (and of reproduce's or validate's rows)",
    )
    report.add_argument(
        "results",
        help="results directory of a sweep; with `steer reproduce --plot DIR`'s rows or `steer validate --json "
        "DIR/validate.json` in it, their sections too (alone if no sweep wrote there)",
    )
    report.add_argument(
        "-o", "--output", type=output.file_name, metavar="FILE", help="HTML file (default RESULTS/report.html)"
    )
    report.add_argument("--title", help="page title (default: the sweep's name)")
    report.set_defaults(handler=cmd_report)

    export = commands.add_parser("export", help="every run of a results directory as one Parquet or CSV table")
    export.add_argument("results", help="results directory of a sweep")
    export.add_argument(
        "-o", "--output", required=True, type=output.file_name, metavar="FILE", help="output file, .parquet or .csv"
    )
    export.set_defaults(handler=cmd_export)

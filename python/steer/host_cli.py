"""The ``steer calibrate`` and ``steer validate`` commands: the model checked against this machine.

``add_commands`` adds them to the ``steer`` command's subparsers. Bad input raises ScenarioError,
which the ``steer`` command prints as one line with exit code 2.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from steer import _core, output


def calibrate_and_write(args: argparse.Namespace, mode: str, out: Path, extra: dict[Path, str | bytes]) -> tuple:
    """Measures, fits, and writes the calibration (and ``extra`` files) atomically."""
    from steer import calibrate

    geometry = calibrate.sysfs_platform()
    cpus = calibrate.parse_cpus(args.cpus) if args.cpus else tuple(_core.probe_allowed_cpus())
    plan = calibrate.plan_for(mode, geometry, cpus, max_bytes(args), args.min_ms)
    progress = output.Progress("calibrate", args.quiet)
    try:
        measured = calibrate.measure(plan, geometry, progress)
    finally:
        progress.close()
    values = calibrate.fit(measured, geometry)
    vendor = calibrate.cpu_vendor()
    guest = "hypervisor" in calibrate.cpu_flags()
    translation = calibrate.translation_values(measured, vendor, guest, _core.probe_data_tlb())
    if translation:
        values = calibrate.refit_memory_latency(measured, values + translation, geometry)
    values += calibrate.fit_streamer(measured, values, vendor)
    streamer = calibrate.STREAMERS.get(vendor or "")
    output.write_atomically({out: calibrate.calibration_toml(measured, values), **extra})
    found = calibrate.warnings(measured, values, streamer)
    if streamer is None:
        found.append(f"no L2 streamer is described for CPU vendor {vendor or 'unknown'}: the host preset's stays")
    for line in found:
        print(f"steer: warning: {line}", file=sys.stderr)
    return measured, values


def max_bytes(args: argparse.Namespace) -> int | None:
    from steer.calibrate import check_working_set, parse_bytes

    if args.max_bytes is None:
        return None
    largest = parse_bytes(args.max_bytes)
    check_working_set(largest)
    return largest


def check_outputs(args: argparse.Namespace, *paths: Path) -> None:
    """Refuses, before anything is measured, a file the command could not write at the end: a
    measurement takes seconds to minutes."""
    for path in [*paths, args.plot, None if args.json == "-" else args.json]:
        if path is not None:
            output.check_destination(Path(path))


def cmd_calibrate(args: argparse.Namespace) -> int:
    from steer import calibrate

    out = Path(args.out) if args.out else calibrate.calibration_path()
    check_outputs(args, out)
    mode = "quick" if args.quick else "full" if args.full else "default"
    measured, values = calibrate_and_write(args, mode, out, {})
    files: dict[Path, str | bytes] = {}
    if args.plot:
        files[Path(args.plot)] = calibrate.plot(measured, values)
    if args.json and args.json != "-":
        files[Path(args.json)] = calibrate.as_json(measured, values, out)
    output.write_atomically(files)
    if args.json == "-":
        sys.stdout.write(calibrate.as_json(measured, values, out))
        return 0
    print(output.table(["key", "value", "source"], [[v.key, v.value, v.source] for v in values]))
    for path in [out, *files]:
        print(f"wrote {path}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from steer import calibrate, validate

    mode = "quick" if args.quick else "default"
    path = calibrate.calibration_path()
    # Bad options are refused before any calibration starts.
    cpus = list(calibrate.parse_cpus(args.cpus)) if args.cpus else None
    largest = max_bytes(args)
    check_outputs(args, *([] if path.exists() else [path]))
    if not path.exists():
        print(f"steer: no calibration of this machine yet: measuring first ({path})", file=sys.stderr)
        calibrate_and_write(args, "quick", path, {})
    settings = validate.MODES[mode]
    progress = output.Progress("validate", args.quiet)
    try:
        rows = validate.validate(settings["repeats"], args.min_ms or settings["min_ms"], progress, cpus, largest)
        moved = validate.peer_moved(settings["repeats"], args.min_ms or settings["min_ms"], cpus)
    finally:
        progress.close()
    if moved:
        print(f"steer: warning: {moved}", file=sys.stderr)
    host = socket.gethostname()
    files: dict[Path, str | bytes] = {}
    if args.plot:
        files[Path(args.plot)] = validate.plot(rows)
    if args.json and args.json != "-":
        files[Path(args.json)] = validate.as_json(rows, path, host)
    output.write_atomically(files)
    if args.json == "-":
        sys.stdout.write(validate.as_json(rows, path, host))
        return 0
    print(output.table(validate.HEADERS, validate.table_rows(rows)))
    within = sum(r.within for r in rows)
    print(f"{within} of {len(rows)} within {validate.TARGET:.0%} of the measured median (calibration: {path})")
    for written in files:
        print(f"wrote {written}")
    return 0


def cmd_scenario(args: argparse.Namespace) -> int:
    from steer import host_scenario

    if not Path(args.root).is_dir():
        raise _core.ScenarioError(f"--root {args.root}: not a directory")
    text = host_scenario.scenario_text(args.root, args.cpus, args.pid)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    output.write_atomically({Path(args.output): text})
    print(f"wrote {args.output}")
    return 0


def add_measuring_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus", metavar="LIST", help="CPUs to measure on (default: all this process may use)")
    p.add_argument("--max-bytes", metavar="SIZE", help="largest working set (e.g. 256MiB; default from the LLC size)")
    p.add_argument("--min-ms", type=float, metavar="MS", help="least time each timing lasts")
    p.add_argument("--plot", type=output.file_name, metavar="FILE.png", help="draw the figures into FILE.png")
    output.add_json_option(
        p,
        "machine-readable output (to FILE or stdout)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_commands(commands: argparse._SubParsersAction) -> None:
    cal = commands.add_parser(
        "calibrate", help="measure this machine (latency and bandwidth per level, clock) into the host preset"
    )
    size = cal.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer sizes and shorter timings (about a minute)")
    size.add_argument("--full", action="store_true", help="more sizes, longer timings, up to 8x the LLC")
    cal.add_argument(
        "--out",
        type=output.file_name,
        metavar="FILE",
        help="where to write the calibration (default: the host preset's)",
    )
    add_measuring_options(cal)
    cal.set_defaults(handler=cmd_calibrate)

    val = commands.add_parser(
        "validate", help="run loops here and in the simulator on the calibrated host preset: measured vs simulated"
    )
    val.add_argument("--quick", action="store_true", help="shorter timings, fewer repeats (under five minutes)")
    add_measuring_options(val)
    val.set_defaults(handler=cmd_validate)

    scen = commands.add_parser(
        "scenario",
        help="write a scenario of this host (its NICs, their queues' IRQ CPUs) for steer compare",
        description="Writes a scenario of this host (or of a tree steer doctor --capture saved): the host "
        "preset with the host's topology, each NIC's RX queues steered to their IRQs' CPUs, a receive loop per "
        "queue on the consumer's CPUs, and which placements the hardware offers (steer compare prints it).",
    )
    scen.add_argument("--from-host", action="store_true", required=True, help="read this host (the only source)")
    scen.add_argument(
        "-o", "--output", type=output.file_name, metavar="FILE", help="write the scenario to FILE (default stdout)"
    )
    consumer = scen.add_mutually_exclusive_group()
    consumer.add_argument("--cpus", metavar="LIST", help="the consumer's CPUs, one queue each (default: every CPU)")
    consumer.add_argument("--pid", type=int, help="the consuming application: the CPUs it may run on")
    scen.add_argument("--root", default="/", metavar="DIR", help="read a captured tree instead of this host")
    scen.set_defaults(handler=cmd_scenario)

"""The ``steer`` command."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

from steer import api, output
from steer._core import ScenarioError, SteerError
from steer.host_cli import add_commands as add_host_commands
from steer.registry_cli import add_commands as add_registry_commands
from steer.result import FILL_SOURCES
from steer.trace_import import add_commands as add_trace_import_commands
from steer.workflow_cli import add_commands as add_workflow_commands


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def format_run(result: dict) -> str:
    """The human-readable summary of one run."""
    sim = result["sim"]
    dram = result["dram"]
    hbm = dram.get("hbm", [])
    memories = (
        f"{len(dram['channels'])} DDR channels, {len(hbm)} HBM nodes" if hbm else f"{len(dram['channels'])} channels"
    )
    lines = [
        f"{result['scenario']} on {result['platform']}: {sim['measured_ns'] / 1000:.0f} µs measured "
        f"after {sim['warmup_ns'] / 1000:.0f} µs warm-up (seed {sim['seed']})",
        "",
        f"DRAM  read {dram['read_gbps']:.2f} GB/s   write {dram['write_gbps']:.2f} GB/s   "
        f"total {dram['total_gbps']:.2f} GB/s   ({memories})",
    ]
    if hbm:
        lines.append(
            f"  of which HBM  read {sum(n['read_gbps'] for n in hbm):.2f} GB/s   "
            f"write {sum(n['write_gbps'] for n in hbm):.2f} GB/s"
        )
    lines.append("")
    placed = {name: d for name, d in result["devices"].items() if "placement" in d}
    # A device that is asked for what it writes (an SSD's reads) has no offered load and drops nothing.
    device_rows = [
        [
            name,
            d["placement"],
            f"{d['offered_gbps']:.2f}" if "offered_gbps" in d else "",
            f"{d['rx_gbps']:.2f}",
            d.get("drops", ""),
        ]
        for name, d in placed.items()
    ]
    if device_rows:
        lines += [output.table(["device", "placement", "offered Gb/s", "rx Gb/s", "drops"], device_rows), ""]
    if "copy" in result:
        lines += [format_copy(result), ""]
    if "query" in result:
        lines += [format_query(result["query"]), ""]
    # Workloads that move their data as flows (bulk copies and scans) make no demand access: their
    # cores show only how busy they were.
    accessed = any(any(core["fills"].values()) for core in result["cores"].values())
    sources = FILL_SOURCES if accessed else ()
    core_rows = []
    for cpu, core in result["cores"].items():
        fills = core["fills"]
        busy = core.get("workload", {}).get("busy")
        core_rows.append(
            [cpu, core["role"]] + [percent(fills[s]) for s in sources] + ["" if busy is None else percent(busy)]
        )
    if core_rows:
        if accessed:
            lines += ["Demand accesses by where they were satisfied:"]
        else:
            lines += ["Cores (no demand access simulated: bulk reads and copies move as flows, not lines):"]
        lines += [output.table(["cpu", "role", *sources, "busy"], core_rows), ""]
    stat_rows = [
        [cpu, core["role"], ", ".join(f"{key} {text}" for key, text in workload_stats(core))]
        for cpu, core in result["cores"].items()
    ]
    if any(row[2] for row in stat_rows):
        lines += ["Workload statistics (`steer stats SCENARIO` says what each means):"]
        lines += [output.table(["cpu", "role", "statistics"], stat_rows), ""]
    lines.append(
        f"simulated {sim['simulated_ns'] / 1e6:.3f} ms in {sim['host_seconds']:.2f} s host time, "
        f"{sim['line_ops']:,} line operations measured"
    )
    return "\n".join(lines)


def format_copy(result: dict) -> str:
    """A copy job's figures and the copy engines that took part."""
    copy = result["copy"]
    if copy["seconds"] is None:
        head = f"copy: {copy['bytes']:,} bytes copied, not finished within sim.measure_us"
    else:
        head = (
            f"copy: {copy['bytes']:,} bytes in {copy['seconds'] * 1e3:.3f} ms = {copy['gibps']:.2f} GiB/s; "
            f"{copy['descriptors']:,} descriptors, {copy['per_descriptor_us']:.3f} µs each"
        )
    if copy["latency_us"] is not None:
        head += f"; {copy['latency_us']:.3f} µs per submission"
    rows = [
        [name, d["node"], f"{d['bytes']:,}", d["descriptors"], percent(d["busy_fraction"]), d["wq"]["retries"]]
        for name, d in result["devices"].items()
        if name in copy["devices"]
    ]
    table = output.table(["device", "node", "bytes", "descriptors", "busy", "retries"], rows) if rows else ""
    return "\n".join(line for line in (head, table) if line)


def format_query(query: dict) -> str:
    """A query's pipeline times and, when it prefetched through the cache, what the cache did."""

    def ms(us: float | None) -> str:
        return "-" if us is None else f"{us / 1e3:.3f} ms"

    if query["total_us"] is None:
        head = "query: not finished within sim.measure_us"
    else:
        head = f"query: {ms(query['total_us'])} over {query['blocks']:,} blocks per column"
    head += (
        f" (scan_a {ms(query['scan_a_us'])}, scan_b {ms(query['scan_b_us'])}, aggregate {ms(query['aggregate_us'])})"
    )
    if query["hit_rate"] is None:
        return head
    return (
        f"{head}\ncache: hit rate {percent(query['hit_rate'])} ({query['ready_blocks']} ready, "
        f"{query['in_flight_blocks']} in flight, {query['missed_blocks']} missed when aggregated); "
        f"aggregate waited {ms(query['copy_wait_us'])} for copies; {query['cache_evicted']} flushed, "
        f"{query['cache_uncached']} without room"
    )


def format_uprof(result: dict, channels_per_socket: int) -> str:
    """The per-UMC memory table as AMDuProfSys prints it (seed 002, figures 4 and 5): one
    column per memory controller, estimated read and write bandwidth and the CAS split."""
    channels = result["dram"]["channels"]
    names = [f"socket:{i // channels_per_socket}-umc:{i % channels_per_socket}" for i in range(len(channels))]

    def share(part: float, whole: float) -> str:
        return f"{100 * part / whole:.3f}" if whole > 0 else "0.000"

    rows = [
        ["#umc", *names],
        ["% UMC CAS for reads", *(share(c["read_gbps"], c["read_gbps"] + c["write_gbps"]) for c in channels)],
        ["% UMC CAS for writes", *(share(c["write_gbps"], c["read_gbps"] + c["write_gbps"]) for c in channels)],
        ["UMC est read BW (GB/s)", *(f"{c['read_gbps']:.3f}" for c in channels)],
        ["UMC est write BW (GB/s)", *(f"{c['write_gbps']:.3f}" for c in channels)],
    ]
    return "\n".join("\t".join(row) for row in rows)


def resolved_path(json_path: Path) -> Path:
    stem = json_path.name[: -len(".json")] if json_path.name.endswith(".json") else json_path.name
    return json_path.with_name(f"{stem}.resolved.toml")


def run_outputs(json_path: Path, text: str, resolved: str) -> dict[Path, str]:
    """The result JSON and the resolved scenario beside it; only the JSON when it goes to a
    device (`/dev/null`, `/dev/stdout`), which has no "beside"."""
    if output.destination(json_path).is_char_device():
        return {json_path: text}
    return {json_path: text, resolved_path(json_path): resolved}


def warn_stalls(result: dict) -> None:
    """One line on stderr per agent that stopped making progress: the run is not silently short."""
    sim = result.get("sim", {})
    # A run whose jobs (a copy, a query) all ended stops with them: it never reports this.
    if sim.get("stalled_at_ns") is not None:
        print(f"steer: warning: nothing was left to happen after {sim['stalled_at_ns'] / 1000:.1f} µs", file=sys.stderr)
    for stall in sim.get("stalls", []):
        since = stall["since_ns"] / 1000
        print(f"steer: warning: {stall['agent']} stalled at {since:.1f} µs: {stall['reason']}", file=sys.stderr)


def note_partial_rings(result: dict) -> None:
    """One line on stderr per device that places DMA in caches and whose window saw less than a
    pass over a ring: its hit rates can depend on which part of the ring the window saw."""
    window_us = result.get("sim", {}).get("measured_ns", 0) / 1000
    for name, device in result.get("devices", {}).items():
        passes = [q["ring_passes"] for q in device.get("queues", []) if q.get("ring_passes", 0) > 0]
        if device.get("placement") == "memory" or not passes or min(passes) >= 1:
            continue
        print(
            f"steer: note: {name}'s {window_us:.0f} µs window saw {min(passes):.2f} of a pass over a ring;"
            f" its hit rates can depend on which part (sim.measure_us={window_us / min(passes):.0f} covers one)",
            file=sys.stderr,
        )


def cmd_run(args: argparse.Namespace) -> int:
    progress = output.Progress(f"steer run {args.scenario}", quiet=args.quiet)
    try:
        result, resolved = api.run_with_resolved(args.scenario, args.set, progress=progress)
    finally:
        progress.close()
    warn_stalls(result)
    note_partial_rings(result)
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
        return 0
    if args.format == "uprof":
        platform = tomllib.loads(resolved)["platform"]
        per_socket = platform["memory"]["channels_per_node"] * platform["memory"]["nodes_per_socket"]
        if args.json:
            output.write_atomically(run_outputs(Path(args.json), text, resolved))
        print(format_uprof(result, per_socket))
        return 0
    written = run_outputs(Path(args.json), text, resolved) if args.json else {}
    output.write_atomically(written)
    print(format_run(result))
    if written:
        print(f"wrote {' and '.join(str(p) for p in written)}")
    return 0


# Totals of the window that the per-unit figures and the busy column already say.
WINDOW_TOTALS = ("busy", "cycles", "exec_ns")


def shown_stats(core: dict) -> list[tuple[str, object]]:
    """A core's workload statistics worth showing: counts, per-unit cycles, the workload's own
    figures (goodput, latency summaries), leaving out the window's totals."""
    return [
        (key, value)
        for key, value in core.get("workload", {}).items()
        if key not in WINDOW_TOTALS and not key.startswith("exec_ns_per_")
    ]


def workload_stats(core: dict) -> list[tuple[str, str]]:
    """:func:`shown_stats` as (key, text), latency summaries by their p50 and p99."""
    shown = []
    for key, value in shown_stats(core):
        if isinstance(value, dict):
            if value.get("count"):
                shown.append((key, f"p50 {value['p50']:.4g} p99 {value['p99']:.4g}"))
        elif isinstance(value, float):
            shown.append((key, f"{value:.4g}"))
        else:
            shown.append((key, str(value)))
    return shown


# The word users know SDCI by, for the placement policy that models it (the core reads it so too:
# Placements::ALIASES); compare needs it to check names and to run each policy once.
PLACEMENT_ALIASES = {"sdci": "l2"}


def compare_rows(results: dict[str, dict | None]) -> list[list[str]]:
    """One row per metric, one column per placement ("n/a" where a run was not possible)."""

    def cell(result: dict | None, get, fmt: str) -> str:
        try:
            value = get(result)
        except (KeyError, TypeError):
            return "n/a"
        return "n/a" if value is None else format(value, fmt)

    rows = [
        ["DRAM read GB/s", lambda r: r["dram"]["read_gbps"], ".2f"],
        ["DRAM write GB/s", lambda r: r["dram"]["write_gbps"], ".2f"],
    ]
    first = next((r for r in results.values() if r), None)
    if any("rx_gbps" in d for d in (first or {}).get("devices", {}).values()):
        # Per second, a placement that drops packets moves less data: per received byte, it does not.
        rows += [
            [f"DRAM {way} bytes per rx byte", lambda r, w=way: per_received_byte(r, r["dram"][f"{w}_gbps"]), ".3f"]
            for way in ("read", "write")
        ]
    for name in (first or {}).get("devices", {}):

        def device(r, name=name):
            return r["devices"][name]

        rows += [
            [f"{name} rx Gb/s", lambda r, d=device: d(r)["rx_gbps"], ".2f"],
            [f"{name} tx Gb/s", lambda r, d=device: d(r)["tx_gbps"], ".2f"],
            [f"{name} drops", lambda r, d=device: d(r)["drops"], "d"],
            [f"{name} DMA write hit rate", lambda r, d=device: d(r)["dma_write_hit_rate"], ".3f"],
            [f"{name} DMA read hit rate", lambda r, d=device: d(r)["dma_read_hit_rate"], ".3f"],
            [f"{name} latency p50 ns", lambda r, d=device: d(r)["latency_ns"]["p50"], ".0f"],
            [f"{name} latency p99 ns", lambda r, d=device: d(r)["latency_ns"]["p99"], ".0f"],
        ]
    for cpu, core in (first or {}).get("cores", {}).items():
        rows.append(
            [f"cpu {cpu} ({core['role']}) fills from DRAM", lambda r, c=cpu: r["cores"][c]["fills"]["dram"], ".1%"]
        )
        for key, value in shown_stats(core):
            stat = lambda r, c=cpu, k=key: r["cores"][c]["workload"][k]  # noqa: E731
            if isinstance(value, dict):
                rows += [
                    [f"cpu {cpu} {key} {p}", lambda r, s=stat, p=p: s(r)[p] if s(r)["count"] else None, ".4g"]
                    for p in ("p50", "p99")
                ]
            else:
                rows.append([f"cpu {cpu} {key}", stat, ".4g"])
    return [[label] + [cell(result, get, fmt) for result in results.values()] for label, get, fmt in rows]


def received_gbps(result: dict) -> float:
    """What every device of a result received, in Gb/s."""
    return sum(d.get("rx_gbps", 0.0) for d in result["devices"].values())


def per_received_byte(result: dict, dram_gbytes_per_s: float) -> float | None:
    """DRAM bytes per byte received (None if nothing was): GB/s against Gb/s."""
    received = received_gbps(result) / 8
    return dram_gbytes_per_s / received if received > 0 else None


def comparable(result: dict) -> dict:
    """A result without what differs between runs that simulate the same (host time, policy name)."""
    same = json.loads(json.dumps(result))
    same["sim"].pop("host_seconds", None)
    for device in same.get("devices", {}).values():
        device.pop("placement", None)
    return same


def why_the_same(placement: str, resolved: str) -> str:
    """Why ``placement`` simulates what another does, where steer knows: the settings that make it so."""
    devices = [(i, d) for i, d in enumerate(tomllib.loads(resolved).get("devices", [])) if "placement" in d]
    if placement == "tph":
        untagged = [(i, d) for i, d in devices if d.get("tph", {}).get("mode", "off") == "off"]
        if untagged:
            i, device = untagged[0]
            return (
                f': {device.get("name", f"devices.{i}")} sends no TPH hints (devices.{i}.tph.mode = "off"); '
                f"--set devices.{i}.tph.mode=iv tags its writes"
            )
    if placement == "inject":
        at_l2 = [i for i, d in devices if d["placement"].get("level", "l2") == "l2"]
        if at_l2:
            return f": inject's level is l2; --set devices.{at_l2[0]}.placement.level=l3 injects into the L3"
    return ""


def resolved_of(result: dict) -> str:
    """The resolved scenario a result was run from, if it carries it (a :class:`Result` does)."""
    return getattr(result, "resolved", None) or ""


def compare_notes(results: dict[str, dict | None]) -> list[str]:
    """Lines under the comparison that keep it from being misread: placements that received
    different amounts, columns that simulate the same as another, and what the DMA write hit rate
    counts under `memory`."""
    notes = []
    ran = {placement: result for placement, result in results.items() if result}
    received = {placement: received_gbps(result) for placement, result in ran.items()}
    if received and max(received.values()) > 1.01 * min(received.values()):
        least, most = min(received, key=received.get), max(received, key=received.get)
        notes.append(
            f"note: the placements received different amounts ({received[least]:.2f} Gb/s under {least}, "
            f"{received[most]:.2f} under {most}): DRAM GB/s are of different traffic; compare DRAM bytes per rx byte"
        )
    seen: dict[str, str] = {}
    for placement, result in ran.items():
        key = json.dumps(comparable(result), sort_keys=True)
        if key in seen:
            earlier = seen[key]
            why = why_the_same(placement, resolved_of(result)) or why_the_same(earlier, resolved_of(ran[earlier]))
            notes.append(f"note: {placement} simulates the same as {earlier}{why}")
        else:
            seen[key] = placement
    memory = ran.get("memory")
    if memory and any((d.get("dma_write_hit_rate") or 0) > 0 for d in memory["devices"].values()):
        notes.append(
            "note: under memory every DMA write goes to DRAM; its hit rate counts writes that found a stale copy "
            "of their line cached (one the consumer read before), which they invalidated"
        )
    return notes


def placement_policies() -> list[str]:
    return [entry["name"] for entry in api.catalog("placement")]


def cmd_compare(args: argparse.Namespace) -> int:
    devices = tomllib.loads(api.resolve(args.scenario, args.set)).get("devices", [])
    nics = [i for i, d in enumerate(devices) if "placement" in d]
    if not nics:
        raise ScenarioError(f"{args.scenario}: no device with a DMA placement to compare")

    def overrides(policy: str) -> list[str]:
        return list(args.set) + [f'devices.{i}.placement.policy="{policy}"' for i in nics]

    known = placement_policies()
    results: dict[str, dict | None] = {}
    failures = []
    if args.placement is None:
        # Every placement the scenario's platform and devices accept (DDIO only where there are DDIO ways).
        placements = []
        for policy in known:
            try:
                api.resolve(args.scenario, overrides(policy))
                placements.append(policy)
            except ScenarioError as error:
                failures.append(f"{policy}: {error}")
    else:
        asked = [p.strip() for p in args.placement.split(",") if p.strip()]
        unknown = [p for p in asked if PLACEMENT_ALIASES.get(p, p) not in known]
        if unknown or not asked:
            names = ", ".join([*known, *PLACEMENT_ALIASES])
            raise ScenarioError(f"--placement: unknown placement {', '.join(unknown) or '(none)'} (known: {names})")
        # Each policy once, under the name first given for it (l2,sdci is one run).
        by_policy = {}
        for placement in asked:
            by_policy.setdefault(PLACEMENT_ALIASES.get(placement, placement), placement)
        placements = list(by_policy.values())
    for placement in placements:
        progress = output.Progress(f"steer compare {placement}", quiet=args.quiet)
        try:
            results[placement] = api.run(
                args.scenario, overrides(PLACEMENT_ALIASES.get(placement, placement)), progress=progress
            )
        except ScenarioError as error:
            failures.append(f"{placement}: {error}")
        finally:
            progress.close()
    if not results:
        raise ScenarioError("; ".join(failures))
    if args.json:
        output.emit_json(args.json, results)
        return 0
    print(output.table(["metric", *results], compare_rows(results)))
    for note in compare_notes(results):
        print(note)
    from steer.host_scenario import compare_line

    offers = compare_line(args.scenario, {p: PLACEMENT_ALIASES.get(p, p) for p in results})
    if offers:
        print(offers)
    for failure in failures:
        print(f"not compared: {failure}")
    return 0


def reproduce_sensitivity(args: argparse.Namespace) -> int:
    from steer import sensitivity

    if args.set or args.plot:
        raise ScenarioError("--sensitivity: not with --set or --plot")
    progress = output.Progress("steer reproduce --sensitivity", quiet=args.quiet)

    def report(stage: str, fraction: float) -> None:
        label = f"steer reproduce --sensitivity: {stage}"
        if progress.label != label:
            progress.restart(label)
        progress(fraction)

    try:
        _, results = sensitivity.sensitivity(args.only, progress=report)
    finally:
        progress.close()
    if args.json:
        text = json.dumps([r.to_dict() for r in results], indent=2) + "\n"
        if args.json == "-":
            print(text, end="")
            return 0
        output.write_atomically({Path(args.json): text})
    print(output.table(sensitivity.HEADERS, sensitivity.table_rows(results)))
    print("moves: simulated at the changed value minus the base, in the row's unit (points for %)")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from steer import reproduce

    if args.sensitivity:
        return reproduce_sensitivity(args)
    progress = output.Progress("steer reproduce", quiet=args.quiet)
    done = []
    planned = reproduce.planned_runs(args.only)

    def step(label: str) -> None:
        done.append(label)
        # Seed 001's figures (--plot) run more; the bar waits at 99% for them.
        progress(min(len(done) / planned, 0.99))

    runner = reproduce.Runner(step, args.set)
    try:
        rows = reproduce.reproduce(args.only, runner=runner)
        if not rows:
            raise ScenarioError(f"{reproduce.only_text(args.only)}: no row matches")
        files: dict[Path, str | bytes] = {}
        rows_json = json.dumps([r.to_dict() for r in rows], indent=2) + "\n"
        if args.json and args.json != "-":
            files[Path(args.json)] = rows_json
        if args.plot:
            plots = Path(args.plot)
            files[plots / "reproduce-parity.png"] = reproduce.parity(rows)
            files[plots / "reproduce.png"] = reproduce.plot(rows)
            # The rows drawn, which `steer report DIR` reads.
            files[plots / reproduce.ROWS_FILE] = rows_json
            if any(row.id.startswith("seed001/") for row in rows):
                for name, image in reproduce.seed001_figures(runner).items():
                    files[Path(args.plot) / name] = image
    finally:
        progress.close()
    output.write_atomically(files)
    if args.json == "-":
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    width = shutil.get_terminal_size((100, 24)).columns
    print(reproduce.table(rows, width) + "\n")
    print(reproduce.summary(rows, width))
    for path in files:
        print(f"wrote {path}")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    sys.stdout.write(api.resolve(args.scenario, args.set))
    return 0


def print_listing(headers: list[str], rows: list, json_target: str | None) -> None:
    """Rows as an aligned table, or for ``--json [FILE]`` as JSON objects keyed by the lower-cased
    headers."""
    if json_target:
        keys = [h.lower() for h in headers]
        output.emit_json(json_target, [dict(zip(keys, row)) for row in rows], sort_keys=False)
    else:
        print(output.table(headers, rows))


def cmd_scenarios(args: argparse.Namespace) -> int:
    print_listing(["name", "description"], api.scenarios(), args.json)
    return 0


def cmd_platforms(args: argparse.Namespace) -> int:
    if args.name is None:
        print_listing(["name", "description"], api.platforms(), args.json)
    else:
        print_listing(["key", "value", "meaning"], api.describe_platform(args.name, args.set), args.json)
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    progress = output.Progress(f"steer trace {args.file}", quiet=args.quiet)
    try:
        report = api.trace(
            args.file,
            platform=args.platform,
            cpu=args.core,
            overrides=args.set,
            allow_empty=args.allow_empty,
            progress=progress,
        )
    finally:
        progress.close()
    if args.json:
        output.emit_json(args.json, report)
        return 0
    rows = []
    for level in ("l1d", "l2", "l3"):
        counts = report[level]
        rows.append([level, counts["reads"], counts["writes"], counts["hits"], counts["misses"], counts["writebacks"]])
    print(f"{report['accesses']:,} accesses on CPU {args.core} of {args.platform} ({report['skipped']:,} skipped)")
    print(output.table(["level", "reads", "writes", "hits", "misses", "writebacks"], rows))
    print(
        f"memory: {report['memory']['reads']:,} line reads, {report['memory']['writes']:,} line writes; "
        f"{report['host_seconds']:.2f} s"
    )
    return 0


# Larger than any config-space dump or lspci output of a whole machine: a device file
# (/dev/zero) or the wrong file; reading stops there instead of never.
TPH_INPUT_LIMIT = 16 << 20


# `0000:41:00.0`: the directory sysfs keeps a PCI function's `config` in.
PCI_ADDRESS = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def sysfs_label(path: str) -> str | None:
    """The bus address of a sysfs ``config`` file (``/sys/bus/pci/devices/0000:41:00.0/config``),
    to name the device by; None for any other file."""
    file = Path(path)
    return file.parent.name if file.name == "config" and PCI_ADDRESS.fullmatch(file.parent.name) else None


def cmd_tph(args: argparse.Namespace) -> int:
    name = "stdin" if args.file == "-" else args.file
    label = None if args.file == "-" else sysfs_label(args.file)
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read(TPH_INPUT_LIMIT + 1)
        else:
            with open(args.file, "rb") as source:
                data = source.read(TPH_INPUT_LIMIT + 1)
    except OSError as error:
        raise ScenarioError(f"{name}: cannot read: {error.strerror}") from None
    if len(data) > TPH_INPUT_LIMIT:
        raise ScenarioError(f"{name}: more than {TPH_INPUT_LIMIT >> 20} MiB: not a config-space dump or lspci output")
    try:
        if args.json is None:
            sys.stdout.write(api._core.describe_tph(data, label))
            return 0
        text = json.dumps(json.loads(api._core.tph_devices(data, label)), indent=2) + "\n"
    except ScenarioError as error:
        raise ScenarioError(f"{name}: {error}") from None
    if args.json == "-":
        sys.stdout.write(text)
    else:
        output.write_atomically({Path(args.json): text})
        print(f"wrote {args.json}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from steer import doctor

    root = Path(args.root)
    if not root.is_dir():
        raise ScenarioError(f"--root {args.root}: not a directory")
    checks, host = doctor.diagnose(root, args.pid, args.cpus)
    files: dict[Path, str | bytes] = {}
    if args.json and args.json != "-":
        files[Path(args.json)] = doctor.as_json(checks, root)
    if args.capture:
        files[Path(args.capture)] = host.capture()
    output.write_atomically(files)
    if args.json == "-":
        sys.stdout.write(doctor.as_json(checks, root))
        return 0
    try:
        from rich.console import Console
    except ImportError:  # the plain table (pip install 'steer[rich]' for the wrapped, coloured one)
        Console = None
    if Console is not None and sys.stdout.isatty():
        doctor.rich_table(checks, Console())
    else:
        rows = [[c.area, c.name, c.verdict, c.evidence, c.fix] for c in checks]
        print(output.table(["area", "check", "verdict", "evidence", "fix"], rows))
    for path in files:
        print(f"wrote {path}")
    return 0


class Parser(argparse.ArgumentParser):
    """argparse with bad usage reported as one line (``steer run: error: ...``, exit 2); ``-h``
    shows the usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {output.shortened(message)} (see {self.prog} -h)\n")


class SetFile(argparse.Action):
    """``--set-file FILE``: the file's keys, as dotted paths, appended to ``--set``. A file that
    cannot be read or is not TOML is bad input as a bad scenario is (``steer: error: ...``), not
    bad usage."""

    def __call__(self, parser, namespace, value, option_string=None) -> None:
        try:
            overrides = api.overrides_from_file(value)
        except ScenarioError as error:
            raise ScenarioError(f"--set-file: {error}") from None
        getattr(namespace, self.dest).extend(overrides)


def parser() -> argparse.ArgumentParser:
    top = Parser(
        prog="steer",
        description="Where does I/O data land in the memory hierarchy, and what does that cost?",
    )
    top.add_argument("--version", action="version", version=f"steer {api._core.__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_set(p: argparse.ArgumentParser, allow_large: bool = True) -> None:
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a declared parameter (NAME=VALUE) or any key path (a.b.c=VALUE); repeatable",
        )
        p.add_argument(
            "--set-file",
            dest="set",
            action=SetFile,
            metavar="FILE",
            help="every key of a TOML file as --set KEY=VALUE (the overlay `steer fit` writes); repeatable",
        )
        if not allow_large:
            return
        p.add_argument(
            "--allow-large",
            dest="set",
            action="append_const",
            const="sim.allow_large=true",
            help="run even beyond the limits of simulated time (1 s) and host memory (4 GiB)",
        )

    run = commands.add_parser("run", help="run a scenario file or built-in scenario")
    run.add_argument("scenario", help="scenario file (.toml) or built-in name (see `steer scenarios`)")
    with_set(run)
    output.add_json_option(
        run,
        "write the result as JSON to FILE (and the resolved scenario beside it); without FILE, print JSON to stdout",
    )
    run.add_argument(
        "--format",
        choices=["table", "uprof"],
        default="table",
        help="table (default) or uprof: the per-UMC memory bandwidth table AMD uProf prints",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(handler=cmd_run)

    repro = commands.add_parser("reproduce", help="run the seeds' published experiments: published vs simulated")
    repro.add_argument(
        "--only",
        action="append",
        metavar="PATTERN",
        help="rows whose id matches (glob or substring, e.g. leon); repeatable: rows any of them matches",
    )
    output.add_json_option(
        repro,
        "rows {id, role, source, metric, unit, published, simulated, relation, within} as JSON (to FILE or stdout)",
    )
    with_set(repro)
    repro.add_argument(
        "--sensitivity",
        action="store_true",
        help="for each value marked assumed or calibrated (preset, scenario, kind): rows moved at -20%% and +20%%",
    )
    repro.add_argument(
        "--plot",
        metavar="DIR",
        help="draw simulated against published per unit into DIR/reproduce-parity.png, each row with its target "
        "into DIR/reproduce.png (and seed 001's curves beside them); the rows drawn into DIR/reproduce.json, "
        "which `steer report DIR` shows",
    )
    repro.add_argument("--quiet", action="store_true", help="no progress bar")
    repro.set_defaults(handler=cmd_reproduce)

    compare = commands.add_parser("compare", help="run one scenario under several DMA placements, side by side")
    compare.add_argument("scenario")
    compare.add_argument(
        "--placement",
        help="comma-separated placement policies (see `steer kinds placement`; sdci means l2); "
        "default: every one the scenario's platform and devices accept",
    )
    with_set(compare)
    output.add_json_option(compare, "JSON (one result per placement) to FILE, or to stdout without one")
    compare.add_argument("--quiet", action="store_true", help="no progress bar")
    compare.set_defaults(handler=cmd_compare)

    resolve = commands.add_parser("resolve", help="print a scenario with every default filled in")
    resolve.add_argument("scenario")
    with_set(resolve)
    resolve.set_defaults(handler=cmd_resolve)

    scen = commands.add_parser("scenarios", help="list built-in scenarios")
    output.add_json_option(scen, "[{name, description}] (to FILE or stdout)")
    scen.set_defaults(handler=cmd_scenarios)

    plat = commands.add_parser("platforms", help="list platform presets, or every parameter of one")
    plat.add_argument("name", nargs="?", help="preset to describe")
    with_set(plat)
    output.add_json_option(plat, "[{name, description}], or one preset's [{key, value, meaning}] (to FILE or stdout)")
    plat.set_defaults(handler=cmd_platforms)

    trc = commands.add_parser("trace", help="replay a memory-access trace (din or binary) through one core's caches")
    trc.add_argument("file", help="the trace (din text or steer's binary format); - reads stdin")
    trc.add_argument("--platform", default="turin-9655", help="platform preset (default turin-9655)")
    trc.add_argument("--core", type=int, default=0, help="logical CPU whose hierarchy replays the trace")
    with_set(trc, allow_large=False)
    trc.add_argument("--allow-empty", action="store_true", help="a trace with nothing to replay is not an error")
    output.add_json_option(trc, "JSON to FILE, or to stdout without one")
    trc.add_argument("--quiet", action="store_true", help="no progress bar")
    trc.set_defaults(handler=cmd_trace)

    tph = commands.add_parser(
        "tph", help="decode PCIe TPH from a config-space dump (binary, lspci -xxx/-xxxx) or lspci -vv text"
    )
    tph.add_argument("file", help="the dump or lspci output; - reads stdin")
    output.add_json_option(
        tph,
        "every device {device, source, root_port, completer, requester, list_complete, problems, missing} "
        "as JSON (to FILE or stdout)",
    )
    tph.set_defaults(handler=cmd_tph)

    doc = commands.add_parser("doctor", help="is SDCI / DDIO / DSA usable on this host, and set up right? (read-only)")
    doc.add_argument("--root", default="/", metavar="DIR", help="check a captured tree instead of this host")
    doc.add_argument("--pid", type=int, help="the consuming application: is injection landing on its CPUs?")
    doc.add_argument("--cpus", metavar="LIST", help="the consumer's CPUs (e.g. 0-3,8), instead of --pid")
    output.add_json_option(
        doc,
        "checks {area, name, verdict, evidence, fix} as JSON",
    )
    doc.add_argument(
        "--capture", type=output.file_name, metavar="FILE.tar.gz", help="save exactly the files the checks read"
    )
    doc.set_defaults(handler=cmd_doctor)

    add_host_commands(commands)
    add_workflow_commands(commands, with_set)
    add_registry_commands(commands, with_set)
    add_trace_import_commands(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)  # --set-file reads its file here
        return args.handler(args)
    except ScenarioError as error:
        print(f"steer: error: {output.shortened(str(error))}", file=sys.stderr)
        return 2
    except SteerError as error:
        print(f"steer: {output.shortened(str(error))} (please report it)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("steer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0

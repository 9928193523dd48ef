"""`steer trace-import`: a run of a user's program, traced with Valgrind's lackey
(`--tool=lackey --trace-mem=yes`) or as din, cut into per-packet traces for the `trace`
workload: one per call of the packet handler (from its entry to its return), each access mapped
to the region (packet buffer or program state) it falls in. docs/your-code.md describes the
files it reads and writes."""

from __future__ import annotations

import argparse
import re
import subprocess
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from steer import _core
from steer._core import ScenarioError
from steer.tomlfile import read_text

# `I  04016e0,3` (an instruction) and ` L 7ff000398,8`, ` S ...`, ` M ...` (data), as lackey
# prints them (lk_main.c: "I  %08lx,%lu", " %c %08lx,%lu").
LACKEY_RECORD = re.compile(r"(I |[ ][LSM]) ([0-9a-fA-F]+),(\d+)")
# Din's kinds (trace_records' codes) as lackey's letters.
DIN_KINDS = {0: "L", 1: "S", 2: "I"}
# Instructions per cycle a core sustains on the handler's code between its accesses. Assumed: 2,
# the order of a modern out-of-order core on integer code; measure yours with `perf stat`
# (instructions / cycles) and pass --cycles-per-instruction.
CYCLES_PER_INSTRUCTION = 0.5


@dataclass
class Region:
    name: str
    kind: str
    start: int
    bytes: int

    def holds(self, address: int, size: int) -> bool:
        return self.start <= address and address + size <= self.start + self.bytes


@dataclass
class PacketTrace:
    lines: list[str] = field(default_factory=list)
    # Instructions since the last access, written as compute before the next one.
    instructions: int = 0
    accesses: int = 0
    # One past the highest byte of the packet the handler touched.
    packet_extent: int = 0


def lackey_records(path: str) -> Iterator[tuple[str, int, int]]:
    """(kind I/L/S/M, address, bytes) of a lackey --trace-mem log; Valgrind's own lines
    (`==PID== ...`) are skipped, anything else is an error naming the line."""
    found = False
    with open(path, encoding="utf-8", errors="replace") as log:
        for number, line in enumerate(log, 1):
            line = line.rstrip("\r\n")
            if line.startswith("==") or line.startswith("--") or not line.strip():
                continue
            match = LACKEY_RECORD.fullmatch(line)
            if match is None:
                shown = line[:40] + ("..." if len(line) > 40 else "")
                raise ScenarioError(
                    f"{path}:{number}: not a line of Valgrind lackey --trace-mem output: `{shown}` "
                    "(expected `I  ADDR,SIZE` or ` L|S|M ADDR,SIZE`)"
                )
            found = True
            yield match.group(1).strip(), int(match.group(2), 16), int(match.group(3))
    if not found:
        raise ScenarioError(f"{path}: no lackey record (run valgrind --tool=lackey --trace-mem=yes --log-file=FILE)")


def din_records(path: str) -> Iterator[tuple[str, int, int]]:
    """The records of a din (or steer binary) trace, read by steer's trace reader."""
    for code, address, size in _core.trace_records(path):
        yield DIN_KINDS[code], address, size


def symbols(binary: str) -> dict[str, tuple[int, int]]:
    """Every sized symbol of `binary` as name -> (address, bytes), from `nm -S`."""
    try:
        listed = subprocess.run(
            ["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise ScenarioError("--binary: `nm` not found (install binutils)") from None
    if listed.returncode != 0:
        reason = (listed.stderr.strip().splitlines() or ["failed"])[-1]
        raise ScenarioError(f"--binary: nm {binary}: {reason}")
    found = {}
    for line in listed.stdout.splitlines():
        fields = line.split()
        if len(fields) == 4:
            found[fields[3]] = (int(fields[0], 16), int(fields[1], 16))
    return found


def regions_of(path: str, binary: str | None) -> list[Region]:
    """The region map: each `[[regions]]` with `start` and `bytes`, or a `symbol` of the binary."""
    try:
        data = tomllib.loads(read_text(path, "region map"))
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: invalid TOML: {error}") from None
    entries = data.get("regions")
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{path}: no [[regions]]")
    table = None
    regions = []
    for i, entry in enumerate(entries):
        where = f"{path}: regions.{i}"
        if not isinstance(entry, dict) or entry.get("kind") not in ("packet", "state") or "name" not in entry:
            raise ScenarioError(f'{where}: needs a name and kind = "packet" or "state"')
        if "symbol" in entry:
            if binary is None:
                raise ScenarioError(f"{where}: symbol `{entry['symbol']}` needs --binary to look it up in")
            table = table if table is not None else symbols(binary)
            if entry["symbol"] not in table:
                raise ScenarioError(f"{where}: no symbol `{entry['symbol']}` with a size in {binary}")
            start, size = table[entry["symbol"]]
        elif isinstance(entry.get("start"), int) and isinstance(entry.get("bytes"), int) and entry["bytes"] > 0:
            start, size = entry["start"], entry["bytes"]
        else:
            raise ScenarioError(f"{where}: needs `symbol`, or `start` and `bytes` (at least 1)")
        regions.append(Region(entry["name"], entry["kind"], start, size))
    return regions


def cut(
    records: Iterable[tuple[str, int, int]],
    entry: int,
    within: range | None,
    regions: list[Region],
    cycles_per_instruction: float,
) -> tuple[list[PacketTrace], int]:
    """The per-packet traces of a run and the accesses left out (outside every region).

    A trace starts at an instruction at `entry` reached from outside it. Without `within` it ends
    at the return: the first instruction at the address after the instruction that jumped to the
    entry (the call). With `within` (an address range) it ends at the first instruction outside it.
    """
    traces: list[PacketTrace] = []
    current: PacketTrace | None = None
    return_to = None
    previous = None
    dropped = 0
    for kind, address, size in records:
        if kind == "I":
            if current is None and address == entry:
                current = PacketTrace()
                return_to = None if previous is None else previous[0] + previous[1]
            elif current is not None and (address == return_to if within is None else address not in within):
                traces.append(finish(current, cycles_per_instruction))
                current = None
            if current is not None:
                current.instructions += 1
            previous = (address, size)
            continue
        if current is None:
            continue
        region = next((r for r in regions if r.holds(address, size)), None)
        if region is None:
            dropped += 1
            continue
        if current.instructions:
            current.lines.append(f"C {current.instructions * cycles_per_instruction:g}")
            current.instructions = 0
        current.lines.append(f"{kind} {address:x} {size}")
        current.accesses += 1
        if region.kind == "packet":
            current.packet_extent = max(current.packet_extent, address + size - region.start)
    return traces, dropped


def finish(trace: PacketTrace, cycles_per_instruction: float) -> PacketTrace:
    """The trace with the compute after its last access."""
    if trace.instructions:
        trace.lines.append(f"C {trace.instructions * cycles_per_instruction:g}")
        trace.instructions = 0
    return trace


def write(out: Path, traces: list[PacketTrace], regions: list[Region], packet_bytes: int | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    body = ["# steer per-packet traces (docs/your-code.md), written by steer trace-import"]
    for trace in traces:
        body.append(f"packet {packet_bytes or max(trace.packet_extent, 1)}")
        body.extend(trace.lines)
    (out / "traces.ptrace").write_text("\n".join(body) + "\n")
    lines = ["# Regions of the traced run (docs/your-code.md), written by steer trace-import"]
    for r in regions:
        lines += ["", "[[regions]]", f'name = "{r.name}"', f'kind = "{r.kind}"']
        lines += [f"start = 0x{r.start:x}", f"bytes = {r.bytes}"]
    (out / "regions.toml").write_text("\n".join(lines) + "\n")


def number(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None


def address_range(text: str) -> range:
    start, sep, end = text.partition("-")
    try:
        bounds = range(int(start, 16), int(end, 16))
    except ValueError:
        bounds = range(0)
    if not sep or not bounds:
        raise argparse.ArgumentTypeError(f"expected START-END in hexadecimal, START below END (got {text})")
    return bounds


def cmd_trace_import(args: argparse.Namespace) -> int:
    if (args.function is None) == (args.range is None):
        raise ScenarioError("trace-import: give the packet handler as --function NAME (with --binary) or --range")
    if args.function is not None:
        if args.binary is None:
            raise ScenarioError(f"--function {args.function}: needs --binary to find it in")
        table = symbols(args.binary)
        if args.function not in table:
            raise ScenarioError(f"--function: no symbol `{args.function}` in {args.binary}")
        entry, within = table[args.function][0], None
    else:
        entry, within = args.range.start, args.range
    if args.cycles_per_instruction < 0 or (args.packet_bytes is not None and args.packet_bytes < 1):
        raise ScenarioError("--cycles-per-instruction must be at least 0 and --packet-bytes at least 1")
    regions = regions_of(args.regions, args.binary)
    lackey = args.format == "lackey" or (args.format == "auto" and not args.run.endswith(".din"))
    records = lackey_records(args.run) if lackey else din_records(args.run)
    traces, dropped = cut(records, entry, within, regions, args.cycles_per_instruction)
    marker = args.function or f"{args.range.start:x}-{args.range.stop:x}"
    if not traces:
        raise ScenarioError(f"{args.run}: no call of {marker} (entry 0x{entry:x}) in the run")
    empty = [i for i, t in enumerate(traces) if not t.accesses]
    if empty:
        raise ScenarioError(
            f"{args.run}: call {empty[0] + 1} of {marker} made no access inside the regions of {args.regions}"
        )
    out = Path(args.output)
    write(out, traces, regions, args.packet_bytes)
    accesses = [t.accesses for t in traces]
    print(
        f"{len(traces)} per-packet traces ({min(accesses)} to {max(accesses)} accesses) in {out / 'traces.ptrace'}, "
        f"regions in {out / 'regions.toml'}; {dropped} accesses outside the regions left out (stack, libraries)"
    )
    return 0


def add_commands(commands) -> None:
    """Adds `trace-import` to the `steer` command's subcommands."""
    p = commands.add_parser(
        "trace-import",
        help="cut a lackey or din trace of your program into per-packet traces for the `trace` workload",
    )
    p.add_argument("run", help="the trace: Valgrind lackey --trace-mem=yes log, or din (.din)")
    p.add_argument("--format", choices=["auto", "lackey", "din"], default="auto", help="default: din for .din files")
    p.add_argument("--regions", required=True, metavar="TOML", help="which address ranges are packet and state")
    p.add_argument("--binary", help="the traced program, for symbols (nm) of --function and the region map")
    p.add_argument("--function", metavar="NAME", help="the packet handler: a trace from each call to its return")
    p.add_argument(
        "--range",
        type=address_range,
        metavar="START-END",
        help="the handler's code as hexadecimal addresses: a trace while the run executes inside it",
    )
    p.add_argument(
        "--cycles-per-instruction",
        type=float,
        default=CYCLES_PER_INSTRUCTION,
        help=f"compute per instruction between accesses (default {CYCLES_PER_INSTRUCTION}, assumed: IPC 2)",
    )
    p.add_argument(
        "--packet-bytes",
        type=number,
        help="the size of every traced packet (default: the extent of the packet each trace touched)",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="writes DIR/traces.ptrace, DIR/regions.toml")
    p.set_defaults(handler=cmd_trace_import)

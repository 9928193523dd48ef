"""Runs built-in scenarios with random odd overrides and reports what no user should see.

    .venv/bin/python scripts/fuzz_runs.py [--seed N] [--cases N] [--timeout S] [--structural]
                                          [--accepted] [--quiet]

Each case takes a built-in scenario, picks one or two of its resolved keys and sets each to an odd
value: a scale or neighbour of its own (x1000, /1000, +-1, negated), a 32- or 64-bit limit, or a
value of another type (a string, a list, a table, nan, inf, 1e30). `sim.allow_large` is left
alone, and the window's keys get no scaled values: a long run the user allowed is not odd input.
It runs 30 µs with no warm-up in a child process. Allowed outcomes: a result, or a `SteerError` of
one line. Anything else is reported: another exception (a traceback a user would see), a crash of
the child (a panic that aborts), a run past the timeout, a message of several lines. Exit status 1
if any was found. Progress goes to stderr every 1000 cases.

`--accepted` also prints every accepted override, for a reader to judge what should have been
refused (a rate of 1e-30 GT/s that ran as if unlimited was found that way). Built with overflow
checks (docs/fuzzing.md), an arithmetic overflow in the core becomes a reported crash.

`--structural` changes a scenario's shape instead, one or two edits per case written to a file
and run: a key or a whole table dropped, an entry of a list of tables (a device, a queue, a
workload) repeated or the list emptied, a `kind` changed to another registered name (of any
registry) or none, a parameter of another kind added, an unknown key added, or a key that names
something (a CPU, a device, a queue, a node) pointed elsewhere, or any key set to an odd value as
above (after another edit, a value of a repeated device or workload).
"""

import argparse
import copy
import json
import multiprocessing
import random
import sys
import tempfile
import tomllib
from pathlib import Path

import steer
from steer.api import toml_literal

ODD_VALUES = [
    "0",
    "-1",
    "1e30",
    "18446744073709551616",
    "4294967296",
    "nan",
    "inf",
    "-inf",
    "1e-30",
    "0.5",
    "-0.0",
    '"x"',
    '""',
    "true",
    "[]",
    "{}",
    "[1e30]",
    '["a"]',
    "1",
    "2",
    "3",
    "65",
    "100000",
]
WINDOW = ["sim.measure_us=30", "sim.warmup_us=0"]
# Keys whose value names another part of the scenario or of the machine.
REFERENCES = (
    "cpu",
    "peer_cpu",
    "consumer_cpu",
    "device",
    "queue",
    "numa_node",
    "node",
    "src_node",
    "dst_node",
    "count",
)
REFERENCE_VALUES = ["0", "1", "2", "3", "7", "8", "63", "64", "95", "96", "191", "192", "1000", "-1"]
REFERENCE_VALUES += ['"nic0"', '"nic1"', '"dsa"', '"dsa0"', '""']


def is_list_of_tables(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def literal(text: str) -> object:
    """The value a TOML literal stands for."""
    return tomllib.loads(f"v = {text}")["v"]


def leaves(prefix: str, value: object, out: dict[str, object]) -> None:
    """Every key of a resolved scenario with its value; a list of tables by index."""
    if isinstance(value, dict):
        for key, inner in value.items():
            leaves(f"{prefix}.{key}" if prefix else key, inner, out)
    elif is_list_of_tables(value):
        for index, item in enumerate(value):
            leaves(f"{prefix}.{index}", item, out)
    else:
        out[prefix] = value


def odd_value(rng: random.Random, key: str, original: object) -> str:
    # A window scaled from its own length is a legitimately long run (a second takes minutes).
    scalable = isinstance(original, (int, float)) and not isinstance(original, bool) and not key.startswith("sim.")
    if scalable and rng.random() < 0.6:
        value = rng.choice(
            [original * 1000, original / 1000, original + 1, original - 1, -original, 2**32 - 1, 2**64 - 1]
        )
        if isinstance(original, int) and value == int(value):
            return str(int(value))
        return repr(float(value))
    return rng.choice(ODD_VALUES)


def tables(value: object, path: str = "") -> list[tuple[str, dict]]:
    """Every table of a document with its path, the document itself first."""
    found = []
    if isinstance(value, dict):
        found.append((path, value))
        for key, inner in value.items():
            found += tables(inner, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += tables(item, f"{path}.{index}")
    return found


def lists_of_tables(document: dict) -> list[tuple[str, list]]:
    """Every non-empty list of tables (devices, queues, workloads, ...) with its path."""
    return [
        (f"{path}.{key}" if path else key, value)
        for path, table in tables(document)
        for key, value in table.items()
        if is_list_of_tables(value)
    ]


def edit(rng: random.Random, document: dict, kinds: dict[str, dict[str, list[tuple[str, str]]]]) -> str:
    """Changes the document's shape in one random way; returns what it did, to reproduce by hand."""
    all_tables = tables(document)
    with_keys = [(path, table) for path, table in all_tables if table]
    lists = lists_of_tables(document)
    kinded = [(path, table) for path, table in all_tables if "kind" in table]
    referring = [(path, table, key) for path, table in all_tables for key in table if key in REFERENCES]
    choices = ["drop", "unknown"] + ["repeat", "empty"] * bool(lists) + ["kind", "foreign"] * bool(kinded)
    choices += ["refer"] * bool(referring) + ["value"]
    action = rng.choice(choices)
    if action == "drop":
        path, table = rng.choice(with_keys)
        key = rng.choice(sorted(table))
        del table[key]
        return f"drop {path + '.' if path else ''}{key}"
    if action == "unknown":
        path, table = rng.choice(all_tables)
        table["nonesuch"] = 1
        return f"add {path or '(top)'}.nonesuch"
    if action == "repeat":
        path, items = rng.choice(lists)
        entry = copy.deepcopy(rng.choice(items))
        # Half the time a repeated device gets a name of its own and a workload a CPU of its own, so
        # that two of them get past the checks that refuse the same name or CPU twice.
        renamed = rng.choice([False, True])
        if renamed and isinstance(entry.get("name"), str):
            entry["name"] += str(len(items))
        if renamed and isinstance(entry.get("cpu"), int):
            entry["cpu"] += len(items)
        items.append(entry)
        return f"repeat an entry of {path}{' (renamed)' if renamed else ''}"
    if action == "empty":
        path, items = rng.choice(lists)
        items.clear()
        return f"empty {path}"
    if action in ("kind", "foreign"):
        path, table = rng.choice(kinded)
        if action == "kind":
            names = sorted({name for registry in kinds.values() for name in registry})
            table["kind"] = rng.choice([*names, "", "nonesuch"])
            return f"{path}.kind = {json.dumps(table['kind'])}"
        registry, kind, key, default = rng.choice(
            [
                (registry, kind, key, default)
                for registry in sorted(kinds)
                for kind, params in sorted(kinds[registry].items())
                for key, default in params
            ]
        )
        key = key.split(".")[0]
        table[key] = literal(default) if default != "none" else 1
        return f"{path}.{key} = {default} (of {registry} {kind})"
    if action == "value":
        found: dict[str, object] = {}
        leaves("", document, found)
        path = rng.choice(sorted(found))
        value = odd_value(rng, path, found[path])
        *parents, last = path.split(".")
        parent = document
        for part in parents:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        parent[last] = literal(value)
        return f"{path} = {value}"
    path, table, key = rng.choice(referring)
    value = rng.choice(REFERENCE_VALUES)
    table[key] = literal(value)
    return f"{path}.{key} = {value}"


def document_text(document: dict) -> str:
    """A document as TOML, each top-level key on a line of its own with its value inline."""
    return "".join(f"{json.dumps(key)} = {toml_literal(value)}\n" for key, value in document.items())


def run_case(name: str, overrides: list[str], conn) -> None:
    try:
        steer.run(name, WINDOW + overrides)
        conn.send(("ok", ""))
    except steer.SteerError as error:
        conn.send(("error", str(error)))
    except BaseException as error:  # what the fuzzer looks for: anything but a result or a SteerError
        conn.send(("exception", f"{type(error).__name__}: {error}"))


def outcome(name: str, overrides: list[str], timeout: float) -> tuple[str, str]:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=run_case, args=(name, overrides, sender))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return "timeout", f"past {timeout:g} s"
    if not receiver.poll():
        return "crash", f"exit status {child.exitcode}"
    kind, message = receiver.recv()
    if kind == "error" and "\n" in message:
        return "several lines", message
    return kind, message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a case may take")
    parser.add_argument("--structural", action="store_true", help="change the scenarios' shape, not their values")
    parser.add_argument("--accepted", action="store_true", help="print every accepted override")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    documents = {name: tomllib.loads(steer.resolve(name)) for name, _ in steer.scenarios()}
    keys = {}
    for name, document in documents.items():
        keys[name] = {}
        leaves("", document, keys[name])
        del keys[name]["sim.allow_large"]  # a user's consent to a long run: not odd input
    kinds: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for entry in steer.catalog():
        kinds.setdefault(entry["registry"], {})[entry["name"]] = [(key, default) for key, default, _ in entry["params"]]
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for case in range(args.cases):
            if not args.quiet and case and case % 1000 == 0:
                print(f"{case} of {args.cases} cases", file=sys.stderr, flush=True)
            name = rng.choice(sorted(keys))
            if args.structural:
                document = copy.deepcopy(documents[name])
                overrides = [edit(rng, document, kinds) for _ in range(rng.choice([1, 1, 2]))]
                scenario = Path(scratch) / f"{name}.toml"
                scenario.write_text(document_text(document), encoding="utf-8")
                kind, message = outcome(str(scenario), [], args.timeout)
                described = f"{name} [{'; '.join(overrides)}]"
            else:
                chosen = rng.sample(sorted(keys[name]), k=rng.choice([1, 1, 2]))
                overrides = [f"{key}={odd_value(rng, key, keys[name][key])}" for key in chosen]
                kind, message = outcome(name, overrides, args.timeout)
                described = f"{name} {' '.join(overrides)}"
            counts[kind] = counts.get(kind, 0) + 1
            if kind not in ("ok", "error") or (kind == "ok" and args.accepted):
                print(f"{kind}: {described}{': ' + message if message else ''}", flush=True)
    print(", ".join(f"{count} {kind}" for kind, count in sorted(counts.items())))
    return 1 if set(counts) - {"ok", "error"} else 0


if __name__ == "__main__":
    sys.exit(main())

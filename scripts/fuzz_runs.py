"""Runs built-in scenarios with random odd overrides and reports what no user should see.

    .venv/bin/python scripts/fuzz_runs.py [--seed N] [--cases N] [--timeout S] [--accepted] [--quiet]

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
"""

import argparse
import multiprocessing
import random
import sys
import tomllib

import steer

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


def leaves(prefix: str, value: object, out: dict[str, object]) -> None:
    """Every key of a resolved scenario with its value; a list of tables by index."""
    if isinstance(value, dict):
        for key, inner in value.items():
            leaves(f"{prefix}.{key}" if prefix else key, inner, out)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
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
    parser.add_argument("--accepted", action="store_true", help="print every accepted override")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    keys = {}
    for name, _ in steer.scenarios():
        keys[name] = {}
        leaves("", tomllib.loads(steer.resolve(name)), keys[name])
        del keys[name]["sim.allow_large"]  # a user's consent to a long run: not odd input
    counts: dict[str, int] = {}
    for case in range(args.cases):
        if not args.quiet and case and case % 1000 == 0:
            print(f"{case} of {args.cases} cases", file=sys.stderr, flush=True)
        name = rng.choice(sorted(keys))
        chosen = rng.sample(sorted(keys[name]), k=rng.choice([1, 1, 2]))
        overrides = [f"{key}={odd_value(rng, key, keys[name][key])}" for key in chosen]
        kind, message = outcome(name, overrides, args.timeout)
        counts[kind] = counts.get(kind, 0) + 1
        if kind not in ("ok", "error") or (kind == "ok" and args.accepted):
            print(f"{kind}: {name} {' '.join(overrides)}{': ' + message if message else ''}", flush=True)
    print(", ".join(f"{count} {kind}" for kind, count in sorted(counts.items())))
    return 1 if set(counts) - {"ok", "error"} else 0


if __name__ == "__main__":
    sys.exit(main())

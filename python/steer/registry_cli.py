"""The `steer kinds` and `steer stats` commands: what steer's registries hold, and what a
scenario's results report, both read from the core's declarations."""

from __future__ import annotations

import argparse

from steer import api, output

# The core's registries, in the order it lists them.
REGISTRIES = tuple(dict.fromkeys(entry["registry"] for entry in api.catalog(None)))


def cmd_kinds(args: argparse.Namespace) -> int:
    entries = api.catalog(args.registry)
    if args.name is not None:
        chosen = [e for e in entries if e["name"] == args.name]
        if not chosen:
            known = ", ".join(e["name"] for e in entries)
            raise api.ScenarioError(f"{args.registry}: no entry `{args.name}` (known: {known})")
        entries = chosen
    if args.json:
        output.emit_json(args.json, entries, sort_keys=False)
        return 0
    if args.markdown:
        print(markdown(entries))
        return 0
    print(
        output.table(
            ["registry", "name", "description"], [[e["registry"], e["name"], e["description"]] for e in entries]
        )
    )
    if args.name is not None and entries[0]["params"]:
        print()
        print(output.table(["key", "default", "meaning"], [list(p) for p in entries[0]["params"]]))
    return 0


def markdown(entries: list[dict]) -> str:
    """The entries as Markdown tables, one per registry (the README's generated section)."""
    parts = []
    for registry in REGISTRIES:
        rows = [e for e in entries if e["registry"] == registry]
        if not rows:
            continue
        lines = [f"**{registry}**", "", "| name | description |", "|---|---|"]
        lines += [f"| `{e['name']}` | {e['description'].replace('|', '/')} |" for e in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def cmd_stats(args: argparse.Namespace) -> int:
    schema = api.result_schema(args.scenario, args.set)
    if args.json:
        output.emit_json(
            args.json, [{"key": k, "unit": u, "meaning": m} for k, (u, m) in schema.items()], sort_keys=False
        )
        return 0
    print(output.table(["key", "unit", "meaning"], [[k, u, m] for k, (u, m) in schema.items()]))
    return 0


def add_commands(commands, with_set) -> None:
    """Adds `kinds` and `stats` to the `steer` command's subcommands."""
    kinds = commands.add_parser("kinds", help="list steer's registries: workload and device kinds, policies, presets")
    kinds.add_argument("registry", nargs="?", choices=REGISTRIES, help="only this registry")
    kinds.add_argument("name", nargs="?", help="one entry, with its parameters and their defaults")
    output.add_json_option(kinds, "[{registry, name, description, params}] (to FILE or stdout)")
    kinds.add_argument("--markdown", action="store_true", help="Markdown tables (as in the README)")
    kinds.set_defaults(handler=cmd_kinds)

    stats = commands.add_parser("stats", help="every key a scenario's results have, with its unit and meaning")
    stats.add_argument("scenario", nargs="?", default="rx-default", help="scenario file or built-in name")
    with_set(stats)
    output.add_json_option(stats, "[{key, unit, meaning}] (to FILE or stdout)")
    stats.set_defaults(handler=cmd_stats)

"""`steer reproduce --sensitivity`: how far each `steer reproduce` row moves when one parameter that
no source fixes (marked `assumed` or `calibrated` in its preset, in a built-in scenario the rows
run, or in the documentation of a device or workload kind such a scenario uses) changes by -20% and
+20%.

Only the runs on that parameter's platform (or of that scenario) change; the others are shared with
the base run. The table says which assumptions the headline rows rest on.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from steer import api, reproduce

FACTORS = (0.8, 1.2)
MARK = re.compile(r"#.*\b(assumed|calibrated)\b")


@dataclass(frozen=True)
class Parameter:
    """A numeric value marked `assumed` or `calibrated` in its comment: of a preset (`preset` is
    its name) or of a scenario file (`scenario` is its name, `preset` empty)."""

    preset: str
    key: str
    value: int | float
    mark: str
    scenario: str = ""

    def scaled(self, factor: float) -> str:
        """The override setting it `factor` times its value (integers stay integers, at least 1)."""
        path = self.key if self.scenario else f"platform.{self.key}"
        if isinstance(self.value, int):
            return f"{path}={max(1, round(self.value * factor))}"
        return f"{path}={self.value * factor:g}"

    @property
    def owner(self) -> str:
        return self.scenario or self.preset

    def to_dict(self) -> dict:
        where = {"scenario": self.scenario} if self.scenario else {"preset": self.preset}
        return {**where, "key": self.key, "value": self.value, "mark": self.mark}


def marked_parameters(preset: str, source: str, scenario: str = "") -> list[Parameter]:
    """The numeric, non-zero values of a preset (or scenario) file whose comment marks them. In
    arrays of tables (a scenario's `[[workloads]]`) a key names its element: `workloads.0.x`; a
    scenario's `[params]` are named as they are set, by their own name."""
    parsed = tomllib.loads(source)
    section = ""
    seen: dict[str, int] = {}
    found = []
    for line in source.splitlines():
        header = re.match(r"\s*\[(\[?)([\w.]+)\]", line)
        if header:
            section = table_path(parsed, header.group(2).split("."), seen, bool(header.group(1)))
            continue
        entry = re.match(r"\s*(\w+)\s*=", line)
        mark = MARK.search(line)
        if not entry or not mark:
            continue
        key = f"{section}.{entry.group(1)}" if section else entry.group(1)
        value = parsed
        for part in key.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        if scenario and section == "params":
            key = entry.group(1)  # a scenario's own parameter is set by its name
        if scalable(value):
            found.append(Parameter(preset, key, value, mark.group(1), scenario))
    return found


# Where a scenario lists its kinds, the registry they are in, and the kind of an entry that names none.
KIND_TABLES = (("devices", "device", "nic"), ("workloads", "workload", None))
DOC_MARK = re.compile(r"\b(assumed|calibrated)\b", re.IGNORECASE)


def kind_defaults(source: str, scenario: str, docs: dict[tuple[str, str], list]) -> list[Parameter]:
    """The defaults a scenario's devices and workloads run with that their kind's documentation
    marks `assumed` or `calibrated` (`docs`: each kind's `(key, default, meaning)`, by registry and
    name), where the scenario does not set the key itself (then its own mark, if any, counts)."""
    parsed = tomllib.loads(source)
    found = []
    for table, registry, default_kind in KIND_TABLES:
        for i, entry in enumerate(parsed.get(table, [])):
            for key, default, meaning in docs.get((registry, entry.get("kind", default_kind)), []):
                mark = DOC_MARK.search(meaning)
                value = number(default)
                if mark and value is not None and key not in entry:
                    found.append(Parameter("", f"{table}.{i}.{key}", value, mark.group(1).lower(), scenario))
    return found


def number(text: str) -> int | float | None:
    """A documented default as a number to scale: None if it is not one, or is zero."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return None
    return value if scalable(value) else None


def scalable(value: object) -> bool:
    """Whether a value can be varied by a factor: a number (not a flag) other than zero."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value != 0


def table_path(parsed: dict, parts: list[str], seen: dict[str, int], array: bool) -> str:
    """The dotted path of a table header, with the index of each array-of-tables element it is in:
    the element the last `[[...]]` header opened (`seen` counts them)."""
    path: list[str] = []
    node = parsed
    for i, part in enumerate(parts):
        node = node[part]
        path.append(part)
        if isinstance(node, list):
            name = ".".join(path)
            if array and i == len(parts) - 1:
                seen[name] = seen.get(name, -1) + 1
            index = seen.get(name, len(node) - 1)
            node = node[index]
            path.append(str(index))
    return ".".join(path)


class ChangedRunner(reproduce.Runner):
    """Runs every experiment as the base runner did, re-running with `common` overrides only those
    the parameter belongs to: whose platform is its preset, or of its scenario."""

    def __init__(self, base: reproduce.Runner, parameter: Parameter, common: Iterable[str]) -> None:
        super().__init__(base.progress, common)
        self.base = base
        self.parameter = parameter

    def run(self, scenario: str, *overrides: str) -> dict:
        result = self.base.run(scenario, *overrides)
        return super().run(scenario, *overrides) if changes(self.parameter, scenario, result) else result


def changes(parameter: Parameter, scenario: str, result: dict) -> bool:
    """Whether a run (its scenario, its base result) depends on the parameter."""
    return scenario == parameter.scenario if parameter.scenario else result["platform"] == parameter.preset


@dataclass(frozen=True)
class Sensitivity:
    parameter: Parameter
    # Per factor, each row's move (simulated at the factor minus the base), by row id; None where
    # the changed value is not a valid one.
    moves: dict[float, dict[str, float] | None]

    def to_dict(self) -> dict:
        return {**self.parameter.to_dict(), "moves": {f"{factor:g}": moves for factor, moves in self.moves.items()}}

    def largest(self, factor: float) -> tuple[str, float]:
        row, move = max(self.moves[factor].items(), key=lambda item: abs(item[1]), default=("", 0.0))
        return row, move


def sensitivity(
    only: reproduce.Only = None, progress: Callable[[str, float], None] | None = None
) -> tuple[list[reproduce.Row], list[Sensitivity]]:
    """The base rows and, for every marked parameter of a preset, of a scenario the rows run or of
    its kinds, their moves. `progress(stage, fraction)` is told the fraction of a stage's runs done:
    stage `base rows`, then `changes` (every run a changed value touches)."""
    stage, ran, total = "base rows", 0, reproduce.planned_runs(only)

    def count(_label: str) -> None:
        nonlocal ran
        ran += 1
        if progress:
            progress(stage, min(ran / total, 0.99))

    base_runner = reproduce.Runner(count)
    base = reproduce.reproduce(only, runner=base_runner)
    if not base:
        raise api.ScenarioError(f"{reproduce.only_text(only)}: no row matches")
    presets = sorted({result["platform"] for result in base_runner.cache.values()})
    scenarios = sorted({scenario for scenario, _ in base_runner.cache})
    parameters = [p for preset in presets for p in marked_parameters(preset, api.preset_source(preset))]
    docs = {(e["registry"], e["name"]): e["params"] for e in api.catalog()}
    for scenario in scenarios:
        source = api.scenario_source(scenario)[0]
        parameters += marked_parameters("", source, scenario) + kind_defaults(source, scenario, docs)
    runs = base_runner.cache.items()
    stage, ran = "changes", 0
    total = len(FACTORS) * sum(changes(p, scenario, r) for p in parameters for (scenario, _), r in runs)
    results = []
    for parameter in parameters:
        moves = {}
        for factor in FACTORS:
            runner = ChangedRunner(base_runner, parameter, [parameter.scaled(factor)])
            try:
                rows = reproduce.reproduce(only, runner=runner)
            except api.ScenarioError:
                moves[factor] = None  # no valid value there (a power of two, say)
                continue
            moves[factor] = {r.id: r.simulated - b.simulated for r, b in zip(rows, base, strict=True)}
        results.append(Sensitivity(parameter, moves))
    return base, results


def table_rows(results: list[Sensitivity]) -> list[list[str]]:
    rows = []
    for s in results:
        cells = [s.parameter.owner, s.parameter.key, f"{s.parameter.value:g}", s.parameter.mark]
        for factor in FACTORS:
            if s.moves[factor] is None:
                cells.append("not a valid value")
                continue
            row, move = s.largest(factor)
            cells.append(f"{move:+.2f} {row}" if abs(move) >= 0.005 else "0")
        rows.append(cells)
    return rows


HEADERS = ["preset or scenario", "parameter", "value", "mark", "largest move at -20%", "largest move at +20%"]

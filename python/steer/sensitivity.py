"""`steer reproduce --sensitivity`: how far each `steer reproduce` row moves when one parameter that
no source fixes (marked `assumed` or `calibrated` in its preset) changes by -20% and +20%.

Only the runs on that parameter's platform change; the others are shared with the base run. The
table says which assumptions the headline rows rest on.
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
    """A numeric preset value marked `assumed` or `calibrated` in its comment."""

    preset: str
    key: str
    value: int | float
    mark: str

    def scaled(self, factor: float) -> str:
        """The override setting it `factor` times its value (integers stay integers, at least 1)."""
        if isinstance(self.value, int):
            return f"platform.{self.key}={max(1, round(self.value * factor))}"
        return f"platform.{self.key}={self.value * factor:g}"

    def to_dict(self) -> dict:
        return {"preset": self.preset, "key": self.key, "value": self.value, "mark": self.mark}


def marked_parameters(preset: str, source: str) -> list[Parameter]:
    """The numeric, non-zero values of a preset file whose comment marks them."""
    parsed = tomllib.loads(source)
    section = ""
    found = []
    for line in source.splitlines():
        header = re.match(r"\s*\[([\w.]+)\]", line)
        if header:
            section = header.group(1)
            continue
        entry = re.match(r"\s*(\w+)\s*=", line)
        mark = MARK.search(line)
        if not entry or not mark:
            continue
        key = f"{section}.{entry.group(1)}" if section else entry.group(1)
        value = parsed
        for part in key.split("."):
            value = value[part]
        if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
            continue
        found.append(Parameter(preset, key, value, mark.group(1)))
    return found


class PlatformRunner(reproduce.Runner):
    """Runs every experiment as the base runner did, re-running with `common` overrides only those
    whose platform is `preset`."""

    def __init__(self, base: reproduce.Runner, preset: str, common: Iterable[str]) -> None:
        super().__init__(base.progress, common)
        self.base = base
        self.preset = preset

    def run(self, scenario: str, *overrides: str) -> dict:
        result = self.base.run(scenario, *overrides)
        return super().run(scenario, *overrides) if result["platform"] == self.preset else result


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
    only: str | None = None, progress: Callable[[str], None] | None = None
) -> tuple[list[reproduce.Row], list[Sensitivity]]:
    """The base rows and, for every marked parameter of a preset the rows run on, their moves."""
    base_runner = reproduce.Runner(progress)
    base = reproduce.reproduce(only, runner=base_runner)
    presets = sorted({result["platform"] for result in base_runner.cache.values()})
    results = []
    for preset in presets:
        for parameter in marked_parameters(preset, api.preset_source(preset)):
            moves = {}
            for factor in FACTORS:
                runner = PlatformRunner(base_runner, preset, [parameter.scaled(factor)])
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
        cells = [s.parameter.preset, s.parameter.key, f"{s.parameter.value:g}", s.parameter.mark]
        for factor in FACTORS:
            if s.moves[factor] is None:
                cells.append("not a valid value")
                continue
            row, move = s.largest(factor)
            cells.append(f"{move:+.2f} {row}" if abs(move) >= 0.005 else "0")
        rows.append(cells)
    return rows


HEADERS = ["preset", "parameter", "value", "mark", "largest move at -20%", "largest move at +20%"]

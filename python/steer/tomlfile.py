"""TOML input files other than scenarios (sweep files, fit files, ``--set-file`` values), read as
the simulator reads a scenario file: UTF-8 with or without a byte-order mark, and a file that is
not UTF-8 named as such rather than by the codec's own words."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from steer._core import ScenarioError


def read_text(path: str | Path, what: str = "") -> str:
    """The file's text (without a byte-order mark). Raises ScenarioError as one line:
    ``PATH: cannot read WHAT: REASON``."""
    cannot = f"{path}: cannot read{' ' + what if what else ''}"
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ScenarioError(f"{cannot}: {error.strerror or error}") from None
    try:
        # A byte-order mark is allowed before UTF-8 text (Windows editors write one); TOML's
        # grammar has no place for it, so it goes here.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ScenarioError(f"{cannot}: not UTF-8 text") from None


def read(path: str | Path, what: str = "") -> tuple[dict[str, Any], str]:
    """The parsed file and its text (without a byte-order mark). Raises ScenarioError as one line:
    ``PATH: cannot read WHAT: REASON`` or ``PATH: invalid TOML: ...``."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: invalid TOML: {error}") from None


def dotted(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested TOML tables as dotted keys, so ``[grid.sim] measure_us`` means ``sim.measure_us``."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat

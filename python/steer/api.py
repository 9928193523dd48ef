"""The Python API: scenarios by path or built-in name, runs, platforms."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from steer import _core
from steer._core import ScenarioError
from steer.output import shortened
from steer.result import Result

# What a function taking overrides accepts: KEY=VALUE strings (one string is one), or a mapping.
Overrides = Iterable[str] | Mapping[str, object]


def scenarios() -> list[tuple[str, str]]:
    """Built-in scenarios as ``(name, description)`` pairs."""
    return [(name, description) for name, description, _ in _core.builtin_scenarios()]


def platforms() -> list[tuple[str, str]]:
    """Platform presets as ``(name, description)`` pairs."""
    return [(name, description) for name, description, _ in _core.platform_presets()]


def preset_source(name: str) -> str:
    """The commented TOML file of preset ``name`` (each value with its source or its mark)."""
    sources = {preset: source for preset, _, source in _core.platform_presets()}
    if not sources.get(name):
        raise ScenarioError(f"no preset file `{name}` (known: {', '.join(p for p, s in sources.items() if s)})")
    return sources[name]


def describe_platform(name: str, overrides: Overrides = ()) -> list[tuple[str, str, str]]:
    """Every parameter of preset ``name`` as ``(key, value, meaning)``, after ``KEY=VALUE`` overrides."""
    return _core.describe_platform(name, override_list(overrides))


def catalog(registry: str | None = None) -> list[dict]:
    """Every registered kind, policy, preset and built-in scenario, from steer's registries:
    ``{registry, name, description, params: [(key, default, meaning)]}``, optionally of one
    registry (``workload``, ``device``, ``placement``, ``copy``, ``cache-placement``, ``replacement``, ``prefetcher``,
    ``preset``, ``scenario``)."""
    entries = [
        {"registry": reg, "name": name, "description": description, "params": params}
        for reg, name, description, params in _core.catalog()
    ]
    if registry is None:
        return entries
    known = sorted({e["registry"] for e in entries})
    if registry not in known:
        raise ScenarioError(f"no registry `{registry}` (known: {', '.join(known)})")
    return [e for e in entries if e["registry"] == registry]


def result_schema(scenario: str | Path, overrides: Overrides = (), **params: object) -> dict[str, tuple[str, str]]:
    """Every key the results of a scenario have, with its unit and meaning, without running it:
    ``{key: (unit, meaning)}``, list indices and CPU numbers written ``*``."""
    from steer.result import schema_of

    text, origin, name = scenario_source(scenario)
    return schema_of(text, origin, name, overrides_from(overrides, params))


def scenario_source(scenario: str | Path) -> tuple[str, str, str]:
    """Finds a scenario: a file path first (it exists, ends in ``.toml`` or has a ``/``), else a
    built-in name.

    Returns ``(text, origin, default_name)``; raises ScenarioError with a one-line message if there
    is neither, or if the file cannot be read.

    A named pipe (``steer run <(make-scenario)``, ``mkfifo``) is read here rather than by the
    core: the core's read waits for a writer through Ctrl-C, Python's is stopped by it.
    """
    name = str(scenario)
    if Path(name).is_fifo():
        from steer.tomlfile import read_text

        return read_text(name, "scenario"), name, Path(name).stem
    return _core.find_scenario(name)


def trace(
    path: str | Path,
    platform: str = "turin-9655",
    cpu: int = 0,
    overrides: Overrides = (),
    allow_empty: bool = False,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Replays a memory-access trace (Dinero din text or steer's binary format) through one CPU's
    cache hierarchy of a platform preset; returns hits, misses and writebacks per level.

    ``overrides`` are ``KEY=VALUE`` strings relative to the platform (``l2.size_kib=512``, or
    as a scenario spells them, ``platform.l2.size_kib=512``). A trace with no access to replay
    (empty, comments or skipped records only, a binary file that is only its magic) raises
    ScenarioError unless ``allow_empty``. ``path`` ``"-"`` reads the trace from standard input
    (either format, as a stream). ``progress(fraction of the file)`` is called now and then (not
    for standard input, whose length is unknown); Ctrl-C stops the replay with KeyboardInterrupt.
    """
    cpu = python_value(cpu)
    if isinstance(cpu, bool) or not isinstance(cpu, int) or not 0 <= cpu < 2**32:
        raise ScenarioError(shortened(f"cpu: expected a logical CPU number (got {cpu!r})"))
    report = json.loads(_core.replay_trace(str(path), platform, cpu, override_list(overrides), progress))
    if report["accesses"] == 0 and not allow_empty:
        count = report["skipped"]
        skipped = f" ({count:,} record{'' if count == 1 else 's'} skipped)" if count else ""
        name = "stdin" if str(path) == "-" else path
        raise ScenarioError(f"{name}: nothing to replay: no data accesses{skipped}; allow_empty accepts it")
    return report


def python_value(value: object) -> object:
    """A value as the plain Python value it holds: a numpy scalar, 0-d array or array (anything
    with ``tolist()`` that is not already a str, list, tuple or mapping) as a Python number, bool
    or list, so that values from numpy and pandas pass where Python's do; numpy itself is not
    needed for it. Other values are returned as they are."""
    if isinstance(value, (str, bytes, list, tuple, Mapping)):
        return value
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value


def toml_literal(value: object) -> str:
    """A Python value (numpy's included, see :func:`python_value`) as a TOML literal for a
    ``--set`` override."""
    value = python_value(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    # int() and float() first: a subclass's repr (an IntEnum's) is not its number.
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        # An inline table, as `--set 'platform.l3.way_masks=[{agent = "cpu:1", mask = 3}]'` writes it.
        return "{" + ", ".join(f"{json.dumps(key)} = {toml_literal(v)}" for key, v in value.items()) + "}"
    raise ScenarioError(shortened(f"cannot express {value!r} as a scenario value"))


def overrides_from(overrides: Overrides, params: dict[str, object]) -> list[str]:
    """``KEY=VALUE`` overrides followed by one per keyword parameter."""
    return override_list(overrides) + override_list(params)


def override_list(overrides: Overrides) -> list[str]:
    """``KEY=VALUE`` overrides as a list; one string is one override, not its characters, and a
    mapping gives one per key (``{"sim.measure_us": 500}``), each value written as a keyword
    parameter's is."""
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping):
        return [f"{key}={toml_literal(value)}" for key, value in overrides.items()]
    if not isinstance(overrides, Iterable):
        raise TypeError(f"overrides: expected KEY=VALUE strings or a mapping of keys to values, not {overrides!r}")
    return list(overrides)


def overrides_from_file(path: str | Path) -> list[str]:
    """A TOML file's values as ``KEY=VALUE`` overrides, nested tables as dotted key paths."""
    from steer import tomlfile

    data, _ = tomlfile.read(path)

    return override_list(tomlfile.dotted(data))


def resolve(scenario: str | Path, overrides: Overrides = (), **params: object) -> str:
    """The fully resolved scenario (every default filled in) as TOML text."""
    text, origin, name = scenario_source(scenario)
    return _core.resolve_scenario(text, origin, name, overrides_from(overrides, params))


def run_with_resolved(
    scenario: str | Path,
    overrides: Overrides = (),
    progress: Callable[[float], None] | None = None,
    **params: object,
) -> tuple[dict, str]:
    """Runs a scenario; returns ``(result, resolved scenario TOML)``."""
    text, origin, name = scenario_source(scenario)
    result, resolved = _core.run_scenario(text, origin, name, overrides_from(overrides, params), progress)
    return json.loads(result), resolved


def run(
    scenario: str | Path,
    overrides: Overrides = (),
    progress: Callable[[float], None] | None = None,
    **params: object,
) -> Result:
    """Runs a scenario file or built-in scenario and returns its :class:`~steer.result.Result`.

    ``overrides`` are ``KEY=VALUE`` strings as on the command line (``sim.measure_us=500``; one
    string alone is one override), or a mapping of keys to values (``{"sim.measure_us": 500}``);
    keyword arguments set the scenario's declared parameters (``placement="l2"``). The result
    reads like the JSON dict (``result["dram"]["read_gbps"]``) and has typed views
    (``result.dram.read_gbps``, ``result.fills``, ``result.devices``, ``result.to_frame()``).
    """
    result, resolved = run_with_resolved(scenario, overrides, progress, **params)
    return Result(result, resolved)

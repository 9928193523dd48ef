"""The result of one run: the JSON dict, readable by key as before, with views on top.

Every key a run reports is declared in steer's core with a unit and a meaning; the views read
the result through that declaration (``result.schema``), so a key that does not exist is a
clear error, never a silent NaN.

>>> result = steer.run("rx-default", placement="l2")
>>> result["dram"]["read_gbps"] == result.dram.read_gbps == result.dram["read_gbps"]
True
>>> result.fills[1]["l2"]          # fraction of CPU 1's demand accesses satisfied by its L2
>>> result.unit("dram.read_gbps"), result.meaning("dram.read_gbps")
('GB/s', 'DRAM read bandwidth')
>>> result.to_frame()              # one row, the same columns as steer.load() gives per run
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Iterator, Mapping
from typing import Any

from steer import _core

# Where demand accesses can be satisfied, nearest first (the core's own list).
FILL_SOURCES: tuple[str, ...] = tuple(_core.FILL_SOURCES)


def schema_key(path: str) -> str:
    """A result key path with list indices and the numbers of CPUs written as ``*``, as
    :func:`schema_of` lists keys (``cores.*.fills.l2``, ``dram.channels.*.read_gbps``)."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)", "*", path)


def schema_of(
    text: str, origin: str, name: str, overrides: list[str] | tuple[str, ...] = ()
) -> dict[str, tuple[str, str]]:
    """Every key the results of a scenario have, as ``{key: (unit, meaning)}`` with indices and
    CPU numbers written ``*``."""
    return {
        schema_key(key): (unit, meaning)
        for key, unit, meaning in _core.result_schema(text, origin, name, list(overrides))
    }


class View(Mapping):
    """A part of a result: its keys as items and as attributes; nested parts are views too.

    A key the result does not have raises ``KeyError`` (``AttributeError`` for attributes)
    naming the full key and the keys that are there.
    """

    __slots__ = ("_data", "_path")

    def __init__(self, data: Mapping[str, Any], path: str) -> None:
        self._data = data
        self._path = path

    def _wrap(self, key: str, value: Any) -> Any:
        path = f"{self._path}.{key}" if self._path else key
        if isinstance(value, Mapping):
            return View(value, path)
        if isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
            return tuple(View(item, f"{path}.{i}") for i, item in enumerate(value))
        return value

    def _missing(self, key: str) -> str:
        path = f"{self._path}.{key}" if self._path else key
        return f"{path}: not in this result (here: {', '.join(self._data) or 'nothing'})"

    def __getitem__(self, key: str) -> Any:
        if key not in self._data:
            raise KeyError(self._missing(key))
        return self._wrap(key, self._data[key])

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        if key not in self._data:
            raise AttributeError(self._missing(key))
        return self._wrap(key, self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<{self._path or 'result'}: {', '.join(self._data)}>"


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested result as one level of dotted keys: ``dram.read_gbps``, ``cores.1.fills.l2``.

    Lists of tables become numbered keys (``dram.channels.0.read_gbps``); lists of plain values
    stay whole in one cell.
    """
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{path}."))
        elif isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
            for index, item in enumerate(value):
                flat.update(flatten(item, f"{path}.{index}."))
        else:
            flat[path] = value
    return flat


class Result(dict):
    """The result of one run.

    It is the JSON dict itself (``result["dram"]["read_gbps"]``, ``json.dumps(result)``, ``==``
    with a dict all work), with views on top: ``dram``, ``caches``, ``sim`` and any other part
    as attributes; ``cores`` and ``devices`` keyed by CPU number and device name; ``fills``;
    ``unit(key)``, ``meaning(key)`` and ``schema`` from the declarations; ``to_dict()`` for a deep
    copy as plain dicts, ``to_frame()`` for a one-row pandas DataFrame. ``resolved`` is the
    scenario that ran, as TOML, when known.
    """

    __slots__ = ("resolved", "_schema")

    def __init__(self, data: Mapping[str, Any] = (), resolved: str | None = None) -> None:
        super().__init__(data)
        self.resolved = resolved
        self._schema: dict[str, tuple[str, str]] | None = None

    def __reduce__(self):
        # Results cross process boundaries (sweeps): rebuild from the data and the scenario.
        return (Result, (dict(self), self.resolved))

    def __missing__(self, key: str) -> Any:
        raise KeyError(View(self, "")._missing(key))

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_") or key not in self:
            raise AttributeError(View(self, "")._missing(key) if not key.startswith("_") else key)
        return View(self, "")[key]

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the result as plain dicts and lists, ready for ``json.dumps``."""
        return copy.deepcopy(dict(self))

    @property
    def scenario(self) -> str:
        """The scenario's name."""
        return self.get("scenario", "")

    @property
    def platform(self) -> str:
        """The platform's name."""
        return self.get("platform", "")

    @property
    def cores(self) -> dict[int, View]:
        """Every CPU that ran a workload, by CPU number."""
        return {int(cpu): View(data, f"cores.{cpu}") for cpu, data in self.get("cores", {}).items()}

    @property
    def fills(self) -> dict[int, dict[str, float]]:
        """Per CPU, the fraction of its demand accesses satisfied at each source (``l1`` … ``dram``)."""
        return {int(cpu): dict(data["fills"]) for cpu, data in self.get("cores", {}).items()}

    @property
    def devices(self) -> dict[str, View]:
        """Every device by name."""
        return {name: View(data, f"devices.{name}") for name, data in self.get("devices", {}).items()}

    @property
    def stalls(self) -> list[dict[str, Any]]:
        """Agents that stopped making progress (``agent``, ``since_ns``, ``reason``)."""
        return list(self.get("sim", {}).get("stalls", []))

    @property
    def schema(self) -> dict[str, tuple[str, str]]:
        """Every key the run reports, as ``{key: (unit, meaning)}`` (indices written ``*``)."""
        if self._schema is None:
            if self.resolved is None:
                raise KeyError("this result carries no scenario to read its schema from")
            self._schema = schema_of(self.resolved, "resolved scenario", self.scenario or "scenario")
        return self._schema

    def _declared(self, key: str) -> tuple[str, str]:
        declared = self.schema.get(schema_key(key))
        if declared is None:
            raise KeyError(f"{key}: no such key in this run's results (see result.schema)")
        return declared

    def unit(self, key: str) -> str:
        """The unit of a dotted key (``dram.read_gbps`` -> ``GB/s``)."""
        return self._declared(key)[0]

    def meaning(self, key: str) -> str:
        """What a dotted key means."""
        return self._declared(key)[1]

    def flat(self) -> dict[str, Any]:
        """The result as one level of dotted keys (see :func:`flatten`)."""
        return flatten(self)

    def to_frame(self):
        """A one-row pandas DataFrame with one column per dotted key (needs pandas)."""
        from steer.optional import require

        pandas = require("pandas", "a DataFrame view")
        return pandas.DataFrame([self.flat()])

    def __repr__(self) -> str:
        dram = self.get("dram", {})
        summary = ""
        if "read_gbps" in dram and "write_gbps" in dram:
            summary = f", DRAM read {dram['read_gbps']:.2f} GB/s, write {dram['write_gbps']:.2f} GB/s"
        return f"<Result {self.scenario!r} on {self.platform!r}{summary}>"

    def _repr_html_(self) -> str:
        """A compact summary for Jupyter: DRAM, devices, and fill sources per CPU."""
        e = html.escape
        dram = self.get("dram", {})
        rows = [
            f"<p><b>{e(self.scenario)}</b> on {e(self.platform)}: DRAM read {dram.get('read_gbps', 0):.2f} GB/s, "
            f"write {dram.get('write_gbps', 0):.2f} GB/s</p>"
        ]
        if self.get("devices"):
            rows.append("<table><tr><th>device</th><th>placement</th><th>rx Gb/s</th><th>drops</th></tr>")
            for name, d in self["devices"].items():
                rows.append(
                    f"<tr><td>{e(name)}</td><td>{e(str(d.get('placement', '')))}</td>"
                    f"<td>{d.get('rx_gbps', 0):.2f}</td><td>{d.get('drops', 0)}</td></tr>"
                )
            rows.append("</table>")
        if self.get("cores"):
            head = "".join(f"<th>{s}</th>" for s in FILL_SOURCES)
            rows.append(f"<table><tr><th>cpu</th><th>role</th>{head}</tr>")
            for cpu, core in self["cores"].items():
                cells = "".join(f"<td>{100 * core['fills'].get(s, 0.0):.1f}%</td>" for s in FILL_SOURCES)
                rows.append(f"<tr><td>{e(cpu)}</td><td>{e(core.get('role', ''))}</td>{cells}</tr>")
            rows.append("</table>")
        return "\n".join(rows)

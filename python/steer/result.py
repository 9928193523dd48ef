"""The result of one run: the JSON dict, readable by key as before, with typed views on top.

>>> result = steer.run("rx-default", placement="l2")
>>> result["dram"]["read_gbps"] == result.dram.read_gbps
True
>>> result.fills[1]["l2"]          # fraction of CPU 1's demand accesses satisfied by its L2
>>> result.to_frame()              # one row, the same columns as steer.load() gives per run
"""

from __future__ import annotations

import copy
import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Where demand accesses can be satisfied, nearest first (README "Results").
FILL_SOURCES = ("l1", "l2", "peer_l2", "l3", "remote_cache", "dram")


@dataclass(frozen=True)
class Channel:
    """Bandwidth of one DRAM channel in GB/s (bytes)."""

    read_gbps: float
    write_gbps: float


@dataclass(frozen=True)
class Dram:
    """DRAM bandwidth in GB/s (bytes): totals and one entry per channel."""

    read_gbps: float
    write_gbps: float
    total_gbps: float
    channels: tuple[Channel, ...]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Dram:
        """Builds the view from the ``dram`` part of a result."""
        channels = tuple(Channel(c["read_gbps"], c["write_gbps"]) for c in data.get("channels", ()))
        total = data.get("total_gbps", data["read_gbps"] + data["write_gbps"])
        return cls(data["read_gbps"], data["write_gbps"], total, channels)


@dataclass(frozen=True)
class Core:
    """One CPU: what it runs and where its accesses were satisfied.

    ``fills`` are fractions of demand accesses by source (``l1`` = hit), ``dc_fills`` the same
    without L1 hits, ``fill_counts`` the underlying counts; ``workload`` holds the workload's
    own statistics (``busy``, ``packets``, ...).
    """

    cpu: int
    role: str
    fills: Mapping[str, float]
    dc_fills: Mapping[str, float] = field(default_factory=dict)
    fill_counts: Mapping[str, int] = field(default_factory=dict)
    workload: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, cpu: str | int, data: Mapping[str, Any]) -> Core:
        """Builds the view from one entry of a result's ``cores``."""
        return cls(
            cpu=int(cpu),
            role=data.get("role", ""),
            fills=dict(data.get("fills", {})),
            dc_fills=dict(data.get("dc_fills", {})),
            fill_counts=dict(data.get("fill_counts", {})),
            workload=dict(data.get("workload", {})),
        )


@dataclass(frozen=True)
class Device:
    """One device: placement policy, offered and accepted throughput in Gb/s (bits), drops.

    ``latency_ns`` is whatever the result holds under ``devices.NAME.latency_ns`` (a list of
    samples or a ``{p50, p99, ...}`` dict), or None when the result has no latency data.
    """

    name: str
    placement: str
    offered_gbps: float
    rx_gbps: float
    drops: int
    queues: tuple[Mapping[str, Any], ...] = ()
    latency_ns: Any = None

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> Device:
        """Builds the view from one entry of a result's ``devices``."""
        return cls(
            name=name,
            placement=data.get("placement", ""),
            offered_gbps=data.get("offered_gbps", float("nan")),
            rx_gbps=data.get("rx_gbps", float("nan")),
            drops=data.get("drops", 0),
            queues=tuple(data.get("queues", ())),
            latency_ns=data.get("latency_ns"),
        )


@dataclass(frozen=True)
class Sim:
    """The simulated window: times in ns, host time in s, line operations measured, seed."""

    simulated_ns: float
    measured_ns: float
    warmup_ns: float
    host_seconds: float
    line_ops: int
    seed: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sim:
        """Builds the view from the ``sim`` part of a result."""
        return cls(
            simulated_ns=data.get("simulated_ns", float("nan")),
            measured_ns=data.get("measured_ns", float("nan")),
            warmup_ns=data.get("warmup_ns", float("nan")),
            host_seconds=data.get("host_seconds", float("nan")),
            line_ops=data.get("line_ops", 0),
            seed=data.get("seed", 0),
        )


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested result as one level of dotted keys: ``dram.read_gbps``, ``cores.1.fills.l2``.

    Lists of tables become numbered keys (``dram.channels.0.read_gbps``); lists of plain values
    (latency samples, for instance) stay whole in one cell.
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
    with a dict all work as before), with typed views on top: ``dram``, ``cores``, ``fills``,
    ``devices``, ``sim``; ``to_dict()`` for a deep copy as plain dicts, ``to_frame()`` for a
    one-row pandas DataFrame. ``resolved`` is the scenario that ran, as TOML, when known.
    """

    __slots__ = ("resolved",)

    def __init__(self, data: Mapping[str, Any] = (), resolved: str | None = None) -> None:
        super().__init__(data)
        self.resolved = resolved

    def __reduce__(self):
        # Results cross process boundaries (sweeps): rebuild from the data and the scenario.
        return (Result, (dict(self), self.resolved))

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
    def dram(self) -> Dram:
        """DRAM bandwidth, total and per channel."""
        return Dram.from_dict(self["dram"])

    @property
    def cores(self) -> dict[int, Core]:
        """Every CPU that ran a workload, by CPU number."""
        return {int(cpu): Core.from_dict(cpu, data) for cpu, data in self.get("cores", {}).items()}

    @property
    def fills(self) -> dict[int, dict[str, float]]:
        """Per CPU, the fraction of its demand accesses satisfied at each source (``l1`` … ``dram``)."""
        return {cpu: dict(core.fills) for cpu, core in self.cores.items()}

    @property
    def devices(self) -> dict[str, Device]:
        """Every device by name."""
        return {name: Device.from_dict(name, data) for name, data in self.get("devices", {}).items()}

    @property
    def sim(self) -> Sim:
        """The simulated window and its cost in host time."""
        return Sim.from_dict(self.get("sim", {}))

    def flat(self) -> dict[str, Any]:
        """The result as one level of dotted keys (see :func:`flatten`)."""
        return flatten(self)

    def to_frame(self):
        """A one-row pandas DataFrame with one column per dotted key (needs pandas)."""
        from steer.store import require

        pandas = require("pandas", "a DataFrame view")
        return pandas.DataFrame([self.flat()])

    def __repr__(self) -> str:
        try:
            dram = self.dram
            summary = f", DRAM read {dram.read_gbps:.2f} GB/s, write {dram.write_gbps:.2f} GB/s"
        except (KeyError, TypeError):
            summary = ""
        return f"<Result {self.scenario!r} on {self.platform!r}{summary}>"

    def _repr_html_(self) -> str:
        """A compact summary for Jupyter: DRAM, devices, and fill sources per CPU."""
        e = html.escape
        dram = self.dram
        rows = [
            f"<p><b>{e(self.scenario)}</b> on {e(self.platform)}: DRAM read {dram.read_gbps:.2f} GB/s, "
            f"write {dram.write_gbps:.2f} GB/s</p>"
        ]
        if self.devices:
            rows.append(
                "<table><tr><th>device</th><th>placement</th><th>offered Gb/s</th><th>rx Gb/s</th><th>drops</th></tr>"
            )
            for d in self.devices.values():
                rows.append(
                    f"<tr><td>{e(d.name)}</td><td>{e(str(d.placement))}</td><td>{d.offered_gbps:.2f}</td>"
                    f"<td>{d.rx_gbps:.2f}</td><td>{d.drops}</td></tr>"
                )
            rows.append("</table>")
        if self.cores:
            head = "".join(f"<th>{s}</th>" for s in FILL_SOURCES)
            rows.append(f"<table><tr><th>cpu</th><th>role</th>{head}</tr>")
            for core in self.cores.values():
                cells = "".join(f"<td>{100 * core.fills.get(s, 0.0):.1f}%</td>" for s in FILL_SOURCES)
                rows.append(f"<tr><td>{core.cpu}</td><td>{e(core.role)}</td>{cells}</tr>")
            rows.append("</table>")
        return "\n".join(rows)

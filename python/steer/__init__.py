"""steer: where I/O data lands in the memory hierarchy, and what that costs.

The simulation runs in a Rust core (``steer._core``); this package is the thin Python layer:
loading scenarios by file or built-in name, running them, sweeping parameters, and shaping,
plotting and reporting the results.

>>> import steer
>>> result = steer.run("rx-default", placement="l2")
>>> result.dram.read_gbps, result["dram"]["write_gbps"]
>>> steer.run_sweep("examples/rx-placement-sweep.toml", "results/rx-placement")
>>> df = steer.load("results/rx-placement")        # one row per run (needs pandas)
"""

from steer._core import InternalError, ScenarioError, SteerError, TooLargeError, __version__
from steer.api import catalog, describe_platform, platforms, resolve, result_schema, run, scenarios, trace
from steer.result import Result

__all__ = [
    "InternalError",
    "catalog",
    "result_schema",
    "Result",
    "ScenarioError",
    "SteerError",
    "TooLargeError",
    "__version__",
    "describe_platform",
    "export",
    "load",
    "load_sweep",
    "platforms",
    "plot",
    "resolve",
    "run",
    "run_sweep",
    "scenarios",
    "trace",
]

# Imported on first use, so that `import steer` stays fast.
_LAZY = {
    "load": ("steer.store", "load"),
    "export": ("steer.store", "export"),
    "run_sweep": ("steer.sweep", "run_sweep"),
    "load_sweep": ("steer.sweep", "load_sweep"),
}


def __getattr__(name: str):
    if name == "plot":  # the module (needs matplotlib): steer.plot.dram(...) without importing it first
        import importlib

        return importlib.import_module("steer.plot")
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'steer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"plot"})

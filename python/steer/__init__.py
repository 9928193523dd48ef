"""steer: where I/O data lands in the memory hierarchy, and what that costs.

The simulation runs in a Rust core (``steer._core``); this package is the thin Python layer:
loading scenarios by file or built-in name, running them, and shaping the results.

>>> import steer
>>> result = steer.run("rx-default", placement="l2")
>>> result["dram"]["read_gbps"]
"""

from steer._core import ScenarioError, __version__
from steer.api import describe_platform, platforms, resolve, run, scenarios, trace

__all__ = [
    "ScenarioError",
    "__version__",
    "describe_platform",
    "platforms",
    "resolve",
    "run",
    "scenarios",
    "trace",
]

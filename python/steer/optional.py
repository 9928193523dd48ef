"""Optional dependencies (pandas, pyarrow, matplotlib, ray), imported where a feature needs them."""

from __future__ import annotations

import importlib

from steer._core import ScenarioError


def require(module: str, purpose: str):
    """Imports an optional dependency, or raises ScenarioError saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = "ray" if module == "ray" else "plot"
        raise ScenarioError(f"{purpose} needs {module}: pip install 'steer[{extra}]'") from None

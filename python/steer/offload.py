"""The offloading cache (seed 001) for notebooks and scripts.

``Cache()`` copies blocks asynchronously into faster memory: the nearest HBM (memory-only NUMA)
node, else the consumer's own node; with Intel DSA where the machine has usable work queues, else
with copy threads pinned per NUMA node. Every consumer of a block shares one entry::

    import numpy as np
    from steer.offload import Cache

    cache = Cache()                      # placement="nearest-hbm", copy_policy="smart", backend="auto"
    table = np.arange(1 << 20, dtype=np.int64)
    entry = cache.access(table)          # returns at once; the copy runs meanwhile
    entry.wait()
    cached = np.frombuffer(entry.location(), dtype=table.dtype)   # zero-copy view of the cached bytes

A block must not change while entries of it live: call ``cache.invalidate(block)`` after changing
it (holders of the old entry keep reading the old copy). Overlapping blocks are not handled.
"""

from __future__ import annotations

from steer._core import OffloadCache as Cache
from steer._core import OffloadCacheData as CacheData
from steer._core import offload_live_allocations as live_allocations
from steer._core import offload_policies


def policies() -> dict[str, list[tuple[str, str]]]:
    """The built-in placements and copy policies, each as (name, description)."""
    return offload_policies()


__all__ = ["Cache", "CacheData", "live_allocations", "policies"]

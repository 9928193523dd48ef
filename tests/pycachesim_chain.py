"""The pycachesim hierarchy steer's trace mode is compared with, shared by the tests and the bench.

steer's per-level counters are defined like pycachesim's; with every level non-inclusive, LRU, and
write hits not refreshing recency, and no prefetcher (`PYCACHESIM_LIKE`), a replay through steer counts exactly like
a pycachesim chain L1 -> L2 -> L3 -> MainMemory of the same geometry.
"""

from __future__ import annotations

LINE = 64
LEVELS = ("l1d", "l2", "l3")
# The pycachesim-equivalent behaviour, spelled out per level as platform overrides.
PYCACHESIM_LIKE = [
    f"{level}.{key}={value}"
    for level in LEVELS
    for key, value in (("replacement", "lru"), ("write_hit_updates_recency", "false"))
] + [
    "l2.relation=non_inclusive",
    "l3.relation=non_inclusive",
    'l1d.prefetcher.kind="none"',
    'l2.prefetcher.kind="none"',
]


def build_chain(geometry: dict[str, tuple[int, int]]):
    """A pycachesim simulator for ``{level: (KiB, ways)}``; returns ``(simulator, caches, memory)``.

    The chain is built bottom-up because each level needs the one below it.
    """
    import cachesim

    below = None
    caches = {}
    for level in reversed(LEVELS):
        size_kib, ways = geometry[level]
        sets = size_kib * 1024 // LINE // ways
        below = caches[level] = cachesim.Cache(level, sets, ways, LINE, "LRU", store_to=below, load_from=below)
    memory = cachesim.MainMemory()
    memory.load_to(caches["l3"])
    memory.store_from(caches["l3"])
    return cachesim.CacheSimulator(caches["l1d"], memory), caches, memory


def requests(accesses: list[tuple[bool, int]]) -> list:
    """``loadstore`` steps, one access each so the trace order is kept."""
    return [((), (addr,)) if write else ((addr,), ()) for write, addr in accesses]


def as_pycachesim(level: dict) -> dict:
    """A steer level report expressed in pycachesim's counters."""
    return {
        "LOAD_count": level["reads"] + level["writes"] - level["write_hits"],
        "STORE_count": level["writes"],
        "HIT_count": level["read_hits"],
        "MISS_count": level["misses"],
        "EVICT_count": level["writebacks"],
    }


def counts_agree(report: dict, caches: dict, memory) -> bool:
    """Whether a steer trace report equals pycachesim's stats at every level and in memory."""
    for level in LEVELS:
        theirs = caches[level].stats()
        if any(theirs[key] != value for key, value in as_pycachesim(report[level]).items()):
            return False
    stats = memory.stats()
    return (report["memory"]["reads"], report["memory"]["writes"]) == (stats["LOAD_count"], stats["STORE_count"])

"""A QdP-like query (seed 001): scan column a, and for the rows that qualify aggregate column b,
whose blocks the offloading cache prefetches into faster memory while the scan of a runs.

    python examples/python/offload_qdp.py [--rows N] [--block-rows N]

Prints the time with and without the cache and checks both give the same sum. On a machine without
HBM and DSA the cache copies into the consumer's node with CPU threads: the figures then show the
cache's overhead, not its benefit.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from steer.offload import Cache


def query(a: np.ndarray, b: np.ndarray, block_rows: int, cache: Cache | None) -> int:
    total = 0
    for start in range(0, len(a), block_rows):
        rows = slice(start, start + block_rows)
        entry = cache.access(b[rows]) if cache is not None else None
        mask = a[rows] < 100  # the scan, while b's block is copied
        if entry is not None:
            entry.wait()
            b_block = np.frombuffer(entry.location(), dtype=b.dtype)
        else:
            b_block = b[rows]
        total += int(b_block[mask].sum())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1 << 22)
    parser.add_argument("--block-rows", type=int, default=1 << 16)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    a = rng.integers(0, 1000, args.rows, dtype=np.int32)
    b = rng.integers(0, 1 << 20, args.rows, dtype=np.int64)
    cache = Cache()
    for label, c in (("without cache", None), ("with cache", cache)):
        begin = time.perf_counter()
        total = query(a, b, args.block_rows, c)
        print(f"{label:>14}: sum {total}  {1e3 * (time.perf_counter() - begin):.1f} ms")
    print(f"backend {cache.backend}" + (f" ({cache.backend_note})" if cache.backend_note else ""))
    print(f"cache stats: {cache.stats()}")
    expected = int(b[a < 100].sum())
    assert query(a, b, args.block_rows, cache) == expected


if __name__ == "__main__":
    main()

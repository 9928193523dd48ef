"""steer.offload from Python: buffers in, zero-copy memoryviews out, errors as ValueError."""

from __future__ import annotations

import gc
import runpy
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from steer import offload
from steer.offload import Cache

ROOT = Path(__file__).resolve().parent.parent


def wait_for_no_live_allocations() -> int:
    gc.collect()
    deadline = time.monotonic() + 5
    while offload.live_allocations() and time.monotonic() < deadline:
        time.sleep(0.01)
    return offload.live_allocations()


def test_a_numpy_block_is_cached_and_read_back_without_copying():
    cache = Cache(backend="cpu")
    block = np.arange(100_000, dtype=np.int64)
    entry = cache.access(block)
    again = cache.access(block)
    entry.wait()
    assert entry.is_ready() and entry.is_cached()
    view = entry.location()
    assert view.readonly and len(view) == block.nbytes
    cached = np.frombuffer(view, dtype=block.dtype)
    assert np.array_equal(cached, block)
    assert not np.shares_memory(cached, block), "the cached copy is elsewhere"
    assert np.shares_memory(cached, np.frombuffer(again.location(), dtype=block.dtype)), "one shared entry"
    assert len(entry) == block.nbytes
    assert cache.stats() == {"hits": 1, "misses": 1, "uncached": 0, "evicted": 0}
    with pytest.raises(TypeError):
        view[0] = 1


def test_bytes_and_other_item_types_are_cached_as_their_bytes():
    cache = Cache(backend="cpu", copy_policy="local", placement="consumer-node")
    assert bytes(cache.access(b"steer" * 1000).location()) == b"steer" * 1000
    floats = np.linspace(0, 1, 4096, dtype=np.float32)
    assert np.array_equal(np.frombuffer(cache.access(floats).location(), dtype=np.float32), floats)


def test_invalidate_flush_and_clear():
    cache = Cache(backend="cpu")
    block = bytearray(b"x" * 8192)
    first = cache.access(block)
    first.wait()
    cache.invalidate(block)
    second = cache.access(block)
    assert cache.stats()["misses"] == 2
    cache.flush()
    cache.clear()
    assert bytes(first.location()) == bytes(second.location()) == bytes(block)
    with pytest.raises(ValueError, match="NUMA node 4096"):
        cache.flush(4096)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(100),
        lambda: np.linspace(0, 1, 100),
        lambda: memoryview(np.arange(100)),
        lambda: bytearray(b"y" * 100),
    ],
    ids=["int64", "float64", "memoryview", "bytearray"],
)
def test_invalidate_takes_every_buffer_access_takes(make):
    cache = Cache(backend="cpu")
    block = make()
    cache.access(block).wait()
    cache.invalidate(block)
    cache.access(block).wait()
    assert cache.stats()["misses"] == 2, "the entry was removed: the second access misses"


def test_a_non_contiguous_block_is_refused_by_invalidate_too():
    with pytest.raises(ValueError, match="contiguous"):
        Cache(backend="cpu").invalidate(np.arange(100)[::2])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: Cache(backend="cpu", capacity=2**70),
            r"capacity is too large: 0 to \d+ \(got 1180591620717411303424\)",
        ),
        (lambda: Cache(backend="cpu", capacity=-(2**70)), "capacity must not be negative"),
        (lambda: Cache(backend="cpu").flush(-1), r"node must not be negative: 0 to \d+ \(got -1\)"),
        (lambda: Cache(backend="cpu").flush(2**70), "node is too large"),
        (lambda: Cache(backend="cpu").flush(np.int64(-1)), "node must not be negative"),
    ],
)
def test_out_of_range_counts_are_value_errors_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_memory_is_freed_with_the_last_holder():
    cache = Cache(backend="cpu")
    entries = [cache.access(np.full(10_000, i, dtype=np.uint8)) for i in range(8)]
    views = [e.location() for e in entries]
    del cache, entries
    assert offload.live_allocations() > 0, "the memoryviews still hold their entries"
    del views
    assert wait_for_no_live_allocations() == 0


@pytest.mark.parametrize(
    ("kwargs", "block", "message"),
    [
        ({}, b"", "zero size"),
        ({"placement": "fastest"}, b"x", 'unknown placement "fastest"'),
        ({"copy_policy": "all"}, b"x", 'unknown copy policy "all"'),
        ({"backend": "gpu"}, b"x", 'unknown backend "gpu"'),
        ({"capacity": 64}, b"x" * 65, "exceeds node"),
        ({"capacity": -1}, b"x", "negative"),
        ({"capacity": 0}, b"x", "capacity is 0 bytes"),
    ],
)
def test_bad_input_is_a_value_error(kwargs, block, message):
    with pytest.raises(ValueError, match=message):
        Cache(backend=kwargs.pop("backend", "cpu"), **kwargs).access(block)


def test_a_non_contiguous_block_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        Cache(backend="cpu").access(np.arange(100)[::2])


def test_the_policies_are_listed_with_their_descriptions():
    names = {kind: [n for n, _ in entries] for kind, entries in offload.policies().items()}
    assert names == {
        "placement": ["nearest-hbm", "consumer-node", "source-hbm"],
        "copy_policy": ["smart", "local", "brute"],
    }


def test_the_python_example_runs(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["offload_qdp.py", "--rows", "200000", "--block-rows", "16384"])
    runpy.run_path(str(ROOT / "examples/python/offload_qdp.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "with cache: sum" in out and "backend " in out

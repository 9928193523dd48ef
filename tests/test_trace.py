"""Trace replay against pycachesim: the same accesses through the same geometry count the same.

steer's per-level counters are defined like pycachesim's, so with every level non-inclusive, LRU
and write hits not refreshing recency, a replay must match a pycachesim chain
L1 -> L2 -> L3 -> MainMemory (write-back, write-allocate) exactly:

    MISS == misses      HIT == read_hits      STORE == writes
    LOAD == reads + writes - write_hits       EVICT == writebacks
    MainMemory LOAD == memory reads           MainMemory STORE == memory writes
"""

import random
import struct
from pathlib import Path

import pytest

import steer

cachesim = pytest.importorskip("cachesim")

from pycachesim_chain import LEVELS, LINE, PYCACHESIM_LIKE, as_pycachesim, build_chain, requests  # noqa: E402 (after the skip)

# turin-9655 as published: 48 KiB 12-way L1D, 1 MiB 16-way L2, 32 MiB 16-way L3.
TURIN_9655 = {"l1d": (48, 12), "l2": (1024, 16), "l3": (32768, 16)}
SMALL = {"l1d": (32, 8), "l2": (256, 8), "l3": (2048, 16)}


def generate(count: int, seed: int, l3_sets: int) -> list[tuple[bool, int]]:
    """(is_write, address) pairs with some locality, all below 2**32 (pycachesim takes C longs).

    45% a hot 64 KiB set, 25% a sequential stream of 8-byte steps through 16 MiB, 20% conflicts
    (1536 lines sharing 32 L3 sets, so L3 evicts dirty lines even on a 32 MiB L3), 10% random
    over 256 MiB; 35% writes.
    """
    rng = random.Random(seed)
    stream = 0
    accesses = []
    for _ in range(count):
        pick = rng.random()
        if pick < 0.45:
            addr = 0x1000_0000 + rng.randrange(64 << 10)
        elif pick < 0.70:
            stream = (stream + 8) % (16 << 20)
            addr = 0x2000_0000 + stream
        elif pick < 0.90:
            line = rng.randrange(32) + l3_sets * rng.randrange(48)
            addr = 0x4000_0000 + line * LINE + rng.randrange(LINE)
        else:
            addr = 0x8000_0000 + rng.randrange(256 << 20)
        accesses.append((rng.random() < 0.35, addr))
    return accesses


def write_din(path: Path, accesses: list[tuple[bool, int]]) -> None:
    with path.open("w") as out:
        out.write("# label address (one-byte accesses)\n")
        out.writelines(f"{int(write)} {addr:x}\n" for write, addr in accesses)


def geometry_overrides(geometry: dict[str, tuple[int, int]]) -> list[str]:
    return [
        override
        for level, (size_kib, ways) in geometry.items()
        for override in (f"{level}.size_kib={size_kib}", f"{level}.ways={ways}")
    ]


def pycachesim_replay(geometry: dict[str, tuple[int, int]], accesses: list[tuple[bool, int]]):
    """Per-level and memory stats of pycachesim after replaying ``accesses`` in one bulk call."""
    simulator, caches, memory = build_chain(geometry)
    simulator.loadstore(requests(accesses), length=1)
    return {level: cache.stats() for level, cache in caches.items()}, memory.stats()


@pytest.mark.parametrize(
    "geometry, seed",
    [pytest.param(SMALL, 1, id="small-3-level"), pytest.param(TURIN_9655, 2, id="turin-9655-geometry")],
)
def test_replay_counts_like_pycachesim(tmp_path: Path, geometry: dict, seed: int) -> None:
    size_kib, ways = geometry["l3"]
    accesses = generate(200_000, seed, l3_sets=size_kib * 1024 // LINE // ways)
    path = tmp_path / "trace.din"
    write_din(path, accesses)

    overrides = PYCACHESIM_LIKE + ([] if geometry is TURIN_9655 else geometry_overrides(geometry))
    report = steer.trace(str(path), platform="turin-9655", cpu=0, overrides=overrides)
    levels, memory = pycachesim_replay(geometry, accesses)

    assert (report["accesses"], report["skipped"], report["line_ops"]) == (len(accesses), 0, len(accesses))
    for level in LEVELS:
        expected = {key: levels[level][key] for key in as_pycachesim(report[level])}
        assert as_pycachesim(report[level]) == expected, level
        assert report[level]["hits"] == report[level]["read_hits"] + report[level]["write_hits"]
    assert (report["memory"]["reads"], report["memory"]["writes"]) == (memory["LOAD_count"], memory["STORE_count"])
    # The trace must exercise every path compared above, or the comparison proves little.
    for level in LEVELS:
        assert min(levels[level][key] for key in ("HIT_count", "MISS_count", "STORE_count", "EVICT_count")) > 0, level
    assert report["l2"]["write_hits"] > 0 and report["l3"]["write_hits"] > 0


def test_binary_trace_replays_like_din(tmp_path: Path) -> None:
    accesses = generate(20_000, 3, l3_sets=2048)
    din = tmp_path / "trace.din"
    write_din(din, accesses)
    binary = tmp_path / "trace.bin"
    # docs/trace-format.md: magic, then per access a little-endian u64, kind in bits 63..62.
    binary.write_bytes(b"STEERTR1" + b"".join(struct.pack("<Q", int(write) << 62 | addr) for write, addr in accesses))

    overrides = PYCACHESIM_LIKE + geometry_overrides(SMALL)
    from_din = steer.trace(str(din), platform="turin-9655", overrides=overrides)
    from_binary = steer.trace(str(binary), platform="turin-9655", overrides=overrides)
    for key in ("accesses", "skipped", "line_ops", *LEVELS, "memory"):
        assert from_binary[key] == from_din[key], key


def test_instruction_fetches_are_skipped_and_bad_lines_are_named(tmp_path: Path) -> None:
    trace = tmp_path / "mixed.din"
    trace.write_text("0 0x1000\n2 0x2000\n1 1000 4\n3\n4 0\n")
    report = steer.trace(str(trace), platform="turin-9655")
    assert (report["accesses"], report["skipped"]) == (2, 3)
    assert (report["l1d"]["misses"], report["l1d"]["write_hits"]) == (1, 1)

    bad = tmp_path / "bad.din"
    bad.write_text("0 1000\n7 2000\n")
    with pytest.raises(steer.ScenarioError, match=r"bad\.din:2: unknown label `7`"):
        steer.trace(str(bad), platform="turin-9655")


def test_a_trace_with_nothing_to_replay_is_an_error_unless_allowed(tmp_path: Path) -> None:
    cases = {"empty.din": b"", "comments.din": b"# nothing\n", "fetches.din": b"2 0x1000\n", "magic.bin": b"STEERTR1"}
    for name, content in cases.items():
        trace = tmp_path / name
        trace.write_bytes(content)
        with pytest.raises(steer.ScenarioError, match=rf"{name}: nothing to replay"):
            steer.trace(str(trace))
        assert steer.trace(str(trace), allow_empty=True)["accesses"] == 0


def test_a_record_spanning_megabytes_is_refused_with_its_line(tmp_path: Path) -> None:
    trace = tmp_path / "huge.din"
    trace.write_text("0 1000 64\n0 2000 4294967295\n")
    with pytest.raises(
        steer.ScenarioError, match=r"huge\.din:2: a 4294967295-byte access would replay as 67108864 line"
    ):
        steer.trace(str(trace))


def test_a_replay_reports_its_progress_and_stops_when_interrupted(tmp_path):
    trace = tmp_path / "t.din"
    trace.write_text("0 7ffd1000 64\n" * 500_000)  # 7 MB: several 2 MiB blocks
    seen = []
    report = steer.trace(trace, progress=seen.append)
    assert report["accesses"] == 500_000
    assert len(seen) >= 3 and seen == sorted(seen) and seen[0] > 0 and seen[-1] == 1.0
    calls = []

    def interrupt(fraction):
        calls.append(fraction)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        steer.trace(trace, progress=interrupt)
    assert len(calls) == 2, "the replay stops at the interrupt"


def test_a_cpu_that_is_not_a_cpu_number_is_one_line(tmp_path, steer_cli):
    trace = tmp_path / "t.din"
    trace.write_text("0 1000\n")
    for cpu in (-1, 2**32, 1.5, True):
        with pytest.raises(steer.ScenarioError, match=r"cpu: expected a logical CPU number"):
            steer.trace(trace, cpu=cpu)
    done = steer_cli("trace", str(trace), "--core", "-1")
    assert (
        done.returncode == 2
        and done.stderr.startswith("steer: error: cpu: expected")
        and "Traceback" not in done.stderr
    )

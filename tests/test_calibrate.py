"""`steer calibrate` and `steer validate`: the fit worked by hand on made-up measurements, the
calibration file as the host preset reads it, both commands end to end on tiny working sets (the
figures themselves depend on this machine), and bad input."""

import json
import os
import re
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest

from steer import api, calibrate, cli
from steer.calibrate import Figure, Measurements
from steer.output import GIB, KIB, MIB

GEOMETRY = {
    "core.freq_ghz": 3.0,
    "l1d.size_kib": 48,
    "l2.size_kib": 2048,
    "l3.size_kib": 32768,
    "memory.channels_per_node": 2,
    "memory.nodes_per_socket": 1,
}


def exact(value: float) -> Figure:
    return Figure.of([value])


def made_up(**changes) -> Measurements:
    """A 2 GHz machine: chase 2.5 ns in L1, 8 in L2, 20.5 in L3 (4 MiB), 100.5 in DRAM at 64 MiB
    (the L3 is 8 MiB, not the 32 sysfs says) and 110.5 at 512 MiB (page walks), 11.05 ns a load
    with many chases; one core reads its L1 at 64 GB/s (copies it at 128), its L2 at 30 and DRAM at
    10 (12 loading a word a line), all cores DRAM at 40."""
    fields = {
        "host": "box",
        "date": "2026-11-25 10:00 UTC",
        "cpus": [0, 1],
        "huge_pages": "madvise",
        "clock_ghz": exact(2.0),
        "latency_ns": {
            4 * KIB: exact(2.5),
            16 * KIB: exact(2.5),
            MIB: exact(8.0),
            4 * MIB: exact(20.5),
            8 * MIB: exact(21.0),
            64 * MIB: exact(100.5),
            512 * MIB: exact(110.5),
        },
        "parallel_ns": exact(11.05),
        "bandwidth_gbs": {
            a: {16 * KIB: exact(128.0 if a == "copy" else 64.0), MIB: exact(30.0), 512 * MIB: exact(10.0)}
            for a in calibrate.ACCESSES
        },
        "all_cores_gbs": {a: exact(40.0) for a in calibrate.ACCESSES},
        "dram_bytes": 512 * MIB,
        "line_read_gbs": exact(12.0),
    }
    fields.update(changes)
    return Measurements(**fields)


def fitted(m: Measurements) -> dict[str, float]:
    return {v.key: v.value for v in calibrate.fit(m, GEOMETRY)}


def test_the_fit_takes_each_value_from_its_own_measurement():
    assert fitted(made_up()) == {
        "core.freq_ghz": 2.0,
        # 64 B at 64 GB/s is 1 ns, 2 cycles.
        "core.issue_cycles_per_line": 2.0,
        # The store port: 64 B copied at 128 GB/s, 1 cycle.
        "core.store_issue_cycles_per_line": 1.0,
        # The L1D's fill path: 64 B read from the L2 (1 MiB) at 30 GB/s, 4.267 cycles.
        "core.fill_cycles_per_line": 4.267,
        # The model's chase is an issue then the latency: 2.5 ns x 2 GHz - 2 cycles.
        "l1d.latency_cycles": 3.0,
        "l2.latency_cycles": 14.0,
        "l3.latency_cycles": 39.0,
        # 100.5 ns at 64 MiB is beyond midway (47.6 ns) from the L3 to DRAM: the L3 ends at 8 MiB.
        "l3.size_kib": 8192,
        # DRAM at 16 x 8 MiB: the chase at 64 MiB, less the issue (1 ns).
        "memory.idle_latency_ns": 99.5,
        # 110.5 ns a chase over 512 MiB, one load every 11.05 ns with many chases: 10 in flight.
        "core.outstanding_misses": 10,
        "memory.channel_gbs": 20.0,
    }


def test_sysfs_l3_size_stays_when_the_chase_agrees_with_it():
    latency = {**made_up().latency_ns, 16 * MIB: exact(21.0), 64 * MIB: exact(30.0)}
    values = fitted(made_up(latency_ns=latency))
    assert "l3.size_kib" not in values
    # DRAM at 16 x 32 MiB (sysfs): the chase at 512 MiB.
    assert values["memory.idle_latency_ns"] == 109.5
    assert calibrate.l3_knee(made_up(), 90.0, 100.5) is None, "DRAM not clearly slower: no knee"


def test_the_l3_knee_is_a_power_of_two_sets_of_the_caches_ways():
    # The chase stays near the L3's latency up to 8 MiB: 8192 sets of 16 ways, or, with 20 ways,
    # 6553 sets rounded down to 4096: 5 MiB.
    assert calibrate.l3_knee(made_up(), 20.5, 100.5) == 8 * MIB
    assert calibrate.l3_knee(made_up(), 20.5, 100.5, ways=20) == 5 * MIB
    assert calibrate.l3_knee(made_up(), 20.5, 100.5, ways=12, line=128) == 6 * MIB


def test_the_core_to_core_transfer_is_the_peer_read_less_the_issue():
    # 30.5 ns a read of a line the other core wrote, less the 1 ns issue (2 cycles at 2 GHz).
    values = fitted(made_up(peer_read_ns=exact(30.5)))
    assert values["fabric.peer_l2_latency_ns"] == 29.5 and "fabric.remote_cache_latency_ns" not in values
    apart = fitted(made_up(peer_read_ns=exact(120.5), peers_share_l3=False))
    assert apart["fabric.remote_cache_latency_ns"] == 119.5 and "fabric.peer_l2_latency_ns" not in apart
    assert "fabric.peer_l2_latency_ns" not in fitted(made_up()), "one CPU: nothing to fit"


def test_without_a_clock_reading_the_presets_clock_converts():
    values = fitted(made_up(clock_ghz=None))
    assert "core.freq_ghz" not in values
    assert values["core.issue_cycles_per_line"] == 3.0
    assert values["l1d.latency_cycles"] == 4.5


def test_every_value_says_where_it_came_from():
    for value in calibrate.fit(made_up(), GEOMETRY):
        assert value.source.startswith(("measured on box at 2026-11-25", "calibrated on box at")), value
    text = calibrate.calibration_toml(made_up(), calibrate.fit(made_up(), GEOMETRY))
    parsed = tomllib.loads(text)
    assert parsed["l2"]["latency_cycles"] == 14.0
    assert parsed["description"].startswith("this machine (box): measured on box at 2026-11-25")
    assert "# calibrated on box" in text and "Little's law" in text


def host_fit(m: Measurements) -> list[calibrate.Value]:
    """The fit laid over this machine's sysfs geometry (with its L3 ways)."""
    with calibrate.sysfs_only():
        ways = calibrate.platform_values("host")["l3.ways"]
    return calibrate.fit(m, {**GEOMETRY, "l3.ways": ways})


def read_at(gbs: float) -> Measurements:
    """The made-up machine, its one core loading each line of DRAM in order at ``gbs``."""
    return made_up(line_read_gbs=exact(gbs))


@pytest.mark.parametrize(
    ("vendor", "kind", "manual"), [("GenuineIntel", "stride", "Intel"), ("AuthenticAMD", "stream", "AMD")]
)
def test_the_streamer_runs_as_far_ahead_as_the_measured_sequential_read_needs(vendor, kind, manual):
    values = host_fit(made_up())
    streamer = calibrate.STREAMERS[vendor]
    simulated = {d: calibrate.sequential_read_gbs(values, streamer, d, 512 * MIB) for d in streamer.distances}
    # Running further ahead reads faster, up to a point.
    assert simulated[1] < simulated[4] < simulated[8] < simulated[12]

    def distance(gbs: float) -> int:
        fitted = {v.key: v for v in calibrate.fit_streamer(read_at(gbs), values, vendor)}
        assert (fitted["l2.prefetcher.kind"].value, fitted["l2.prefetcher.degree"].value) == (kind, 2)
        assert fitted["l2.prefetcher.distance"].source.startswith("calibrated on box at 2026-11-25")
        # Each vendor's prefetcher is described from that vendor's own document, never another's.
        other = "AMD" if manual == "Intel" else "Intel"
        assert all(other not in v.source for v in fitted.values()), fitted
        assert manual in fitted["l2.prefetcher.kind"].source
        # Intel's L2 has the adjacent-line prefetcher beside the streamer; AMD documents none.
        pair = fitted.get("l2.prefetcher.pair_line")
        assert (pair.value if pair else None) == (True if manual == "Intel" else None)
        return fitted["l2.prefetcher.distance"].value

    # The candidate whose simulated read is nearest the measured one.
    assert distance(simulated[8]) == 8
    assert distance(0.1) == 1
    fastest = max(simulated, key=simulated.get)
    assert distance(simulated[fastest] * 1.1) == fastest


def test_a_stream_no_page_confines_crosses_pages_only_where_the_read_within_them_falls_short():
    values = host_fit(made_up())
    amd = calibrate.STREAMERS["AuthenticAMD"]
    within = {d: calibrate.sequential_read_gbs(values, amd, d, 512 * MIB) for d in amd.distances}
    across = {d: calibrate.sequential_read_gbs(values, amd, d, 512 * MIB, crossing=True) for d in amd.distances}
    # Within pages the streamer stops at each page's end and starts again: running on reads faster.
    assert across[32] > within[32] * 1.2
    best = max(within.values())

    def fitted(vendor: str, gbs: float) -> dict[str, calibrate.Value]:
        return {v.key: v for v in calibrate.fit_streamer(read_at(gbs), values, vendor)}

    # Within 15% of the best read within pages: the stream stays in its pages.
    assert "l2.prefetcher.cross_pages" not in fitted("AuthenticAMD", best * 1.1)
    # Beyond it, it crosses them, at the distance whose read across pages is nearest.
    wanted = across[48] * 1.01
    crossing = fitted("AuthenticAMD", wanted)
    assert crossing["l2.prefetcher.cross_pages"].value is True
    assert crossing["l2.prefetcher.distance"].value == 48
    how = crossing["l2.prefetcher.cross_pages"].source
    assert how.startswith("calibrated on box at 2026-11-25 10:00 UTC: within 4 KiB pages the model's streamer reads")
    assert "AMD" in how and "across pages" in crossing["l2.prefetcher.distance"].source
    # Intel's manual keeps its streamer within the page, however fast the measured read.
    assert "l2.prefetcher.cross_pages" not in fitted("GenuineIntel", wanted)


def test_a_vendor_without_a_described_streamer_gets_none_fitted():
    assert calibrate.fit_streamer(made_up(), host_fit(made_up()), "HygonGenuine") == []
    assert calibrate.fit_streamer(made_up(), host_fit(made_up()), None) == []


def test_the_vendor_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n")
    assert calibrate.cpu_vendor(cpuinfo) == "AuthenticAMD"
    cpuinfo.write_text("processor\t: 0\n")
    assert calibrate.cpu_vendor(cpuinfo) is None
    assert calibrate.cpu_vendor(tmp_path / "missing") is None


def test_the_tlb_comes_from_cpuid_and_the_page_and_walk_from_where_the_probes_ran():
    def tlb(vendor, guest, cpuid, huge="madvise"):
        found = calibrate.translation_values(made_up(huge_pages=huge), vendor, guest, cpuid)
        return {v.key.removeprefix("core.tlb."): v for v in found}

    bare = tlb("GenuineIntel", False, (1536, 12))
    assert {k: v.value for k, v in bare.items()} == {
        "entries": 1536,
        "ways": 12,
        "page_kib": 2048,
        "walk_reads": 1,
        "walkers": 4,
    }
    assert bare["entries"].source == "CPUID on box"
    assert tlb("GenuineIntel", False, (1536, 12), huge="never")["page_kib"].value == 4
    # A guest: 4 KiB pages walked in two dimensions, whatever the kernel inside gives.
    guest = tlb("AuthenticAMD", True, None)
    assert (guest["page_kib"].value, guest["walk_reads"].value, guest["walkers"].value) == (4, 2, 6)
    # No CPUID leaf: the vendor's documented TLB, said to be assumed, from that vendor's document.
    assert (guest["entries"].value, guest["ways"].value) == (2048, 16)
    assert guest["entries"].source.startswith("assumed: ") and "AMD" in guest["entries"].source
    assert all("Intel" not in v.source for v in guest.values())
    assert calibrate.translation_values(made_up(), "HygonGenuine", True, (64, 4)) == []


def test_the_memory_latency_is_refitted_so_the_models_chase_takes_the_measured_time(monkeypatch):
    values = host_fit(made_up()) + calibrate.translation_values(made_up(), "GenuineIntel", True, None)
    assert {v.key: v.value for v in values}["memory.idle_latency_ns"] == 99.5
    runs = []

    def chase(values, workload, warmup_us, extra=()):
        latency = {v.key: v.value for v in values}["memory.idle_latency_ns"]
        runs.append((workload, warmup_us, latency))
        # Walks of 30 ns, and 10% more when the latency is longer (their reads reach DRAM).
        return latency + 30.0 + 0.1 * latency

    monkeypatch.setattr(calibrate, "simulated_ns_per_load", chase)
    refitted = {v.key: v for v in calibrate.refit_memory_latency(made_up(), values, GEOMETRY)}
    # The chase over the 64 MiB the latency was measured at (16 times the 4 MiB L3 the chase sees):
    # 139.45 ns at 99.5 (the measured 100.5 less an issue), 38.95 ns too slow; 96.605 at 60.55,
    # 3.895 too fast; 100.8895 at 64.445, 0.3895 too slow: a step under 0.5 ns, the last.
    workload = 'pattern = "chase"\nworking_set_bytes = 67108864\n'
    assert [r[:2] for r in runs] == [(workload, 20000.0)] * 3
    assert [round(r[2], 4) for r in runs] == [99.5, 60.55, 64.445]
    assert refitted["memory.idle_latency_ns"].value == 64.1
    assert "takes 100.9 ns a load at 64.4 ns, the measured 100.5" in refitted["memory.idle_latency_ns"].source
    assert len(refitted) == len(values)


def test_a_models_chase_with_page_walks_is_slower_than_without():
    values = host_fit(made_up())
    chase = f'pattern = "chase"\nworking_set_bytes = {64 * MIB}\n'
    without = calibrate.simulated_ns_per_load(values, chase, warmup_us=3000.0)
    walks = calibrate.translation_values(made_up(), "GenuineIntel", True, None)
    assert calibrate.simulated_ns_per_load(values + walks, chase, warmup_us=3000.0) > without + 2.0


def test_a_noisy_figure_and_a_fit_at_the_end_of_its_range_are_warned_of():
    intel = calibrate.STREAMERS["GenuineIntel"]
    assert calibrate.warnings(made_up(), [], intel) == []
    noisy = made_up(clock_ghz=Figure.of([0.92, 1.5, 1.915]))
    [line] = calibrate.warnings(noisy, [], intel)
    assert line.startswith("clock: repeats spread 0.92-1.915 (more than 1.5x)")
    # Exactly 1.5x is not yet noise.
    assert calibrate.warnings(made_up(clock_ghz=Figure.of([1.0, 1.5])), [], intel) == []
    for distance, warned in ((20, True), (1, True), (16, False)):
        values = [calibrate.Value("l2.prefetcher.distance", distance, "calibrated")]
        found = calibrate.warnings(made_up(), values, intel)
        assert bool(found) == warned, (distance, found)
    assert calibrate.warnings(made_up(), [calibrate.Value("l2.prefetcher.distance", 20, "")], None) == []
    # An L3 the chase sees smaller than sysfs says: the calibration takes it, and says why.
    [line] = calibrate.warnings(made_up(), [calibrate.Value("l3.size_kib", 8192, "measured")], intel)
    assert line.startswith("l3.size_kib: the chase sees an L3 of 8 MiB, not the size sysfs gives: a guest")


def test_the_host_preset_reads_the_calibration(tmp_path, monkeypatch):
    values = host_fit(made_up())
    values += calibrate.fit_streamer(made_up(), values, "GenuineIntel")
    path = tmp_path / "host.toml"
    path.write_text(calibrate.calibration_toml(made_up(), values))
    monkeypatch.setenv("STEER_HOST_CALIBRATION", str(path))
    values = calibrate.platform_values("host")
    assert values["l2.prefetcher.kind"] == "stride"
    assert values["l2.latency_cycles"] == 14.0
    assert values["l3.size_kib"] == calibrate.l3_knee(made_up(), 20.5, 100.5, ways=values["l3.ways"]) // KIB
    assert values["description"].startswith("this machine (box)")
    with calibrate.sysfs_only():
        assert calibrate.platform_values("host")["description"].startswith("this machine: geometry from sysfs")
    path.write_text("[l2]\nlatency_cycles = -1.0\n")
    with pytest.raises(api.ScenarioError, match=r"host calibration .*host.toml: platform.l2.latency_cycles"):
        calibrate.platform_values("host")


def test_sizes_double_per_octave_from_4_kib():
    plan = calibrate.Plan(max_bytes=64 * KIB, min_ms=1, repeats=1, per_octave=1, cpus=(0,))
    assert calibrate.sizes(plan) == [4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB]
    plan = calibrate.Plan(max_bytes=16 * KIB, min_ms=1, repeats=1, per_octave=2, cpus=(0,))
    assert calibrate.sizes(plan) == [4096, 5760, 8192, 11584, 16384]


def test_the_default_plan_reaches_past_the_llc_within_its_cap():
    plan = calibrate.plan_for("default", GEOMETRY, (0,), None, None)
    assert (plan.max_bytes, plan.min_ms, plan.repeats) == (128 * MIB, 20.0, 3)
    assert calibrate.plan_for("quick", {**GEOMETRY, "l3.size_kib": 1 << 20}, (0,), None, None).max_bytes == 512 * MIB
    assert calibrate.plan_for("full", GEOMETRY, (0,), 3 * GIB, 5.0).max_bytes == 3 * GIB


@pytest.mark.parametrize(
    ("mode", "l3_kib", "plan"),
    [
        # Each mode: so many times the LLC, under its cap; each figure's time, repeats, sizes per doubling.
        ("quick", 32 << 10, (64 * MIB, 10.0, 3, 1)),
        ("default", 32 << 10, (128 * MIB, 20.0, 3, 2)),
        ("full", 32 << 10, (256 * MIB, 50.0, 5, 4)),
        ("quick", 1 << 20, (512 * MIB, 10.0, 3, 1)),
        ("default", 1 << 20, (GIB, 20.0, 3, 2)),
        ("full", 1 << 20, (4 * GIB, 50.0, 5, 4)),
    ],
)
def test_each_mode_plans_its_own_working_sets_timings_and_repeats(mode, l3_kib, plan):
    got = calibrate.plan_for(mode, {**GEOMETRY, "l3.size_kib": l3_kib}, (0, 1), None, None)
    assert got == calibrate.Plan(*plan, cpus=(0, 1))


def test_one_doubling_at_one_size_a_doubling_is_its_two_ends():
    plan = calibrate.Plan(max_bytes=8 * KIB, min_ms=1, repeats=1, per_octave=1, cpus=(0,))
    assert calibrate.sizes(plan) == [4 * KIB, 8 * KIB]


@pytest.mark.parametrize(
    ("max_bytes", "min_ms", "error"),
    [
        (4 * KIB, 10_000, None),
        (64 * GIB, 0.001, None),
        (4 * KIB - 1, None, "--max-bytes 4095: must be 4 KiB to 64 GiB"),
        (0, None, "--max-bytes 0: must be 4 KiB to 64 GiB"),
        (64 * GIB + 1, None, "--max-bytes 68719476737: must be 4 KiB to 64 GiB"),
        (None, 10_000.5, "--min-ms 10000.5: must be above 0 and at most 10000"),
        (None, -1.0, "--min-ms -1.0: must be above 0 and at most 10000"),
    ],
)
def test_a_plans_bounds_are_inclusive_and_a_value_past_one_is_named(monkeypatch, max_bytes, min_ms, error):
    monkeypatch.setattr(calibrate, "available_memory", lambda: None)
    if error is None:
        plan = calibrate.plan_for("quick", GEOMETRY, (0,), max_bytes, min_ms)
        assert (plan.max_bytes, plan.min_ms) == (max_bytes, min_ms)
        return
    with pytest.raises(api.ScenarioError) as raised:
        calibrate.plan_for("quick", GEOMETRY, (0,), max_bytes, min_ms)
    assert str(raised.value) == error


def test_a_working_set_takes_at_most_three_quarters_of_the_memory_available(monkeypatch):
    monkeypatch.setattr(calibrate, "available_memory", lambda: 8 * GIB)
    assert calibrate.plan_for("quick", GEOMETRY, (0,), 6 * GIB, None).max_bytes == 6 * GIB
    with pytest.raises(api.ScenarioError) as raised:
        calibrate.plan_for("quick", GEOMETRY, (0,), 6 * GIB + 1, None)
    assert str(raised.value) == "--max-bytes 6442450945: more than three quarters of the 8 GiB of memory available here"


def test_validate_refuses_a_working_set_too_large_for_the_memory_before_measuring(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(calibrate, "available_memory", lambda: 8 * GIB)
    monkeypatch.setattr(calibrate, "calibration_path", lambda: tmp_path / "host.toml")
    assert cli.main(["validate", "--max-bytes", "7GiB", "--quiet"]) == 2
    message = f"steer: error: --max-bytes {7 * GIB}: more than three quarters of the 8 GiB of memory available here\n"
    assert capsys.readouterr().err == message
    assert not (tmp_path / "host.toml").exists(), "refused before any calibration"


def test_available_memory_is_the_kernels_estimate(monkeypatch):
    available = calibrate.available_memory()
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert available is not None and 0 < available <= total
    meminfo = {line.split(":")[0]: line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()}
    assert abs(available - int(meminfo["MemAvailable"]) * KIB) < total // 10

    def unreadable(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr("builtins.open", unreadable)
    assert calibrate.available_memory() is None


@pytest.mark.parametrize(
    ("text", "cpus", "error"),
    [
        ("0-3,8", (0, 1, 2, 3, 8), None),
        (" 8 , 1-2,2", (1, 2, 8), None),
        ("9", None, "--cpus '9': CPUs [9] are not ones this process may run on"),
        ("3-2", None, "--cpus '3-2': expected a list such as 0-3,8"),
        ("0-x", None, "--cpus '0-x': expected a list such as 0-3,8"),
    ],
)
def test_cpus_are_a_list_of_ones_this_process_may_run_on(monkeypatch, text, cpus, error):
    monkeypatch.setattr(calibrate._core, "probe_allowed_cpus", lambda: [0, 1, 2, 3, 8])
    if error is None:
        assert calibrate.parse_cpus(text) == cpus
        return
    with pytest.raises(api.ScenarioError) as raised:
        calibrate.parse_cpus(text)
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("text", "value"), [("4096", 4096), ("64KiB", 64 * KIB), ("1g", GIB), ("1.5 MiB", 3 * MIB // 2), ("2M", 2 * MIB)]
)
def test_sizes_parse(text, value):
    assert calibrate.parse_bytes(text) == value


def test_bad_plans_are_one_line_errors():
    for text in ("", "1x", "MiB", "-4k"):
        with pytest.raises(api.ScenarioError) as raised:
            calibrate.parse_bytes(text)
        assert str(raised.value) == f"--max-bytes {text!r}: expected a size such as 64MiB or 1GiB"
    with pytest.raises(api.ScenarioError, match="must be 4 KiB to 64 GiB"):
        calibrate.plan_for("quick", GEOMETRY, (0,), 1024, None)
    with pytest.raises(api.ScenarioError, match="--min-ms 0"):
        calibrate.plan_for("quick", GEOMETRY, (0,), None, 0)
    with pytest.raises(api.ScenarioError, match="not ones this process may run on"):
        calibrate.parse_cpus("9999")
    with pytest.raises(api.ScenarioError, match="expected a list such as 0-3,8"):
        calibrate.parse_cpus("one")


def test_calibrate_and_validate_end_to_end(tmp_path, monkeypatch, steer_cli):
    path = tmp_path / "host.toml"
    monkeypatch.setenv("STEER_HOST_CALIBRATION", str(path))
    small = ["--max-bytes", "256KiB", "--min-ms", "1", "--quiet"]
    done = steer_cli(
        "calibrate", *small, "--quick", "--json", str(tmp_path / "c.json"), "--plot", str(tmp_path / "c.png")
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {path}" in done.stdout
    written = json.loads((tmp_path / "c.json").read_text())
    assert {v["key"] for v in written["values"]} >= {"l1d.latency_cycles", "memory.idle_latency_ns"}
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")
    described = steer_cli("platforms", "--json")
    assert "measured on" in described.stdout

    done = steer_cli("validate", *small, "--quick", "--json", "-")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["calibration"] == str(path)
    assert {"ring_copy.l1", "ring_copy.dram", "random.dram", "strided.prefetch0", "strided.prefetch16"} <= {
        r["metric"] for r in body["rows"]
    }
    for row in body["rows"]:
        assert set(row) >= {"workload", "metric", "unit", "measured", "simulated", "spread"}
        assert row["measured"] > 0 and row["simulated"] > 0, row
        assert row["spread"][0] <= row["measured"] <= row["spread"][1]


def test_validate_measures_first_when_there_is_no_calibration(tmp_path, monkeypatch, steer_cli):
    path = tmp_path / "fresh" / "host.toml"
    monkeypatch.setenv("STEER_HOST_CALIBRATION", str(path))
    done = steer_cli("validate", "--max-bytes", "64KiB", "--min-ms", "1", "--quick", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "no calibration of this machine yet" in done.stderr
    assert path.exists() and "within 15%" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calibrate", "--max-bytes", "lots"], "--max-bytes 'lots': expected a size"),
        (["calibrate", "--cpus", "4096"], "--cpus '4096'"),
        (["calibrate", "--min-ms", "-1"], "--min-ms -1.0"),
        (["calibrate", "--max-bytes", "0"], "--max-bytes 0: must be 4 KiB to 64 GiB"),
        (["validate", "--max-bytes", "0"], "--max-bytes 0: must be 4 KiB to 64 GiB"),
        (["calibrate", "--out", "/proc/steer.toml", "--max-bytes", "8KiB", "--min-ms", "1"], "/proc/steer.toml"),
        (["validate", "--quick"], "host calibration"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, steer_cli, args, message):
    broken = tmp_path / "host.toml"
    broken.write_text("[l2\n")
    monkeypatch.setenv("STEER_HOST_CALIBRATION", str(broken))
    done = steer_cli(*args, "--quiet")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert broken.read_text() == "[l2\n", "nothing half-written"


class FakeProbes:
    """steer-probe's kernels as made-up functions of their arguments, each call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.clock_calls = 0

    def probe_clock_ghz(self, cpu, min_ns):
        self.calls.append(("clock", cpu, min_ns))
        self.clock_calls += 1
        return 3.0 if self.clock_calls == 1 else 3.5

    def probe_chase_ns(self, cpu, working_set, min_ns, chains=1):
        self.calls.append(("chase", cpu, working_set, min_ns, chains))
        return working_set / KIB + chains

    def probe_bandwidth_gbs(self, access, working_set, cpus, min_ns):
        self.calls.append(("bandwidth", access, working_set, tuple(cpus), min_ns))
        return len(access) + working_set / KIB + len(cpus)

    def probe_strided_scan_ns(self, cpu, working_set, stride, distance, min_ns):
        self.calls.append(("scan", cpu, working_set, stride, distance, min_ns))
        return 2.0

    def probe_peer_read_ns(self, cpu, peer, min_ns):
        self.calls.append(("peer", cpu, peer, min_ns))
        return 80.0

    def probe_huge_pages(self):
        return "madvise"


def test_measure_runs_every_kernel_once_per_repeat_and_takes_each_figure_from_its_own(monkeypatch):
    probes = FakeProbes()
    monkeypatch.setattr(calibrate, "_core", probes)
    monkeypatch.setattr(calibrate, "share_l3", lambda a, b: (a, b) != (2, 5))  # in different L3s
    plan = calibrate.Plan(max_bytes=64 * KIB, min_ms=0.5, repeats=2, per_octave=1, cpus=(2, 5))
    geometry = {"l1d.size_kib": 48, "l2.size_kib": 1024, "l3.size_kib": 32768}
    said = []
    m = calibrate.measure(plan, geometry, said.append)
    ns = 500_000
    chases = [4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB]
    levels = [24 * KIB, 64 * KIB]  # half of L1 (48 KiB), the rest capped at the largest working set
    one_pass = [
        ("clock", 2, ns),
        *[("chase", 2, ws, ns, 1) for ws in chases],
        ("chase", 2, 64 * KIB, ns, 32),
        *[("bandwidth", a, ws, (2,), ns) for a in ("read", "write", "copy") for ws in levels],
        # Each CPU streams its own half of the largest working set.
        *[("bandwidth", a, 32 * KIB, (2, 5), ns) for a in ("read", "write", "copy")],
        ("scan", 2, 64 * KIB, 64, 0, ns),
        ("peer", 2, 5, ns),
    ]
    assert probes.calls == one_pass + one_pass
    assert said == [i / 36 for i in range(1, 37)]
    assert m.clock_ghz == Figure(3.25, 3.0, 3.5, [3.0, 3.5])
    assert m.latency_ns == {ws: Figure(ws / KIB + 1, ws / KIB + 1, ws / KIB + 1, [ws / KIB + 1] * 2) for ws in chases}
    assert m.parallel_ns.median == 64 + 32
    assert m.bandwidth_gbs["write"] == {
        24 * KIB: Figure(30.0, 30.0, 30.0, [30.0, 30.0]),  # "write", 24 KiB, one CPU
        64 * KIB: Figure(70.0, 70.0, 70.0, [70.0, 70.0]),
    }
    assert {a: f.median for a, f in m.all_cores_gbs.items()} == {"read": 38.0, "write": 39.0, "copy": 38.0}
    assert m.line_read_gbs.median == 32.0 and m.peer_read_ns.median == 80.0 and m.peers_share_l3 is False
    assert (m.cpus, m.huge_pages, m.dram_bytes) == ([2, 5], "madvise", 64 * KIB)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", m.date), m.date
    # Two CPUs' shares of 4 KiB would be 2 KiB each: each streams at least 4 KiB.
    probes.calls.clear()
    small = calibrate.Plan(max_bytes=4 * KIB, min_ms=0.5, repeats=1, per_octave=1, cpus=(2, 5))
    calibrate.measure(small, geometry)
    assert [c[2] for c in probes.calls if c[0] == "bandwidth" and c[3] == (2, 5)] == [4 * KIB] * 3


def test_measure_on_one_cpu_has_no_peer_and_a_clock_that_reads_nothing_is_none(monkeypatch):
    probes = FakeProbes()
    probes.probe_clock_ghz = lambda cpu, min_ns: None
    monkeypatch.setattr(calibrate, "_core", probes)
    plan = calibrate.Plan(max_bytes=4 * KIB, min_ms=1.0, repeats=1, per_octave=2, cpus=(0,))
    m = calibrate.measure(plan, {"l1d.size_kib": 48, "l2.size_kib": 1024, "l3.size_kib": 32768})
    assert not [c for c in probes.calls if c[0] == "peer"]
    assert (m.clock_ghz, m.peer_read_ns, m.peers_share_l3) == (None, None, True)
    assert list(m.latency_ns) == [4 * KIB] and list(m.bandwidth_gbs["read"]) == [4 * KIB]


def test_two_cpus_share_an_l3_when_sysfs_lists_the_second_with_the_first(monkeypatch, tmp_path):
    monkeypatch.setattr(calibrate, "Path", lambda path: tmp_path / path.lstrip("/"))
    shared = tmp_path / "sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list"
    shared.parent.mkdir(parents=True)
    shared.write_text("0-3,8\n")
    assert calibrate.share_l3(0, 8) and calibrate.share_l3(0, 3)
    assert not calibrate.share_l3(0, 4)
    # Without sysfs, the transfer is taken as within one L3.
    assert calibrate.share_l3(1, 4)


# Made-up machines whose fits (every value with where it came from) are kept in
# tests/fixtures/calibrate/NAME.json; bless a change with STEER_BLESS=1 and review the diff.
FIT_CASES = {
    "made-up": {},
    "knee-at-sysfs-size": {"latency_ns": {**made_up().latency_ns, 16 * MIB: exact(21.0), 64 * MIB: exact(30.0)}},
    "peer-in-the-same-l3": {"peer_read_ns": Figure(30.5, 29.0, 31.25, [29.0, 30.5, 31.25])},
    "peer-in-another-l3": {"peer_read_ns": exact(120.5), "peers_share_l3": False},
    "no-clock": {"clock_ghz": None},
    "slow-chases": {"parallel_ns": exact(200.0), "clock_ghz": Figure(2.0, 1.9, 2.1, [1.9, 2.0, 2.1])},
    # The chase leaves the L3 at half of what sysfs says, or inside it: sysfs stays; past 2x it goes.
    "knee-at-half-sysfs": {"latency_ns": {**made_up().latency_ns, 16 * MIB: exact(21.0)}},
    "knee-inside-sysfs": {"latency_ns": {**made_up().latency_ns, 16 * MIB: exact(21.0), 32 * MIB: exact(21.0)}},
    # An L1 chase quicker than the issue it includes: no negative latency.
    "fast-l1": {"latency_ns": {**made_up().latency_ns, 4 * KIB: exact(0.9), 16 * KIB: exact(0.9)}},
    # Figures with more digits than a value keeps: each is rounded as the preset shows it.
    "many-digits": {
        "latency_ns": {**made_up().latency_ns, 64 * MIB: exact(100.5678)},
        "clock_ghz": exact(2.123456),
        "parallel_ns": exact(11.0517),
        "all_cores_gbs": {a: exact(40.12345) for a in calibrate.ACCESSES},
        "peer_read_ns": exact(30.56789),
    },
}


@pytest.mark.parametrize("case", sorted(FIT_CASES))
def test_each_fitted_value_and_its_provenance_is_as_blessed(case):
    got = [asdict(v) for v in calibrate.fit(made_up(**FIT_CASES[case]), GEOMETRY)]
    path = Path(__file__).parent / "fixtures" / "calibrate" / f"{case}.json"
    if os.environ.get("STEER_BLESS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())


def test_the_json_names_the_file_and_holds_every_value_and_measurement(tmp_path):
    m = made_up()
    values = calibrate.fit(m, GEOMETRY)
    data = json.loads(calibrate.as_json(m, values, tmp_path / "host.toml"))
    assert list(data) == ["calibration", "values", "measurements"]
    assert data["calibration"] == str(tmp_path / "host.toml")
    assert data["values"][0] == {"key": "core.freq_ghz", "value": 2.0, "source": values[0].source}
    assert data["measurements"]["host"] == "box" and data["measurements"]["dram_bytes"] == 512 * MIB

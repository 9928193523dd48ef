"""`steer validate` against made-up probes and a made-up simulator: which loops it times at which
sizes, with which arguments, how each row is made from them, its progress, its table and its JSON.
The command end to end on this machine is in test_calibrate."""

import io
import json
from types import SimpleNamespace

import pytest

from steer import calibrate, cli, host_cli, validate
from steer.calibrate import Figure
from steer.output import GIB, KIB, MIB

PLATFORM = {
    "l1d.size_kib": 48,
    "l2.size_kib": 2048,
    "l3.size_kib": 32768,
    "memory.idle_latency_ns": 100.0,
    "core.outstanding_misses": 10,
}


class Probes:
    """Stands in for the native probes: records each call and answers 1, 2, 3, ... in turn."""

    def __init__(self, cpus=(4, 6)) -> None:
        self.calls: list[tuple] = []
        self.cpus = list(cpus)

    def answer(self, *call) -> float:
        # The native probes take whole numbers only.
        assert all(type(argument) is int for argument in call[1:]), call
        self.calls.append(call)
        return float(len(self.calls))

    def probe_ring_copy_ns(self, *args):
        return self.answer("ring_copy", *args)

    def probe_random_reads_ns(self, *args):
        return self.answer("random", *args)

    def probe_strided_scan_ns(self, *args):
        return self.answer("strided", *args)

    def probe_handoff_ns(self, *args):
        return self.answer("handoff", *args)

    def probe_producer_consumer_ns(self, *args):
        return self.answer("producer_consumer", *args)

    def probe_peer_read_ns(self, *args):
        return self.answer("peer_read", *args)

    def probe_allowed_cpus(self):
        return self.cpus


@pytest.fixture
def probes(monkeypatch) -> Probes:
    fake = Probes()
    monkeypatch.setattr(validate, "_core", fake)
    return fake


def summary(case: validate.Case) -> tuple:
    return (case.workload, case.metric, case.unit, case.cpu, case.key)


def test_each_level_below_the_dram_working_set_gets_a_ring_copy_and_random_reads_but_the_l1(probes):
    found = validate.cases(PLATFORM, [3, 5], 1000, 256 * MIB)
    assert [summary(c) for c in found] == [
        ("ring copy, 24 KiB ring (L1)", "ring_copy.l1", "ns/buffer", 3, "exec_ns_per_buffer"),
        ("ring copy, 1 MiB ring (L2)", "ring_copy.l2", "ns/buffer", 3, "exec_ns_per_buffer"),
        ("ring copy, 16 MiB ring (L3)", "ring_copy.l3", "ns/buffer", 3, "exec_ns_per_buffer"),
        ("ring copy, 256 MiB ring (DRAM)", "ring_copy.dram", "ns/buffer", 3, "exec_ns_per_buffer"),
        ("memcpy 4 KiB from DRAM", "memcpy.4k", "ns/copy", 3, "exec_ns_per_buffer"),
        ("memcpy 64 KiB from DRAM", "memcpy.64k", "ns/copy", 3, "exec_ns_per_buffer"),
        ("memcpy 1 MiB from DRAM", "memcpy.1024k", "ns/copy", 3, "exec_ns_per_buffer"),
        ("random reads over 1 MiB (L2)", "random.l2", "ns/load", 3, "exec_ns_per_load"),
        ("random reads over 16 MiB (L3)", "random.l3", "ns/load", 3, "exec_ns_per_load"),
        ("random reads over 256 MiB (DRAM)", "random.dram", "ns/load", 3, "exec_ns_per_load"),
        (
            "strided scan, 256 B stride over 256 MiB, no software prefetch",
            "strided.prefetch0",
            "ns/load",
            3,
            "exec_ns_per_load",
        ),
        (
            "strided scan, 256 B stride over 256 MiB, software prefetch 16 ahead",
            "strided.prefetch16",
            "ns/load",
            3,
            "exec_ns_per_load",
        ),
        ("handoff of a line between CPUs 3 and 5", "handoff", "ns/round trip", 3, "ns_per_round_trip"),
        (
            "producer on CPU 3 writing 2 KiB, consumer on CPU 5 reading it",
            "producer_consumer.2k",
            "ns/buffer",
            3,
            "ns_per_round_trip",
        ),
        (
            "producer on CPU 3 writing 64 KiB, consumer on CPU 5 reading it",
            "producer_consumer.64k",
            "ns/buffer",
            3,
            "ns_per_round_trip",
        ),
    ]
    # A pass of misses over N lines at 100 ns / 10 outstanding: 100 us plus 1.5 x 10 ns a line, up
    # to 50 ms; a scan and a handoff warm up in 100 us.
    assert [c.warmup_us for c in found] == pytest.approx(
        [105.76, 345.76, 4032.16, 50_000.0, *[50_000.0] * 3, 345.76, 4032.16, 50_000.0, *[100.0] * 5]
    )
    assert [c.simulated for c in found] == [
        {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": 24 * KIB, "buffer_bytes": 2048},
        {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": MIB, "buffer_bytes": 2048},
        {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": 16 * MIB, "buffer_bytes": 2048},
        {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": 256 * MIB, "buffer_bytes": 2048},
        *(
            {"kind": "probe", "pattern": "ring_copy", "working_set_bytes": 256 * MIB, "buffer_bytes": size}
            for size in (4 * KIB, 64 * KIB, MIB)
        ),
        {"kind": "probe", "pattern": "random", "working_set_bytes": MIB},
        {"kind": "probe", "pattern": "random", "working_set_bytes": 16 * MIB},
        {"kind": "probe", "pattern": "random", "working_set_bytes": 256 * MIB},
        *(
            {
                "kind": "probe",
                "pattern": "strided",
                "working_set_bytes": 256 * MIB,
                "stride_bytes": 256,
                "prefetch_distance": distance,
            }
            for distance in (0, 16)
        ),
        {"kind": "handoff", "cpu": 3, "peer_cpu": 5},
        {"kind": "handoff", "cpu": 3, "peer_cpu": 5, "buffer_bytes": 2 * KIB},
        {"kind": "handoff", "cpu": 3, "peer_cpu": 5, "buffer_bytes": 64 * KIB},
    ]
    # Each loop is timed on the first CPU (the pairs on both), for at least the time asked.
    assert [c.native(7) for c in found] == [float(n) for n in range(1, 16)]
    assert probes.calls == [
        ("ring_copy", 3, 12, 2048, 1000),
        ("ring_copy", 3, 512, 2048, 1000),
        ("ring_copy", 3, 8192, 2048, 1000),
        ("ring_copy", 3, 131072, 2048, 1000),
        ("ring_copy", 3, 65536, 4 * KIB, 1000),
        ("ring_copy", 3, 4096, 64 * KIB, 1000),
        ("ring_copy", 3, 256, MIB, 1000),
        ("random", 3, MIB, 1000),
        ("random", 3, 16 * MIB, 1000),
        ("random", 3, 256 * MIB, 1000),
        ("strided", 3, 256 * MIB, 256, 0, 1000),
        ("strided", 3, 256 * MIB, 256, 16, 1000),
        ("handoff", 3, 5, 1000),
        ("producer_consumer", 3, 5, 2 * KIB, 1000),
        ("producer_consumer", 3, 5, 64 * KIB, 1000),
    ]
    # Each case names the model values it checks, and the row and its JSON carry them.
    assert found[0].checks == ("core.issue_cycles_per_line", "core.store_issue_cycles_per_line")
    assert "core.fill_cycles_per_line" in found[1].checks
    assert found[-1].checks[0] == "fabric.peer_l2_latency_ns"
    assert all(case.checks for case in found)


def test_a_small_dram_working_set_drops_the_levels_it_does_not_exceed_and_one_cpu_drops_the_handoff(probes):
    metrics = [c.metric for c in validate.cases(PLATFORM, [0], 1000, 64 * KIB)]
    # A 64 KiB ring holds two copies of 4 KiB, not of 64 KiB.
    assert metrics == [
        "ring_copy.l1",
        "ring_copy.dram",
        "memcpy.4k",
        "random.dram",
        "strided.prefetch0",
        "strided.prefetch16",
    ]
    # Below half the L1 only DRAM is left, and its random reads stay.
    metrics = [c.metric for c in validate.cases(PLATFORM, [0, 1], 1000, 24 * KIB)]
    assert metrics == [
        "ring_copy.dram",
        "memcpy.4k",
        "random.dram",
        "strided.prefetch0",
        "strided.prefetch16",
        "handoff",
        "producer_consumer.2k",
        "producer_consumer.64k",
    ]
    # The handoff takes the first two CPUs of any more.
    handoff = next(c for c in validate.cases(PLATFORM, [7, 2, 5], 1000, 24 * KIB) if c.metric == "handoff")
    assert handoff.simulated == {
        "kind": "handoff",
        "cpu": 7,
        "peer_cpu": 2,
    }


def test_the_warm_up_outlasts_one_pass_of_misses_within_50_ms():
    platform = {"memory.idle_latency_ns": 100.0, "core.outstanding_misses": 10}
    # 64 MiB is 1 Mi lines at 10 ns each: 10.5 ms, and half again.
    assert validate.pass_us(platform, 64 * MIB) == pytest.approx(100.0 + 1.5 * 10485.76)
    assert validate.pass_us(platform, 64 * GIB) == 50_000.0


def test_a_case_is_simulated_on_the_host_preset_and_read_from_its_cpu(monkeypatch):
    case = next(c for c in validate.cases(PLATFORM, [3, 5], 1000, 256 * MIB) if c.metric == "handoff")
    assert validate.scenario_text(case) == (
        '[platform]\npreset = "host"\n'
        "[sim]\nwarmup_us = 100.0\nmeasure_us = 1000.0\n"
        '[[workloads]]\nkind = "handoff"\ncpu = 3\npeer_cpu = 5\n'
    )
    calls = []

    def run_scenario(*args):
        calls.append(args)
        cores = {str(cpu): {"workload": {"ns_per_round_trip": 10.0 * cpu}} for cpu in (3, 5)}
        return json.dumps({"cores": cores}), None

    monkeypatch.setattr(validate, "_core", SimpleNamespace(run_scenario=run_scenario))
    assert validate.simulate(case) == 30.0
    assert calls == [(validate.scenario_text(case), "validate", "validate", [], None)]


def test_a_case_runs_in_the_simulator():
    platform = {**PLATFORM, "l1d.size_kib": 64}
    case = validate.cases(platform, [0], 1000, 64 * KIB)[0]
    assert case.metric == "ring_copy.l1"
    assert validate.simulate(case) > 0


@pytest.mark.parametrize(
    ("l3_kib", "max_bytes", "dram_bytes"),
    [(32768, None, 256 * MIB), (131072, None, 512 * MIB), (524288, None, GIB), (524288, 8 * MIB, 8 * MIB)],
)
def test_the_dram_working_set_is_four_l3s_within_256_mib_to_1_gib_unless_given(
    monkeypatch, probes, l3_kib, max_bytes, dram_bytes
):
    monkeypatch.setattr(validate, "platform_values", lambda name: {**PLATFORM, "l3.size_kib": l3_kib})
    monkeypatch.setattr(validate, "simulate", lambda case: 0.0)
    validate.validate(1, 1.0, max_bytes=max_bytes)
    assert [call[2] for call in probes.calls if call[0] == "strided"] == [dram_bytes, dram_bytes]


def test_each_row_is_the_median_of_its_repeats_against_the_simulated_figure(monkeypatch, probes):
    asked = []
    monkeypatch.setattr(validate, "platform_values", lambda name: asked.append(name) or PLATFORM)
    monkeypatch.setattr(validate, "simulate", lambda case: 100.0 * len(case.metric))
    seen = []
    rows = validate.validate(3, 2.5, progress=seen.append, max_bytes=64 * KIB)
    assert asked == ["host"]
    # No CPUs given: the ones this process may run on (4 and 6), and so the pairs.
    assert [r.metric for r in rows] == [
        "ring_copy.l1",
        "ring_copy.dram",
        "memcpy.4k",
        "random.dram",
        "strided.prefetch0",
        "strided.prefetch16",
        "handoff",
        "producer_consumer.2k",
        "producer_consumer.64k",
    ]
    assert probes.calls[0] == ("ring_copy", 4, 12, 2048, 2_500_000)
    assert probes.calls[-1] == ("producer_consumer", 4, 6, 64 * KIB, 2_500_000)
    assert [len(r.measured.samples) for r in rows] == [3] * 9
    assert rows[1].measured == Figure(5.0, 4.0, 6.0, [4.0, 5.0, 6.0])
    assert [r.simulated for r in rows] == [1200.0, 1400.0, 900.0, 1100.0, 1700.0, 1800.0, 700.0, 2000.0, 2100.0]
    assert (rows[0].workload, rows[0].unit) == ("ring copy, 24 KiB ring (L1)", "ns/buffer")
    assert rows[-1].checks == ("fabric.peer_l2_latency_ns", *validate.ISSUE, "core.outstanding_misses")
    # Four steps a case: three repeats, then its simulation.
    assert seen == pytest.approx([k / 36 for k in range(1, 37)])

    rows = validate.validate(1, 1.0, cpus=[9], max_bytes=64 * KIB)
    assert "handoff" not in [r.metric for r in rows]
    assert {call[1] for call in probes.calls[27:]} == {9}


def row(measured: list[float], simulated: float, metric: str = "m") -> validate.Row:
    return validate.Row(f"loop {metric}", metric, "ns", Figure.of(measured), simulated)


def test_a_row_is_within_target_up_to_15_percent_either_way():
    assert row([10.0, 9.0, 12.0], 11.4).error == pytest.approx(0.14)
    assert row([10.0, 9.0, 12.0], 11.4).within
    assert row([10.0], 11.45).within and row([10.0], 8.55).within
    assert not row([10.0], 11.55).within and not row([10.0], 8.45).within


def test_the_table_and_the_json_give_each_row_with_its_spread_and_verdict():
    rows = [row([10.0, 9.0, 12.0], 11.4, "a"), row([2000.0, 1000.0, 4000.0], 1234.0, "b")]
    assert validate.HEADERS == ["workload", "unit", "measured", "spread", "simulated", "error", "within 15%"]
    assert validate.table_rows(rows) == [
        ["loop a", "ns", "10", "9-12", "11.4", "+14%", "yes"],
        ["loop b", "ns", "2e+03", "1e+03-4e+03", "1.23e+03", "-38%", "NO"],
    ]
    body = json.loads(validate.as_json(rows, "/home/u/host.toml", "box"))
    assert body == {
        "host": "box",
        "calibration": "/home/u/host.toml",
        "target": 0.15,
        "rows": [
            {
                "workload": "loop a",
                "metric": "a",
                "unit": "ns",
                "measured": 10.0,
                "simulated": 11.4,
                "error": pytest.approx(0.14),
                "within_target": True,
                "spread": [9.0, 12.0],
                "samples": [10.0, 9.0, 12.0],
                "checks": [],
            },
            {
                "workload": "loop b",
                "metric": "b",
                "unit": "ns",
                "measured": 2000.0,
                "simulated": 1234.0,
                "error": pytest.approx(-0.383),
                "within_target": False,
                "spread": [1000.0, 4000.0],
                "samples": [2000.0, 1000.0, 4000.0],
                "checks": [],
            },
        ],
    }
    assert (
        validate.as_json([], "x", "y")
        == '{\n  "host": "y",\n  "calibration": "x",\n  "target": 0.15,\n  "rows": []\n}\n'
    )


def test_the_plot_puts_each_ratio_first_row_on_top_with_its_spread_in_the_target_band():
    import matplotlib.colors

    rows = [row([10.0, 8.0, 12.5], 11.0, "a"), row([4.0], 2.0, "b")]
    ax = validate.figure(rows).axes[1]
    assert dict(zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()])) == {1: "loop a", 0: "loop b"}
    bars, points = ax.collections
    # The ratio at the median, its bar from the highest measurement to the lowest; in the band green.
    assert points.get_offsets().tolist() == [[1.1, 1.0], [0.5, 0.0]]
    assert [matplotlib.colors.to_hex(c) for c in points.get_facecolors()] == ["#55a868", "#c44e52"]
    assert [segment.tolist() for segment in bars.get_segments()] == [
        [[0.88, 1.0], [1.375, 1.0]],
        [[0.5, 0.0], [0.5, 0.0]],
    ]
    band = ax.patches[0]
    assert (band.get_x(), band.get_width()) == pytest.approx((0.85, 0.3))
    assert ax.lines[0].get_xdata() == [1.0, 1.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["within 15%"]
    assert (ax.get_xscale(), ax.get_xlabel()) == ("log", "simulated / measured (bars: the measured spread)")


def test_the_parity_panel_puts_each_probe_against_its_measurement_in_the_band_and_names_the_misses():
    import matplotlib.colors

    rows = [row([10.0, 8.0, 12.5], 11.0, "a"), row([4.0], 2.0, "b"), row([100.0, 90.0], 200.0, "c")]
    rows[2].unit = "ns/round trip"
    fig = validate.figure(rows)
    assert fig._suptitle.get_text() == (
        "steer validate: 1 of 3 within 15% of the measured median (every probe validates: none is fitted on)"
    )
    ax = fig.axes[0]
    band, spread_ns, ns, spread_trip, trip = ax.collections
    # Log axes from a third below the lowest value (the lowest measurement included) to half above.
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert ax.get_xlim() == ax.get_ylim() == pytest.approx((2.0 / 1.5, 200.0 * 1.5))
    # The band is 15% either way of the diagonal, across the panel.
    low, high = ax.get_xlim()
    assert band.get_paths()[0].vertices.min(axis=0) == pytest.approx([low, low * 0.85])
    assert band.get_paths()[0].vertices.max(axis=0) == pytest.approx([high, high * 1.15])
    assert list(ax.lines[0].get_xdata()) == list(ax.lines[0].get_ydata()) == [low, high]
    # A marker per unit, the verdict's colour, the measured spread across.
    assert ns.get_offsets().tolist() == [[10.0, 11.0], [4.0, 2.0]] and trip.get_offsets().tolist() == [[95.0, 200.0]]
    assert [matplotlib.colors.to_hex(c) for c in ns.get_facecolors()] == ["#55a868", "#c44e52"]
    assert [s.tolist() for s in spread_ns.get_segments()] == [[[8.0, 11.0], [12.5, 11.0]], [[4.0, 2.0], [4.0, 2.0]]]
    assert [s.tolist() for s in spread_trip.get_segments()] == [[[90.0, 200.0], [100.0, 200.0]]]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["within 15%", "ns", "ns/round trip"]
    # Each miss named by its metric: above the diagonal at the top left, below it at the right.
    assert [(t.get_text(), t.xy, t.xyann) for t in ax.texts] == [("c", (95.0, 200.0), (0.03, 0.95))] + [
        ("b", (4.0, 2.0), (0.97, 0.45))
    ]


def test_the_plot_is_a_png_a_row_taller_for_each_row_beyond_nine():
    from PIL import Image

    sizes = []
    for count in (1, 9, 12):
        rows = [row([10.0, 9.0, 12.0], 11.4 + n) for n in range(count)]
        png = validate.plot(rows)
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        sizes.append(Image.open(io.BytesIO(png)).size)
    # 15 inches wide; 0.45 inch a row and 1.5 more, at least 5.5, at 120 dpi.
    assert sizes == [(1800, 660), (1800, 666), (1800, 828)]


@pytest.fixture
def command(monkeypatch, tmp_path, capsys):
    """`steer validate` in this process with made-up rows: returns what it asked `validate` for
    and a function that runs it and returns its output."""
    calibration = tmp_path / "host.toml"
    calibration.write_text("")
    monkeypatch.setattr(calibrate, "calibration_path", lambda: calibration)
    monkeypatch.setattr(host_cli.socket, "gethostname", lambda: "box")
    asked = []

    def made_up(repeats, min_ms, progress, cpus, max_bytes):
        asked.append((repeats, min_ms, cpus, max_bytes))
        return [row([10.0], 11.0, "a"), row([10.0], 20.0, "b")]

    monkeypatch.setattr(validate, "validate", made_up)
    monkeypatch.setattr(validate, "peer_moved", lambda repeats, min_ms, cpus: None)

    def run(*args: str) -> str:
        assert cli.main(["validate", "--quiet", *args]) == 0
        return capsys.readouterr().out

    return SimpleNamespace(calibration=calibration, asked=asked, run=run)


@pytest.mark.parametrize(
    ("shared", "calibrated", "warned"),
    [
        (True, 2.0, False),
        (True, 1.4, False),
        (True, 1.3, True),
        (True, 3.0, False),
        (True, 3.1, True),
        (False, 1.3, True),
    ],
)
def test_a_core_to_core_read_that_moved_since_the_calibration_is_warned_of(
    monkeypatch, probes, shared, calibrated, warned
):
    # The probe answers 1, 2, 3 ns: a median of 2; the calibration holds the read less its issue.
    key = "fabric.peer_l2_latency_ns" if shared else "fabric.remote_cache_latency_ns"
    platform = {"core.issue_cycles_per_line": 2.0, "core.freq_ghz": 4.0, key: calibrated - 0.5}
    monkeypatch.setattr(validate, "platform_values", lambda name: platform)
    monkeypatch.setattr(validate, "share_l3", lambda a, b: (a, b) == (4, 6) and shared)
    found = validate.peer_moved(3, 2.0)
    assert probes.calls == [
        ("peer_read", 4, 6, 2_000_000),
        ("peer_read", 4, 6, 2_000_000),
        ("peer_read", 4, 6, 2_000_000),
    ]
    assert (found is not None) == warned, found
    if warned:
        assert found.startswith(
            f"{key}: cpu 4 reads lines cpu 6 just wrote in 2.0 ns now (1-3, n=3), {calibrated:.1f} ns"
        )


def test_one_cpu_has_no_core_to_core_read_to_check(monkeypatch, probes):
    monkeypatch.setattr(validate, "platform_values", lambda name: pytest.fail("read the calibration"))
    assert validate.peer_moved(3, 2.0, [5]) is None
    assert probes.calls == []


def test_the_command_times_five_repeats_of_30_ms_or_three_of_10_ms_quick(command):
    out = command.run()
    command.run("--quick")
    command.run("--quick", "--min-ms", "2", "--cpus", "0", "--max-bytes", "1MiB")
    assert command.asked == [(5, 30.0, None, None), (3, 10.0, None, None), (3, 2.0, [0], MIB)]
    assert out.splitlines()[1].split() == ["loop", "a", "ns", "10", "10-10", "11", "+10%", "yes"]
    assert out.splitlines()[-1] == f"1 of 2 within 15% of the measured median (calibration: {command.calibration})"


def test_the_command_warns_of_a_core_to_core_read_that_moved_and_still_gives_its_rows(command, monkeypatch, capsys):
    monkeypatch.setattr(validate, "peer_moved", lambda repeats, min_ms, cpus: "fabric.x: moved")
    assert cli.main(["validate", "--quiet", "--quick"]) == 0
    out, err = capsys.readouterr()
    assert "1 of 2 within 15%" in out
    assert err == "steer: warning: fabric.x: moved\n"


def test_the_command_writes_json_and_a_plot_or_json_alone_to_stdout(command, tmp_path):
    rows = [row([10.0], 11.0, "a"), row([10.0], 20.0, "b")]
    assert command.run("--json", "-") == validate.as_json(rows, command.calibration, "box")
    out = command.run("--json", str(tmp_path / "v.json"), "--plot", str(tmp_path / "v.png"))
    assert out.splitlines()[-2:] == [f"wrote {tmp_path / 'v.png'}", f"wrote {tmp_path / 'v.json'}"]
    assert (tmp_path / "v.json").read_text() == validate.as_json(rows, command.calibration, "box")
    assert (tmp_path / "v.png").read_bytes().startswith(b"\x89PNG")


def test_the_command_calibrates_quickly_first_where_there_is_no_calibration(command, monkeypatch, capsys):
    command.calibration.unlink()
    calibrated = []
    monkeypatch.setattr(host_cli, "calibrate_and_write", lambda args, mode, out, extra: calibrated.append((mode, out)))
    command.run()
    assert calibrated == [("quick", command.calibration)]


@pytest.mark.parametrize(
    ("option", "message"),
    [(["--cpus", "x"], "--cpus 'x': expected a list such as 0-3,8"), (["--max-bytes", "lots"], "--max-bytes 'lots'")],
)
def test_a_bad_option_is_refused_before_a_first_calibration(command, monkeypatch, capsys, option, message):
    command.calibration.unlink()
    monkeypatch.setattr(host_cli, "calibrate_and_write", lambda *args: pytest.fail("calibrated"))
    assert cli.main(["validate", "--quiet", *option]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"steer: error: {message}") and err.count("\n") == 1


def test_the_json_reads_back_as_the_rows_and_anything_else_is_one_line(tmp_path):
    rows = [row([10.0, 8.0, 12.5], 11.0, "a"), row([4.0], 2.0, "b")]
    rows[0].checks = ("core.fill_cycles_per_line",)
    path = tmp_path / "v.json"
    path.write_text(validate.as_json(rows, tmp_path / "host.toml", "box"))
    assert validate.load(path) == ("box", rows)
    for text, why in [
        ("[", "not the output of steer validate --json: Expecting value"),
        ('{"rows": []}', "not the output of steer validate --json: 'host'"),
        (validate.as_json([row([10.0], 0.0, "z")], "x", "y"), "z: measured, spread and simulated must be positive"),
    ]:
        path.write_text(text)
        with pytest.raises(validate.ScenarioError) as raised:
            validate.load(path)
        assert str(raised.value).startswith(f"{path}: {why}")

"""`steer`'s own commands (run, compare, reproduce, resolve, trace, tph, doctor) in process: the
text each prints from a hand-made result, the files it writes, and how `main` turns errors into
exit codes. test_cli.py checks the same contract through a subprocess, end to end."""

import io
import json
import re
import tomllib

import pytest
from steer._core import ScenarioError, SteerError

import steer
from steer import cli
from steer.cli import main

SHORT = ["--set", "sim.measure_us=50", "--quiet"]


def fills(**shares):
    return {s: shares.get(s, 0.0) for s in ("l1", "l2", "peer_l2", "l3", "remote_cache", "dram")}


def hand_made_result():
    """One NIC, one core with a count, a rate and a latency summary: the smallest result that
    reaches every part of `format_run`."""
    return {
        "scenario": "s",
        "platform": "p",
        "sim": {
            "measured_ns": 1_500_000.0,
            "warmup_ns": 1_000_000.0,
            "seed": 7,
            "simulated_ns": 3_500_000.0,
            "host_seconds": 1.234,
            "line_ops": 1234567,
        },
        "dram": {
            "read_gbps": 1.234,
            "write_gbps": 2.0,
            "total_gbps": 3.234,
            "channels": [{"read_gbps": 1.0, "write_gbps": 3.0}, {"read_gbps": 0.0, "write_gbps": 0.0}],
        },
        "devices": {
            "nic0": {"placement": "l2", "offered_gbps": 100.0, "rx_gbps": 99.5, "drops": 3},
            "dsa0": {"node": 1},
        },
        "cores": {
            "1": {
                "role": "rx_loop",
                "fills": fills(l1=0.5, l2=0.25, dram=0.25),
                "workload": {
                    "busy": 0.5,
                    "cycles": 100.0,
                    "exec_ns": 40.0,
                    "exec_ns_per_packet": 4.0,
                    "packets": 10,
                    "cycles_per_packet": 10.04,
                    "latency_ns": {"count": 2, "p50": 123.456, "p99": 987.65},
                    "idle_ns": {"count": 0},
                },
            }
        },
    }


def test_a_run_prints_its_window_dram_devices_fills_statistics_and_host_time():
    assert cli.format_run(hand_made_result()) == "\n".join(
        [
            "s on p: 1500 µs measured after 1000 µs warm-up (seed 7)",
            "",
            "DRAM  read 1.23 GB/s   write 2.00 GB/s   total 3.23 GB/s   (2 channels)",
            "",
            "device  placement  offered Gb/s  rx Gb/s  drops",
            "nic0    l2               100.00    99.50      3",
            "",
            "Demand accesses by where they were satisfied:",
            "cpu  role        l1     l2  peer_l2    l3  remote_cache   dram   busy",
            "  1  rx_loop  50.0%  25.0%     0.0%  0.0%          0.0%  25.0%  50.0%",
            "",
            "Workload statistics (`steer stats SCENARIO` says what each means):",
            "cpu  role     statistics",
            "  1  rx_loop  packets 10, cycles_per_packet 10.04, latency_ns p50 123.5 p99 987.6",
            "",
            "simulated 3.500 ms in 1.23 s host time, 1,234,567 line operations measured",
        ]
    )


def test_a_run_without_devices_cores_or_statistics_prints_none_of_their_tables():
    result = hand_made_result()
    result["devices"] = {"dsa0": {"node": 1}}
    result["cores"]["1"]["workload"] = {"busy": 0.5}
    text = cli.format_run(result)
    assert "device" not in text and "Workload statistics" not in text
    assert "  1  rx_loop  50.0%  25.0%     0.0%  0.0%          0.0%  25.0%  50.0%" in text
    result["cores"]["1"].pop("workload")
    assert cli.format_run(result).splitlines()[4:7] == [
        "Demand accesses by where they were satisfied:",
        "cpu  role        l1     l2  peer_l2    l3  remote_cache   dram  busy",
        "  1  rx_loop  50.0%  25.0%     0.0%  0.0%          0.0%  25.0%",
    ]
    result["cores"] = {}
    assert "Demand accesses" not in cli.format_run(result)


def test_hbm_traffic_is_shown_beside_the_ddr_channels():
    result = hand_made_result()
    result["dram"]["hbm"] = [
        {"node": 2, "read_gbps": 0.25, "write_gbps": 1.0},
        {"node": 3, "read_gbps": 0.5, "write_gbps": 0.0},
    ]
    assert cli.format_run(result).splitlines()[2:5] == [
        "DRAM  read 1.23 GB/s   write 2.00 GB/s   total 3.23 GB/s   (2 DDR channels, 2 HBM nodes)",
        "  of which HBM  read 0.75 GB/s   write 1.00 GB/s",
        "",
    ]


def test_cores_without_demand_accesses_show_how_busy_they_were_not_an_empty_fill_table():
    result = hand_made_result()
    result["cores"]["1"]["fills"] = dict.fromkeys(result["cores"]["1"]["fills"], 0.0)
    text = cli.format_run(result)
    assert "Demand accesses" not in text
    assert text.splitlines()[7:10] == [
        "Cores (no demand access simulated: bulk reads and copies move as flows, not lines):",
        "cpu  role      busy",
        "  1  rx_loop  50.0%",
    ]


def test_a_finished_copy_or_query_is_measured_over_its_own_time_without_a_warning(steer_cli):
    for args, took in (
        (["dsa-copy", "--set", "total_bytes=16777216"], r"bytes in ([\d.]+) ms"),
        (["qdp", "--set", "column_bytes=16777216", "--set", "block_bytes=1048576"], r"query: ([\d.]+) ms"),
    ):
        done = steer_cli("run", *args, "--quiet")
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr)
        measured = re.search(r"(\d+) µs measured", done.stdout)
        assert measured and int(measured[1]) == round(1000 * float(re.search(took, done.stdout)[1])), done.stdout
        assert "DRAM  read 0.00" not in done.stdout, done.stdout


def test_workload_statistics_leave_out_window_totals_and_empty_latency_summaries():
    core = hand_made_result()["cores"]["1"]
    assert cli.shown_stats(core) == [
        ("packets", 10),
        ("cycles_per_packet", 10.04),
        ("latency_ns", {"count": 2, "p50": 123.456, "p99": 987.65}),
        ("idle_ns", {"count": 0}),
    ]
    assert cli.workload_stats(core) == [
        ("packets", "10"),
        ("cycles_per_packet", "10.04"),
        ("latency_ns", "p50 123.5 p99 987.6"),
    ]
    assert cli.shown_stats({"role": "x"}) == []


def copy_result(seconds, latency_us):
    return {
        "copy": {
            "bytes": 1048576,
            "seconds": seconds,
            "gibps": 2.5,
            "descriptors": 1024,
            "per_descriptor_us": 0.4,
            "latency_us": latency_us,
            "devices": ["dsa0"],
        },
        "devices": {
            "dsa0": {"node": 1, "bytes": 1048576, "descriptors": 1024, "busy_fraction": 0.75, "wq": {"retries": 2}},
            "dsa1": {"node": 3, "bytes": 0, "descriptors": 0, "busy_fraction": 0.0, "wq": {"retries": 0}},
        },
    }


def test_a_copy_prints_its_rate_and_only_the_engines_that_took_part():
    assert cli.format_copy(copy_result(0.002, 1.5)) == "\n".join(
        [
            "copy: 1,048,576 bytes in 2.000 ms = 2.50 GiB/s; 1,024 descriptors, 0.400 µs each; 1.500 µs per submission",
            "device  node      bytes  descriptors   busy  retries",
            "dsa0       1  1,048,576         1024  75.0%        2",
        ]
    )
    unfinished = copy_result(None, None)
    unfinished["copy"]["devices"] = []
    assert cli.format_copy(unfinished) == "copy: 1,048,576 bytes copied, not finished within sim.measure_us"


def query(total_us, hit_rate):
    return {
        "total_us": total_us,
        "blocks": 4096,
        "scan_a_us": 1500.0,
        "scan_b_us": None,
        "aggregate_us": 2.5,
        "hit_rate": hit_rate,
        "ready_blocks": 3,
        "in_flight_blocks": 2,
        "missed_blocks": 1,
        "copy_wait_us": 12.0,
        "cache_evicted": 5,
        "cache_uncached": 6,
    }


def test_a_query_prints_its_pipeline_and_what_the_cache_did():
    assert cli.format_query(query(2000.0, 0.5)) == (
        "query: 2.000 ms over 4,096 blocks per column (scan_a 1.500 ms, scan_b -, aggregate 0.003 ms)\n"
        "cache: hit rate 50.0% (3 ready, 2 in flight, 1 missed when aggregated); aggregate waited 0.012 ms "
        "for copies; 5 flushed, 6 without room"
    )
    assert cli.format_query(query(None, None)) == (
        "query: not finished within sim.measure_us (scan_a 1.500 ms, scan_b -, aggregate 0.003 ms)"
    )


def test_a_run_with_a_copy_or_a_query_prints_them_before_the_cores():
    result = hand_made_result() | copy_result(None, None)
    result["devices"] = copy_result(None, None)["devices"]
    result["query"] = query(None, None)
    lines = cli.format_run(result).splitlines()
    assert lines[4:7] == [
        "copy: 1,048,576 bytes copied, not finished within sim.measure_us",
        "device  node      bytes  descriptors   busy  retries",
        "dsa0       1  1,048,576         1024  75.0%        2",
    ]
    assert lines[7:11] == ["", lines[8], "", "Demand accesses by where they were satisfied:"]
    assert lines[8].startswith("query: not finished")


def test_uprof_prints_one_column_per_controller_named_by_socket():
    result = {
        "dram": {
            "channels": [
                {"read_gbps": 1.0, "write_gbps": 3.0},
                {"read_gbps": 0.0, "write_gbps": 0.0},
                {"read_gbps": 2.0, "write_gbps": 0.0},
                {"read_gbps": 0.125, "write_gbps": 0.375},
            ]
        }
    }
    assert cli.format_uprof(result, 2).split("\n") == [
        "#umc\tsocket:0-umc:0\tsocket:0-umc:1\tsocket:1-umc:0\tsocket:1-umc:1",
        "% UMC CAS for reads\t25.000\t0.000\t100.000\t25.000",
        "% UMC CAS for writes\t75.000\t0.000\t0.000\t75.000",
        "UMC est read BW (GB/s)\t1.000\t0.000\t2.000\t0.125",
        "UMC est write BW (GB/s)\t3.000\t0.000\t0.000\t0.375",
    ]


def test_stalls_and_a_stalled_window_are_one_warning_each(capsys):
    cli.warn_stalls(
        {
            "sim": {
                "stalled_at_ns": 150_000.0,
                "stalls": [{"agent": "cpu 2 (pingpong)", "since_ns": 2_500_000.0, "reason": "waits for a message"}],
            }
        }
    )
    assert capsys.readouterr().err.splitlines() == [
        "steer: warning: nothing was left to happen after 150.0 µs",
        "steer: warning: cpu 2 (pingpong) stalled at 2500.0 µs: waits for a message",
    ]
    cli.warn_stalls({"sim": {"stalled_at_ns": None}})
    cli.warn_stalls({})
    assert capsys.readouterr().err == ""
    cli.warn_stalls({"sim": {"stalled_at_ns": 1500.0}, "copy": {"seconds": None}})
    assert capsys.readouterr().err == "steer: warning: nothing was left to happen after 1.5 µs\n"


def test_a_window_shorter_than_a_ring_pass_is_noted_for_cached_placements_only(capsys):
    def result(placement, passes):
        return {
            "sim": {"measured_ns": 1_000_000.0},
            "devices": {"nic0": {"placement": placement, "queues": [{"ring_passes": p} for p in passes]}},
        }

    two = result("l2", [0.5, 0.25, 0.0])
    two["devices"] = {"nic1": {"placement": "memory", "queues": [{"ring_passes": 0.5}]}, **two["devices"]}
    cli.note_partial_rings(two)
    assert capsys.readouterr().err == (
        "steer: note: nic0's 1000 µs window saw 0.25 of a pass over a ring; its hit rates can depend on "
        "which part (sim.measure_us=4000 covers one)\n"
    )
    cli.note_partial_rings({"devices": result("l2", [0.5])["devices"]})
    assert capsys.readouterr().err.startswith("steer: note: nic0's 0 µs window saw 0.50 of a pass")
    for quiet in (result("memory", [0.5]), result("l2", [1.0, 2.0]), result("l2", [0.0]), {"devices": {"d": {}}}):
        cli.note_partial_rings(quiet)
    assert capsys.readouterr().err == ""


def test_compare_rows_put_each_metric_beside_each_placement_and_na_where_a_run_has_none():
    first = hand_made_result()
    first["devices"] = {
        "nic0": {
            "rx_gbps": 99.5,
            "tx_gbps": 0.0,
            "drops": 3,
            "dma_write_hit_rate": 0.5,
            "dma_read_hit_rate": 0.25,
            "latency_ns": {"p50": 100.4, "p99": 200.6},
        }
    }
    second = json.loads(json.dumps(first))
    second["dram"]["read_gbps"] = 0.004
    second["cores"]["1"]["workload"]["latency_ns"] = {"count": 0}
    del second["devices"]["nic0"]["drops"]
    rows = cli.compare_rows({"memory": first, "l2": second, "ddio": None})
    assert rows == [
        ["DRAM read GB/s", "1.23", "0.00", "n/a"],
        ["DRAM write GB/s", "2.00", "2.00", "n/a"],
        # 1.23 GB/s over 99.5 Gb/s / 8 = 12.44 GB/s received.
        ["DRAM read bytes per rx byte", "0.099", "0.000", "n/a"],
        ["DRAM write bytes per rx byte", "0.161", "0.161", "n/a"],
        ["nic0 rx Gb/s", "99.50", "99.50", "n/a"],
        ["nic0 tx Gb/s", "0.00", "0.00", "n/a"],
        ["nic0 drops", "3", "n/a", "n/a"],
        ["nic0 DMA write hit rate", "0.500", "0.500", "n/a"],
        ["nic0 DMA read hit rate", "0.250", "0.250", "n/a"],
        ["nic0 latency p50 ns", "100", "100", "n/a"],
        ["nic0 latency p99 ns", "201", "201", "n/a"],
        ["cpu 1 (rx_loop) fills from DRAM", "25.0%", "25.0%", "n/a"],
        ["cpu 1 packets", "10", "10", "n/a"],
        ["cpu 1 cycles_per_packet", "10.04", "10.04", "n/a"],
        ["cpu 1 latency_ns p50", "123.5", "n/a", "n/a"],
        ["cpu 1 latency_ns p99", "987.6", "n/a", "n/a"],
        ["cpu 1 idle_ns p50", "n/a", "n/a", "n/a"],
        ["cpu 1 idle_ns p99", "n/a", "n/a", "n/a"],
    ]
    assert cli.compare_rows({"memory": None}) == [["DRAM read GB/s", "n/a"], ["DRAM write GB/s", "n/a"]]


def test_run_writes_the_result_and_the_resolved_scenario_beside_it(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "eflatency", *SHORT, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("eflatency on turin-9575f: 50 µs measured after 200 µs warm-up (seed 1)\n")
    assert printed.endswith(f"wrote {out} and {tmp_path / 'r.resolved.toml'}\n")
    assert json.loads(out.read_text())["scenario"] == "eflatency"
    assert tomllib.loads((tmp_path / "r.resolved.toml").read_text())["sim"]["measure_us"] == 50
    assert cli.resolved_path(tmp_path / "a.json") == tmp_path / "a.resolved.toml"
    beside = {tmp_path / "x.json": "t", tmp_path / "x.resolved.toml": "r"}
    assert cli.run_outputs(tmp_path / "x.json", "t", "r") == beside


def test_a_scenario_without_a_name_is_named_by_its_file_alike_everywhere(tmp_path, capsys):
    scenario = tmp_path / "my.toml"
    scenario.write_text(steer.api.scenario_source("rx-default")[0])
    out = tmp_path / "result.json"
    assert main(["run", str(scenario), *SHORT, "--json", str(out)]) == 0
    assert capsys.readouterr().out.startswith("my on turin-9655: ")
    assert json.loads(out.read_text())["scenario"] == "my"
    assert tomllib.loads((tmp_path / "result.resolved.toml").read_text())["name"] == "my"


def test_run_to_a_device_writes_only_the_json(tmp_path, capsys):
    assert cli.run_outputs(cli.Path("/dev/null"), "t", "r") == {cli.Path("/dev/null"): "t"}
    assert main(["run", "eflatency", *SHORT, "--json", "/dev/null"]) == 0
    assert capsys.readouterr().out.endswith("wrote /dev/null\n")


def test_run_json_on_stdout_is_the_whole_result_and_nothing_else(capsys):
    assert main(["run", "eflatency", *SHORT, "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)
    assert out == json.dumps(result, indent=2, sort_keys=True) + "\n"
    assert result["sim"]["measured_ns"] == 50_000.0


def test_run_in_uprof_format_prints_a_column_per_controller_of_each_socket(tmp_path, capsys):
    assert main(["run", "eflatency", *SHORT, "--format", "uprof"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split("\t")
    assert header[:2] == ["#umc", "socket:0-umc:0"] and header[-1] == "socket:0-umc:11" and len(header) == 13
    out = tmp_path / "u.json"
    assert main(["run", "eflatency", *SHORT, "--format", "uprof", "--json", str(out)]) == 0
    assert capsys.readouterr().out.startswith("#umc\t")
    assert out.exists() and (tmp_path / "u.resolved.toml").exists()


def test_a_run_without_a_file_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "eflatency", *SHORT]) == 0
    assert "wrote" not in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_compare_runs_every_placement_the_scenario_accepts_and_says_which_it_could_not(capsys):
    assert main(["compare", "sdci-l2fwd", *SHORT]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "inject", "l2", "memory", "tph"]
    assert lines[1].split()[-4:] == ["6.72", "6.72", "12.49", "12.49"]
    assert lines[-1] == f"not compared: {NO_DDIO}"


def test_compare_takes_sdci_as_the_l2_placement_and_writes_json(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["compare", "eflatency", "--placement", " sdci , memory,", *SHORT, "--json", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    results = json.loads(out.read_text())
    assert sorted(results) == ["memory", "sdci"]
    assert results["sdci"]["devices"]["nic0"]["placement"] == "l2"
    assert results["memory"]["devices"]["nic0"]["placement"] == "memory"


NO_DDIO = (
    "ddio: --set devices.0.placement.policy: platform `turin-9655` has no DDIO ways (platform.io.ddio_ways = 0); "
    'set platform = "skylake-sp-6140" (presets with DDIO ways: skylake-sp-6140, icelake-sp-6354, xeon-max-9468) '
    "or platform.io.ddio_ways = 2"
)


def test_compare_at_100_gbps_says_per_received_byte_what_memory_drops_and_which_columns_are_the_same(capsys):
    assert main(["compare", "rx-default", "--set", "offered_gbps=100", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "inject", "l2", "memory", "tph"]
    rows = {line[:33].strip(): line[33:].split() for line in lines[1:] if not line.startswith(("note", "not "))}
    assert rows["DRAM read GB/s"] == ["6.77", "6.77", "6.32", "6.32"]
    assert rows["nic0 rx Gb/s"] == ["100.01", "100.01", "48.84", "48.84"]
    # 6.77 GB/s over 100.01 Gb/s / 8 and 6.32 over 48.84 / 8: memory reads more DRAM per byte received.
    assert rows["DRAM read bytes per rx byte"] == ["0.542", "0.542", "1.035", "1.035"]
    assert rows["DRAM write bytes per rx byte"] == ["0.542", "0.542", "1.067", "1.067"]
    assert lines[-5:] == [
        "note: the placements received different amounts (48.84 Gb/s under memory, 100.01 under inject): "
        "DRAM GB/s are of different traffic; compare DRAM bytes per rx byte",
        "note: l2 simulates the same as inject: inject's level is l2; "
        "--set devices.0.placement.level=l3 injects into the L3",
        'note: tph simulates the same as memory: nic0 sends no TPH hints (devices.0.tph.mode = "off"); '
        "--set devices.0.tph.mode=iv tags its writes",
        "note: under memory every DMA write goes to DRAM; its hit rate counts writes that found a stale copy "
        "of their line cached (one the consumer read before), which they invalidated",
        f"not compared: {NO_DDIO}",
    ]
    # Set as the note says, tph tags its writes and is no longer memory; the platform named has DDIO.
    tagged = ["--set", "offered_gbps=100", "--set", "devices.0.tph.mode=iv", "--set", "platform=skylake-sp-6140"]
    assert main(["compare", "rx-default", "--placement", "tph,memory,ddio", *tagged, *SHORT]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["metric", "tph", "memory", "ddio"] and "simulates the same" not in out


def test_compare_runs_each_placement_once_whatever_it_is_called(capsys):
    assert main(["compare", "rx-default", "--placement", "l2,l2,sdci,memory,l2", *SHORT]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["metric", "l2", "memory"]
    assert "simulates the same" not in out


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["eflatency", "--placement", "bogus,l2,nope"],
            "--placement: unknown placement bogus, nope (known: ddio, inject, l2, memory, tph, sdci)\n",
        ),
        (["eflatency", "--placement", ","], "--placement: unknown placement (none) (known: "),
        (["dsa-copy"], "dsa-copy: no device with a DMA placement to compare"),
        (["sdci-l2fwd", "--placement", "ddio,ddio"], f"{NO_DDIO}\n"),
    ],
)
def test_compare_refuses_what_it_cannot_compare(args, expected, capsys):
    assert main(["compare", *args, *SHORT]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"steer: error: {expected}") and err.count("\n") == 1
    if "known" in expected:
        assert "sdci" in err and "memory" in err


def test_reproduce_prints_one_row_and_the_scores(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the table wraps to the terminal's width
    out = tmp_path / "rows.json"
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--quiet", "--json", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "seed 004 (Solarflare X4 white paper, EPYC 9575F), calibration rows:",
        "id                     published  simulated  difference  target  metric",
        "seed004/eflatency-avg     55.0ns     55.2ns    +0.20 ns  within  eflatency latency saved by SDCI,",
        "                                                                 mean over 0-648 B",
        "",
        "calibration: 1 of 1 within target; validation: 0 of 0 within target",
        "targets: ns ±20 ns",
        f"wrote {out}",
    ]
    rows = json.loads(out.read_text())
    assert out.read_text() == json.dumps(rows, indent=2) + "\n"
    assert rows[0]["id"] == "seed004/eflatency-avg" and rows[0]["within"] is True
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--quiet", "--json"]) == 0
    assert capsys.readouterr().out == json.dumps(rows, indent=2) + "\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.json"]
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines() == printed[:-1]


def test_reproduce_takes_every_only_pattern_given_and_names_them_all_when_none_matches(capsys):
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--only", "leon/prefetch-time", "--quiet"]) == 0
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line]
    assert "seed004/eflatency-avg" in printed and "leon/prefetch-time" in printed
    assert main(["reproduce", "--only", "leon/x", "--only", "seed004/y", "--quiet"]) == 2
    assert capsys.readouterr().err == "steer: error: --only leon/x --only seed004/y: no row matches\n"


def test_reproduce_draws_the_rows_and_seed_001s_curves_when_its_rows_are_there(tmp_path, capsys):
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--quiet", "--plot", str(tmp_path / "a")]) == 0
    names = ["reproduce-parity.png", "reproduce.png", "reproduce.json"]
    assert capsys.readouterr().out.splitlines()[-3:] == [f"wrote {tmp_path / 'a' / name}" for name in names]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(names)
    # The rows drawn, as --json writes them, for `steer report`.
    rows = json.loads((tmp_path / "a" / "reproduce.json").read_text())
    assert [r["id"] for r in rows] == ["seed004/eflatency-avg"] and rows[0]["within"] is True
    assert main(["reproduce", "--only", "seed001/dsa-ceiling", "--quiet", "--plot", str(tmp_path / "b")]) == 0
    names = ["reproduce-parity.png", "reproduce.png", "seed001-ddr-to-hbm.png", "seed001-transfer-size.png"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted([*names, "reproduce.json"])
    assert all((tmp_path / "b" / name).read_bytes().startswith(b"\x89PNG") for name in names)


class Bars:
    """`output.Progress` as a record of each bar's label and the fractions it was given."""

    made: list = []

    def __init__(self, label, quiet=False):
        self.label, self.labels, self.fractions, self.closed = label, [label], [], False
        Bars.made.append(self)

    def __call__(self, fraction):
        self.fractions.append(fraction)

    def restart(self, label):
        self.label = label
        self.labels.append(label)

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    Bars.made = []
    monkeypatch.setattr(cli.output, "Progress", Bars)
    return Bars.made


def test_each_command_names_its_progress_bar_and_closes_it(bars, tmp_path):
    trace = tmp_path / "t.din"
    trace.write_text("0 1000\n")
    assert main(["run", "eflatency", *SHORT]) == 0
    assert main(["compare", "eflatency", "--placement", "sdci", *SHORT]) == 0
    assert main(["trace", str(trace)]) == 0
    assert main(["reproduce", "--only", "seed004/eflatency-avg"]) == 0
    assert [(b.label, b.closed) for b in bars] == [
        ("steer run eflatency", True),
        ("steer compare sdci", True),
        (f"steer trace {trace}", True),
        ("steer reproduce", True),
    ]
    # Seed 004's 42 runs, each a step of the bar, which waits at 99% for what is not a run.
    steps = bars[-1].fractions
    assert len(steps) == 42 and steps[0] == pytest.approx(1 / 42) and steps[-1] == 0.99


def test_reproduce_applies_set_to_every_run(capsys):
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--quiet", "--json"]) == 0
    base = json.loads(capsys.readouterr().out)[0]["simulated"]
    changed = ["--set", "platform.memory.write_queue_latency_ns=100.0"]
    assert main(["reproduce", "--only", "seed004/eflatency-avg", "--quiet", "--json", *changed]) == 0
    assert json.loads(capsys.readouterr().out)[0]["simulated"] != base


def test_reproduce_refuses_a_pattern_with_no_row_and_sensitivity_with_set_or_plot(tmp_path, capsys, monkeypatch):
    from steer import sensitivity

    monkeypatch.setattr(sensitivity, "sensitivity", lambda *args, **kwargs: pytest.fail("ran"))
    assert main(["reproduce", "--only", "seed004/nothing-like-this", "--quiet"]) == 2
    assert capsys.readouterr().err == "steer: error: --only seed004/nothing-like-this: no row matches\n"
    for extra in (["--set", "x=1"], ["--plot", str(tmp_path)]):
        assert main(["reproduce", "--sensitivity", "--quiet", *extra]) == 2
        assert capsys.readouterr().err == "steer: error: --sensitivity: not with --set or --plot\n"
    assert list(tmp_path.iterdir()) == []


def test_resolve_prints_the_scenario_with_the_override_applied(capsys):
    assert main(["resolve", "eflatency", "--set", "sim.measure_us=7"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["sim"]["measure_us"] == 7


def resolved(capsys, *sets):
    assert main(["resolve", "rx-default", *(a for s in sets for a in ("--set", s))]) == 0
    return tomllib.loads(capsys.readouterr().out)


def test_a_table_override_merges_into_the_table_it_overrides(capsys):
    scenario = resolved(capsys)
    assert scenario["sim"]["warmup_us"] == 300  # the scenario's, not the built-in 200
    sim = resolved(capsys, "sim={measure_us=100}")["sim"]
    assert (sim["warmup_us"], sim["measure_us"]) == (300, 100)
    # The queue stays on the CPU whose workload consumes it.
    queue = resolved(capsys, "devices.0.queues.0={ring_entries=64}")["devices"][0]["queues"][0]
    assert (queue["ring_entries"], queue["consumer_cpu"]) == (64, 1)
    assert {k: v for k, v in queue.items() if k != "ring_entries"} == {
        k: v for k, v in scenario["devices"][0]["queues"][0].items() if k != "ring_entries"
    }
    # An empty table changes nothing: the scenario's platform, not a made-up one.
    assert resolved(capsys, "platform={}") == scenario
    # Recursively, as `platform.l2={ways=8}` always merged into the preset.
    nested = resolved(capsys, "platform={l2={ways=8}}")
    assert nested == resolved(capsys, "platform.l2={ways=8}") == resolved(capsys, "platform.l2.ways=8")
    assert (nested["platform"]["name"], nested["platform"]["l2"]["size_kib"]) == ("turin-9655", 1024)
    # A preset's name is that preset alone, in place of the platform (as before).
    assert resolved(capsys, "platform=turin-9845")["platform"]["name"] == "turin-9845"
    assert steer.api.resolve("rx-default", {"sim": {"measure_us": 100}}) == steer.api.resolve(
        "rx-default", ["sim={measure_us=100}"]
    )


def test_platforms_describe_one_with_overrides_as_a_run_or_the_preset_spells_them(capsys):
    for key in ("platform.l2.ways", "l2.ways"):
        assert main(["platforms", "turin-9655", "--set", f"{key}=8", "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert list(listed[0]) == ["key", "value", "meaning"]
        assert {r["key"]: r for r in listed}["l2.ways"]["value"] == "8"
    for typed in ("l2.ways", "=8"):
        assert main(["platforms", "turin-9655", "--set", typed]) == 2
        assert capsys.readouterr().err == f"steer: error: --set {typed}: expected KEY=VALUE\n"
    assert main(["platforms", "turin-9655", "--set", "l2..ways=8"]) == 2
    assert capsys.readouterr().err == (
        "steer: error: --set platform.l2..ways: "
        "a key's parts are joined by single dots, none empty (e.g. sim.measure_us)\n"
    )
    assert main(["platforms", "turin-9655"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["key", "value", "meaning"]
    for command in ("scenarios", "platforms"):
        assert main([command]) == 0
        assert capsys.readouterr().out.splitlines()[0].split() == ["name", "description"]
        assert main([command, "--json"]) == 0
        assert list(json.loads(capsys.readouterr().out)[0]) == ["name", "description"]


def test_trace_prints_each_level_and_memory(tmp_path, capsys):
    trace = tmp_path / "t.din"
    trace.write_text("0 1000\n0 1000\n1 2000\n")
    assert main(["trace", str(trace), "--core", "3", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "3 accesses on CPU 3 of turin-9655 (0 skipped)"
    assert lines[1].split() == ["level", "reads", "writes", "hits", "misses", "writebacks"]
    assert lines[2].split() == ["l1d", "2", "1", "1", "2", "0"]
    assert re.fullmatch(r"memory: 2 line reads, 0 line writes; \d+\.\d\d s", lines[-1])
    assert main(["trace", str(trace), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("3 accesses on CPU 0 of turin-9655 (0 skipped)\n")
    assert main(["trace", str(trace), "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["l1d"]["hits"] == 1


def test_trace_names_a_file_it_cannot_open_or_read_in_one_line(tmp_path, capsys):
    missing = tmp_path / "none.din"
    assert main(["trace", str(missing)]) == 2
    assert capsys.readouterr().err == f"steer: error: {missing}: cannot open: No such file or directory\n"
    assert main(["trace", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"steer: error: {tmp_path}: cannot read: Is a directory\n"


def test_tph_refuses_input_larger_than_any_dump_and_unreadable_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "TPH_INPUT_LIMIT", 8)
    large = tmp_path / "large"
    large.write_bytes(b"012345678")
    assert main(["tph", str(large)]) == 2
    refused = f"steer: error: {large}: more than 0 MiB: not a config-space dump or lspci output\n"
    assert capsys.readouterr().err == refused
    exact = tmp_path / "exact"
    exact.write_bytes(b"01234567")
    assert main(["tph", str(exact)]) == 2
    assert "more than" not in capsys.readouterr().err
    assert main(["tph", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"steer: error: {tmp_path}: cannot read: Is a directory\n"


def test_tph_reads_at_most_16_mib(tmp_path, capsys):
    dump = tmp_path / "big"
    dump.write_bytes(b"\n" * (16 << 20))
    assert main(["tph", str(dump)]) == 2
    assert "more than" not in capsys.readouterr().err
    with dump.open("ab") as more:
        more.write(b"\n")
    assert main(["tph", str(dump)]) == 2
    assert capsys.readouterr().err.endswith(": more than 16 MiB: not a config-space dump or lspci output\n")


LSPCI = (
    "41:00.0 Ethernet controller: Broadcom Inc. BCM57608\n"
    "\tCapabilities: [1a0 v1] Transaction Processing Hints\n"
    "\t\tDevice specific mode supported\n"
    "\t\tSteering table in TPH capability structure\n"
)


def test_tph_reads_stdin_for_a_dash_and_names_it_in_errors(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(LSPCI.encode())))
    assert main(["tph", "-"]) == 0
    assert "41:00.0" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert main(["tph", "-"]) == 2
    assert capsys.readouterr().err.startswith("steer: error: stdin: ")
    monkeypatch.setattr(cli, "TPH_INPUT_LIMIT", 8)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"012345678")))
    assert main(["tph", "-"]) == 2
    assert capsys.readouterr().err == "steer: error: stdin: more than 0 MiB: not a config-space dump or lspci output\n"


def test_tph_json_goes_to_a_file_or_stdout(tmp_path, capsys):
    dump = tmp_path / "lspci.txt"
    dump.write_text(LSPCI)
    out = tmp_path / "tph.json"
    assert main(["tph", str(dump), "--json", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    devices = json.loads(out.read_text())
    assert main(["tph", str(dump), "--json"]) == 0
    assert capsys.readouterr().out == json.dumps(devices, indent=2) + "\n" == out.read_text()
    assert main(["tph", str(dump)]) == 0
    assert "41:00.0" in capsys.readouterr().out


def test_doctor_refuses_a_root_that_is_not_a_directory(tmp_path, capsys):
    assert main(["doctor", "--root", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"steer: error: --root {tmp_path / 'missing'}: not a directory\n"


def test_doctor_json_on_stdout_and_a_capture_beside_the_table(tmp_path, capsys):
    assert main(["doctor", "--root", str(tmp_path), "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)
    assert {"area", "name", "verdict", "evidence", "fix"} <= set(checks["checks"][0])
    capture = tmp_path / "out" / "c.tar.gz"
    assert main(["doctor", "--root", str(tmp_path), "--capture", str(capture)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["area", "check", "verdict", "evidence", "fix"]
    assert printed[-1] == f"wrote {capture}" and capture.stat().st_size > 0


def test_doctor_json_to_a_file_and_of_this_host_by_default(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["doctor", "--root", str(tmp_path), "--json"]) == 0
    on_stdout = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    assert main(["doctor", "--root", str(tmp_path), "--json", "d.json"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "wrote d.json"
    assert (tmp_path / "d.json").read_text() == on_stdout
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["root"] == "/"


def test_doctor_draws_the_rich_table_on_a_terminal(tmp_path, capsys, monkeypatch):
    from steer import doctor

    drawn = []
    monkeypatch.setattr(
        doctor, "rich_table", lambda checks, console: drawn.append((len(checks), type(console).__name__))
    )
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main(["doctor", "--root", str(tmp_path)]) == 0
    assert drawn and drawn[0][1] == "Console"
    assert capsys.readouterr().out == ""


def fail_with(error):
    def handler(args):
        raise error

    return handler


@pytest.mark.parametrize(
    "error, code, message",
    [
        (ScenarioError("x.toml: bad"), 2, "steer: error: x.toml: bad\n"),
        (SteerError("an invariant broke"), 1, "steer: an invariant broke (please report it)\n"),
        (KeyboardInterrupt(), 130, "steer: interrupted\n"),
        (BrokenPipeError(), 0, ""),
    ],
)
def test_main_turns_each_kind_of_error_into_its_exit_code_and_one_line(error, code, message, capsys, monkeypatch):
    monkeypatch.setattr(cli, "cmd_resolve", fail_with(error))
    assert main(["resolve", "eflatency"]) == code
    assert capsys.readouterr().err == message


def test_bad_usage_is_one_line_pointing_at_the_commands_help(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["run"])
    assert exit.value.code == 2
    assert capsys.readouterr().err == (
        "steer run: error: the following arguments are required: scenario (see steer run -h)\n"
    )


def test_set_file_and_allow_large_append_overrides_in_order(tmp_path):
    overlay = tmp_path / "o.toml"
    overlay.write_text("[platform.l2]\nways = 8\n")
    args = cli.parser().parse_args(
        ["run", "s", "--set", "a=1", "--set-file", str(overlay), "--allow-large", "--set", "b=2"]
    )
    assert args.set == ["a=1", "platform.l2.ways=8", "sim.allow_large=true", "b=2"]
    assert cli.parser().parse_args(["trace", "f"]).set == []
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["trace", "f", "--allow-large"])


def test_a_set_file_that_cannot_be_read_is_an_input_error_as_a_scenario_s_is(tmp_path, capsys):
    assert main(["run", "s", "--set-file", str(tmp_path / "none.toml")]) == 2
    assert (
        capsys.readouterr().err
        == f"steer: error: --set-file: {tmp_path / 'none.toml'}: cannot read: No such file or directory\n"
    )
    bad = tmp_path / "bad.toml"
    bad.write_text("a = [\n")
    assert main(["resolve", "rx-default", "--set-file", str(bad)]) == 2
    invalid = "invalid TOML: Invalid value (at end of document)"
    assert capsys.readouterr().err == f"steer: error: --set-file: {bad}: {invalid}\n"


def test_long_keys_and_values_are_shortened_in_messages(tmp_path, capsys):
    long = "x" * 100_000
    cases = [
        (["resolve", "rx-default", "--set", f"{long}=1"], f"steer: error: --set {'x' * 80}…[99901 characters]…"),
        (["resolve", "rx-default", "--set", f"placement={long}"], "unknown placement policy `"),
    ]
    key_file = tmp_path / "longkey.toml"
    key_file.write_text(f"{'k' * 200_000} = 1\n")
    cases.append((["run", str(key_file)], f"steer: error: {key_file}:1:1: {'k' * 80}…[199901 characters]…"))
    for argv, expected in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err) < 600 and err.count("\n") == 1, err[:300]
    # Usage errors too, and a message from the Python layer (a sweep's value, say) as the core's.
    with pytest.raises(SystemExit):
        main(["run", "rx-default", "--format", long])
    assert len(capsys.readouterr().err) < 600
    assert cli.output.shortened(f"a {long} b") == f"a {'x' * 80}…[99900 characters]…{'x' * 20} b"
    spaced = "ab " * 1000
    assert cli.output.shortened(spaced) == f"{spaced[:700]}…[2100 characters]…{spaced[-200:]}"
    assert cli.output.shortened("short: as it is") == "short: as it is"


def test_no_command_is_a_usage_error_and_version_names_steer(capsys):
    with pytest.raises(SystemExit) as exit:
        main([])
    assert exit.value.code == 2
    assert capsys.readouterr().err == ("steer: error: the following arguments are required: COMMAND (see steer -h)\n")
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert re.fullmatch(r"steer \d+\.\d+\.\d+\n", capsys.readouterr().out)


class MadeUpSensitivity:
    def __init__(self, name):
        self.name = name

    def to_dict(self):
        return {"parameter": self.name}


def test_reproduce_sensitivity_shows_each_stage_and_prints_or_writes_the_table(monkeypatch, bars, tmp_path, capsys):
    from steer import sensitivity

    def made_up(only, progress):
        assert only == ["seed004/*"]
        for stage, fraction in (("base rows", 0.5), ("base rows", 1.0), ("changes", 0.25)):
            progress(stage, fraction)
        return None, [MadeUpSensitivity("a"), MadeUpSensitivity("b")]

    monkeypatch.setattr(sensitivity, "sensitivity", made_up)
    monkeypatch.setattr(sensitivity, "table_rows", lambda results: [[r.name] * 6 for r in results])
    assert main(["reproduce", "--sensitivity", "--only", "seed004/*"]) == 0
    [bar] = bars
    assert (bar.label, bar.fractions, bar.closed) == ("steer reproduce --sensitivity: changes", [0.5, 1.0, 0.25], True)
    assert bar.labels == [
        "steer reproduce --sensitivity",
        "steer reproduce --sensitivity: base rows",
        "steer reproduce --sensitivity: changes",
    ]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:4] == ["preset", "or", "scenario", "parameter"]
    assert [line.split() for line in printed[1:3]] == [["a"] * 6, ["b"] * 6]
    assert printed[3] == "moves: simulated at the changed value minus the base, in the row's unit (points for %)"
    table = json.dumps([{"parameter": "a"}, {"parameter": "b"}], indent=2) + "\n"
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--sensitivity", "--only", "seed004/*", "--json"]) == 0
    assert capsys.readouterr().out == table and list(tmp_path.iterdir()) == []
    assert main(["reproduce", "--sensitivity", "--only", "seed004/*", "--json", "s.json"]) == 0
    assert (tmp_path / "s.json").read_text() == table
    assert capsys.readouterr().out.splitlines()[-1].startswith("moves: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "rx-default", "--json", "out/"],
        ["doctor", "--capture", "out/."],
        ["calibrate", "--out", "out/"],
        ["calibrate", "--plot", "out/.."],
        ["fit", "f.toml", "-o", "out/"],
        ["plot", "r", "--kind", "dram", "-o", "out/"],
        ["report", "r", "-o", "out/"],
        ["export", "r", "-o", "out/"],
    ],
)
def test_a_file_to_write_spelled_as_a_directory_is_refused_before_anything_runs(argv, tmp_path, capsys, monkeypatch):
    """`out/` would otherwise be written as a file named `out`."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.endswith(f": {argv[-1]}: a directory, not a file name (see steer {argv[0]} -h)"), last
    assert list(tmp_path.iterdir()) == []


def test_an_empty_file_name_to_write_is_refused(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["export", "r", "-o", " "])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr().err.splitlines()[-1].endswith("argument -o/--output: empty file name (see steer export -h)")
    )

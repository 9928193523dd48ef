"""The command line contract: outputs, machine-readable results, and one-line errors (exit 2)."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import steer

SHORT = ["--set", "sim.measure_us=200", "--set", "sim.warmup_us=100"]

BAD_SCENARIO = """
[platform]
preset = "turin-9655"

[[devices]]
name = "nic0"

[[devices.queues]]
consumer_cpu = 1
{extra}

[[workloads]]
kind = "rx_loop"
cpu = 1
"""


def without_host_time(value):
    """A result without its host timings, which differ between two runs."""
    if isinstance(value, dict):
        return {k: without_host_time(v) for k, v in value.items() if k != "host_seconds"}
    return value


def test_scenarios_and_platforms_are_listed(steer_cli):
    listing = steer_cli("scenarios")
    assert listing.returncode == 0 and "rx-default" in listing.stdout
    presets = steer_cli("platforms", "--json")
    names = {p["name"] for p in json.loads(presets.stdout)}
    assert {"turin-9655", "turin-9845", "turin-9575f", "host"} <= names
    described = steer_cli("platforms", "turin-9845")
    assert described.returncode == 0
    row = next(line for line in described.stdout.splitlines() if line.startswith("topology.cores_per_ccx"))
    assert "16" in row and "Cores per CCX" in row


def test_run_writes_result_and_resolved_scenario(steer_cli, tmp_path):
    out = tmp_path / "out" / "result.json"
    done = steer_cli("run", "rx-default", *SHORT, "--set", "placement=l2", "--json", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "DRAM" in done.stdout
    result = json.loads(out.read_text())
    for key in ("read_gbps", "write_gbps", "channels"):
        assert key in result["dram"]
    assert len(result["dram"]["channels"]) == 12
    core = result["cores"]["1"]
    assert core["role"] == "rx_loop"
    assert set(core["fills"]) == {"l1", "l2", "peer_l2", "l3", "remote_cache", "dram"}
    assert abs(sum(core["fills"].values()) - 1) < 1e-9
    assert {"rx_gbps", "drops"} <= set(result["devices"]["nic0"])
    assert {"simulated_ns", "host_seconds", "line_ops", "seed"} <= set(result["sim"])
    resolved_path = tmp_path / "out" / "result.resolved.toml"
    resolved = tomllib.loads(resolved_path.read_text())
    assert resolved["platform"]["l2"]["size_kib"] == 1024
    assert resolved["devices"][0]["placement"]["policy"] == "l2"
    # Re-running the resolved scenario reproduces the result.
    again = steer_cli("run", str(resolved_path), "--json", "--quiet")
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    rerun["scenario"] = result["scenario"]
    assert without_host_time(rerun) == without_host_time(result)
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_json_on_stdout_is_deterministic(steer_cli):
    first = steer_cli("run", "rx-default", *SHORT, "--json")
    second = steer_cli("run", "rx-default", *SHORT, "--json")
    assert first.returncode == 0, first.stderr
    assert without_host_time(json.loads(first.stdout)) == without_host_time(json.loads(second.stdout))


@pytest.mark.parametrize(
    "extra, args, expected",
    [
        ("wayz = 3", [], "s.toml:10:1: devices.0.queues.0.wayz: unknown field `wayz`"),
        ('offered_gbps = "fast"', [], "s.toml:10:1: devices.0.queues.0.offered_gbps: invalid type"),
        ("offered_gbps = -1.0", [], "devices.0.queues.0.offered_gbps: must be positive"),
        ("", ["--set", "platform.l2.ways=0"], "--set platform.l2.ways: must be at least 1"),
        ("", ["--set", "platform.l1d.size_kib=47"], "platform.l1d.size_kib: 47 KiB does not divide"),
        ("", ["--set", "workloads.0.cpu=999"], "workloads.0.cpu: CPU 999 out of range"),
        ("", ["--set", "devices.3.name=x"], "devices.3.name: index 3 out of range"),
        ("", ["--set", "nonsense"], "expected KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_2(steer_cli, tmp_path, extra, args, expected):
    scenario = tmp_path / "s.toml"
    scenario.write_text(BAD_SCENARIO.format(extra=extra))
    out = tmp_path / "result.json"
    done = steer_cli("run", "s.toml", *args, "--json", str(out), cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0], lines[0]
    assert done.stdout == ""
    assert not out.exists() and not list(tmp_path.glob("*.resolved.toml"))


def test_missing_and_unreadable_files(steer_cli, tmp_path):
    missing = steer_cli("run", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        == f"steer: error: {tmp_path / 'nope.toml'}: cannot read scenario: No such file or directory"
    )
    unknown = steer_cli("run", "no-such-builtin")
    assert unknown.returncode == 2 and "no such scenario file or built-in scenario" in unknown.stderr
    directory = tmp_path / "dir.toml"
    directory.mkdir()
    assert steer_cli("run", str(directory)).returncode == 2
    broken = tmp_path / "broken.toml"
    broken.write_text("[sim\n")
    done = steer_cli("run", str(broken))
    assert done.returncode == 2 and f"{broken}:1:5: invalid TOML" in done.stderr


def test_python_api_runs_with_parameters():
    memory = steer.run("rx-default", ["sim.measure_us=200"], placement="memory")
    injected = steer.run("rx-default", ["sim.measure_us=200"], placement="l2")
    # Every payload line reaches DRAM; the rx loop reads each just after it was written, from the
    # controllers' write queues.
    assert memory["dram"]["write_gbps"] > 2.5 and memory["dram"]["write_queue_reads"] > 0
    assert injected["dram"]["read_gbps"] < 0.05 and injected["dram"]["write_gbps"] < 0.05
    assert injected["cores"]["1"]["fills"]["l2"] > 0.9
    with pytest.raises(steer.ScenarioError, match="unknown parameter|unknown field"):
        steer.run("rx-default", ["sim.bogus=1"])


TPH_DATA = __import__("pathlib").Path(__file__).parents[1] / "crates" / "steer-tph" / "tests" / "data"


def test_tph_decodes_dumps_and_rejects_garbage(steer_cli, tmp_path):
    done = steer_cli("tph", str(TPH_DATA / "lspci-xxxx-tph.txt"))
    assert done.returncode == 0, done.stderr
    assert "Transaction Processing Hints" in done.stdout and "Not shown by lspci" in done.stdout
    text = steer_cli("tph", str(TPH_DATA / "lspci-vv-tph.txt"))
    assert text.returncode == 0 and "Steering table in MSI-X table" in text.stdout
    garbage = tmp_path / "bad.txt"
    garbage.write_text("00: zz 11\n")
    bad = steer_cli("tph", str(garbage))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert steer_cli("tph", str(tmp_path / "missing.bin")).returncode == 2
    # Quoted in an e-mail, the same text decodes the same.
    quoted = tmp_path / "mail.txt"
    quoted.write_text("".join(f"> {line}\n" for line in (TPH_DATA / "lspci-vv-tph.txt").read_text().splitlines()))
    assert steer_cli("tph", str(quoted)).stdout == text.stdout
    # lspci -vvx: the decoded text wins over the 64-byte dump an unprivileged -x appends.
    with_dump = tmp_path / "vvx.txt"
    dump = "00: e4 14 d8 16 06 04 10 00 01 00 00 02 10 00 80 00\n" + "".join(
        f"{row:x}0: " + " ".join(["00"] * 16) + "\n" for row in range(1, 4)
    )
    with_dump.write_text((TPH_DATA / "lspci-vv-tph.txt").read_text() + dump)
    assert steer_cli("tph", str(with_dump)).stdout == text.stdout
    for nothing, content in [("empty.txt", ""), ("prose.txt", "no devices here\n")]:
        (tmp_path / nothing).write_text(content)
        done = steer_cli("tph", str(tmp_path / nothing))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    zero = steer_cli("tph", "/dev/zero")
    assert zero.returncode == 2 and "more than 16 MiB" in zero.stderr


def test_tph_json_real_dumps_and_stdin(steer_cli, tmp_path):
    real = TPH_DATA / "real"
    mail = subprocess.run(
        [sys.executable, "-m", "steer", "tph", "-", "--json"],
        input=(real / "wcn785x-email-quoted-printable.eml").read_bytes(),
        capture_output=True,
    )
    assert mail.returncode == 0, mail.stderr
    (device,) = json.loads(mail.stdout)
    assert device["device"].startswith("63:00.0 Network controller: Qualcomm") and device["device"].endswith("(rev 01)")
    assert (device["source"], device["root_port"], device["completer"]) == ("lspci_text", False, "TPHComp+ ExtTPHComp-")
    assert device["requester"]["offset"] == 0x158
    assert device["requester"]["st_table_location"] == "No steering table available"
    # A broken chain is reported on its device; the file still decodes, the DSA after it too.
    both = tmp_path / "both.txt"
    both.write_text(
        (real / "pciutils-broken-ecaps.txt").read_text() + "\n" + (real / "pciutils-pri-pasid.txt").read_text()
    )
    out = tmp_path / "out.json"
    done = steer_cli("tph", str(both), "--json", str(out))
    assert done.returncode == 0, done.stderr
    broken, dsa = json.loads(out.read_text())
    assert broken["list_complete"] is False and "broken" in broken["problems"][0] and broken["requester"] is None
    assert dsa["requester"]["st_table"] == [0, 10] and dsa["requester"]["enable"] == "TPH only"
    text = steer_cli("tph", str(both))
    assert text.returncode == 0 and "note: extended capability list broken" in text.stdout
    assert "[160 v1] Transaction Processing Hints" in text.stdout
    empty = steer_cli("tph", str(both), "--json", "")
    assert empty.returncode == 2 and "--json: empty file name" in empty.stderr


def test_tph_reads_dumps_with_stray_bytes_or_the_mail_around_them(steer_cli, tmp_path):
    clean = steer_cli("tph", str(TPH_DATA / "lspci-xxxx-tph.txt"))
    for name in ["latin1-line.txt", "nul-bytes.txt", "mail-quoted-hex.eml", "prose-around-hex.txt"]:
        done = steer_cli("tph", str(TPH_DATA / "damaged" / name))
        assert (done.returncode, done.stdout, done.stderr) == (0, clean.stdout, ""), name
    # A config space read from sysfs is named by the bus address in its path.
    config = tmp_path / "0000:41:00.0" / "config"
    config.parent.mkdir()
    (nic,) = json.loads(steer_cli("tph", str(TPH_DATA / "lspci-xxxx-tph.txt"), "--json").stdout)[:1]
    raw = bytes.fromhex(
        "".join(
            line.split(":", 1)[1]
            for line in (TPH_DATA / "lspci-xxxx-tph.txt").read_text().split("\n\n")[0].splitlines()
            if line[:1] in "0123456789abcdef" and not line.startswith("41:00.0")
        )
    )
    config.write_bytes(raw)
    named = steer_cli("tph", str(config))
    assert named.returncode == 0 and named.stdout.startswith("0000:41:00.0\n"), named.stderr
    assert json.loads(steer_cli("tph", str(config), "--json").stdout)[0]["requester"] == nic["requester"]
    other = tmp_path / "dump.bin"
    other.write_bytes(raw)
    assert steer_cli("tph", str(other)).stdout.startswith("device\n")
    ten = tmp_path / "ten.bin"
    ten.write_bytes(raw[:10])
    short = steer_cli("tph", str(ten))
    assert (short.returncode, short.stderr) == (
        2,
        f"steer: error: {ten}: not a config-space dump: 10 bytes, "
        "fewer than the 64-byte header of every PCI function\n",
    )


def test_trace_reads_stdin_and_escapes_what_it_quotes(tmp_path):
    def trace(data: bytes, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "steer", "trace", "-", "--quiet", "--json", *args], input=data, capture_output=True
        )

    din = trace(b"0 1000\n1 2000 8\n")
    assert din.returncode == 0, din.stderr
    report = json.loads(din.stdout)
    assert (report["accesses"], report["l1d"]["reads"], report["l1d"]["writes"]) == (2, 1, 1)
    binary = trace(b"STEERTR1" + (0x1000).to_bytes(8, "little") + (1 << 62 | 0x2000).to_bytes(8, "little"))
    assert json.loads(binary.stdout)["l1d"] == report["l1d"], binary.stderr
    empty = trace(b"")
    assert (empty.returncode, empty.stderr) == (
        2,
        b"steer: error: stdin: nothing to replay: no data accesses; allow_empty accepts it\n",
    )
    labelled = trace(b"0 10\n\0\0\x1b 10\n")
    assert labelled.stderr == (
        b"steer: error: stdin:2: unknown label `\\u{0}\\u{0}\\u{1b}` "
        b"(expected 0 read, 1 write, 2 instruction fetch, 3 escape or 4 flush)\n"
    )
    # A binary trace with the wrong magic is read as din: its first line is quoted escaped and cut short.
    wrong = trace(b"STEERTR2" + bytes(range(1, 9)) * 8 + b"\n")
    assert wrong.returncode == 2
    assert wrong.stderr.startswith(b"steer: error: stdin:1: unknown label `STEERTR2\\u{1}\\u{2}")
    assert b"...` (expected" in wrong.stderr and wrong.stderr.isascii() and len(wrong.stderr) < 400


def test_compare_runs_each_placement_side_by_side(steer_cli):
    short = ["--set", "sim.warmup_us=200", "--set", "sim.measure_us=200", "--set", "rx_ring=256"]
    done = steer_cli("compare", "ddio-l2fwd", *short, "--quiet")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    # By default every registered placement the platform accepts, in the registry's order.
    assert header.split() == ["metric", "ddio", "inject", "l2", "memory", "tph"]
    hit_rate = dict(
        zip(header.split()[1:], next(r for r in rows if r.startswith("nic0 DMA write hit rate")).split()[-5:])
    )
    # Without DDIO a write finds its line cached only where a core still holds it.
    assert float(hit_rate["ddio"]) > 0.9 and float(hit_rate["memory"]) < 0.2
    assert any(r.startswith("cpu 0 cycles_per_packet") for r in rows), "the workload's own statistics"
    as_json = json.loads(steer_cli("compare", "ddio-l2fwd", *short, "--placement", "memory,sdci", "--json").stdout)
    assert set(as_json) == {"memory", "sdci"}
    assert as_json["sdci"]["devices"]["nic0"]["placement"] == "l2"
    # On a platform without DDIO the default leaves it out and says why; asked for, it is n/a.
    turin = steer_cli("compare", "sdci-l2fwd", *short, "--quiet")
    assert turin.returncode == 0 and "ddio" not in turin.stdout.splitlines()[0]
    assert "not compared: ddio:" in turin.stdout and "has no DDIO ways" in turin.stdout
    asked = steer_cli("compare", "sdci-l2fwd", *short, "--quiet", "--placement", "ddio,sdci")
    assert asked.returncode == 0 and asked.stdout.splitlines()[0].split() == ["metric", "sdci"]
    bad = steer_cli("compare", "sdci-l2fwd", "--placement", "cxl")
    assert bad.returncode == 2 and "unknown placement cxl" in bad.stderr
    only_ddio = steer_cli("compare", "sdci-l2fwd", "--placement", "ddio")
    assert only_ddio.returncode == 2 and "has no DDIO ways" in only_ddio.stderr


def test_compare_and_trace_write_json_to_a_file_or_stdout(tmp_path, steer_cli):
    trace = tmp_path / "t.din"
    trace.write_text("0 1000\n1 1040\n0 1000\n")
    compare = ("compare", "eflatency", "--set", "sim.measure_us=100", "--placement", "memory", "--quiet")
    for command in (("trace", str(trace), "--quiet"), compare):
        printed = steer_cli(*command, "--json")
        target = tmp_path / f"{command[0]}.json"
        written = steer_cli(*command, "--json", str(target))
        assert (written.returncode, written.stdout, written.stderr) == (0, f"wrote {target}\n", "")
        assert without_host_time(json.loads(target.read_text())) == without_host_time(json.loads(printed.stdout))
    # Nothing half-written where a file cannot go.
    bad = steer_cli("trace", str(trace), "--json", str(trace / "t.json"))
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == f"steer: error: {trace / 't.json'}: cannot write there: {trace} is not a directory\n"


def test_compare_shows_the_ping_pong_latency(steer_cli):
    done = steer_cli("compare", "eflatency", "--set", "sim.measure_us=500", "--placement", "memory,tph", "--quiet")
    assert done.returncode == 0, done.stderr
    assert any(r.startswith("cpu 2 half_rtt_ns p50") for r in done.stdout.splitlines()), done.stdout
    run = steer_cli("run", "eflatency", "--set", "sim.measure_us=500", "--quiet")
    assert "half_rtt_ns p50" in run.stdout, run.stdout


def test_reproduce_prints_published_beside_simulated(steer_cli, tmp_path):
    done = steer_cli("reproduce", "--only", "leon", "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["id"] for r in rows][:2] == ["leon/prefetch-reads", "leon/inject-l3-reads"]
    keys = {"id", "source", "metric", "unit", "published", "simulated", "relation", "role", "within"}
    assert all(set(r) == keys for r in rows)
    # Each row carries the judgement the table prints; the ratio published as equal too.
    assert all(isinstance(r["within"], bool) for r in rows)
    assert {r["role"] for r in rows} == {"validation"}, "seed 003 only validates"
    reads = {r["id"]: r for r in rows}
    assert abs(reads["leon/prefetch-reads"]["simulated"] - 1.0) < 0.01
    table = steer_cli("reproduce", "--only", "leon/*time", "--plot", str(tmp_path), "--quiet")
    assert table.returncode == 0 and "leon/prefetch-time" in table.stdout and "leon/prefetch-reads" not in table.stdout
    # Each percentage row is judged against the seeds' 10-point target, and the total is summed up.
    verdicts = [line.split()[5] for line in table.stdout.splitlines() if line.startswith("leon/")]
    assert len(verdicts) == 3 and set(verdicts) <= {"within", "miss"}
    assert f"calibration: 0 of 0 within target; validation: {verdicts.count('within')} of 3 within" in table.stdout
    png = tmp_path / "reproduce.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    # A pattern no row matches is refused before any run.
    none = steer_cli("reproduce", "--only", "leon/nothing-like-this")
    assert none.returncode == 2 and none.stderr == "steer: error: --only leon/nothing-like-this: no row matches\n"


def test_uprof_format_prints_one_column_per_umc(steer_cli):
    done = steer_cli("run", "rx-default", *SHORT, "--format", "uprof", "--quiet")
    assert done.returncode == 0, done.stderr
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in done.stdout.splitlines()}
    assert lines["#umc"][0] == "socket:0-umc:0" and len(lines["#umc"]) == 12
    reads = [float(v) for v in lines["UMC est read BW (GB/s)"]]
    writes = [float(v) for v in lines["UMC est write BW (GB/s)"]]
    assert len(reads) == 12 and sum(reads) > 1.0 and sum(writes) > 1.0
    assert abs(float(lines["% UMC CAS for reads"][0]) + float(lines["% UMC CAS for writes"][0]) - 100) < 0.01


def test_reproduce_rows_calibrate_on_seed_000_one_queue_and_the_eflatency_mean_only():
    from steer.reproduce import Row

    def role(row_id):
        return Row(row_id, "s", "m", "%", 1.0, 1.0).role

    assert role("seed000/1q/dram-read-sdci-on") == "calibration"
    assert role("seed004/eflatency-avg") == "calibration"
    assert [role(i) for i in ("seed000/4q/dram-read-sdci-on", "seed004/eflatency-256b", "seed002/96c-1q/x")] == [
        "validation"
    ] * 3


def test_absurd_runs_and_non_numbers_are_one_line_errors(steer_cli, tmp_path):
    huge = steer_cli("run", "rx-default", "--set", "devices.0.queues.0.ring_entries=4000000000", "--quiet")
    assert huge.returncode == 2 and huge.stderr.count("\n") == 1 and "GiB of host memory" in huge.stderr
    assert "--allow-large" in huge.stderr
    long = steer_cli("run", "rx-default", "--set", "sim.measure_us=1e7", "--quiet")
    assert long.returncode == 2 and "µs of simulated time" in long.stderr
    infinite = steer_cli("run", "rx-default", "--set", "sim.warmup_us=inf", "--quiet")
    assert infinite.returncode == 2 and "sim.warmup_us: must be a finite number (got inf)" in infinite.stderr
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing here\n")
    nothing = steer_cli("run", str(empty), "--quiet")
    assert nothing.returncode == 2 and "nothing to simulate" in nothing.stderr


def test_outputs_go_through_symlinks_and_devices_and_bad_places_are_one_line_errors(steer_cli, tmp_path):
    short = ("--set", "sim.measure_us=50", "--set", "sim.warmup_us=10", "--quiet")
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert steer_cli("run", "rx-default", *short, "--json", str(link)).returncode == 0
    assert link.is_symlink() and json.loads(real.read_text())["scenario"] == "rx-default"
    # A character device is written through, never replaced, and gets no resolved file beside it.
    devnull = steer_cli("run", "rx-default", *short, "--json", "/dev/null")
    assert devnull.returncode == 0 and Path("/dev/null").is_char_device()
    assert not Path("/dev/null.resolved.toml").exists()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad, why in [
        (tmp_path, "a directory"),
        (fifo, "not a regular file"),
        (real / "x.json", f"cannot write there: {real} is not a directory"),
    ]:
        done = steer_cli("run", "rx-default", *short, "--json", str(bad))
        assert done.returncode == 2 and why in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert fifo.exists() and not (tmp_path / "x.resolved.toml").exists()


def test_qdp_prints_the_pipelines_and_what_the_cache_did(steer_cli):
    small = ["--set", "column_bytes=16777216", "--set", "groups=1"]
    prefetch = steer_cli("run", "qdp", *small)
    assert prefetch.returncode == 0, prefetch.stderr
    assert "query: " in prefetch.stdout and "over 4 blocks per column (scan_a " in prefetch.stdout
    assert "cache: hit rate " in prefetch.stdout
    ddr = steer_cli("run", "qdp", *small, "--set", "column_b=ddr")
    assert "scan_b -, aggregate" in ddr.stdout and "cache:" not in ddr.stdout


def test_reproduce_plots_wrap_their_panels_and_draw_seed_001s_curves(tmp_path):
    from steer import reproduce

    def size(image: bytes) -> tuple[int, int]:
        return int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")

    rows = [reproduce.Row(f"r/{i}", "s", "m", "x", 1.0, 1.0) for i in range(13)]
    # Thirteen panels: three lines of six, 2.6 x 3 inches each at 120 dpi, not one line thirteen wide.
    assert size(reproduce.plot(rows)) == (1872, 1080)
    assert size(reproduce.plot(rows[:1])) == (312, 360)
    runner = reproduce.Runner()
    figures = reproduce.seed001_figures(runner)
    assert set(figures) == {"seed001-transfer-size.png", "seed001-ddr-to-hbm.png"}
    assert all(f[:8] == b"\x89PNG\r\n\x1a\n" for f in figures.values())
    # Every point of both curves is a run of dsa-copy: 11 sizes single and 12 threads, the 8 whose
    # batch of 32 fits in 1 GiB, and 8 destination nodes x 3 ways.
    assert len(runner.cache) == 11 * 2 + 8 + 8 * 3


def test_a_mistyped_parameter_lists_the_declared_ones_and_an_unconsumed_queue_is_refused(steer_cli):
    typo = steer_cli("run", "rx-default", "--set", "ofered_gbps=10")
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1, typo.stderr
    assert "declared: offered_gbps, packet_bytes, placement, ring" in typo.stderr
    extra = steer_cli("run", "rx-default", "--set", "devices.0.queues.0.count=2")
    assert extra.returncode == 2 and "queue 1 of `nic0` has no workload consuming it" in extra.stderr


def test_a_resolved_scenario_refuses_its_parameters_which_would_change_nothing(steer_cli, tmp_path):
    resolved = tmp_path / "rx.toml"
    resolved.write_text(steer_cli("resolve", "rx-default").stdout)
    for key in ("placement", "params.placement"):
        done = steer_cli("run", str(resolved), "--set", f"{key}=l2")
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.startswith(
            f"steer: error: --set {key}: no value of this scenario uses parameter `placement`"
        )
        assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("script", ["ddio_bench.py", "ddio_sweep.py"])
@pytest.mark.parametrize(
    ("argument", "expected"),
    [("rx_ring=many", "--set rx_ring: "), ("bogus=1", "bogus: not a parameter"), ("--bogus", "unrecognized")],
)
def test_the_ddio_scripts_reject_bad_settings_before_any_point(script, argument, expected):
    path = Path(__file__).parent.parent / "scripts" / script
    done = subprocess.run([sys.executable, path, argument], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert expected in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""


def test_the_profile_guided_build_s_training_script_runs():
    """scripts/setup.sh trains its profile-guided build on this script; the tests run it since `.ci/run`
    installs a plain build (the script reaches every built-in scenario, so a scenario renamed or
    broken fails it)."""
    path = Path(__file__).parent.parent / "scripts" / "pgo_train.py"
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_a_scenario_from_a_named_pipe_is_read_and_ctrl_c_stops_the_wait_for_a_writer(tmp_path):
    """`steer run <(...)` reads a pipe; one nobody writes to waits, as `cat` does, until Ctrl-C."""
    import signal
    import time

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    source = tmp_path / "source.toml"
    source.write_text(steer.api.scenario_source("rx-default")[0])
    with subprocess.Popen(["sh", "-c", f"cat {source} > {fifo}"]) as writer:
        assert steer.resolve(fifo) == steer.resolve("rx-default").replace('name = "rx-default"', 'name = "fifo"', 1)
    assert writer.returncode == 0
    waiting = subprocess.Popen(
        [sys.executable, "-m", "steer", "run", str(fifo)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(1.5)  # started, and waiting for a writer
    waiting.send_signal(signal.SIGINT)
    try:
        assert waiting.wait(timeout=10) == 130
    finally:
        waiting.kill()
    assert waiting.stderr.read() == "steer: interrupted\n"

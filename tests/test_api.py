"""The Python API: typed results that still read like the JSON dict, and results loaded as tables."""

import json
import pickle
import subprocess
import sys

import pytest

import steer
from steer.result import FILL_SOURCES, Result, flatten

SHORT = ["sim.measure_us=100", "sim.warmup_us=50"]


@pytest.fixture(scope="module")
def result():
    return steer.run("rx-default", SHORT, placement="l2", offered_gbps=40.0)


def test_result_reads_like_the_json_dict(result):
    raw, resolved = steer.api.run_with_resolved("rx-default", SHORT, placement="l2", offered_gbps=40.0)
    assert isinstance(result, Result)
    assert result["dram"]["read_gbps"] == raw["dram"]["read_gbps"]
    assert set(result) == set(raw) and len(result) == len(raw)

    def without_host(d):
        return {**d, "sim": {k: v for k, v in d["sim"].items() if k != "host_seconds"}}

    assert without_host(dict(result)) == without_host(raw)
    assert result.resolved == resolved
    # Still a dict: callers serialise it directly. Pickling too (results cross processes in sweeps).
    assert isinstance(result, dict)
    assert json.loads(json.dumps(result)) == result.to_dict() == result
    assert type(result.to_dict()) is dict
    assert pickle.loads(pickle.dumps(result)) == result


def test_typed_views(result):
    assert result.scenario == "rx-default" and result.platform == "turin-9655"
    assert result.dram.read_gbps == result["dram"]["read_gbps"]
    assert len(result.dram.channels) == len(result["dram"]["channels"])
    assert result.dram.channels[0].write_gbps == result["dram"]["channels"][0]["write_gbps"]
    core = result.cores[1]
    assert core.role == "rx_loop" and core["workload"]["packets"] == core.workload.packets > 0
    assert result.fills[1] == result["cores"]["1"]["fills"]
    assert set(result.fills[1]) == set(FILL_SOURCES)
    # Injected into the L2: the loop's reads are served there, or from the L1D where its
    # prefetcher brought the line first.
    assert result.fills[1]["l2"] + result.fills[1]["l1"] > 0.99 and result.fills[1]["l2"] > 0.8
    nic = result.devices["nic0"]
    assert nic.placement == "l2" and nic.rx_gbps == pytest.approx(40.0, rel=0.05) and nic.latency_ns is None
    assert result.sim.measured_ns == 100_000
    assert "rx-default" in repr(result) and "<table>" in result._repr_html_()


def test_views_read_the_declared_schema_and_name_what_is_missing(result):
    assert result.dram["read_gbps"] == result.dram.read_gbps
    assert result.unit("dram.read_gbps") == "GB/s"
    assert result.unit("cores.1.fills.l2") == "fraction"
    assert result.unit("devices.nic0.queues.0.dropped_packets") == "packets"
    assert "DRAM read bandwidth" in result.meaning("dram.read_gbps")
    assert {"dram.read_gbps", "cores.*.fills.l2", "devices.nic0.queues.*.restarts"} <= set(result.schema)
    with pytest.raises(AttributeError, match=r"dram\.bogus: not in this result \(here: read_gbps"):
        _ = result.dram.bogus
    with pytest.raises(KeyError, match=r"devices\.nic0\.bogus: not in this result"):
        result.devices["nic0"]["bogus"]
    with pytest.raises(KeyError, match="no such key"):
        result.unit("dram.bogus")
    with pytest.raises(KeyError, match=r"^'dramm: not in this result \(here: scenario, platform, "):
        result["dramm"]
    assert result.get("dramm") is None and "dramm" not in result  # the dict's other reads are as they were
    assert result.stalls == []


def test_the_catalog_lists_every_registry():
    names = {(e["registry"], e["name"]) for e in steer.catalog()}
    assert {("workload", "tcp_rx"), ("device", "nic"), ("placement", "tph"), ("replacement", "lru")} <= names
    assert {("prefetcher", "stride"), ("preset", "turin-9655"), ("scenario", "iperf-rx")} <= names
    tcp = steer.catalog("workload")
    assert any(key == "napi_budget" and value == "64" for e in tcp for key, value, _ in e["params"])
    with pytest.raises(steer.ScenarioError, match="no registry `bogus`"):
        steer.catalog("bogus")


def test_one_override_may_be_given_as_a_string():
    resolved = steer.resolve("rx-default", "sim.measure_us=123")
    assert resolved == steer.resolve("rx-default", ["sim.measure_us=123"]) and "measure_us = 123.0" in resolved
    assert dict((k, v) for k, v, _ in steer.describe_platform("turin-9655", "l2.ways=8"))["l2.ways"] == "8"


def test_overrides_may_be_a_mapping_of_keys_to_values():
    by_mapping = steer.resolve("rx-default", {"sim.measure_us": 123, "placement": "l2", "sim.allow_large": True})
    by_strings = steer.resolve("rx-default", ["sim.measure_us=123", 'placement="l2"', "sim.allow_large=true"])
    assert by_mapping == by_strings and 'policy = "l2"' in by_mapping
    assert dict((k, v) for k, v, _ in steer.describe_platform("turin-9655", {"l2.ways": 8}))["l2.ways"] == "8"
    with pytest.raises(steer.ScenarioError, match=r"^cannot express None as a scenario value$"):
        steer.resolve("rx-default", {"placement": None})
    with pytest.raises(
        TypeError, match="^overrides: expected KEY=VALUE strings or a mapping of keys to values, not 5$"
    ):
        steer.resolve("rx-default", 5)


def test_an_unknown_preset_is_named_with_the_known_ones(tmp_path):
    known = [name for name, _ in steer.platforms()]
    trace = tmp_path / "t.din"
    trace.write_text("0 40\n")
    for call in (lambda: steer.describe_platform("nosuch"), lambda: steer.trace(trace, platform="nosuch")):
        with pytest.raises(steer.ScenarioError) as raised:
            call()
        assert str(raised.value) == f"`nosuch`: no such platform preset (known: {', '.join(known)})"


def test_result_as_a_frame(result):
    frame = result.to_frame()
    assert frame.shape[0] == 1
    assert frame.loc[0, "dram.read_gbps"] == result.dram.read_gbps
    assert frame.loc[0, "cores.1.fills.l2"] == result.fills[1]["l2"]
    assert frame.loc[0, "dram.channels.3.read_gbps"] == result.dram.channels[3].read_gbps


def test_flatten_keeps_sample_lists_whole():
    flat = flatten({"a": {"b": 1, "samples": [1.0, 2.0]}, "rows": [{"x": 1}, {"x": 2}], "empty": []})
    assert flat == {"a.b": 1, "a.samples": [1.0, 2.0], "rows.0.x": 1, "rows.1.x": 2, "empty": []}


def test_load_and_export(tmp_path):
    sweep = {
        "scenario": "rx-default",
        "set": {"sim": {"measure_us": 100, "warmup_us": 50}},
        "grid": {"placement": ["memory", "l2"], "offered_gbps": [10.0, 20.0]},
    }
    summary = steer.run_sweep(sweep, tmp_path / "results", workers=1)
    assert summary.ok and summary.total == 4
    df = steer.load(tmp_path / "results")
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    assert list(df["param.placement"]) == ["memory", "memory", "l2", "l2"]
    assert list(df["param.offered_gbps"]) == [10.0, 20.0, 10.0, 20.0]
    memory = df[df["param.placement"] == "memory"]
    assert (memory["dram.write_gbps"] > 0.5).all()
    assert df["run_id"].is_unique
    parquet = steer.export(tmp_path / "results", tmp_path / "runs.parquet")
    again = steer.load(parquet)
    assert list(again["run_id"]) == list(df["run_id"])
    assert list(again["dram.read_gbps"]) == list(df["dram.read_gbps"])
    csv = steer.export(tmp_path / "results", tmp_path / "runs.csv")
    assert csv.read_text().startswith("run_id,status,error")
    with pytest.raises(steer.ScenarioError, match="unknown export format"):
        steer.export(tmp_path / "results", tmp_path / "runs.xlsx")
    with pytest.raises(steer.ScenarioError, match="no such results directory"):
        steer.load(tmp_path / "missing")
    # A directory no sweep wrote into is refused, not read as an empty sweep (a mistyped path).
    (tmp_path / "results" / "plots").mkdir()
    for verb in (steer.load, lambda d: steer.export(d, tmp_path / "none.csv")):
        with pytest.raises(steer.ScenarioError) as raised:
            verb(tmp_path / "results" / "plots")
        assert (
            str(raised.value)
            == f"{tmp_path / 'results' / 'plots'}: not a results directory (no sweep.json, runs/ or failed/ in it)"
        )
    assert not (tmp_path / "none.csv").exists()


def test_import_steer_stays_light():
    code = "import sys, steer; print(sorted(m for m in ('pandas', 'matplotlib', 'ray', 'pyarrow') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


PRESETS_WITH_FILES = "turin-9655, turin-9845, turin-9575f, skylake-sp-6140, icelake-sp-6354, power5, xeon-max-9468"


def test_a_presets_file_is_its_commented_toml_and_only_built_in_presets_have_one():
    assert steer.api.preset_source("turin-9655").startswith('# AMD EPYC 9655 "Turin"')
    for name in ("host", "nosuch"):
        with pytest.raises(steer.ScenarioError) as raised:
            steer.api.preset_source(name)
        assert str(raised.value) == f"no preset file `{name}` (known: {PRESETS_WITH_FILES})"
    assert [e["description"] for e in steer.catalog("preset") if e["name"] == "power5"][0].startswith("IBM POWER5")
    with pytest.raises(steer.ScenarioError) as raised:
        steer.catalog("bogus")
    known = "cache-placement, copy, device, placement, prefetcher, preset, replacement, scenario, workload"
    assert str(raised.value) == f"no registry `bogus` (known: {known})"


def test_a_scenario_is_a_file_where_the_name_looks_like_one_else_a_built_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").write_text("[sim]\n", encoding="utf-8")
    assert steer.api.scenario_source("mine") == ("[sim]\n", "mine", "mine")
    assert steer.api.scenario_source("rx-default")[1:] == ("builtin:rx-default", "rx-default")
    # A name ending .toml or holding a slash is a file, even one that is not there.
    for name in ("rx-default.toml", "x/rx-default", str(tmp_path)):
        with pytest.raises(steer.ScenarioError) as raised:
            steer.api.scenario_source(name)
        reason = "Is a directory" if name == str(tmp_path) else "No such file or directory"
        assert str(raised.value) == f"{name}: cannot read scenario: {reason}"
    (tmp_path / "latin.toml").write_bytes(b"\xff")
    with pytest.raises(steer.ScenarioError) as raised:
        steer.api.scenario_source("latin.toml")
    assert str(raised.value) == "latin.toml: cannot read scenario: not UTF-8 text"
    with pytest.raises(steer.ScenarioError) as raised:
        steer.api.scenario_source("nosuch")
    known = ", ".join(name for name, _ in steer.scenarios())
    assert str(raised.value) == f"nosuch: no such scenario file or built-in scenario (built-in: {known})"


def test_a_result_schema_names_every_key_without_running():
    schema = steer.result_schema("rx-default", placement="l2")
    assert schema["dram.read_gbps"] == (
        "GB/s",
        "DRAM read bandwidth: bytes read over the measured window, by line reads of DDR channels and by bulk"
        " transfers (DSA copies, a core's copies and scans) from DDR and HBM nodes",
    )
    assert "cores.*.fills.l2" in schema


def test_a_trace_replays_on_cpu_0_of_turin_9655_and_an_empty_one_is_refused(tmp_path):
    trace = tmp_path / "t.din"
    trace.write_text("0 40\n")
    report = steer.trace(trace)
    assert (report["accesses"], report["l1d"]["reads"]) == (1, 1)
    assert steer.trace(trace, cpu=1, platform="power5", overrides=["l2.ways=8"])["accesses"] == 1
    assert steer.trace(trace, cpu=191)["accesses"] == 1
    for cpu in (-1, 2**32, True, 1.0):
        with pytest.raises(steer.ScenarioError) as raised:
            steer.trace(trace, cpu=cpu)
        assert str(raised.value) == f"cpu: expected a logical CPU number (got {cpu!r})"
    for text, skipped in (("", ""), ("2 40\n", " (1 record skipped)"), ("2 40\n4 40\n", " (2 records skipped)")):
        trace.write_text(text)
        with pytest.raises(steer.ScenarioError) as raised:
            steer.trace(trace)
        assert str(raised.value) == f"{trace}: nothing to replay: no data accesses{skipped}; allow_empty accepts it"
        assert steer.trace(trace, allow_empty=True)["accesses"] == 0


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (2.5, "2.5"),
        ('a "b"', '"a \\"b\\""'),
        ([1, [True, "x"]], '[1, [true, "x"]]'),
        ((), "[]"),
        ({"agent": "cpu:1", "mask": 3}, '{"agent" = "cpu:1", "mask" = 3}'),
        ([{"a b": [{}]}], '[{"a b" = [{}]}]'),
    ],
)
def test_python_values_become_toml_literals(value, literal):
    assert steer.api.toml_literal(value) == literal


def test_numpy_values_pass_as_the_python_values_they_hold(tmp_path):
    np = pytest.importorskip("numpy")
    literals = [(np.float64(50), "50.0"), (np.int64(512), "512"), (np.int32(3), "3"), (np.bool_(True), "true")]
    literals += [(np.array(2.5), "2.5"), (np.array([1, 2]), "[1, 2]"), ({"w": np.int64(8)}, '{"w" = 8}')]
    for value, literal in literals:
        assert steer.api.toml_literal(value) == literal, value
    plain = {"sim.measure_us": 100, "ring": 512, "sim.allow_large": True}
    by_python = steer.resolve("rx-default", plain, offered_gbps=50.0)
    by_numpy = steer.resolve(
        "rx-default",
        {"sim.measure_us": np.array(100.0), "ring": np.int64(512), "sim.allow_large": np.bool_(True)},
        offered_gbps=np.float64(50),
    )
    assert by_numpy == by_python
    trace = tmp_path / "t.din"
    trace.write_text("0 40\n")
    assert steer.trace(trace, cpu=np.int64(3))["accesses"] == 1
    # A grid given as a numpy array, and values read back from results, run as the numbers they are.
    sweep = {
        "scenario": "rx-default",
        "set": {"sim.measure_us": np.float64(20), "sim.warmup_us": np.int64(0)},
        "grid": {"offered_gbps": np.array([10.0, 20.0])},
        "zip": {"ring": list(np.array([128, 256]))},
    }
    summary = steer.run_sweep(sweep, tmp_path / "results", workers=1)
    assert summary.ok and summary.total == 4
    df = steer.load(tmp_path / "results")
    assert list(df["param.offered_gbps"]) == [10.0, 10.0, 20.0, 20.0] and list(df["param.ring"]) == [128, 256] * 2
    read_back = {"offered_gbps": df["param.offered_gbps"].iloc[0], "ring": df["param.ring"].iloc[1]}
    assert steer.resolve("rx-default", read_back) == steer.resolve("rx-default", {"offered_gbps": 10.0, "ring": 256})


def test_a_value_toml_cannot_hold_is_refused():
    for value, shown in ((None, "None"), ({1: 2}, "{1: 2}"), ([{"a": None}], "None")):
        with pytest.raises(steer.ScenarioError) as raised:
            steer.api.toml_literal(value)
        assert str(raised.value) == f"cannot express {shown} as a scenario value"


def test_a_table_is_an_inline_table_as_on_the_command_line():
    masks = [{"agent": "cpu:1", "mask": 3}]
    by_python = steer.resolve("rx-default", {"platform.l3.way_masks": masks})
    assert by_python == steer.resolve("rx-default", ['platform.l3.way_masks=[{agent = "cpu:1", mask = 3}]'])
    assert 'agent = "cpu:1"' in by_python


def test_a_files_values_become_overrides_by_dotted_path(tmp_path):
    values = tmp_path / "v.toml"
    values.write_text('placement = "l2"\n[sim]\nmeasure_us = 50\n', encoding="utf-8")
    assert steer.api.overrides_from_file(values) == ['placement="l2"', "sim.measure_us=50"]
    for path, text, message in (
        (tmp_path / "none.toml", None, "cannot read: No such file or directory"),
        (tmp_path, None, "cannot read: Is a directory"),
        (values, "[sim\n", "invalid TOML: Expected ']' at the end of a table declaration (at line 1, column 5)"),
        (values, b"\xff", "cannot read: not UTF-8 text"),
    ):
        if isinstance(text, bytes):
            path.write_bytes(text)
        elif text is not None:
            path.write_text(text)
        with pytest.raises(steer.ScenarioError) as raised:
            steer.api.overrides_from_file(path)
        assert str(raised.value) == f"{path}: {message}"


MADE_UP = {
    "scenario": "s<1>",
    "platform": "p",
    "dram": {"read_gbps": 1.234, "write_gbps": 0.5},
    "devices": {"nic0": {"placement": "l2", "rx_gbps": 9.876, "drops": 3}, "nic1": {}},
    "cores": {"0": {"role": "napi", "fills": {"l1": 0.5, "dram": 0.25}}, "1": {"fills": {}}},
    "sim": {"stalls": [{"agent": "a"}]},
    "list": [{"x": 1}, {"x": 2}],
}


def test_a_made_up_result_reads_through_views_that_name_their_path():
    result = Result(MADE_UP)
    assert (result.scenario, result.platform, result.stalls) == ("s<1>", "p", [{"agent": "a"}])
    assert (Result({}).scenario, Result({}).platform, Result({}).stalls) == ("", "", [])
    assert repr(result.dram) == "<dram: read_gbps, write_gbps>" and repr(result.cores[0]) == "<cores.0: role, fills>"
    assert repr(steer.result.View(MADE_UP, "")) == f"<result: {', '.join(MADE_UP)}>"
    assert [repr(v) for v in result.list] == ["<list.0: x>", "<list.1: x>"]
    assert repr(result.devices["nic0"]) == "<devices.nic0: placement, rx_gbps, drops>"
    # A view is a mapping of its part: its keys in order, its size, its items.
    assert (list(result.dram), len(result.dram), len(result.devices["nic1"])) == (["read_gbps", "write_gbps"], 2, 0)
    assert dict(result.cores[0].fills.items()) == {"l1": 0.5, "dram": 0.25}
    with pytest.raises(KeyError) as raised:
        result.devices["nic1"]["rx_gbps"]
    assert raised.value.args[0] == "devices.nic1.rx_gbps: not in this result (here: nothing)"
    with pytest.raises(AttributeError) as raised:
        _ = result.nope
    assert str(raised.value) == f"nope: not in this result (here: {', '.join(MADE_UP)})"
    with pytest.raises(AttributeError) as raised:
        _ = result._hidden
    assert str(raised.value) == "_hidden"
    with pytest.raises(AttributeError) as raised:
        _ = result.dram._hidden
    assert str(raised.value) == "_hidden"
    with pytest.raises(AttributeError) as raised:
        _ = Result({"_private": 1})._private
    assert str(raised.value) == "_private"
    assert repr(steer.result.View(MADE_UP, "")["devices"]["nic0"]) == "<devices.nic0: placement, rx_gbps, drops>"
    with pytest.raises(AttributeError):
        result.resolved_typo = 1  # slots: a result takes no new attributes
    copied = result.to_dict()
    copied["dram"]["read_gbps"] = 0.0
    assert result["dram"]["read_gbps"] == 1.234, "to_dict copies deeply"
    with pytest.raises(KeyError) as raised:
        _ = result.schema
    assert raised.value.args[0] == "this result carries no scenario to read its schema from"


def test_a_result_is_summarised_in_a_line_and_for_jupyter():
    result = Result(MADE_UP)
    assert repr(result) == "<Result 's<1>' on 'p', DRAM read 1.23 GB/s, write 0.50 GB/s>"
    assert repr(Result({"dram": {"read_gbps": 1.0}})) == "<Result '' on ''>"
    zeros = "".join("<td>0.0%</td>" for _ in FILL_SOURCES[1:-1])
    assert result._repr_html_().splitlines() == [
        "<p><b>s&lt;1&gt;</b> on p: DRAM read 1.23 GB/s, write 0.50 GB/s</p>",
        "<table><tr><th>device</th><th>placement</th><th>rx Gb/s</th><th>drops</th></tr>",
        "<tr><td>nic0</td><td>l2</td><td>9.88</td><td>3</td></tr>",
        "<tr><td>nic1</td><td></td><td>0.00</td><td>0</td></tr>",
        "</table>",
        "<table><tr><th>cpu</th><th>role</th>" + "".join(f"<th>{s}</th>" for s in FILL_SOURCES) + "</tr>",
        f"<tr><td>0</td><td>napi</td><td>50.0%</td>{zeros}<td>25.0%</td></tr>",
        "<tr><td>1</td><td></td>" + "<td>0.0%</td>" * len(FILL_SOURCES) + "</tr>",
        "</table>",
    ]
    assert Result({})._repr_html_() == "<p><b></b> on : DRAM read 0.00 GB/s, write 0.00 GB/s</p>"


def test_a_results_schema_is_read_from_the_scenario_it_ran_once(result, monkeypatch):
    assert result.unit("cores.1.fills.l2") == "fraction"
    calls = []
    real = steer.result.schema_of
    monkeypatch.setattr(steer.result, "schema_of", lambda *args: calls.append(args) or real(*args))
    fresh = Result(dict(result), result.resolved)
    assert fresh.schema is fresh.schema
    assert [args[1:] for args in calls] == [("resolved scenario", "rx-default")]
    unnamed = Result({}, result.resolved)
    assert unnamed.schema == fresh.schema
    assert calls[-1][1:] == ("resolved scenario", "scenario")
    with pytest.raises(KeyError) as raised:
        result.meaning("dram.nope")
    assert raised.value.args[0] == "dram.nope: no such key in this run's results (see result.schema)"

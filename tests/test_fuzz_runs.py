"""scripts/fuzz_runs.py: what it counts as a finding, and a short campaign over the built-ins."""

import copy
import importlib.util
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import steer

SCRIPT = Path(__file__).parent.parent / "scripts" / "fuzz_runs.py"
spec = importlib.util.spec_from_file_location("fuzz_runs", SCRIPT)
fuzz_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_runs)


def exits(*_):
    os._exit(3)


def sleeps(*_):
    time.sleep(30)


def raises(error):
    def run(*_):
        raise error

    return run


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (lambda name, overrides: None, ("ok", "")),
        (raises(steer.ScenarioError("--set x: bad")), ("error", "--set x: bad")),
        (raises(steer.ScenarioError("two\nlines")), ("several lines", "two\nlines")),
        (raises(ValueError("oops")), ("exception", "ValueError: oops")),
        (exits, ("crash", "exit status 3")),
        (sleeps, ("timeout", "past 0.5 s")),
    ],
)
def test_a_case_is_a_result_or_one_line_and_anything_else_is_a_finding(monkeypatch, run, expected):
    monkeypatch.setattr(steer, "run", run)
    assert fuzz_runs.outcome("rx-default", ["ring=1"], 0.5) == expected


def test_each_case_runs_a_short_window_with_the_chosen_overrides(monkeypatch):
    seen = []
    monkeypatch.setattr(steer, "run", lambda name, overrides: seen.append((name, overrides)))

    class Pipe:
        def send(self, message):
            seen.append(message)

    fuzz_runs.run_case("eflatency", ["seed=2"], Pipe())
    assert seen == [("eflatency", ["sim.measure_us=30", "sim.warmup_us=0", "seed=2"]), ("ok", "")]


def test_keys_are_every_leaf_with_lists_of_tables_by_index():
    out = {}
    fuzz_runs.leaves("", {"a": {"b": 1, "c": [1, 2]}, "d": [{"e": "x"}, {"e": "y"}], "f": []}, out)
    assert out == {"a.b": 1, "a.c": [1, 2], "d.0.e": "x", "d.1.e": "y", "f": []}


def test_an_odd_value_is_a_neighbour_of_a_number_or_a_value_of_any_type():
    class Fixed:
        def __init__(self, draw, pick):
            self.draw, self.pick = draw, pick

        def random(self):
            return self.draw

        def choice(self, options):
            return options[self.pick]

    assert fuzz_runs.odd_value(Fixed(0.1, 0), "a.b", 64) == "64000"
    assert fuzz_runs.odd_value(Fixed(0.1, 1), "a.b", 64) == "0.064"
    assert fuzz_runs.odd_value(Fixed(0.1, 4), "a.b", 2.5) == "-2.5"
    assert fuzz_runs.odd_value(Fixed(0.1, 6), "a.b", 3) == str(2**64 - 1)
    assert fuzz_runs.odd_value(Fixed(0.9, 5), "a.b", 64) == "nan"
    assert fuzz_runs.odd_value(Fixed(0.1, 5), "a.b", "lru") == "nan"
    assert fuzz_runs.odd_value(Fixed(0.1, 13), "a.b", True) == "true"
    # The window only gets the odd values of any key, never its own length scaled.
    assert fuzz_runs.odd_value(Fixed(0.1, 0), "sim.measure_us", 1000.0) == "0"


def test_a_short_campaign_over_the_built_ins_finds_nothing():
    done = subprocess.run(
        [sys.executable, SCRIPT, "--seed", "3", "--cases", "40"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    counts = dict(reversed(part.split(" ")) for part in done.stdout.strip().splitlines()[-1].split(", "))
    assert set(counts) <= {"ok", "error"} and sum(map(int, counts.values())) == 40, done.stdout
    assert done.stderr == ""  # fewer cases than a progress step


class Scripted:
    """A random source whose choices are given in turn, each as an index into the options."""

    def __init__(self, *picks):
        self.picks = list(picks)

    def choice(self, options):
        return options[self.picks.pop(0)]

    def random(self):
        return 0.9  # an odd value of any type, not a neighbour


DOCUMENT = {
    "sim": {"measure_us": 5.0},
    "devices": [{"kind": "nic", "name": "nic0", "queues": [{"count": 1}]}],
    "workloads": [{"kind": "rx_loop", "cpu": 0}],
}
KINDS = {"device": {"nic": [("link_gbps", "100.0"), ("placement.cpu", "none")]}, "workload": {"stream": [("cpu", "0")]}}


def test_tables_and_lists_of_tables_are_found_at_every_depth():
    assert [path for path, _ in fuzz_runs.tables(DOCUMENT)] == [
        "",
        "sim",
        "devices.0",
        "devices.0.queues.0",
        "workloads.0",
    ]
    assert [path for path, _ in fuzz_runs.lists_of_tables(DOCUMENT)] == ["devices", "workloads", "devices.0.queues"]


@pytest.mark.parametrize(
    ("picks", "described", "changed"),
    [
        # The actions in order: drop, unknown, repeat, empty, kind, foreign, refer, value.
        ((0, 1, 0), "drop sim.measure_us", lambda d: d["sim"].clear()),
        ((0, 0, 0), "drop devices", lambda d: d.pop("devices")),
        ((1, 4), "add workloads.0.nonesuch", lambda d: d["workloads"][0].update(nonesuch=1)),
        ((1, 0), "add (top).nonesuch", lambda d: d.update(nonesuch=1)),
        ((2, 2, 0, 0), "repeat an entry of devices.0.queues", lambda d: d["devices"][0]["queues"].append({"count": 1})),
        (
            (2, 0, 0, 1),
            "repeat an entry of devices (renamed)",
            lambda d: d["devices"].append({**copy.deepcopy(d["devices"][0]), "name": "nic01"}),
        ),
        (
            (2, 1, 0, 1),
            "repeat an entry of workloads (renamed)",
            lambda d: d["workloads"].append({"kind": "rx_loop", "cpu": 1}),
        ),
        ((3, 1), "empty workloads", lambda d: d["workloads"].clear()),
        ((4, 1, 1), 'workloads.0.kind = "stream"', lambda d: d["workloads"][0].update(kind="stream")),
        ((4, 0, 3), 'devices.0.kind = "nonesuch"', lambda d: d["devices"][0].update(kind="nonesuch")),
        ((5, 0, 0), "devices.0.link_gbps = 100.0 (of device nic)", lambda d: d["devices"][0].update(link_gbps=100.0)),
        # A parameter with no default (an optional one) is given 1; a dotted one is set at its first part.
        ((5, 1, 1), "workloads.0.placement = none (of device nic)", lambda d: d["workloads"][0].update(placement=1)),
        ((6, 0, 6), "devices.0.queues.0.count = 63", lambda d: d["devices"][0]["queues"][0].update(count=63)),
        ((6, 1, 15), 'workloads.0.cpu = "nic1"', lambda d: d["workloads"][0].update(cpu="nic1")),
        ((7, 2, 2), "devices.0.queues.0.count = 1e30", lambda d: d["devices"][0]["queues"][0].update(count=1e30)),
        ((7, 3, 16), "sim.measure_us = [1e30]", lambda d: d["sim"].update(measure_us=[1e30])),
    ],
)
def test_each_structural_edit_changes_the_shape_as_it_says(picks, described, changed):
    document, expected = copy.deepcopy(DOCUMENT), copy.deepcopy(DOCUMENT)
    assert fuzz_runs.edit(Scripted(*picks), document, KINDS) == described
    changed(expected)
    assert document == expected


def test_a_document_is_written_as_toml_that_reads_back_the_same():
    for name, _ in steer.scenarios():
        document = tomllib.loads(steer.resolve(name))
        assert tomllib.loads(fuzz_runs.document_text(document)) == document


def test_a_short_structural_campaign_over_the_built_ins_finds_nothing():
    done = subprocess.run(
        [sys.executable, SCRIPT, "--structural", "--seed", "3", "--cases", "40"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    counts = dict(reversed(part.split(" ")) for part in done.stdout.strip().splitlines()[-1].split(", "))
    assert set(counts) == {"ok", "error"} and sum(map(int, counts.values())) == 40, done.stdout

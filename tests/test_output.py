"""steer.output on its own: atomic writes (all files or none), tables, --json [FILE], progress."""

import argparse
import io
import itertools
import json
import os
import stat
from pathlib import Path

import pytest

import steer
from steer import output


def leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_every_file_is_written_whole_and_an_existing_one_replaced(tmp_path):
    old = tmp_path / "result.json"
    old.write_text("old")
    new = tmp_path / "deep" / "er" / "plot.png"  # its directories are made
    output.write_atomically({old: "text é", new: b"\x89PNG"})
    assert old.read_text(encoding="utf-8") == "text é" and new.read_bytes() == b"\x89PNG"
    assert leftovers(tmp_path) == [] and leftovers(new.parent) == []


def test_files_follow_the_umask_like_any_other_output(tmp_path):
    previous = os.umask(0o002)
    try:
        output.write_atomically({tmp_path / "a.json": "{}"})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o664
    assert output.current_umask() == previous


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_a_file_that_cannot_be_written_means_none_is(tmp_path, where):
    kept = tmp_path / "kept.json"
    kept.write_text("before")
    blocker = tmp_path / "file"
    blocker.write_text("")
    bad, reason = {
        "a directory": (tmp_path, "a directory"),
        "under a file": (blocker / "x.json", f"{blocker} is not a directory"),
    }[where]
    with pytest.raises(steer.ScenarioError) as raised:
        output.write_atomically({kept: "after", bad: "x"})
    assert str(raised.value) == f"{bad}: cannot write there: {reason}"
    assert kept.read_text() == "before" and leftovers(tmp_path) == []


def test_a_fifo_is_refused_and_a_character_device_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(steer.ScenarioError) as raised:
        output.write_atomically({fifo: "x"})
    assert str(raised.value) == f"{fifo}: cannot write there: not a regular file"
    output.write_atomically({Path(os.devnull): "discarded", tmp_path / "a.txt": "a"})
    assert (tmp_path / "a.txt").read_text() == "a"


def test_a_symlink_is_followed_and_stays_a_symlink(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    output.write_atomically({link: "new"})
    assert link.is_symlink() and target.read_text() == "new"


def test_a_dangling_symlink_into_no_directory_is_refused_and_none_is_made(tmp_path):
    link = tmp_path / "dangling.json"
    link.symlink_to("nowhere/x.json")
    kept = tmp_path / "kept.json"
    with pytest.raises(steer.ScenarioError) as raised:
        output.write_atomically({kept: "x", link: "x"})
    assert str(raised.value) == (
        f"{link}: cannot write there: a symbolic link to nowhere/x.json, in a directory that does not exist"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.json"]
    # Into a directory that exists, a dangling link makes its file.
    (tmp_path / "nowhere").mkdir()
    output.write_atomically({link: "x"})
    assert (tmp_path / "nowhere" / "x.json").read_text() == "x"


def test_an_error_while_writing_names_the_file_and_leaves_nothing(tmp_path, monkeypatch):
    staged = []

    def full(temporary, target):
        staged.append(Path(temporary))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "replace", full)
    with pytest.raises(steer.ScenarioError) as raised:
        output.write_atomically({tmp_path / "a.json": "x"})
    assert str(raised.value) == f"{tmp_path / 'a.json'}: cannot write there: No space left on device"
    assert list(tmp_path.iterdir()) == []
    # Beside its file, named as steer.store.Store.remove_partial_files expects.
    assert staged[0].parent == tmp_path
    assert staged[0].name.startswith(".a.json.") and staged[0].name.endswith(".tmp")


def test_a_table_aligns_numbers_right_and_text_left():
    rows = [["dram", 1.5, "12.5%", "1,024"], ["l2 fills", 10, "3%", "8"]]
    assert output.table(["metric", "GB/s", "share", "lines"], rows).splitlines() == [
        "metric    GB/s  share  lines",
        "dram       1.5  12.5%  1,024",
        "l2 fills    10     3%      8",
    ]
    # A version or a number with a suffix is text.
    assert output.table(["version", "tag"], [["1.2.3", "12X"], ["3", "4"]]).splitlines() == [
        "version  tag",
        "1.2.3    12X",
        "3        4",
    ]
    # One cell that is not a number makes the column text; trailing spaces are dropped.
    assert output.table(["a", "b"], [[1, "x"], ["-", ""]]).splitlines() == ["a  b", "1  x", "-"]


def test_json_goes_to_stdout_or_a_file(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    output.add_json_option(parser, "JSON")
    assert parser.parse_args([]).json is None
    assert parser.parse_args(["--json"]).json == "-"
    assert parser.parse_args(["--json", "x.json"]).json == "x.json"
    with pytest.raises(SystemExit):
        parser.parse_args(["--json", " "])
    assert capsys.readouterr().err.endswith(
        "error: argument --json: empty file name (give a file, or no value to print to stdout)\n"
    )
    # A name that can only be a directory is refused before anything runs (`-` is stdout).
    for directory in (".", "/", "..", "out/..", "out/", "out/."):
        with pytest.raises(SystemExit):
            parser.parse_args(["--json", directory])
        assert capsys.readouterr().err.endswith(f"error: argument --json: {directory}: a directory, not a file name\n")
    assert parser.parse_args(["--json", "-"]).json == "-"
    assert "[--json [FILE]]" in parser.format_usage()
    output.emit_json("-", {"b": 1, "a": [1.5]})
    assert capsys.readouterr().out == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'
    output.emit_json(str(tmp_path / "x.json"), {"b": 1})
    assert capsys.readouterr().out == f"wrote {tmp_path / 'x.json'}\n"
    assert json.loads((tmp_path / "x.json").read_text()) == {"b": 1}


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (99 * 1024 + 900, "99.9 KiB"),
        (1000 * 1024, "1000 KiB"),
        ((1 << 20) - 1, "1024 KiB"),
        (1 << 20, "1 MiB"),
        (256 << 20, "256 MiB"),
        (3 << 29, "1.5 GiB"),
        (2048 << 30, "2048 GiB"),
    ],
)
def test_a_size_takes_the_largest_unit_it_reaches_and_no_exponent(n, text):
    assert output.fmt_bytes(n) == text


def test_counts_take_the_plural_except_for_one():
    assert [output.count(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]


def test_progress_draws_only_on_a_terminal_and_not_when_quiet(monkeypatch):
    err = io.StringIO()
    err.isatty = lambda: True
    monkeypatch.setattr(output.sys, "stderr", err)
    # Exact binary times: the first call is exactly the 0.1 s the bar waits between draws.
    clock = itertools.chain([0.05, 0.1, 0.15, 0.16, 0.17, 3.05], itertools.repeat(4.0))
    monkeypatch.setattr(output.time, "monotonic", lambda: next(clock))
    bar = output.Progress("steer run")  # starts at 0.05 s
    bar(0.25)  # 0.1 s: drawn
    bar(0.3)  # 0.15 s: too soon after the last, skipped
    bar(1.0)  # 0.16 s: soon, but the end is always drawn
    bar(1.5)  # more than done is shown as done
    bar(0.0)  # nothing done: no estimate
    bar.close()
    assert err.getvalue().split("\r") == [
        "",
        "steer run [#######-----------------------]  25.0%    0.1s  eta   0.2s",
        "steer run [##############################] 100.0%    0.1s  eta   0.0s",
        "steer run [##############################] 150.0%    0.1s  eta  -0.0s",
        "steer run [------------------------------]   0.0%    3.0s  eta   0.0s",
        "\033[K",
    ]
    quiet = output.Progress("steer run", quiet=True)
    quiet(0.5)
    quiet.close()
    assert not quiet.enabled and err.getvalue().endswith("\r\033[K")
    err.isatty = lambda: False
    assert not output.Progress("steer run").enabled


def test_a_restarted_bar_clears_the_line_and_times_its_stage_from_the_restart(monkeypatch):
    err = io.StringIO()
    err.isatty = lambda: True
    monkeypatch.setattr(output.sys, "stderr", err)
    clock = iter([0.0, 1.0, 1.0, 1.0625, 2.0])
    monkeypatch.setattr(output.time, "monotonic", lambda: next(clock))
    bar = output.Progress("steer x: base rows")  # starts at 0 s
    bar(0.5)  # 1 s
    bar.restart("steer x: changes")  # 1 s
    bar(0.25)  # 1.0625 s: drawn, though the last draw (of the last stage) was under 0.1 s ago
    bar(0.5)  # 2 s
    assert err.getvalue().split("\r") == [
        "",
        "steer x: base rows [###############---------------]  50.0%    1.0s  eta   1.0s",
        "\033[K",
        "steer x: changes [#######-----------------------]  25.0%    0.1s  eta   0.2s",
        "steer x: changes [###############---------------]  50.0%    1.0s  eta   1.0s",
    ]

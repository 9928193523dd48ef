"""The results directory (steer.store) on its own: its layout, run ids, the lock, partial files,
reading records back, and the tables made from them. No simulation runs here."""

import hashlib
import json
from pathlib import Path

import pandas
import pytest

import steer
from steer import optional
from steer import store as stores
from steer import sweep as sweeps
from steer.store import Store


def record(run_id: str, status: str = "ok", **fields) -> dict:
    task = sweeps.Task(fields.pop("index", 0), run_id, fields.pop("point", {}), [], "probe", resolved="[sim]\n")
    if status == "ok":
        return sweeps.record_for(task, "ok", 0.0, 0.5, result=fields.pop("result", {"dram": {"read_gbps": 1.0}}))
    return sweeps.record_for(task, "failed", 0.0, 0.5, error=fields.pop("error", "broke"))


def test_a_directory_holds_the_manifest_a_lock_and_one_file_per_run(tmp_path):
    root = tmp_path / "a" / "b"  # made with its parents
    store = Store(root)
    with store.lock():
        store.write_manifest({"points": []})
        ok = store.write(record("1" * 16))
        failed = store.write(record("2" * 16, "failed"))
    assert sorted(p.name for p in root.iterdir()) == [".lock", "failed", "runs", "sweep.json"]
    assert ok == root / "runs" / f"{'1' * 16}.json" and failed == root / "failed" / f"{'2' * 16}.json"
    # One key a line, in the order the sweep wrote them.
    assert ok.read_text() == json.dumps(record("1" * 16) | json.loads(ok.read_text()), indent=1) + "\n"
    assert json.loads(ok.read_text())["format"] == stores.RECORD_FORMAT == 1
    assert (root / "sweep.json").read_text() == '{\n "points": []\n}\n'
    assert store.finished_ids() == {"1" * 16} and store.failed_ids() == {"2" * 16}
    # A retry that succeeds supersedes the failure.
    store.write(record("2" * 16))
    assert not failed.exists() and store.failed_ids() == set()


def test_a_run_id_is_the_hash_of_the_resolved_scenario_and_the_build(tmp_path):
    core = Path(steer._core.__file__).read_bytes()
    assert stores.build_identity() == f"{steer.__version__}+{hashlib.sha256(core).hexdigest()[:12]}"
    expected = hashlib.sha256(b"[sim]\n\nsteer 1.2.3+abc\n").hexdigest()[:16]
    assert stores.run_id("[sim]\n", build="1.2.3+abc") == expected


def test_a_second_lock_is_refused_until_the_first_is_released(tmp_path):
    store = Store(tmp_path)
    with store.lock():
        with pytest.raises(steer.ScenarioError) as raised, Store(tmp_path).lock():
            pass
        assert str(raised.value) == f"{tmp_path}: another sweep is writing into this results directory"
    with Store(tmp_path).lock():
        pass


def test_a_place_that_cannot_be_a_results_directory_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    for root, reason in (
        (tmp_path / "file", "not a directory"),
        (tmp_path / "file" / "sub", "Not a directory"),
        (Path("/proc/steer-results"), "No such file or directory"),
    ):
        with pytest.raises(steer.ScenarioError) as raised, Store(root).lock():
            pass
        assert str(raised.value) == f"{root}: cannot hold results: {reason}"


def test_only_the_temporary_files_of_killed_writers_are_removed(tmp_path):
    store = Store(tmp_path)
    for directory in (tmp_path, store.runs, store.failed):
        directory.mkdir(exist_ok=True)
        (directory / ".0123.json.tmp").write_text("half")
        (directory / "notes.tmp").write_text("a user's")
    assert store.remove_partial_files() == 3
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == [
        "failed/notes.tmp",
        "notes.tmp",
        "runs/notes.tmp",
    ]
    assert store.remove_partial_files() == 0


def test_records_come_back_in_point_order_whichever_directory_holds_them(tmp_path):
    store = Store(tmp_path)
    store.write(record("c" * 16, "failed", index=0))
    with pytest.raises(steer.ScenarioError) as raised:
        Store(tmp_path / "missing").records()
    assert str(raised.value) == f"{tmp_path / 'missing'}: no such results directory"
    # Only failed/ exists so far.
    assert [r["run_id"] for r in store.records()] == ["c" * 16]
    store.write(record("d" * 16, index=2))
    store.write(record("a" * 16, index=1))
    unindexed = record("b" * 16)
    del unindexed["index"]
    store.write(unindexed)
    # A record without an index counts as the first point; ties go by run id.
    assert [r["run_id"] for r in store.records()] == ["b" * 16, "c" * 16, "a" * 16, "d" * 16]
    # The manifest limits them to the last sweep's points, unless every sweep is asked for.
    store.write_manifest({"points": [{"run_id": "a" * 16}, {"run_id": "c" * 16}]})
    assert [r["run_id"] for r in store.records()] == ["c" * 16, "a" * 16]
    assert len(store.records(every_sweep=True)) == 4
    # Records of other sweeps are passed over wherever they sort.
    store.write_manifest({"points": [{"run_id": "d" * 16}]})
    assert [r["run_id"] for r in store.records()] == ["d" * 16]
    # A run in both directories (a retry written by an older steer) is its successful record.
    (store.failed / f"{'a' * 16}.json").write_text(json.dumps(record("a" * 16, "failed")))
    assert [r["status"] for r in store.records(every_sweep=True) if r["run_id"] == "a" * 16] == ["ok"]
    tmp_path.joinpath("empty").mkdir()
    with pytest.raises(steer.ScenarioError) as raised:
        Store(tmp_path / "empty").records()
    assert str(raised.value) == f"{tmp_path / 'empty'}: not a results directory (no sweep.json, runs/ or failed/ in it)"


def test_a_row_is_the_runs_metadata_its_swept_values_and_its_flattened_result():
    done = stores.record_row(record("a" * 16, index=3, point={"ring": 64}, result={"dram": {"read_gbps": 2.0}}))
    assert done == {
        "run_id": "a" * 16,
        "status": "ok",
        "error": None,
        "index": 3,
        "steer_version": steer.__version__,
        "wall_seconds": 0.5,
        "param.ring": 64,
        "dram.read_gbps": 2.0,
    }
    failed = stores.record_row(record("b" * 16, "failed", point={"ring": 0}, error="too big"))
    assert (failed["error"], failed["param.ring"]) == ("too big", 0) and "dram.read_gbps" not in failed


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("sweep.json", "{", "sweep.json: not a steer sweep manifest: Expecting property name"),
        ("runs/x.json", "[]", "runs/x.json: not a steer run record: list indices must be integers"),
        ("runs/x.json", '{"run_id": "x"}', "runs/x.json: not a steer run record: 'status'"),
    ],
)
def test_a_file_that_is_not_a_record_is_named(tmp_path, name, text, expected):
    (tmp_path / "runs").mkdir()
    (tmp_path / name).write_text(text)
    with pytest.raises(steer.ScenarioError) as raised:
        Store(tmp_path).records()
    assert str(raised.value).startswith(f"{tmp_path}/{expected}")


def test_load_keeps_or_drops_failed_runs_and_reads_only_parquet_files_as_tables(tmp_path):
    store = Store(tmp_path / "results")
    store.write(record("a" * 16, index=0, point={"ring": 64}))
    store.write(record("b" * 16, "failed", index=1, point={"ring": 0}))
    every = steer.load(store.root)
    assert list(every.columns[:7]) == [*stores.META_COLUMNS, "param.ring"]
    assert list(every["status"]) == ["ok", "failed"] and list(every["wall_seconds"]) == [0.5, 0.5]
    assert list(every["steer_version"]) == [steer.__version__] * 2 and list(every["index"]) == [0, 1]
    assert list(steer.load(store.root, include_failed=False)["run_id"]) == ["a" * 16]
    csv = steer.export(store.root, tmp_path / "runs.csv")
    assert (
        csv.read_text().splitlines()[0].startswith("run_id,status,error,index,steer_version,wall_seconds,param.ring,")
    )
    parquet = steer.export(store.root, tmp_path / "runs.parquet")
    assert list(pandas.read_parquet(parquet).columns) == list(every.columns)
    # A directory a later sweep reused loads only that sweep's runs, unless every one is asked for.
    store.write_manifest({"points": [{"run_id": "b" * 16}]})
    assert list(steer.load(store.root)["run_id"]) == ["b" * 16]
    assert list(steer.load(store.root, every_sweep=True)["run_id"]) == ["a" * 16, "b" * 16]
    with pytest.raises(steer.ScenarioError) as raised:
        steer.export(store.root, tmp_path / "runs.xlsx")
    assert str(raised.value) == f"{tmp_path / 'runs.xlsx'}: unknown export format `.xlsx` (use .parquet or .csv)"
    with pytest.raises(steer.ScenarioError, match="no such results directory"):
        steer.load(csv)


def test_a_column_of_mixed_types_becomes_text_for_parquet():
    df = pandas.DataFrame({"count": [1, 2, 3, 4], "mixed": [1, "x", [1, 2], None], "flags": [True, 2.5, 1, None]})
    df["lists"] = [[1], [2, 3], [], None]
    # Integers and floats are one kind (numbers), lists and tuples another.
    df["numbers"] = pandas.Series([1, 2.5, 3, None], dtype=object)
    df["sequences"] = [[1], (2, 3), [], None]
    safe = stores._parquet_safe(df)
    assert list(safe["numbers"][:3]) == [1, 2.5, 3]
    assert list(safe["sequences"][:3]) == [[1], (2, 3), []]
    assert list(safe["lists"][:3]) == [[1], [2, 3], []], "one kind of value stays as it is"
    assert list(safe["count"]) == [1, 2, 3, 4]
    assert list(safe["mixed"][:3]) == ["1", "x", "[1, 2]"] and pandas.isna(safe["mixed"][3])
    assert list(safe["flags"][:3]) == ["True", "2.5", "1"] and pandas.isna(safe["flags"][3])
    assert (stores.as_text(None), stores.as_text((1, 2)), stores.as_text(2.5)) == (None, "[1, 2]", "2.5")
    assert list(df["mixed"]) == [1, "x", [1, 2], None], "the frame given is left as it was"


def test_a_missing_optional_dependency_says_which_extra_installs_it(tmp_path, monkeypatch):
    store = Store(tmp_path / "results")
    store.write(record("a" * 16))
    parquet = steer.export(store.root, tmp_path / "runs.parquet")
    absent: set[str] = set()
    real_import = optional.importlib.import_module

    def without(name):
        if name in absent:
            raise ImportError(name)
        return real_import(name)

    monkeypatch.setattr(optional.importlib, "import_module", without)
    for module, extra in (("ray", "ray"), ("pandas", "plot")):
        absent.add(module)
        with pytest.raises(steer.ScenarioError) as raised:
            optional.require(module, "this")
        assert str(raised.value) == f"this needs {module}: pip install 'steer[{extra}]'"
    for missing, call, purpose in (
        ("pandas", lambda: steer.load(store.root), "a DataFrame of runs"),
        ("pandas", lambda: steer.load(parquet), "reading Parquet"),
        ("pyarrow", lambda: steer.load(parquet), "reading Parquet"),
        ("pyarrow", lambda: steer.export(store.root, tmp_path / "again.parquet"), "Parquet export"),
    ):
        absent.clear()
        absent.add(missing)
        with pytest.raises(steer.ScenarioError) as raised:
            call()
        assert str(raised.value) == f"{purpose} needs {missing}: pip install 'steer[plot]'"

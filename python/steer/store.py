"""The results directory of a sweep: one JSON record per run, written so that nothing is lost.

Layout::

    RESULTS/sweep.json          what the last sweep into this directory asked for (its points)
    RESULTS/runs/RUN_ID.json    a finished run: status "ok", the result, the resolved scenario
    RESULTS/failed/RUN_ID.json  a run that failed: status "failed" and its error

Every file is written to a temporary file beside it and renamed into place, so a reader (or a
sweep resumed after the previous one was killed) sees whole records or none. The run id is a
hash of the resolved scenario and of the steer that runs it (its version and a digest of its
compiled core): the same point run by the same build has the same id, which is how a resumed
sweep knows what is already done, and a rebuilt model never reuses results of the one before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from steer import _core, output
from steer._core import ScenarioError, __version__
from steer.optional import require
from steer.result import flatten

RECORD_FORMAT = 1
MANIFEST = "sweep.json"
RUNS = "runs"
FAILED = "failed"
# Columns that describe a run rather than its result; swept parameters follow as "param.KEY".
META_COLUMNS = ("run_id", "status", "error", "index", "steer_version", "wall_seconds")
PARAM_PREFIX = "param."


@functools.cache
def build_identity() -> str:
    """The steer version and a digest of its compiled core: what a result depends on besides
    its scenario. A model changed and rebuilt under the same version gets a new identity."""
    core = hashlib.sha256(Path(_core.__file__).read_bytes()).hexdigest()
    return f"{__version__}+{core[:12]}"


def run_id(resolved_toml: str, build: str | None = None) -> str:
    """The id of a run: a hash of the resolved scenario and the build that runs it."""
    build = build_identity() if build is None else build
    digest = hashlib.sha256(f"{resolved_toml}\nsteer {build}\n".encode()).hexdigest()
    return digest[:16]


class Store:
    """A results directory: writes run records atomically and reads them back."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.runs = self.root / RUNS
        self.failed = self.root / FAILED

    def finished_ids(self) -> set[str]:
        """Ids of runs that completed successfully (found by file name; no file is parsed)."""
        return {p.stem for p in self.runs.glob("*.json")} if self.runs.is_dir() else set()

    def failed_ids(self) -> set[str]:
        """Ids of runs whose last attempt failed and that have not succeeded since."""
        failed = {p.stem for p in self.failed.glob("*.json")} if self.failed.is_dir() else set()
        return failed - self.finished_ids()

    def write(self, record: Mapping[str, Any]) -> Path:
        """Writes one run record into ``runs/`` or ``failed/`` according to its status."""
        ok = record["status"] == "ok"
        path = (self.runs if ok else self.failed) / f"{record['run_id']}.json"
        output.write_atomically({path: json.dumps(record, indent=1) + "\n"})  # keeps the sweep's key order
        if ok:
            # A retry that succeeded supersedes the earlier failure.
            with contextlib.suppress(FileNotFoundError):
                (self.failed / path.name).unlink()
        return path

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Records what the current sweep asked for (read back by ``steer report``)."""
        output.write_atomically({self.root / MANIFEST: json.dumps(manifest, indent=1) + "\n"})

    def manifest(self) -> dict[str, Any] | None:
        """The manifest of the last sweep into this directory, if any."""
        path = self.root / MANIFEST
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ScenarioError(f"{path}: not a steer sweep manifest: {error}") from None

    def remove_partial_files(self) -> int:
        """Deletes temporary files left by a writer that was killed mid-write; returns how many.

        Only safe while holding :meth:`lock`, which keeps other sweeps out of this directory.
        """
        removed = 0
        for directory in (self.root, self.runs, self.failed):
            if directory.is_dir():
                for stale in directory.glob(".*.tmp"):
                    stale.unlink(missing_ok=True)
                    removed += 1
        return removed

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Holds an exclusive lock on the directory so two sweeps never write into it at once.

        The lock is released by the kernel if the process dies, so a killed sweep never leaves
        the directory locked.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ScenarioError(f"{self.root}: cannot hold results: not a directory") from None
        except OSError as error:
            raise ScenarioError(f"{self.root}: cannot hold results: {error.strerror or error}") from None
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, as before
            yield
            return
        with open(self.root / ".lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ScenarioError(f"{self.root}: another sweep is writing into this results directory") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def records(self, every_sweep: bool = False) -> list[dict[str, Any]]:
        """The run records of the last sweep into this directory (its manifest's points), or with
        ``every_sweep`` every record the directory holds (earlier sweeps, other steer versions).
        A run that failed and later succeeded is its successful record."""
        if not self.root.is_dir():
            raise ScenarioError(f"{self.root}: no such results directory")
        if not any(path.exists() for path in (self.root / MANIFEST, self.runs, self.failed)):
            raise ScenarioError(f"{self.root}: not a results directory (no {MANIFEST}, {RUNS}/ or {FAILED}/ in it)")
        manifest = None if every_sweep else self.manifest()
        wanted = {point["run_id"] for point in manifest["points"]} if manifest else None
        records: dict[str, dict[str, Any]] = {}
        for directory in (self.runs, self.failed):
            if not directory.is_dir():
                continue
            for path in sorted(directory.glob("*.json")):
                if path.stem in records or (wanted is not None and path.stem not in wanted):
                    continue
                try:
                    record = json.loads(path.read_text(encoding="utf-8"))
                    record["run_id"], record["status"]
                except (OSError, ValueError, KeyError, TypeError) as error:
                    raise ScenarioError(f"{path}: not a steer run record: {error}") from None
                records[path.stem] = record
        return sorted(records.values(), key=lambda r: (r.get("index", 0), r["run_id"]))


def record_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """One run record as a flat row: run metadata, ``param.KEY`` per swept value, the result."""
    row = {key: record.get(key) for key in META_COLUMNS}
    for key, value in (record.get("point") or {}).items():
        row[f"{PARAM_PREFIX}{key}"] = value
    row.update(flatten(record.get("result") or {}))
    return row


def frame(records: Iterable[Mapping[str, Any]]):
    """Run records as a pandas DataFrame, one row per run (see :func:`load`)."""
    pandas = require("pandas", "a DataFrame of runs")
    rows = [record_row(r) for r in records]
    columns: dict[str, None] = dict.fromkeys(META_COLUMNS)
    for row in rows:
        columns.update(dict.fromkeys(row))
    return pandas.DataFrame(rows, columns=list(columns))


def load(results: str | Path, include_failed: bool = True, every_sweep: bool = False):
    """All runs in a results directory as a pandas DataFrame, one row per run.

    Columns: ``run_id``, ``status`` ("ok" or "failed"), ``error``, ``index`` (the point's place
    in its sweep), ``steer_version``, ``wall_seconds``; then ``param.KEY`` for every swept value
    (``param.placement``, ``param.sim.measure_us``); then the result flattened to dotted keys
    (``dram.read_gbps``, ``cores.1.fills.l2``, ``devices.nic0.rx_gbps``). Failed runs have empty
    result columns. ``results`` may also be a Parquet file written by :func:`export`.

    A directory reused by several sweeps holds all their runs; only the last sweep's are loaded
    unless ``every_sweep``.
    """
    path = Path(results)
    if path.suffix == ".parquet" and path.is_file():
        pandas = require("pandas", "reading Parquet")
        require("pyarrow", "reading Parquet")
        return pandas.read_parquet(path)
    records = Store(path).records(every_sweep)
    if not include_failed:
        records = [r for r in records if r["status"] == "ok"]
    return frame(records)


def as_text(value: Any) -> str | None:
    """A cell as text for a column of mixed types (lists as JSON)."""
    if value is None:
        return None
    return json.dumps(value) if isinstance(value, (list, tuple)) else str(value)


def _parquet_safe(df):
    """A copy in which every column has one Parquet type: mixed-type cells become text."""
    df = df.copy()
    for column in df.columns:
        if df[column].dtype != object:
            continue
        kinds = set()
        for value in df[column].dropna():
            if isinstance(value, bool):
                kinds.add("bool")
            elif isinstance(value, (int, float)):
                kinds.add("number")
            elif isinstance(value, (list, tuple)):
                kinds.add("list")
            else:
                kinds.add(type(value).__name__)
        if len(kinds) > 1:
            df[column] = df[column].map(as_text)
    return df


def export(results: str | Path, path: str | Path) -> Path:
    """Writes every run of a results directory to one file: Parquet (``.parquet``) or CSV (``.csv``).

    The file is written atomically; returns its path.
    """
    path = Path(path)
    df = load(results)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        require("pyarrow", "Parquet export")
        import io

        buffer = io.BytesIO()
        _parquet_safe(df).to_parquet(buffer, index=False)
        output.write_atomically({path: buffer.getvalue()})
    elif suffix == ".csv":
        output.write_atomically({path: df.to_csv(index=False)})
    else:
        raise ScenarioError(f"{path}: unknown export format `{path.suffix}` (use .parquet or .csv)")
    return path

"""Sweeps: one scenario run at every point of parameter grids, on this machine or a Ray cluster.

A sweep file is TOML::

    scenario = "rx-default"            # built-in name, or a scenario file relative to this one
    description = "DRAM traffic against offered load, DMA to memory vs L2 injection"

    [set]                              # applied to every point
    "sim.measure_us" = 2000

    [grid]                             # cartesian product: every combination
    placement = ["memory", "l2"]
    offered_gbps = [10, 20, 30, 40]

    [zip]                              # advanced together: ring 128 with 2 KiB packets, ...
    ring = [128, 256]                  # (crossed with the grid; [[zip]] for several groups)
    packet_bytes = [1500, 1024]

Keys are declared parameters (``placement``) or key paths (``sim.measure_us``, quoted in TOML
or written as nested tables), exactly as for ``steer run --set``. Each point is one run; results
go into a results directory (see :mod:`steer.store`) and a sweep run again skips what is done.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steer import _core, api, output, tomlfile
from steer._core import ScenarioError, __version__
from steer.store import RECORD_FORMAT, Store, run_id

SWEEP_KEYS = ("scenario", "description", "set", "grid", "zip")


@dataclass
class Sweep:
    """A scenario and the parameter values to run it at.

    ``sets`` apply to every point; ``grid`` axes are crossed (cartesian product); each group in
    ``zips`` is a set of equally long lists advanced together, crossed with everything else.
    ``origin`` names where the sweep came from, for error messages.
    """

    scenario: str | Path
    sets: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list] = field(default_factory=dict)
    zips: list[dict[str, list]] = field(default_factory=list)
    description: str = ""
    origin: str = "sweep"
    text: str = ""

    def keys(self) -> list[str]:
        """The swept keys, in the order their values vary in :meth:`points`."""
        return list(self.grid) + [key for group in self.zips for key in group]

    def points(self) -> list[dict[str, Any]]:
        """Every point as ``{key: value}``, the first grid key varying slowest."""
        axes: list[list[dict[str, Any]]] = [[{key: v} for v in values] for key, values in self.grid.items()]
        for group in self.zips:
            length = len(next(iter(group.values())))
            axes.append([{key: values[i] for key, values in group.items()} for i in range(length)])
        return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)]


# Points one sweep may have: every one is resolved and validated (about a millisecond each) before
# any runs, and each leaves a record in the results directory.
MAX_POINTS = 10_000


def type_name(value: object) -> str:
    """How a TOML value is called in error messages."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def check_value(origin: str, where: str, value: object) -> None:
    """Rejects values that cannot be passed to the scenario as an override."""
    try:
        api.toml_literal(value)
    except ScenarioError:
        raise ScenarioError(f"{origin}: {where}: {type_name(value)} cannot be a scenario value") from None


def axes_from(origin: str, section: str, table: object) -> dict[str, list]:
    """A ``[grid]`` or ``[zip]`` table as ``{key: values}``, each a non-empty list."""
    if not isinstance(table, dict):
        raise ScenarioError(f"{origin}: {section}: expected a table of lists (got {type_name(table)})")
    axes = {}
    for key, values in tomlfile.dotted(table).items():
        values = api.python_value(values)  # a numpy array is the list it holds
        if not isinstance(values, list):
            raise ScenarioError(f"{origin}: {section}.{key}: expected a list of values (got {type_name(values)})")
        if not values:
            raise ScenarioError(f"{origin}: {section}.{key}: expected at least one value (got an empty list)")
        for index, value in enumerate(values):
            check_value(origin, f"{section}.{key}[{index}]", value)
        # Plain Python values: they are written into the records as JSON.
        axes[key] = [api.python_value(value) for value in values]
    return axes


def sweep_from_dict(data: Mapping[str, Any], origin: str = "sweep", base: Path | None = None, text: str = "") -> Sweep:
    """Builds and checks a :class:`Sweep` from a parsed sweep file (or a dict written in Python).

    ``base`` is the directory a relative scenario path is taken from. Raises ScenarioError with a
    one-line message naming the key for anything malformed.
    """
    for key in data:
        if key not in SWEEP_KEYS:
            raise ScenarioError(f"{origin}: unknown key `{key}` (expected one of: {', '.join(SWEEP_KEYS)})")
    scenario = data.get("scenario")
    if scenario is None:
        raise ScenarioError(f"{origin}: missing `scenario` (a scenario file or built-in name)")
    if not isinstance(scenario, (str, Path)):
        raise ScenarioError(f"{origin}: scenario: expected a string (got {type_name(scenario)})")
    looks_like_path = isinstance(scenario, Path) or str(scenario).endswith(".toml") or "/" in str(scenario)
    if looks_like_path and base is not None:
        scenario = base / scenario  # an absolute path stays as it is
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError(f"{origin}: description: expected a string (got {type_name(description)})")
    sets = data.get("set", {})
    if not isinstance(sets, dict):
        raise ScenarioError(f"{origin}: set: expected a table (got {type_name(sets)})")
    sets = {key: api.python_value(value) for key, value in tomlfile.dotted(sets).items()}
    for key, value in sets.items():
        check_value(origin, f"set.{key}", value)
    grid = axes_from(origin, "grid", data.get("grid", {}))
    raw_zips = data.get("zip", [])
    groups = [raw_zips] if isinstance(raw_zips, dict) else raw_zips
    if not isinstance(groups, list):
        raise ScenarioError(f"{origin}: zip: expected a table or an array of tables (got {type_name(raw_zips)})")
    zips = [axes_from(origin, "zip", group) for group in groups]
    # `params.NAME` is parameter NAME: the same key twice however it is spelt.
    seen = {key.removeprefix("params."): "set" for key in sets}
    for section, axes in [("grid", grid)] + [("zip", group) for group in zips]:
        for key in axes:
            name = key.removeprefix("params.")
            if name in seen:
                raise ScenarioError(f"{origin}: {section}.{key}: also given in [{seen[name]}]")
            seen[name] = section
    for group in zips:
        lengths = {key: len(values) for key, values in group.items()}
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{key} has {n}" for key, n in lengths.items())
            raise ScenarioError(f"{origin}: zip: lists must have the same length ({listed})")
    points = math.prod(len(values) for values in grid.values()) * math.prod(
        len(next(iter(group.values()))) for group in zips if group
    )
    if points > MAX_POINTS:
        raise ScenarioError(
            f"{origin}: the grid and zips make {points:,} points, more than {MAX_POINTS:,} (each is validated "
            "before any runs): split the sweep"
        )
    return Sweep(scenario, sets, grid, [g for g in zips if g], description, origin, text)


def load_sweep(path: str | Path) -> Sweep:
    """Reads and checks a sweep file; raises ScenarioError naming the file and key for bad input."""
    path = Path(path)
    data, text = tomlfile.read(path, "sweep file")
    return sweep_from_dict(data, str(path), path.parent, text)


@dataclass
class Task:
    """One point of a sweep, resolved: what a worker needs to run it, and nothing else.

    ``resolved`` is the full scenario (None if the point's values were rejected; ``error`` then
    says why), so workers need neither the scenario file nor the sweep file.
    """

    index: int
    run_id: str
    point: dict[str, Any]
    overrides: list[str]
    name: str
    resolved: str | None = None
    error: str | None = None


def override_error(message: str, sections: Mapping[str, str], origin: str, values: Mapping[str, Any]) -> str:
    """Rewrites the core's ``--set KEY: reason`` as ``SWEEP: grid.KEY = VALUE: reason``."""
    if message.startswith("--set "):
        key, _, rest = message[len("--set ") :].partition(": ")
        if key in sections:
            return output.shortened(f"{origin}: {sections[key]}.{key} = {api.toml_literal(values[key])}: {rest}")
    return message


def plan(sweep: Sweep, overrides: Iterable[str] = (), keep_going: bool = False) -> list[Task]:
    """Resolves and validates every point of a sweep into a :class:`Task` with its run id, before
    any runs.

    ``overrides`` are extra ``KEY=VALUE`` strings (``--set``) applied to every point. Points that
    resolve to the same scenario are one run. If a point's values are rejected, ScenarioError is
    raised naming the first bad point and how many are bad, as `steer run` would for one; with
    ``keep_going`` such a point becomes a task carrying its error (recorded as failed) and the
    others run, unless no point resolves at all.
    """
    overrides = api.override_list(overrides)
    text, origin, name = sweep_source(sweep)
    sections = {key: "set" for key in sweep.sets}
    sections.update({key: "grid" for key in sweep.grid})
    sections.update({key: "zip" for group in sweep.zips for key in group})
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key in sections and sections[key] != "set":
            raise ScenarioError(f"--set {key}: already swept in {sweep.origin}")
    fixed = [f"{key}={api.toml_literal(value)}" for key, value in sweep.sets.items()] + overrides
    tasks: dict[str, Task] = {}
    first_error = None
    origin_prefix = f"{sweep.origin}: "
    for index, point in enumerate(sweep.points()):
        point_overrides = fixed + [f"{key}={api.toml_literal(value)}" for key, value in point.items()]
        try:
            resolved = _core.resolve_scenario(text, origin, name, point_overrides)
        except ScenarioError as error:
            message = override_error(str(error), sections, sweep.origin, {**sweep.sets, **point})
            if first_error is None:
                where = ", ".join(f"{k}={api.toml_literal(v)}" for k, v in point.items()) or "the scenario"
                first_error = output.shortened(
                    message if message.startswith(origin_prefix) else f"{origin_prefix}{where}: {message}"
                )
            # No resolved scenario to hash: the id comes from what was asked for instead.
            key = json.dumps([origin, text, point_overrides])
            task = Task(index, run_id(key), point, point_overrides, name, error=message)
        else:
            task = Task(index, run_id(resolved), point, point_overrides, name, resolved=resolved)
        tasks.setdefault(task.run_id, task)
    bad = sum(t.resolved is None for t in tasks.values())
    if bad and (not keep_going or bad == len(tasks)):
        count = f" ({bad} of {len(tasks)} points are invalid; --keep-going runs the others)" if bad > 1 else ""
        raise ScenarioError(f"{first_error}{count}")
    return list(tasks.values())


def sweep_source(sweep: Sweep) -> tuple[str, str, str]:
    """The sweep's scenario text, origin and default name; errors name the sweep file."""
    try:
        return api.scenario_source(sweep.scenario)
    except ScenarioError as error:
        raise ScenarioError(f"{sweep.origin}: scenario: {error}") from None


def record_for(
    task: Task, status: str, started: float, seconds: float, result: dict | None = None, error: str | None = None
) -> dict[str, Any]:
    """The record a run leaves in the results directory."""
    return {
        "format": RECORD_FORMAT,
        "run_id": task.run_id,
        "status": status,
        "index": task.index,
        "point": task.point,
        "overrides": task.overrides,
        "steer_version": __version__,
        "host": socket.gethostname(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_seconds": round(seconds, 6),
        "resolved": task.resolved,
        "result": result,
        "error": error,
    }


def describe_error(error: BaseException) -> str:
    """An exception as one message; scenario errors are already worded for people."""
    if isinstance(error, ScenarioError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def run_resolved(resolved: str, name: str) -> dict[str, Any]:
    """A point's result: its resolved scenario run."""
    result, _ = _core.run_scenario(resolved, f"{name} (resolved)", name, [], None)
    return json.loads(result)


def execute(task: Task, work: Callable[[str, str], Any] = run_resolved) -> dict[str, Any]:
    """Runs one task and returns its record; every failure becomes a record, never an exception.

    ``work`` makes the result from the task's ``resolved`` text and name (by default, runs the
    scenario). Runs in worker processes (local pool or Ray), so it returns the record rather than
    writing it: only the sweep's own process writes into the results directory.
    """
    started, clock = time.time(), time.perf_counter()
    if task.resolved is None:
        return record_for(task, "failed", started, 0.0, error=task.error)
    try:
        result = work(task.resolved, task.name)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # the core's panics are BaseExceptions; they fail one run only
        return record_for(task, "failed", started, time.perf_counter() - clock, error=describe_error(error))
    return record_for(task, "ok", started, time.perf_counter() - clock, result=result)


def watch_parent(parent: int) -> None:
    """Ends this worker once the sweep process that started it is gone (killed, say).

    Results go back to the sweep process, so a worker without it has nothing left to do; its
    queue pipes never report the loss, so it checks who its parent is.
    """
    while True:
        time.sleep(0.25)
        if os.getppid() != parent:
            os._exit(1)


def setup_worker(parent: int) -> None:
    """Worker initializer: Ctrl-C is left to the sweep process, and the worker ends with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=watch_parent, args=(parent,), daemon=True).start()


Work = Callable[[Task], dict[str, Any]]


def run_serial(tasks: list[Task], on_record: Callable[[dict], None], work: Work = execute) -> None:
    """Runs tasks one after another in this process."""
    for task in tasks:
        on_record(work(task))


def check_main_guard() -> None:
    """Refuses a script that would start the sweep again in every worker: spawned workers run the
    main script once more (``multiprocessing``'s spawn), so a script without an
    ``if __name__ == "__main__":`` guard would have each worker die starting its own pool."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(main, "__spec__", None) is not None:
        return  # an interactive session, a notebook or `python -m`: workers do not re-run it
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    if "__main__" not in source:
        raise ScenarioError(
            f"{path}: worker processes run this script again; call run_sweep under "
            '`if __name__ == "__main__":` (or pass workers=1)'
        )


def run_local(tasks: list[Task], workers: int, on_record: Callable[[dict], None], work: Work = execute) -> None:
    """Runs tasks on a pool of ``workers`` processes on this machine; ``work`` (a module-level
    function, so that workers can import it) turns a task into its record.

    Workers are spawned, not forked (forking a process that may run threads is unsafe), and end
    on their own if this process is killed. At most ``workers`` tasks are handed out
    at a time, so the runs in flight are always known: if a worker dies (killed, out of memory,
    a crash in the core), the runs it may have been running are retried one at a time, and the
    one that dies alone is recorded as failed.
    """
    if workers <= 1 or len(tasks) <= 1:
        run_serial(tasks, on_record, work)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")
    queue = deque(tasks)
    alone: set[str] = set()  # suspects of a worker's death, run by themselves
    while queue:
        pool = ProcessPoolExecutor(
            max_workers=min(workers, len(queue)), mp_context=context, initializer=setup_worker, initargs=(os.getpid(),)
        )
        in_flight: dict = {}
        broken = False
        try:
            while (queue or in_flight) and not broken:
                while queue and len(in_flight) < workers:
                    solo = queue[0].run_id in alone
                    if solo and in_flight:
                        break
                    task = queue.popleft()
                    in_flight[pool.submit(work, task)] = task
                    if solo:
                        break
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    if isinstance(future.exception(), BrokenProcessPool):
                        broken = True
                    else:
                        on_record(future.result())
                        del in_flight[future]
        except KeyboardInterrupt:
            pool.shutdown(wait=True, cancel_futures=True)
            # Keep what finished while the pool wound down.
            for future in in_flight:
                if future.done() and not future.cancelled() and future.exception() is None:
                    on_record(future.result())
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if not broken:
            return
        suspects = list(in_flight.values())
        if len(suspects) == 1:
            on_record(
                record_for(
                    suspects[0], "failed", time.time(), 0.0, error="the worker process died while running this point"
                )
            )
        else:
            alone.update(task.run_id for task in suspects)
            queue.extendleft(reversed(suspects))


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fails fast, in one line, for a ``[ray://]HOST:PORT`` nobody listens on (Ray itself keeps
    retrying for minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: left to Ray
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ScenarioError(f"--address {address}: no Ray cluster reachable there ({reason})") from None


@contextlib.contextmanager
def ray_session(workers: int | None, address: str | None) -> Iterator[Any]:
    """Ray, connected to the cluster at ``address`` or started here with ``workers`` CPUs (and
    shut down afterwards), unless this process is connected already. A cluster that cannot be
    reached or started is a ScenarioError naming the option."""
    from steer.optional import require

    ray = require("ray", "--executor ray")
    import logging

    started_here = not ray.is_initialized()
    if started_here:
        options: dict[str, Any] = {"address": address, "logging_level": logging.WARNING, "log_to_driver": False}
        if address is None:
            options.update(num_cpus=workers or os.cpu_count(), include_dashboard=False)
        else:
            check_reachable(address)
        try:
            ray.init(**options)
        except Exception as error:  # Ray raises several kinds; all mean no cluster to run on
            where = f"--address {address}" if address else "--executor ray"
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ScenarioError(f"{where}: cannot start or connect to Ray: {reason}") from None
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def run_ray(
    tasks: list[Task],
    workers: int | None,
    address: str | None,
    on_record: Callable[[dict], None],
    work: Work = execute,
) -> None:
    """Runs tasks as Ray tasks: on the cluster at ``address``, or on a local Ray instance.

    A local instance is started with ``workers`` CPUs and shut down afterwards; a cluster must
    have steer installed on its workers. Results come back to this process, which writes them, so
    workers need no shared file system. At most about two tasks per cluster CPU are in flight, so
    killing the sweep loses little work.
    """
    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1)(work)
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        queue = iter(tasks)
        pending: dict[Any, Task] = {}

        def refill() -> None:
            for task in itertools.islice(queue, window - len(pending)):
                pending[remote.remote(task)] = task

        refill()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as error:  # the worker died or Ray lost the task
                    record = record_for(task, "failed", time.time(), 0.0, error=describe_error(error).splitlines()[0])
                on_record(record)
            refill()


class SweepProgress:
    """Runs done of total, failures and an ETA, labelled ``steer NAME`` (``sweep rx``, ``fit
    turin``): a bar on a terminal, a line per 10% elsewhere."""

    def __init__(self, name: str, total: int, quiet: bool) -> None:
        self.name, self.total, self.quiet = name, total, quiet
        self.done = self.failed = 0
        self.bar = output.Progress(self.label(), quiet=quiet)
        self.started = time.monotonic()
        self.next_tenth = 1  # counted in whole tenths: sums of 0.1 drift past 0.3

    def label(self) -> str:
        return f"steer {self.name}: {self.done}/{output.count(self.total, 'run')}, {self.failed} failed"

    def __call__(self, record: Mapping[str, Any]) -> None:
        self.done += 1
        self.failed += record["status"] != "ok"
        fraction = self.done / self.total if self.total else 1.0
        self.bar.label = self.label()
        self.bar(fraction)
        tenths = self.done * 10 // self.total if self.total else 10
        if not self.quiet and not self.bar.enabled and tenths >= self.next_tenth:
            # Logs of batch jobs have no terminal: a plain line each tenth.
            self.next_tenth = tenths + 1
            elapsed = time.monotonic() - self.started
            eta = elapsed * (1 - fraction) / fraction
            print(f"{self.label()}, {elapsed:.1f} s, eta {eta:.1f} s", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()


@dataclass
class SweepSummary:
    """What a sweep did: ``total`` distinct runs, ``skipped`` (done before), ``ran`` (ids run
    now), ``failed`` (id -> error for every run of this sweep that is failed now)."""

    results_dir: Path
    total: int
    skipped: int
    ran: list[str]
    failed: dict[str, str]
    seconds: float

    @property
    def ok(self) -> bool:
        """True if every run of the sweep has a successful result."""
        return not self.failed


def check_executor(executor: str, workers: int | None, address: str | None) -> None:
    """Refuses executor options that cannot work, before anything is planned or run."""
    if executor not in ("local", "ray"):
        raise ScenarioError(f"unknown executor `{executor}` (expected local or ray)")
    if address is not None and executor != "ray":
        raise ScenarioError("--address: only for --executor ray")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ScenarioError(f"--workers: must be a whole number, at least 1 (got {workers!r})")


def run_sweep(
    sweep: Sweep | Mapping[str, Any] | str | Path,
    results_dir: str | Path,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    overrides: Iterable[str] = (),
    retry_failed: bool = True,
    quiet: bool = True,
    keep_going: bool = False,
) -> SweepSummary:
    """Runs every point of a sweep not yet finished in ``results_dir``; returns a summary.

    ``sweep`` is a :class:`Sweep`, a sweep file, or a dict laid out like one
    (``{"scenario": "rx-default", "grid": {"placement": ["memory", "l2"]}}``). ``executor`` is
    ``"local"`` (a process pool of ``workers`` processes, default all cores; 1 runs in this
    process) or ``"ray"`` (``address`` of a cluster, or a local Ray instance with ``workers``
    CPUs). ``overrides`` are ``KEY=VALUE`` strings applied to every point. Runs that failed
    before are tried again unless ``retry_failed`` is False. Every point is validated before any
    runs: an invalid one raises ScenarioError, unless ``keep_going`` (then it is recorded as failed
    and the valid points run). A run that fails is recorded and the others go on. ``quiet`` hides
    the progress display.

    With the local executor, call this from under ``if __name__ == "__main__":`` in scripts: the
    worker processes import the main module.
    """
    if isinstance(sweep, Mapping):
        sweep = sweep_from_dict(sweep, base=Path.cwd())
    elif not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    check_executor(executor, workers, address)
    clock = time.monotonic()
    tasks = plan(sweep, overrides, keep_going)
    manifest = {
        "sweep": sweep.origin,
        "text": sweep.text,
        "scenario": str(sweep.scenario),
        "description": sweep.description,
        "points": [{"index": t.index, "run_id": t.run_id, "point": t.point} for t in tasks],
    }
    summary = run_tasks(
        tasks,
        Store(results_dir),
        manifest,
        f"sweep {Path(sweep.origin).stem}",
        executor=executor,
        workers=workers,
        address=address,
        quiet=quiet,
        retry_failed=retry_failed,
    )
    summary.seconds = time.monotonic() - clock
    return summary


def run_tasks(
    tasks: list[Task],
    store: Store,
    manifest: Mapping[str, Any],
    name: str,
    work: Work = execute,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    quiet: bool = True,
    retry_failed: bool = True,
) -> SweepSummary:
    """Runs the tasks not yet finished in ``store`` with ``work``, locally or on Ray, recording
    each; ``manifest`` (with the steer version and the time added) says what was asked for."""
    check_executor(executor, workers, address)
    clock = time.monotonic()
    if executor == "local" and (workers or os.cpu_count() or 1) > 1 and len(tasks) > 1:
        check_main_guard()

    def pending() -> list[Task]:
        finished, failed_before = store.finished_ids(), store.failed_ids()
        return [t for t in tasks if t.run_id not in finished and (retry_failed or t.run_id not in failed_before)]

    # Ray is up, or refused in one line, before the results directory is made or touched.
    runs_on_ray = executor == "ray" and any(t.resolved is not None for t in pending())
    with ray_session(workers, address) if runs_on_ray else contextlib.nullcontext(), store.lock():
        store.remove_partial_files()
        store.write_manifest(
            {**manifest, "steer_version": __version__, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        )
        failed_before = store.failed_ids()
        todo = pending()
        failed: dict[str, str] = {}
        ran: list[str] = []
        progress = SweepProgress(name, len(todo), quiet)

        def on_record(record: dict[str, Any]) -> None:
            store.write(record)
            ran.append(record["run_id"])
            if record["status"] != "ok":
                failed[record["run_id"]] = record["error"]
            progress(record)

        try:
            # Points the scenario rejected need no worker: record them straight away.
            for task in todo:
                if task.resolved is None:
                    on_record(work(task))
            runnable = [t for t in todo if t.resolved is not None]
            if runnable and executor == "ray":
                run_ray(runnable, workers, address, on_record, work)
            elif runnable:
                run_local(runnable, workers or os.cpu_count() or 1, on_record, work)
        finally:
            progress.close()
        if not retry_failed:
            for task in tasks:
                if task.run_id in failed_before and task.run_id not in failed:
                    failed[task.run_id] = json.loads((store.failed / f"{task.run_id}.json").read_text())["error"]
    return SweepSummary(store.root, len(tasks), len(tasks) - len(todo), ran, failed, time.monotonic() - clock)

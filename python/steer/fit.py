"""``steer fit``: parameters searched so that simulated rows match measured ones.

A fit file is TOML::

    description = "the controller write queue's answer latency, from seed 004's eflatency mean"

    [parameters]                        # applied to every run of every row
    "platform.memory.write_queue_latency_ns" = { min = 30.0, max = 90.0, steps = 13 }  # a range
    # or a list: "platform.l2.latency_cycles" = [12, 14, 16]

    [[rows]]                            # a row of `steer reproduce`: its published value and target
    reproduce = "seed004/eflatency-avg"

    [[rows]]                            # a measurement of your own
    name = "DRAM read at 40 Gb/s"
    scenario = "rx-default"             # built-in name, or a scenario file relative to this one
    set = { offered_gbps = 40 }         # overrides for this row's run
    key = "dram.read_gbps"              # a result key, as `steer stats SCENARIO` lists it
    measured = 3.1
    tolerance = 0.3                     # or tolerance_percent = 10
    role = "validation"                 # calibration (the default for own rows) or validation

The points are a search's (:mod:`steer.fit_search`: a range is continuous, a list a set of
values in order) or the grid's (every combination; a range's ``steps`` evenly spaced values).
Before anything runs, the points (the search: its box's corners) are resolved with every run of
every row, so a key or value a row's scenario refuses is found first. Each point runs every row
(through the sweep executor: a local process pool or Ray) with the point's values applied to
every run. The best point is the one with the least sum of squared calibration errors, each in
units of its row's tolerance; validation rows only check it. Points are recorded in a results
directory as sweeps are (:mod:`steer.store`), so an interrupted fit resumes where it stopped. The
best values are written as an overlay that ``--set-file`` applies.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steer import _core, api, output, reproduce, sweep, tomlfile
from steer._core import ScenarioError
from steer.fit_search import Axis, Search
from steer.result import flatten
from steer.store import Store, run_id

FIT_KEYS = ("description", "parameters", "rows")
REPRODUCE_ROW_KEYS = ("reproduce", "role")
OWN_ROW_KEYS = ("name", "scenario", "set", "key", "measured", "tolerance", "tolerance_percent", "role", "unit")
# A grid larger than this is a search the sweep executor should not be asked to run point by point.
MAX_POINTS = sweep.MAX_POINTS
MAX_STEPS = 1000
METHODS = ("search", "grid")
# Failed points the report names one by one.
SHOWN_FAILURES = 5


@dataclass(frozen=True)
class FitRow:
    """One measured value to match: a `steer reproduce` row (``reproduce`` is its id) or one of
    the user's own (a scenario run with ``overrides`` whose result ``key`` is compared)."""

    name: str
    role: str
    reproduce: str | None = None
    scenario: str = ""
    overrides: tuple[str, ...] = ()
    key: str = ""
    measured: float = math.nan
    tolerance: float = math.nan
    unit: str = ""

    def to_spec(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "reproduce": self.reproduce,
            "scenario": self.scenario,
            "overrides": list(self.overrides),
            "key": self.key,
        }


@dataclass
class Fit:
    """Parameters with the values to try, and the rows they are judged on."""

    parameters: dict[str, list]
    rows: list[FitRow]
    description: str = ""
    origin: str = "fit"
    # The parameters given as {min, max, steps}: their bounds, which the search takes as continuous.
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)

    def points(self) -> list[dict[str, Any]]:
        """The grid's points, the first parameter varying slowest."""
        return sweep.Sweep("", grid=self.parameters).points()

    def axes(self) -> list[Axis]:
        """What the search varies: every range, and every list of more than one value."""
        axes = []
        for key, values in self.parameters.items():
            if key in self.ranges:
                low, high = self.ranges[key]
                axes.append(Axis(key, low=low, high=high, whole=all(isinstance(v, int) for v in values)))
            elif len(values) > 1:
                axes.append(Axis(key, values=tuple(values)))
        return axes

    def point(self, values: Iterable[Any]) -> dict[str, Any]:
        """The point with the searched parameters at ``values`` (in :meth:`axes` order) and the
        others at their one value, in the fit file's order."""
        given = dict(zip((axis.key for axis in self.axes()), values))
        return {key: given[key] if key in given else options[0] for key, options in self.parameters.items()}

    def corners(self) -> list[dict[str, Any]]:
        """Every value of every list with both ends of every range: what the search checks before it runs."""
        ends = {
            key: [self.parameters[key][0], self.parameters[key][-1]] if key in self.ranges else values
            for key, values in self.parameters.items()
        }
        return sweep.Sweep("", grid=ends).points()


def _number(origin: str, where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        got = value if isinstance(value, float) else sweep.type_name(value)  # nan and inf by name
        raise ScenarioError(f"{origin}: {where}: expected a finite number (got {got})")
    return float(value)


def _check_keys(origin: str, where: str, table: Mapping, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    for key in table:
        if key not in allowed:
            raise ScenarioError(f"{origin}: {where}{key}: unknown key (expected one of {', '.join(allowed)})")


def parameter_specs(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``[parameters]`` as dotted keys; a table with ``min``, ``max`` or ``steps`` is a range."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict) and not {"min", "max", "steps"} & value.keys():
            flat.update(parameter_specs(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def parameter_values(origin: str, key: str, spec: object) -> list:
    """A parameter's values: a non-empty list, or ``{min, max, steps}`` evenly spaced."""
    where = f"parameters.{key}"
    if isinstance(spec, list):
        return sweep.axes_from(origin, "parameters", {key: spec})[key]
    if not isinstance(spec, dict):
        raise ScenarioError(f"{origin}: {where}: expected a list of values or {{min, max, steps}}")
    _check_keys(origin, f"{where}.", spec, ("min", "max", "steps"))
    for needed in ("min", "max", "steps"):
        if needed not in spec:
            raise ScenarioError(f"{origin}: {where}: missing `{needed}`")
    low, high = _number(origin, f"{where}.min", spec["min"]), _number(origin, f"{where}.max", spec["max"])
    steps = spec["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or not 2 <= steps <= MAX_STEPS:
        raise ScenarioError(f"{origin}: {where}.steps: expected a whole number from 2 to {MAX_STEPS} (got {steps!r})")
    if not low < high:
        raise ScenarioError(f"{origin}: {where}: min must be less than max (got {low:g} and {high:g})")
    values = [low + (high - low) * i / (steps - 1) for i in range(steps)]
    whole = all(isinstance(spec[k], int) for k in ("min", "max")) and all(v == round(v) for v in values)
    return [round(v) for v in values] if whole else [round(v, 12) for v in values]


def _row(origin: str, index: int, table: object, base: Path) -> FitRow:
    where = f"rows[{index}]"
    if not isinstance(table, dict):
        raise ScenarioError(f"{origin}: {where}: expected a table (got {sweep.type_name(table)})")
    role = table.get("role")
    if role is not None and role not in reproduce.ROLES:
        raise ScenarioError(f"{origin}: {where}.role: expected calibration or validation (got {role!r})")
    if "reproduce" in table:
        _check_keys(origin, f"{where}.", table, REPRODUCE_ROW_KEYS)
        row_id = table["reproduce"]
        if not isinstance(row_id, str) or row_id.split("/")[0] not in reproduce.EXPERIMENTS:
            raise ScenarioError(
                f"{origin}: {where}.reproduce: expected a `steer reproduce` row id starting with one of "
                f"{', '.join(reproduce.EXPERIMENTS)} (got {row_id!r})"
            )
        own_role = reproduce.Row(row_id, "", "", "", 0.0, 0.0).role
        return FitRow(row_id, role or own_role, reproduce=row_id)
    _check_keys(origin, f"{where}.", table, OWN_ROW_KEYS)
    for needed in ("scenario", "key", "measured"):
        if needed not in table:
            raise ScenarioError(f"{origin}: {where}: missing `{needed}` (or `reproduce` for a reproduce row)")
    if ("tolerance" in table) == ("tolerance_percent" in table):
        raise ScenarioError(f"{origin}: {where}: give one of `tolerance` and `tolerance_percent`")
    measured = _number(origin, f"{where}.measured", table["measured"])
    if "tolerance" in table:
        tolerance = _number(origin, f"{where}.tolerance", table["tolerance"])
    else:
        tolerance = _number(origin, f"{where}.tolerance_percent", table["tolerance_percent"]) / 100 * abs(measured)
    if not tolerance > 0:
        raise ScenarioError(f"{origin}: {where}: the tolerance must be more than 0")
    for text_key in ("scenario", "key", "name", "unit"):
        if text_key in table and not isinstance(table[text_key], str):
            raise ScenarioError(f"{origin}: {where}.{text_key}: expected a string")
    sets = table.get("set", {})
    if not isinstance(sets, dict):
        raise ScenarioError(f"{origin}: {where}.set: expected a table of overrides")
    for key, value in tomlfile.dotted(sets).items():
        sweep.check_value(origin, f"{where}.set.{key}", value)
    scenario = table["scenario"]
    if scenario.endswith(".toml"):
        scenario = str(base / scenario)
    return FitRow(
        table.get("name", f"{table['scenario']}: {table['key']}"),
        role or "calibration",
        scenario=scenario,
        overrides=tuple(f"{k}={api.toml_literal(v)}" for k, v in tomlfile.dotted(sets).items()),
        key=table["key"],
        measured=measured,
        tolerance=tolerance,
        unit=table.get("unit", ""),
    )


def fit_from_dict(data: Mapping[str, Any], origin: str = "fit", base: Path | None = None) -> Fit:
    """Builds and checks a :class:`Fit`; anything malformed is one ScenarioError naming the key."""
    _check_keys(origin, "", data, FIT_KEYS)
    parameters = data.get("parameters")
    if not isinstance(parameters, dict) or not parameters:
        raise ScenarioError(f"{origin}: parameters: expected a table with at least one parameter to fit")
    values = {key: parameter_values(origin, key, spec) for key, spec in parameter_specs(parameters).items()}
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ScenarioError(f"{origin}: rows: expected at least one [[rows]] table")
    fit_rows = [_row(origin, i, row, base or Path.cwd()) for i, row in enumerate(rows)]
    names = [row.name for row in fit_rows]
    for name in names:
        if names.count(name) > 1:
            raise ScenarioError(f"{origin}: rows: two rows are named {name!r}")
    if not any(row.role == "calibration" for row in fit_rows):
        raise ScenarioError(f"{origin}: rows: no calibration row to fit on")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError(f"{origin}: description: expected a string")
    ranges = {
        key: (float(spec["min"]), float(spec["max"]))
        for key, spec in parameter_specs(parameters).items()
        if isinstance(spec, dict)
    }
    fit = Fit(values, fit_rows, description, origin, ranges)
    count = math.prod(len(v) for v in values.values())
    if count > MAX_POINTS:
        raise ScenarioError(f"{origin}: parameters: {count} points, more than {MAX_POINTS}; use fewer values")
    return fit


def load_fit(path: str | Path) -> Fit:
    path = Path(path)
    data, _ = tomlfile.read(path, "fit file")
    return fit_from_dict(data, str(path), path.parent)


def point_overrides(point: Mapping[str, Any]) -> list[str]:
    return [f"{key}={api.toml_literal(value)}" for key, value in point.items()]


def task(fit: Fit, index: int, point: dict[str, Any]) -> sweep.Task:
    """What a worker needs to simulate every row at a point. Its id depends on the rows and the
    point alone, so the grid and the search store a point they share under one id."""
    overrides = point_overrides(point)
    work = json.dumps({"rows": [row.to_spec() for row in fit.rows], "overrides": overrides}, sort_keys=True)
    return sweep.Task(index, run_id(work), point, overrides, "fit", resolved=work)


def tasks(fit: Fit) -> list[sweep.Task]:
    """One task per point of the grid."""
    return [task(fit, index, point) for index, point in enumerate(fit.points())]


def point_label(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} = {api.toml_literal(value)}" for key, value in point.items())


class _AnyPart(float):
    """Any part of a result while an experiment's runs are listed rather than run: every key
    gives another, it counts as 1 in arithmetic and as an empty table when iterated."""

    def __new__(cls) -> _AnyPart:
        return super().__new__(cls, 1.0)

    def __getitem__(self, key: object) -> _AnyPart:
        return _AnyPart()

    def values(self) -> tuple:
        return ()

    def items(self) -> tuple:
        return ()

    def __iter__(self):
        return iter(())


class PlanningRunner(reproduce.Runner):
    """Lists the runs (scenario and overrides) an experiment asks for, without running any."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def run(self, scenario: str, *overrides: str) -> dict:
        if (scenario, overrides) not in self.asked:
            self.asked.append((scenario, overrides))
        return _AnyPart()  # type: ignore[return-value]


def row_runs(row: FitRow) -> list[tuple[str, tuple[str, ...]]]:
    """The runs a row's value comes from: a reproduce row's experiment's, or the row's own."""
    if row.reproduce:
        planner = PlanningRunner()
        # An experiment that reads its results in a way the stand-in cannot answer stops here:
        # the runs listed so far are checked now, the others when they run (a test keeps every
        # experiment listed whole).
        with contextlib.suppress(Exception):
            reproduce.EXPERIMENTS[row.reproduce.split("/")[0]](planner)
        return planner.asked
    return [(row.scenario, row.overrides)]


class PointCheck:
    """Resolves every run of every row at a point, as the simulation will, without running it:
    a key a scenario does not have, or a value it refuses, is found before anything runs."""

    def __init__(self, fit: Fit) -> None:
        self.fit = fit
        self.runs = {i: row_runs(row) for i, row in enumerate(fit.rows)}
        self.sources: dict[str, tuple[str, str, str]] = {}
        for i, runs in self.runs.items():
            for scenario, _ in runs:
                if scenario not in self.sources:
                    try:
                        self.sources[scenario] = api.scenario_source(scenario)
                    except ScenarioError as error:
                        raise ScenarioError(f"{fit.origin}: rows[{i}].scenario: {error}") from None

    def __call__(self, point: Mapping[str, Any]) -> str | None:
        """Why the point cannot run (the row, its run and the scenario's reason), or None."""
        overrides = point_overrides(point)
        checked: set[tuple[str, tuple[str, ...]]] = set()
        for i, runs in self.runs.items():
            for scenario, own in runs:
                if (scenario, own) in checked:
                    continue
                checked.add((scenario, own))
                try:
                    _core.resolve_scenario(*self.sources[scenario], [*own, *overrides])
                except ScenarioError as error:
                    run = " ".join((scenario, *own))
                    return f"rows[{i}] ({self.fit.rows[i].name}): {run}: {error}"
        return None


def refuse_invalid(fit: Fit, tasks: list[sweep.Task], keep_going: bool) -> None:
    """Raises for the first invalid task (and how many there are), as ``steer sweep`` does,
    unless ``keep_going`` and some are valid."""
    bad = [t for t in tasks if t.resolved is None]
    if bad and (not keep_going or len(bad) == len(tasks)):
        others = "; --keep-going runs the others" if len(bad) < len(tasks) else ""
        count = f" ({len(bad)} of {len(tasks)} points checked are invalid{others})" if len(bad) > 1 else ""
        raise ScenarioError(f"{fit.origin}: {point_label(bad[0].point)}: {bad[0].error}{count}")


class Runs:
    """Runs points of a fit through the sweep executor into a results directory, each point at
    most once: a point recorded there before (by the grid or the search) is read back."""

    def __init__(self, fit: Fit, results_dir: str | Path, method: str, **executor: Any) -> None:
        self.fit, self.method, self.executor = fit, method, executor
        self.store = Store(results_dir)
        self.check = PointCheck(fit)
        self.asked: list[sweep.Task] = []
        self.ran = self.skipped = 0
        self.failed: dict[str, str] = {}

    def plan(self, points: list[dict[str, Any]]) -> list[sweep.Task]:
        """Tasks for the points, an invalid one carrying why it cannot run instead of its work."""
        planned = []
        for point in points:
            planned.append(task(self.fit, len(self.asked) + len(planned), point))
            error = self.check(point)
            if error:
                planned[-1].resolved, planned[-1].error = None, error
        return planned

    def __call__(self, planned: list[sweep.Task], label: str) -> list[Point | None]:
        """Runs the tasks not done before; each one's point, or None if it failed."""
        self.asked += planned
        summary = sweep.run_tasks(
            planned,
            self.store,
            {
                "fit": self.fit.origin,
                "description": self.fit.description,
                "method": self.method,
                "points": [{"index": t.index, "run_id": t.run_id, "point": t.point} for t in self.asked],
            },
            label,
            evaluate,
            **self.executor,
        )
        self.ran += len(summary.ran)
        self.skipped += summary.skipped
        points: list[Point | None] = []
        for t in planned:
            if t.run_id in summary.failed:
                self.failed[point_label(t.point)] = summary.failed[t.run_id]
                points.append(None)
            else:
                record = json.loads((self.store.runs / f"{t.run_id}.json").read_text(encoding="utf-8"))
                points.append(point_from(self.fit, record))
        return points


def calibration_residuals(point: Point | None) -> tuple[float, ...] | None:
    """Each calibration row's error in tolerances: what the search's cost is the sum of squares of."""
    if point is None:
        return None
    return tuple(r.error / r.tolerance for r in point.rows if r.row.role == "calibration" and r.tolerance)


def default_budget(fit: Fit) -> int:
    """A fifth of the grid's points, but enough for the start and a step along each parameter."""
    return max(len(fit.points()) // 5, 2 * len(fit.axes()) + 2)


def simulate_rows(rows: list[dict], overrides: list[str]) -> dict[str, Any]:
    """Every row's simulated value (and a reproduce row's published value and unit) at one point."""
    runner = reproduce.Runner(common=overrides)
    values: dict[str, Any] = {}
    for spec in rows:
        if spec["reproduce"]:
            found = [r for r in reproduce.reproduce(spec["reproduce"], runner=runner) if r.id == spec["reproduce"]]
            if not found:
                raise ScenarioError(f"rows: {spec['reproduce']}: no `steer reproduce` row has this id")
            row = found[0]
            values[spec["name"]] = {
                "simulated": row.simulated,
                "measured": row.published,
                "tolerance": row.tolerance,
                "unit": row.unit,
            }
            continue
        result = flatten(runner.run(spec["scenario"], *spec["overrides"]))
        if spec["key"] not in result:
            raise ScenarioError(f"rows: {spec['name']}: no result key `{spec['key']}` (see `steer stats`)")
        value = result[spec["key"]]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(f"rows: {spec['name']}: result key `{spec['key']}` is not a number")
        values[spec["name"]] = {"simulated": value}
    return values


def evaluate(task: sweep.Task) -> dict[str, Any]:
    """Worker: simulates every row at the task's point and returns the record (failures too)."""
    return sweep.execute(task, lambda work, _name: simulate_rows(**json.loads(work)))


@dataclass
class RowResult:
    row: FitRow
    measured: float
    simulated: float
    tolerance: float | None
    unit: str

    @property
    def error(self) -> float:
        return self.simulated - self.measured

    @property
    def within(self) -> bool | None:
        return None if self.tolerance is None else abs(self.error) <= self.tolerance

    def cost(self) -> float:
        """Squared error in tolerances; 0 for a row without a tolerance."""
        return 0.0 if not self.tolerance else (self.error / self.tolerance) ** 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row.name,
            "role": self.row.role,
            "unit": self.unit,
            "measured": self.measured,
            "simulated": self.simulated,
            "error": self.error,
            "tolerance": self.tolerance,
            "within": self.within,
        }


@dataclass
class Point:
    point: dict[str, Any]
    rows: list[RowResult]

    def cost(self, role: str = "calibration") -> float:
        return sum(r.cost() for r in self.rows if r.row.role == role)

    def score(self, role: str) -> tuple[int, int]:
        judged = [r for r in self.rows if r.row.role == role and r.within is not None]
        return sum(bool(r.within) for r in judged), len(judged)


@dataclass
class FitResult:
    fit: Fit
    points: list[Point]
    failed: dict[str, str]  # why each point that failed did, by its label
    ran: int
    skipped: int
    method: str = "grid"

    @property
    def best(self) -> Point:
        return min(self.points, key=lambda p: (p.cost(), p.cost("validation")))

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "fit": self.fit.origin,
            "best": best.point,
            "calibration_cost": best.cost(),
            "validation_cost": best.cost("validation"),
            "scores": {role: list(best.score(role)) for role in reproduce.ROLES},
            "rows": [r.to_dict() for r in best.rows],
            "method": self.method,
            "points": [{"point": p.point, "calibration_cost": p.cost()} for p in self.points],
            "failed": [{"point": label, "error": error} for label, error in self.failed.items()],
        }


def point_from(fit: Fit, record: Mapping[str, Any]) -> Point:
    values = record["result"]
    rows = []
    for row in fit.rows:
        value = values[row.name]
        measured = value.get("measured", row.measured)
        tolerance = value.get("tolerance", row.tolerance)
        rows.append(RowResult(row, measured, value["simulated"], tolerance, value.get("unit", row.unit)))
    return Point(record["point"], rows)


def run_fit(
    fit: Fit | str | Path,
    results_dir: str | Path,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    quiet: bool = True,
    method: str = "search",
    budget: int | None = None,
    keep_going: bool = False,
) -> FitResult:
    """Runs the fit's rows at the points of ``method`` (``"search"``, at most ``budget`` points, by
    default :func:`default_budget`; or ``"grid"``, every point) not yet done in ``results_dir``.

    Every point of the grid, or for the search every corner of the parameters' box
    (:meth:`Fit.corners`), is resolved for every run of every row before anything runs: one the
    scenario refuses raises ScenarioError naming it, unless ``keep_going`` (then it is recorded as
    failed and the others run). Raises ScenarioError if no point could be simulated (the first
    failure's reason)."""
    if not isinstance(fit, Fit):
        fit = load_fit(fit)
    if method not in METHODS:
        raise ScenarioError(f"unknown method `{method}` (expected {' or '.join(METHODS)})")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ScenarioError(f"--budget: expected a whole number of points, at least 1 (got {budget!r})")
    if budget is not None and method == "grid":
        raise ScenarioError("--budget: only for --method search (the grid runs every point)")
    sweep.check_executor(executor, workers, address)
    runs = Runs(fit, results_dir, method, executor=executor, workers=workers, address=address, quiet=quiet)
    name = f"fit {Path(fit.origin).stem}"
    if method == "grid":
        planned = runs.plan(fit.points())
        refuse_invalid(fit, planned, keep_going)
        done = runs(planned, name)
    else:
        refuse_invalid(fit, runs.plan(fit.corners()), keep_going)
        budget = budget or default_budget(fit)
        done = []

        def evaluate_points(values: list[tuple]) -> list[tuple[float, ...] | None]:
            start = len(done)
            which = f"{start + 1}" if len(values) == 1 else f"s {start + 1}-{start + len(values)}"
            points = runs(runs.plan([fit.point(v) for v in values]), f"{name}: point{which} of at most {budget}")
            done.extend(points)
            return [calibration_residuals(p) for p in points]

        # One Ray session for every step of the search, not one each.
        with sweep.ray_session(workers, address) if executor == "ray" else contextlib.nullcontext():
            Search(fit.axes(), evaluate_points, budget).run()
    points = [p for p in done if p is not None]
    if not points:
        first = next(iter(runs.failed.values()), "no point was simulated")
        raise ScenarioError(f"{fit.origin}: {first}")
    return FitResult(fit, points, runs.failed, runs.ran, runs.skipped, method)


def overlay_toml(result: FitResult) -> str:
    """The best values as TOML that ``--set-file`` applies, each with where it was fitted."""
    best = result.best
    rows = ", ".join(r.row.name for r in best.rows if r.row.role == "calibration")
    lines = [
        f"# steer fit {result.fit.origin}: the best of {len(result.points)} points "
        f"(calibration cost {best.cost():.4g}; validation cost {best.cost('validation'):.4g}).",
        "# Apply with --set-file FILE (steer run, reproduce, sweep, ...).",
    ]
    if result.fit.description:
        lines.append(f"# {result.fit.description}")
    sections: dict[str, list[str]] = {}
    for key, value in best.point.items():
        section, _, name = key.rpartition(".")
        sections.setdefault(section, []).append(
            f"{name} = {api.toml_literal(value)}  # calibrated by steer fit on {rows}"
        )
    # Keys outside any table come before the first table header, or TOML would put them in it.
    top_level = sections.pop("", [])
    if top_level:
        lines += ["", *top_level]
    for section, entries in sections.items():
        lines += ["", f"[{section}]", *entries]
    return "\n".join(lines) + "\n"


def report(result: FitResult) -> str:
    """The best point, its rows and both scores, as text."""
    best = result.best
    lines = [
        "best point: " + point_label(best.point),
        "",
        output.table(
            ["row", "role", "measured", "simulated", "error", "tolerance", "within"],
            [
                [
                    r.row.name,
                    r.row.role,
                    f"{r.measured:.4g} {r.unit}".strip(),
                    f"{r.simulated:.4g} {r.unit}".strip(),
                    f"{r.error:+.3g}",
                    "-" if r.tolerance is None else f"{r.tolerance:.3g}",
                    {True: "yes", False: "no", None: "-"}[r.within],
                ]
                for r in best.rows
            ],
        ),
    ]
    for role in reproduce.ROLES:
        met, judged = best.score(role)
        if judged:
            lines.append(f"{role}: {met} of {judged} rows within tolerance (cost {best.cost(role):.4g})")
    ranked = sorted(result.points, key=lambda p: p.cost())[:5]
    if len(result.points) > 1:
        lines += ["", "lowest calibration costs:"]
        lines += [f"  {p.cost():10.4g}  " + point_label(p.point) for p in ranked]
    searched = f" (searched; the grid has {len(result.fit.points())})" if result.method == "search" else ""
    lines.append(
        f"{output.count(len(result.points), 'point')}{searched}: {result.ran} simulated now, "
        f"{result.skipped} done before, {len(result.failed)} failed"
    )
    failed = list(result.failed.items())
    lines += [f"  failed at {label}: {error}" for label, error in failed[:SHOWN_FAILURES]]
    if len(failed) > SHOWN_FAILURES:
        lines.append(f"  and {len(failed) - SHOWN_FAILURES} more (--json lists every one)")
    return "\n".join(lines)


@dataclass
class CostCurve:
    """One method's points as the plot draws them: each point's calibration cost in the order run,
    and the least so far."""

    method: str
    costs: list[float]

    @property
    def best_so_far(self) -> list[float]:
        return list(itertools.accumulate(self.costs, min))


def cost_curves(result: FitResult, store: Store | None = None) -> list[CostCurve]:
    """The fit's points; after a search, the grid's too if ``store`` holds every one of them (a
    grid run into the same results directory), in the grid's order."""
    curves = [CostCurve(result.method, [p.cost() for p in result.points])]
    if result.method == "search" and store is not None:
        finished = store.finished_ids()
        grid = tasks(result.fit)
        if all(t.run_id in finished for t in grid):
            records = [json.loads((store.runs / f"{t.run_id}.json").read_text(encoding="utf-8")) for t in grid]
            curves.append(CostCurve("grid", [point_from(result.fit, r).cost() for r in records]))
    return curves


def cost_figure(result: FitResult, store: Store | None = None):
    """The calibration cost of every point in the order run (log scale; a cost of 0 at the axis'
    floor), the least so far as a step line, and the grid's for comparison when it is there."""
    return curves_figure(cost_curves(result, store), Path(result.fit.origin).stem, result.method)


def curves_figure(curves: list[CostCurve], name: str, method: str):
    """:func:`cost_figure` of ``curves``, titled by the fit file's ``name``."""
    from steer import plot

    positive = [c for curve in curves for c in curve.costs if c > 0]
    floor = min(positive) / 10 if positive else 1.0
    fig = plot.new_figure(7.0, 4.5)
    ax = fig.add_subplot()
    styles = {"search": ("tab:blue", "o", "-"), "grid": ("tab:grey", ".", "--")}
    for curve in curves:
        colour, marker, line = styles[curve.method]
        xs = list(range(1, len(curve.costs) + 1))
        ax.plot(xs, [max(c, floor) for c in curve.costs], marker, color=colour, label=f"{curve.method}: each point")
        best = curve.best_so_far
        label = f"{curve.method}: least so far ({best[-1]:.3g} after {len(best)} points)"
        ax.step(xs, [max(c, floor) for c in best], line, where="post", color=colour, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("point, in the order run")
    ax.set_ylabel("calibration cost (sum of squared errors in tolerances)")
    ax.set_title(f"steer fit {name}: calibration cost by point ({method})")
    ax.legend()
    return fig


# Where `steer report DIR` looks for `steer fit --json`'s output.
RESULT_FILE = "fit.json"


def load_curve(path: Path) -> tuple[str, CostCurve, dict[str, Any]]:
    """The fit file's name, the cost curve and the whole body of `steer fit --json`'s output."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        costs = [float(p["calibration_cost"]) for p in body["points"]]
        return Path(str(body["fit"])).stem, CostCurve(str(body["method"]), costs), body
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ScenarioError(f"{path}: not the output of steer fit --json: {error}") from None


def cost_plot(result: FitResult, store: Store | None, image_format: str = "png") -> bytes:
    """:func:`cost_figure` as PNG or SVG bytes."""
    from steer import plot

    return plot.image_bytes(cost_figure(result, store), image_format)

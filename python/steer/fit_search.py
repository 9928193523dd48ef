"""The search of ``steer fit --method search``: a space-filling start, then a trust region.

The cost to minimise is a sum of squares, each row's error in units of its tolerance, so the
search models every row's error rather than the cost alone: near the best point so far, each
error is taken as a linear function of the parameters (fitted by least squares to the points run
nearest it), and the step is the one that minimises the modelled cost within a box around it (a
Levenberg-Marquardt step: the derivative-free Gauss-Newton of DFO-LS and POUNDERS). The box
grows when the model predicts well and shrinks when it does not. Where the model proposes no
point not run yet, the search tries the best point's neighbours: a list's next values, a range's
values one resolution step away. When none of them is better (a local minimum at the
resolution), a neighbourhood search on the lists goes on from the next best combination of their
values while the budget lasts; it stops when no list has a value beside a point run that has not
run itself, or after ``budget`` points.

Parameters are coordinates in [0, 1]: a range (``{min, max, steps}`` in the fit file) is
continuous, its values rounded to a resolution (the largest power of ten at most a thousandth of
the range; at least 1 if the grid's values are whole numbers); a list is searched in its order,
its values ``1 / (values - 1)`` apart. Nothing here is random: the same costs give the same points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Of the points run, how many nearest the centre (besides it) each model is fitted to, per parameter.
NEIGHBOURS_PER_PARAMETER = 2
# A step whose cost fell by at least this share of what the model predicted widens the box.
GOOD_PREDICTION = 0.75


@dataclass(frozen=True)
class Axis:
    """One parameter: a list of values (``values``), or a range from ``low`` to ``high``."""

    key: str
    values: tuple = ()
    low: float = 0.0
    high: float = 0.0
    whole: bool = False

    @property
    def resolution(self) -> float:
        """A range's smallest difference: the largest power of ten at most a thousandth of it."""
        power = 10.0 ** math.floor(math.log10((self.high - self.low) / 1000))
        return max(1.0, power) if self.whole else power

    @property
    def step(self) -> float:
        """The coordinate distance of neighbouring values."""
        if self.values:
            return 1.0 / (len(self.values) - 1)
        return self.resolution / (self.high - self.low)

    def value(self, u: float) -> Any:
        """The parameter's value nearest coordinate ``u`` (clipped to [0, 1])."""
        u = min(1.0, max(0.0, u))
        if self.values:
            return self.values[math.floor(u * (len(self.values) - 1) + 0.5)]
        steps = round((self.low + u * (self.high - self.low)) / self.resolution)
        value = min(self.high, max(self.low, steps * self.resolution))
        if self.whole:
            return int(round(value))
        # The resolution's decimals, no more: 56.46, not 56.460000000000001.
        return round(value, max(0, round(-math.log10(self.resolution))))

    def coordinate(self, value: Any) -> float:
        if self.values:
            return self.values.index(value) * self.step
        return (value - self.low) / (self.high - self.low)


@dataclass
class Evaluated:
    """A point run: its values, its coordinates, and its rows' errors in tolerances (None: failed)."""

    values: tuple
    coordinates: tuple[float, ...]
    residuals: tuple[float, ...] | None

    @property
    def cost(self) -> float:
        return math.inf if self.residuals is None else sum(r * r for r in self.residuals)


# Runs points (each a tuple of values, one per axis) and returns each one's residuals, or None
# for a point that failed.
Evaluate = Callable[[list[tuple]], list[tuple[float, ...] | None]]


@dataclass
class Search:
    axes: list[Axis]
    evaluate: Evaluate
    budget: int
    history: list[Evaluated] = field(default_factory=list)

    def run(self) -> list[Evaluated]:
        """Runs the search; returns every point run, in order."""
        self.run_points([self.snap(u) for u in start_design(len(self.axes))])
        radius = 0.25
        # Nothing to search with every parameter at one value: the start is that one point.
        while self.axes and len(self.history) < self.budget and self.best.cost > 0:
            centre = self.best
            step, predicted = self.model_step(centre, radius)
            candidate = self.snap([c + s for c, s in zip(centre.coordinates, step)])
            if candidate not in self.seen():
                (new,) = self.run_points([candidate])
                size = max((abs(s) for s in step), default=0.0)
                if new.cost < centre.cost and centre.cost - new.cost >= GOOD_PREDICTION * (centre.cost - predicted):
                    radius = min(1.0, max(radius, 2 * size))
                elif new.cost >= centre.cost:
                    radius = max(self.smallest_radius, size / 2)
                continue
            if candidate != centre.values and radius > self.smallest_radius:
                radius = max(self.smallest_radius, radius / 2)  # a point run before: look nearer
                continue
            # The model sees no better point: try the neighbours one step away.
            neighbours = self.neighbours(centre) or self.next_in_lists()
            if not neighbours:
                break  # none is better, and no list has a value left beside a point run
            self.run_points(neighbours[:1])
        return self.history

    def next_in_lists(self) -> list[tuple]:
        """Once every neighbour of the best point has run: the neighbours in lists of the next
        best combination of list values that has some not run (best first), as a neighbourhood
        search on whole values goes on past a local minimum while the budget lasts. Each
        combination is taken at its best point; ranges are not walked so, since their neighbours
        are a resolution step apart, where the trust region has looked already."""
        lists = [i for i, axis in enumerate(self.axes) if axis.values]
        ranked = sorted((e for e in self.history if e.residuals is not None), key=lambda e: e.cost)
        combinations: set[tuple] = set()
        for centre in ranked:
            combination = tuple(centre.values[i] for i in lists)
            if combination in combinations:
                continue
            combinations.add(combination)
            found = self.neighbours(centre, lists_only=True)
            if found:
                return found
        return []

    @property
    def best(self) -> Evaluated:
        # The first of equal costs: the order points ran in decides, never the order of a dict.
        return min(self.history, key=lambda e: e.cost)

    @property
    def smallest_radius(self) -> float:
        return min(axis.step for axis in self.axes)

    def seen(self) -> set[tuple]:
        return {e.values for e in self.history}

    def snap(self, coordinates: Sequence[float]) -> tuple:
        return tuple(axis.value(u) for axis, u in zip(self.axes, coordinates))

    def run_points(self, points: list[tuple]) -> list[Evaluated]:
        """Runs the points not run before (at most what the budget leaves) and records them."""
        fresh: list[tuple] = []
        for point in points:
            if point not in self.seen() and point not in fresh:
                fresh.append(point)
        fresh = fresh[: self.budget - len(self.history)]
        results = self.evaluate(fresh) if fresh else []
        done = [
            Evaluated(point, tuple(a.coordinate(v) for a, v in zip(self.axes, point)), residuals)
            for point, residuals in zip(fresh, results)
        ]
        self.history += done
        return done

    def model(self, centre: Evaluated) -> list[list[float]]:
        """Each residual's gradient (rows: residuals, columns: parameters), fitted by least
        squares to the points nearest the centre; directions no such point explores get 0."""
        others = [e for e in self.history if e is not centre and e.residuals is not None]
        others.sort(key=lambda e: distance(e.coordinates, centre.coordinates))
        others = others[: NEIGHBOURS_PER_PARAMETER * len(self.axes)]
        d = len(self.axes)
        gram = [[0.0] * d for _ in range(d)]
        cross = [[0.0] * len(centre.residuals) for _ in range(d)]
        for e in others:
            dx = [a - b for a, b in zip(e.coordinates, centre.coordinates)]
            dr = [a - b for a, b in zip(e.residuals, centre.residuals)]
            for i in range(d):
                for j in range(d):
                    gram[i][j] += dx[i] * dx[j]
                for k, value in enumerate(dr):
                    cross[i][k] += dx[i] * value
        # A ridge far below any explored direction's weight, so unexplored ones solve to 0.
        ridge = 1e-9 * (1.0 + sum(gram[i][i] for i in range(d)))
        columns = solve(
            [[g + (ridge if i == j else 0.0) for j, g in enumerate(row)] for i, row in enumerate(gram)], cross
        )
        return [[columns[i][k] for i in range(d)] for k in range(len(centre.residuals))]

    def model_step(self, centre: Evaluated, radius: float) -> tuple[list[float], float]:
        """The step within ``radius`` (each coordinate, and [0, 1]) that minimises the modelled
        cost, and that cost."""
        d = len(self.axes)
        if centre.residuals is None or not centre.residuals:
            return [0.0] * d, centre.cost
        jacobian = self.model(centre)
        r = centre.residuals
        normal = [[sum(row[i] * row[j] for row in jacobian) for j in range(d)] for i in range(d)]
        gradient = [sum(row[i] * value for row, value in zip(jacobian, r)) for i in range(d)]
        scale = 1.0 + sum(normal[i][i] for i in range(d))

        def step(damping: float) -> list[float]:
            damped = [[n + (damping if i == j else 0.0) for j, n in enumerate(row)] for i, row in enumerate(normal)]
            return [-x[0] for x in solve(damped, [[g] for g in gradient])]

        damping = 1e-12 * scale
        if max(abs(s) for s in step(damping)) > radius:
            # Levenberg-Marquardt: more damping shortens the step; bisect for the box's edge.
            low, high = damping, scale
            while max(abs(s) for s in step(high)) > radius:
                high *= 10
            for _ in range(60):
                middle = math.sqrt(low * high)
                low, high = (middle, high) if max(abs(s) for s in step(middle)) > radius else (low, middle)
            damping = high
        moved = [min(1.0, max(0.0, c + s)) - c for c, s in zip(centre.coordinates, step(damping))]
        predicted = [value + sum(g * s for g, s in zip(row, moved)) for row, value in zip(jacobian, r)]
        return moved, sum(p * p for p in predicted)

    def neighbours(self, centre: Evaluated, lists_only: bool = False) -> list[tuple]:
        """Points not yet run one step from the centre along one parameter (a list's next value,
        a range's next value at its resolution), most promising by the model first."""
        jacobian = self.model(centre) if centre.residuals else None
        found: list[tuple[float, int, tuple]] = []
        for i, axis in enumerate(self.axes):
            if lists_only and not axis.values:
                continue
            for sign in (-1.0, 1.0):
                coordinates = list(centre.coordinates)
                coordinates[i] += sign * axis.step
                if not -1e-12 <= coordinates[i] <= 1 + 1e-12:
                    continue
                point = self.snap(coordinates)
                if point == centre.values or point in self.seen():
                    continue
                moved = axis.coordinate(point[i]) - centre.coordinates[i]
                if jacobian is None:
                    predicted = 0.0
                else:
                    predicted = sum((value + row[i] * moved) ** 2 for row, value in zip(jacobian, centre.residuals))
                found.append((predicted, len(found), point))
        return [point for _, _, point in sorted(found)]


def start_design(dimensions: int) -> list[list[float]]:
    """``dimensions + 1`` points of a Latin hypercube (each parameter's range cut into that many
    equal strata, one point at the middle of each), the strata matched across parameters by the
    ranks of an additive recurrence (Roberts' R sequence), so that the points spread without
    any random number."""
    count = dimensions + 1
    # The generalised golden ratio: the positive root of x ** (d + 1) = x + 1.
    phi = 2.0
    for _ in range(60):
        phi = (1 + phi) ** (1 / (dimensions + 1))
    alphas = [phi ** -(j + 1) for j in range(dimensions)]
    sequence = [[(0.5 + (i + 1) * a) % 1.0 for a in alphas] for i in range(count)]
    design = [[0.0] * dimensions for _ in range(count)]
    for j in range(dimensions):
        order = sorted(range(count), key=lambda i: sequence[i][j])
        for stratum, i in enumerate(order):
            design[i][j] = (stratum + 0.5) / count
    return design


def distance(a: Sequence[float], b: Sequence[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))


def solve(matrix: list[list[float]], right: list[list[float]]) -> list[list[float]]:
    """``matrix`` (square, symmetric positive definite here) solved for each column of ``right``,
    by Gaussian elimination with partial pivoting."""
    n = len(matrix)
    rows = [list(matrix[i]) + list(right[i]) for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        if rows[col][col] == 0.0:
            continue
        for r in range(col + 1, n):
            factor = rows[r][col] / rows[col][col]
            if factor:
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    width = len(right[0]) if right else 0
    solution = [[0.0] * width for _ in range(n)]
    for i in reversed(range(n)):
        if rows[i][i] == 0.0:
            continue
        for k in range(width):
            known = sum(rows[i][j] * solution[j][k] for j in range(i + 1, n))
            solution[i][k] = (rows[i][n + k] - known) / rows[i][i]
    return solution

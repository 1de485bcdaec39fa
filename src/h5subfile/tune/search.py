"""A search over the plan's space that respects measurement noise (docs/TUNING.md).

The measurement is injected: ``measure(points, repetitions)`` runs every point once per
repetition, interleaved (A B C A B C ...), and returns each point's times in seconds (lower is
better), one list per point *in the order given*. Points may repeat: every round measures its
baseline twice, and the second copy against the first is the *null comparison* that tells how
much two runs of the same plan differ on this machine, now.

**The noise rule.** Per repetition, ratio = candidate time / baseline time; the null ratios
are the second baseline copy's times / the baseline's. The noise is
``|1 - median(null ratios)| + IQR(null ratios) / 2`` (at least ``floor``). A candidate *wins*
only when its median ratio is below ``1 - noise`` and its third quartile of ratios is below 1
(at least three repetitions in four faster). The search confirms each winner in a fresh round,
and the final recommendation in a last round against the default itself; otherwise the
default is kept and the result says why.

The clock is injected as well, so budgets in trials (point x repetition) and in seconds are
tested without waiting. Pure: no MPI, no I/O.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import PlanError
from .space import Axis, Point, compact, default_point, exhaustive, point_key, problem

Measure = Callable[[list[Point], int], list[list[float]]]
Clock = Callable[[], float]

#: The smallest noise band: differences under 1 % are never worth a change.
NOISE_FLOOR = 0.01


@dataclass(frozen=True)
class Comparison:
    """A candidate against a baseline measured in the same interleaved round.

    ``ratio`` is the median per-repetition ratio candidate / baseline (below 1: faster),
    ``ratio_min`` / ``ratio_max`` its spread, ``null_ratio`` the median of the null comparison,
    ``noise`` the band a win must clear.
    """

    baseline_median: float
    candidate_median: float
    ratio: float
    ratio_min: float
    ratio_max: float
    ratio_q3: float
    null_ratio: float
    noise: float
    wins: bool

    @property
    def margin(self) -> float:
        """How much faster than the baseline (0.3: 30 % less time)."""
        return 1.0 - self.ratio


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile (inclusive method)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def noise_band(
    baseline_times: list[float], null_times: list[float], floor: float = NOISE_FLOOR
) -> float:
    """The null comparison's noise: ``|1 - median ratio| + IQR / 2`` of the per-repetition
    ratios null / baseline, at least ``floor``."""
    ratios = [n / b for n, b in zip(null_times, baseline_times)]
    q1, median, q3 = quartiles(ratios)
    return max(floor, abs(1.0 - median) + (q3 - q1) / 2)


def compare(
    default_times: list[float],
    candidate_times: list[float],
    null_times: list[float],
    floor: float = NOISE_FLOOR,
) -> Comparison:
    """Compare a candidate with the default (or any baseline), repetition by repetition.

    Parameters
    ----------
    default_times, candidate_times, null_times
        Seconds per repetition, measured interleaved; ``null_times`` is a second run of the
        default in the same round.
    floor
        The smallest noise band.

    Returns
    -------
    Comparison
        Medians, the ratio and its spread, the noise and whether the candidate wins (the
        module's rule).
    """
    if not (len(default_times) == len(candidate_times) == len(null_times)) or not default_times:
        raise PlanError(
            f"compare: {len(default_times)} default, {len(candidate_times)} candidate and "
            f"{len(null_times)} null times: expected the same number (at least one) of each"
        )
    ratios = [c / d for c, d in zip(candidate_times, default_times)]
    _, ratio, q3 = quartiles(ratios)
    noise = noise_band(default_times, null_times, floor)
    return Comparison(
        baseline_median=statistics.median(default_times),
        candidate_median=statistics.median(candidate_times),
        ratio=ratio,
        ratio_min=min(ratios),
        ratio_max=max(ratios),
        ratio_q3=q3,
        null_ratio=statistics.median(n / d for n, d in zip(null_times, default_times)),
        noise=noise,
        wins=ratio < 1.0 - noise and q3 < 1.0,
    )


@dataclass
class Row:
    """One point's line of the ranked table: its plan (fields set), times, ratio to the
    default (chained through the baseline it was measured against) and trials spent on it."""

    plan: dict[str, Any]
    median: float
    min: float
    max: float
    ratio: float
    ratio_min: float
    ratio_max: float
    trials: int


@dataclass
class TuningResult:
    """What a search found: the ranked table and the recommendation, or why the default stays.

    ``recommendation`` is the plan's fields (None: keep the default); ``margin`` and
    ``spread`` (ratio min, max) come from the final round against the default, ``noise`` is that
    round's band.
    """

    rows: list[Row]
    recommendation: dict[str, Any] | None
    reason: str
    margin: float
    spread: tuple[float, float]
    noise: float
    trials: int
    seconds: float
    stopped: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spread"] = list(self.spread)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TuningResult:
        values = dict(data)
        values["rows"] = [Row(**row) for row in data["rows"]]
        values["spread"] = tuple(data["spread"])
        return cls(**values)


@dataclass
class Budget:
    """Limits of a search: trials (point x repetition) and seconds on ``clock`` (None: none)."""

    trials: int | None = None
    seconds: float | None = None
    clock: Clock = time.monotonic
    used: int = 0
    start: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.start = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def allows(self, trials: int, reserve: int = 0) -> bool:
        """Whether ``trials`` more fit, keeping ``reserve`` trials for later."""
        if self.trials is not None and self.used + trials + reserve > self.trials:
            return False
        return self.seconds is None or self.elapsed() < self.seconds


class Tuner:
    """Runs rounds (a baseline, its null copy, candidates), counts trials, keeps the table."""

    def __init__(self, measure: Measure, repetitions: int, budget: Budget, floor: float) -> None:
        if repetitions < 3:
            raise PlanError(
                f"repetitions={repetitions}: at least 3 are needed to measure the noise"
            )
        self.measure = measure
        self.repetitions = repetitions
        self.budget = budget
        self.floor = floor
        self.rows: dict[str, Row] = {}
        self.chain: dict[str, float] = {"default": 1.0}
        self.stopped = ""
        self.noises: list[float] = []

    def cost(self, candidates: int) -> int:
        """Trials of a round with ``candidates`` candidates (plus the baseline twice)."""
        return (candidates + 2) * self.repetitions

    def round(
        self, baseline: Point, candidates: list[Point], reserve: int = 0
    ) -> list[Comparison] | None:
        """Measure ``candidates`` against ``baseline``; None when the budget refuses it."""
        trials = self.cost(len(candidates))
        if not self.budget.allows(trials, reserve):
            self.stopped = self.stopped or (
                f"budget reached after {self.budget.used} trials, {self.budget.elapsed():.1f} s"
            )
            return None
        points = [baseline, baseline, *candidates]
        times = self.measure(points, self.repetitions)
        if len(times) != len(points) or any(len(t) != self.repetitions for t in times):
            raise PlanError(
                f"the measurement returned {len(times)} list(s) of times for {len(points)} "
                f"points: expected one list of {self.repetitions} times per point, in order"
            )
        self.budget.used += trials
        base, null = times[0], times[1]
        self.noises.append(noise_band(base, null, self.floor))
        self.note(baseline, base, compare(base, base, null, self.floor), 2)
        comparisons = []
        for point, candidate in zip(candidates, times[2:]):
            comparison = compare(base, candidate, null, self.floor)
            self.note(point, candidate, comparison, 1, baseline)
            comparisons.append(comparison)
        return comparisons

    def note(
        self,
        point: Point,
        times: list[float],
        comparison: Comparison,
        copies: int,
        baseline: Point | None = None,
    ) -> None:
        """Record ``point``'s row (its latest measurement; trials add up)."""
        key = point_key(point)
        scale = self.chain.get(point_key(baseline), 1.0) if baseline is not None else 1.0
        if baseline is None:
            ratio = ratio_min = ratio_max = self.chain.get(key, 1.0)
        else:
            ratio, ratio_min, ratio_max = (
                scale * comparison.ratio,
                scale * comparison.ratio_min,
                scale * comparison.ratio_max,
            )
            self.chain[key] = ratio
        before = self.rows[key].trials if key in self.rows else 0
        self.rows[key] = Row(
            plan=compact(point),
            median=statistics.median(times),
            min=min(times),
            max=max(times),
            ratio=ratio,
            ratio_min=ratio_min,
            ratio_max=ratio_max,
            trials=before + copies * self.repetitions,
        )

    def ranked(self) -> list[Row]:
        return sorted(self.rows.values(), key=lambda row: (row.ratio, row.median))


def finish(tuner: Tuner, default: Point, best: Point) -> TuningResult:
    """The last round, ``best`` against the default itself, and the result it decides."""
    elapsed = tuner.budget.elapsed
    if point_key(best) == point_key(default):
        return keep_default(tuner, "no candidate beat the default by more than the measured noise")
    comparisons = tuner.round(default, [best])
    if comparisons is None:
        return keep_default(tuner, "the budget ran out before the best plan could be confirmed")
    final = comparisons[0]
    if not final.wins:
        return keep_default(
            tuner,
            f"no candidate beat the default by more than the measured noise "
            f"({100 * final.noise:.1f} %): the best, {point_key(best)}, was at "
            f"{final.ratio:.3f} x the default in the final round",
            final.noise,
        )
    return TuningResult(
        rows=tuner.ranked(),
        recommendation=compact(best),
        reason=(
            f"{point_key(best)} took {final.ratio:.3f} x the default's time (per repetition "
            f"{final.ratio_min:.3f}-{final.ratio_max:.3f}), beyond the measured noise "
            f"({100 * final.noise:.1f} %)"
        ),
        margin=final.margin,
        spread=(final.ratio_min, final.ratio_max),
        noise=final.noise,
        trials=tuner.budget.used,
        seconds=elapsed(),
        stopped=tuner.stopped,
    )


def keep_default(tuner: Tuner, reason: str, noise: float | None = None) -> TuningResult:
    """A result that keeps the default, saying why; ``noise`` defaults to the median noise of
    the rounds run (named in the reason when it speaks of the measured noise)."""
    if noise is None:
        noise = statistics.median(tuner.noises) if tuner.noises else tuner.floor
        if "measured noise" in reason:
            reason += f" ({100 * noise:.1f} %)"
    return TuningResult(
        rows=tuner.ranked(),
        recommendation=None,
        reason=f"keep the default: {reason}",
        margin=0.0,
        spread=(1.0, 1.0),
        noise=noise,
        trials=tuner.budget.used,
        seconds=tuner.budget.elapsed(),
        stopped=tuner.stopped,
    )


def best_winner(candidates: list[Point], comparisons: list[Comparison]) -> Point | None:
    """The candidate with the lowest ratio among those that win, if any."""
    winners = [(c.ratio, i) for i, c in enumerate(comparisons) if c.wins]
    return candidates[min(winners)[1]] if winners else None


def descend_axis(tuner: Tuner, axis: Axis, current: Point, ranks: int) -> Point | None:
    """Try ``axis``'s other values with the rest of ``current`` fixed; the confirmed winner, or
    None (no winner, or the budget refused the round)."""
    candidates = []
    for value in axis.values:
        point = {**current, **value}
        if point_key(point) != point_key(current) and problem(point, ranks) is None:
            candidates.append(point)
    if not candidates:
        return None
    reserve = tuner.cost(1)  # the final round against the default
    comparisons = tuner.round(current, candidates, reserve)
    if comparisons is None:
        return None
    best = best_winner(candidates, comparisons)
    if best is None:
        return None
    confirmation = tuner.round(current, [best], reserve)
    return best if confirmation is not None and confirmation[0].wins else None


def coordinate_descent(
    space: list[Axis],
    measure: Measure,
    ranks: int,
    repetitions: int = 5,
    budget: Budget | None = None,
    start: Point | None = None,
    max_sweeps: int = 3,
    floor: float = NOISE_FLOOR,
) -> TuningResult:
    """Coordinate descent over the axes, starting at the default (or ``start``).

    Each axis in turn: its other values are measured against the current point in one round;
    the best winner (module docstring: the noise rule) is confirmed in a second round and then
    kept. Sweeps repeat until one changes nothing, ``max_sweeps`` or the budget; a last round
    compares the result with the default.

    Parameters
    ----------
    space
        The axes (:func:`h5subfile.tune.space.search_space`).
    measure
        Times points interleaved (module docstring).
    ranks
        The job's rank count (which points are worth trying).
    repetitions
        Repetitions per round (at least 3).
    budget
        Limits in trials and seconds (:class:`Budget`); None: none.
    start
        The point to start from (a file system's starting point); must be worth trying.
    max_sweeps
        At most this many passes over the axes.
    floor
        The smallest noise band.
    """
    tuner = Tuner(measure, repetitions, budget or Budget(), floor)
    default = default_point(space)
    current = {**default, **(start or {})}
    if problem(current, ranks) is not None:
        raise PlanError(f"start point {point_key(current)}: {problem(current, ranks)}")
    if point_key(current) != point_key(default):
        tuner.round(default, [current], tuner.cost(1))
    for _ in range(max_sweeps):
        changed = False
        for axis in space:
            better = descend_axis(tuner, axis, current, ranks)
            if better is not None:
                current, changed = better, True
            if tuner.stopped:
                break
        if not changed or tuner.stopped:
            break
    return finish(tuner, default, current)


def exhaustive_search(
    space: list[Axis],
    measure: Measure,
    ranks: int,
    repetitions: int = 5,
    budget: Budget | None = None,
    floor: float = NOISE_FLOOR,
) -> TuningResult:
    """Every point worth trying against the default in one interleaved round, then the best
    winner confirmed against the default: the reference the sample-efficient search is
    checked against (same parameters as :func:`coordinate_descent`)."""
    tuner = Tuner(measure, repetitions, budget or Budget(), floor)
    default = default_point(space)
    points = [p for p in exhaustive(space, ranks) if point_key(p) != point_key(default)]
    comparisons = tuner.round(default, points, tuner.cost(1))
    best = best_winner(points, comparisons) if comparisons is not None else None
    return finish(tuner, default, best if best is not None else default)

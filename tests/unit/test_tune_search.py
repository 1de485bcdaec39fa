"""The tuner's search space (derived from the plan table) and its noise-respecting search, with
injected timings and clocks: deterministic."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from h5subfile.errors import PlanError
from h5subfile.plan import PLAN_FIELDS, Plan
from h5subfile.tune.search import (
    Budget,
    Measure,
    TuningResult,
    compare,
    coordinate_descent,
    exhaustive_search,
)
from h5subfile.tune.space import (
    Point,
    default_point,
    exhaustive,
    format_space,
    plan_from_point,
    point_key,
    search_space,
)

TUNING_DOC = Path(__file__).resolve().parents[2] / "docs" / "TUNING.md"


def noisy(cost: Callable[[Point], float], sigma: float, seed: int) -> Measure:
    """A measurement: each trial's time is cost(point) times log-normal noise, A B A B."""
    rng = random.Random(seed)

    def measure(points: list[Point], repetitions: int) -> list[list[float]]:
        times: list[list[float]] = [[] for _ in points]
        for _ in range(repetitions):
            for index, point in enumerate(points):
                times[index].append(cost(point) * math.exp(rng.gauss(0.0, sigma)))
        return times

    return measure


def test_space_comes_from_the_plan_table() -> None:
    space = search_space(64)
    fields = {name for axis in space for name in axis.fields}
    tuned = {field.name for field in PLAN_FIELDS if field.candidates is not None}
    assert fields == tuned
    assert not fields & {"fsync", "compression", "shuffle", "chunk_size"}
    grouping = next(axis for axis in space if axis.name == "grouping")
    assert grouping.fields == ("subfiles", "ranks_per_subfile")
    assert [point_key(v) for v in grouping.values][:3] == ["default", "subfiles=1", "subfiles=rank"]
    assert [v["ranks_per_subfile"] for v in grouping.values[3:]] == [2, 4, 8, 16, 32]
    assert all(axis.values[0] == dict.fromkeys(axis.fields) for axis in space)
    assert plan_from_point(default_point(space), 64) == Plan()


def test_exhaustive_counts_and_prunes() -> None:
    assert len(exhaustive(search_space(2), 2)) == 144
    assert len(exhaustive(search_space(64), 64)) == 752
    points = exhaustive(search_space(64), 64)
    assert len({point_key(p) for p in points}) == len(points)
    for point in points:
        plan = plan_from_point(point, 64)
        assert plan.buffer_size is None or plan.aggregators is not None
        assert plan.subfiles is None or plan.ranks_per_subfile is None
    with pytest.raises(PlanError, match="buffer_size only matters with aggregators"):
        plan_from_point({"buffer_size": 4 << 20}, 64)
    with pytest.raises(PlanError, match="every rank would write"):
        plan_from_point({"subfiles": "rank", "aggregators": 1}, 64)
    with pytest.raises(PlanError, match="one choice"):
        plan_from_point({"subfiles": 1, "ranks_per_subfile": 2}, 64)


def test_docs_show_the_generated_spaces() -> None:
    text = TUNING_DOC.read_text()
    assert format_space(2) in text and format_space(64) in text


def test_compare_rule() -> None:
    default = [1.0, 1.0, 1.0, 1.0, 1.0]
    null = [1.02, 0.98, 1.01, 0.99, 1.0]
    win = compare(default, [0.7, 0.72, 0.69, 0.71, 0.7], null)
    assert win.wins and win.ratio == pytest.approx(0.7) and win.margin == pytest.approx(0.3)
    assert win.noise == pytest.approx(0.01)
    small = compare(default, [0.995] * 5, null)
    assert not small.wins
    noisy_null = [1.3, 0.7, 1.2, 0.8, 1.0]
    assert not compare(default, [0.85] * 5, noisy_null).wins
    with pytest.raises(PlanError, match="same number"):
        compare(default, [1.0], null)


def test_pure_noise_recommends_nothing() -> None:
    for seed in range(5):
        measure = noisy(lambda point: 1.0, sigma=0.1, seed=seed)
        space = search_space(64)
        result = coordinate_descent(space, measure, 64)
        assert result.recommendation is None, (seed, result.reason)
        assert result.reason.startswith(
            "keep the default: no candidate beat the default by more than the measured noise ("
        )


def test_clear_winner_is_recommended() -> None:
    def cost(point: Point) -> float:
        return 0.7 if point.get("alignment") == 1 << 20 else 1.0

    result = coordinate_descent(search_space(2), noisy(cost, sigma=0.05, seed=1), 2)
    assert result.recommendation == {"alignment": 1 << 20}
    assert result.margin == pytest.approx(0.3, abs=0.05)
    assert result.spread[0] <= 1 - result.margin <= result.spread[1]
    aligned = [row.plan.get("alignment") == 1 << 20 for row in result.rows]
    assert aligned == sorted(aligned, reverse=True)  # every 1m row ranks above the others
    again = TuningResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result


def test_start_point_and_measurement_checks() -> None:
    def cost(point: Point) -> float:
        return 0.6 if point.get("ranks_per_subfile") == 8 else 1.0

    space = search_space(64)
    start = {"ranks_per_subfile": 8, "alignment": 4 << 20}
    result = coordinate_descent(space, noisy(cost, 0.03, seed=2), 64, start=start)
    assert result.recommendation is not None
    assert result.recommendation["ranks_per_subfile"] == 8
    with pytest.raises(PlanError, match="start point"):
        coordinate_descent(space, noisy(cost, 0.03, 2), 64, start={"buffer_size": 4 << 20})

    def short(points: list[Point], repetitions: int) -> list[list[float]]:
        return [[1.0] * repetitions for _ in points[1:]]

    with pytest.raises(PlanError, match="one list of 5 times per point"):
        coordinate_descent(space, short, 64)


def separable_cost(point: Point) -> float:
    """A cost that adds one term per axis (seconds)."""
    grouping = {"subfiles=rank": 0.6, "subfiles=1": 0.9, "ranks_per_subfile=8": 0.05}
    cost = 1.0 + grouping.get(
        point_key({k: point.get(k) for k in ("subfiles", "ranks_per_subfile")}), 0.3
    )
    cost += {None: 0.4, 1: 0.0, 2: 0.1}[point.get("aggregators")]
    cost += {None: 0.2, 4 << 20: 0.3, 64 << 20: 0.0}[point.get("buffer_size")]
    cost += {None: 0.3, 64 << 10: 0.2, 1 << 20: 0.05, 4 << 20: 0.0}[point.get("alignment")]
    cost += {None: 0.0, 1 << 20: 0.5, 4 << 20: 0.1, 16 << 20: 0.02}[point.get("transfer_size")]
    return cost


def test_descent_near_exhaustive_best_with_a_quarter_of_the_trials() -> None:
    space = search_space(64)
    full = exhaustive_search(space, noisy(separable_cost, 0.02, seed=7), 64)
    fast = coordinate_descent(space, noisy(separable_cost, 0.02, seed=8), 64)
    assert full.recommendation is not None and fast.recommendation is not None
    best = separable_cost(full.recommendation)
    found = separable_cost(fast.recommendation)
    assert found <= 1.10 * best, (found, best)
    assert fast.trials <= full.trials / 4, (fast.trials, full.trials)
    assert full.trials == (752 + 1) * 5 + 3 * 5  # one round of every point, one confirmation


def test_budget_in_trials_and_seconds() -> None:
    space = search_space(64)
    measure = noisy(separable_cost, 0.02, seed=3)
    limited = coordinate_descent(space, measure, 64, budget=Budget(trials=60))
    assert limited.trials <= 60 and limited.stopped.startswith("budget reached")
    ticks = iter(range(1000))
    budget = Budget(seconds=3, clock=lambda: float(next(ticks)))
    timed = coordinate_descent(space, measure, 64, budget=budget)
    assert timed.stopped.startswith("budget reached") and timed.trials < 200
    with pytest.raises(PlanError, match="at least 3"):
        coordinate_descent(space, measure, 64, repetitions=2)

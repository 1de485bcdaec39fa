"""Slabs and runs (layout/hyperslab.py) against numpy masks of small datasets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.layout.blocks import Block
from h5subfile.layout.hyperslab import Run, Slab, first_shared, prefix_boxes, slabs_meet
from h5subfile.layout.runs import listed_apart


def _mask(shape: tuple[int, ...], boxes: list[Block]) -> np.ndarray:
    mask = np.zeros(shape, dtype=np.int64)
    for box in boxes:
        mask[box.slices] += 1
    return mask


def _indices(shape: tuple[int, ...], boxes: list[Block]) -> list[int]:
    """The C-order element indices of ``boxes``, each box in C order, one after another."""
    grid = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return [int(i) for box in boxes for i in grid[box.slices].ravel()]


@st.composite
def slabs(draw: st.DrawFn, ndim: int, extent: int = 13) -> Slab:
    start, stride, count, block = [], [], [], []
    for _ in range(ndim):
        b = draw(st.integers(1, 3))
        c = draw(st.integers(1, 3))
        s = draw(st.integers(b, b + 2))
        lo = draw(st.integers(0, max(0, extent - (c - 1) * s - b)))
        start.append(lo)
        stride.append(s)
        count.append(c)
        block.append(b)
    return Slab.made(start, stride, count, block)


@st.composite
def box_in(draw: st.DrawFn, shape: tuple[int, ...]) -> Block:
    lo = [draw(st.integers(0, n)) for n in shape]
    hi = [draw(st.integers(a, n)) for a, n in zip(lo, shape)]
    return Block(tuple(lo), tuple(b - a for a, b in zip(lo, hi)))


SHAPE = (14, 13)


@given(slabs(2), st.data())
def test_within_is_the_slab_inside_the_box(slab: Slab, data: st.DataObject) -> None:
    box = data.draw(box_in(SHAPE))
    whole = _mask(SHAPE, list(slab.blocks()))
    found = _mask(SHAPE, slab.within(box))
    expected = np.zeros(SHAPE, dtype=np.int64)
    expected[box.slices] = whole[box.slices]
    assert np.array_equal(found, expected)
    assert whole.max(initial=0) <= 1  # blocks never overlap
    assert whole.sum() == slab.size


@given(slabs(2), slabs(2))
def test_slabs_meet_exactly_when_their_masks_do(a: Slab, b: Slab) -> None:
    shared = (_mask(SHAPE, list(a.blocks())) * _mask(SHAPE, list(b.blocks()))).any()
    assert slabs_meet(a, b) == bool(shared)


@given(slabs(2), st.data())
def test_count_in_is_the_selected_elements_the_slab_holds(slab: Slab, data: st.DataObject) -> None:
    shape = (16, 16)
    axes: list[range | np.ndarray] = []
    for n in shape:
        if data.draw(st.booleans()):
            lo = data.draw(st.integers(0, n))
            axes.append(range(lo, data.draw(st.integers(lo, n)), data.draw(st.integers(1, 4))))
        else:
            axes.append(np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), np.int64))
    held = _mask(shape, list(slab.blocks())).astype(bool)
    chosen = np.zeros(shape, dtype=bool)
    chosen[np.ix_(*(np.asarray(a, dtype=np.int64) for a in axes))] = True
    assert slab.count_in(axes) == int(np.count_nonzero(held & chosen))


@given(st.lists(slabs(2), min_size=0, max_size=6), st.data())
def test_first_shared_finds_an_overlap_of_different_owners(
    found: list[Slab], data: st.DataObject
) -> None:
    _check_first_shared(found, [data.draw(st.integers(0, 2)) for _ in found])


@settings(max_examples=400)
@given(slabs(2), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=8), st.data())
def test_first_shared_finds_an_overlap_among_translates_of_one_slab(
    slab: Slab, moves: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Slabs alike but for their start (ranks of a round robin), which ``first_shared`` may
    prove apart by their phases without comparing them in pairs: it still finds every
    overlap, and reports none where there is none."""
    found = [
        Slab(tuple(s + m for s, m in zip(slab.start, move)), slab.stride, slab.count, slab.block)
        for move in [(0, 0), *moves]
    ]
    _check_first_shared(found, [data.draw(st.integers(0, 3)) for _ in found])


@settings(max_examples=400)
@given(st.lists(box_in((9, 7)), min_size=0, max_size=10), st.data())
def test_first_shared_finds_an_overlap_among_boxes(found: list[Block], data: st.DataObject) -> None:
    """Boxes only (ranks' tiles and slabs: ``first_shared`` compares them as plain numbers)."""
    boxes = [Slab.of_box(box) for box in found]
    _check_first_shared(boxes, [data.draw(st.integers(0, 2)) for _ in boxes])


@settings(max_examples=400)
@given(st.one_of(slabs(2), box_in((13, 13)).map(Slab.of_box)), slabs(2))
def test_holds_is_inclusion_of_elements(outer: Slab, inner: Slab) -> None:
    """``holds`` against the sets of elements, for slabs and for boxes (which it answers from
    their bounds)."""
    shape = (20, 20)
    mine = _mask(shape, list(outer.blocks())) > 0
    theirs = _mask(shape, list(inner.blocks())) > 0
    assert outer.holds(inner) == bool(np.all(mine[theirs]))


def _check_first_shared(found: list[Slab], owners: list[int]) -> None:
    """``first_shared`` of ``found`` (owned by ``owners``) is one of the pairs of different
    owners that meet, compared one by one, or None when there is none."""
    pairs = [
        (i, j)
        for i in range(len(found))
        for j in range(i + 1, len(found))
        if owners[i] != owners[j] and slabs_meet(found[i], found[j])
    ]
    result = first_shared(list(zip(owners, found)))
    if not pairs:
        assert result is None
    else:
        assert result is not None and result in pairs


@given(st.integers(0, 3).flatmap(lambda n: st.tuples(st.just(n), st.data())))
def test_prefix_boxes_are_the_c_order_prefix(case: tuple[int, st.DataObject]) -> None:
    ndim, data = case
    shape = tuple(data.draw(st.integers(1, 4)) for _ in range(ndim))
    box = Block((1,) * ndim, shape)
    size = int(np.prod(shape))
    elements = data.draw(st.integers(0, size))
    outer = tuple(n + 2 for n in shape)
    parts = prefix_boxes(box, elements)
    assert _indices(outer, parts) == _indices(outer, [box])[:elements]


def _round_robin_rows(rank: int, ranks: int, rows: int, width: int, cut: int) -> list[Block]:
    """Rank ``rank``'s rows of ``ranks`` round-robin, each written in parts of ``cut`` columns."""
    boxes = []
    for row in range(rank, rows, ranks):
        for col in range(0, width, cut):
            boxes.append(Block((row, col), (1, min(cut, width - col))))
    return boxes


def _feed(boxes: list[Block]) -> tuple[list[Run], list[list[Block]]]:
    runs: list[Run] = []
    fed: list[list[Block]] = []
    for box in boxes:
        if not runs or not runs[-1].extend(box):
            runs.append(Run(box))
            fed.append([])
        fed[-1].append(box)
    return runs, fed


def _check_runs(shape: tuple[int, ...], runs: list[Run], fed: list[list[Block]]) -> None:
    """Each run holds exactly what was fed to it, in the order it was fed (the hash's order)."""
    for run, boxes in zip(runs, fed):
        made = list(run.slab.blocks()) + run.partial()
        assert _indices(shape, made) == _indices(shape, boxes)


def test_round_robin_rows_are_one_run_per_rank() -> None:
    for cut in (1, 2, 5):
        for rank in range(3):
            boxes = _round_robin_rows(rank, 3, 11, 5, cut)
            runs, fed = _feed(boxes)
            assert len(runs) == 1
            assert runs[0].whole
            assert runs[0].slab == Slab.made(
                (rank, 0), (3, 5), (len(range(rank, 11, 3)), 1), (1, 5)
            )
            _check_runs((11, 5), runs, fed)


def test_slabs_written_in_parts_grow_one_box() -> None:
    boxes = [Block((r, 0), (min(3, 10 - r), 4)) for r in range(0, 10, 3)]
    runs, fed = _feed(boxes)
    assert len(runs) == 1 and runs[0].slab == Slab.of_box(Block((0, 0), (10, 4)))
    _check_runs((10, 4), runs, fed)


def test_time_series_steps_along_axis_zero() -> None:
    # a 1-D series of 4 ranks x 3 elements per step, rank 1's part of each of 5 steps
    boxes = [Block((12 * t + 3,), (3,)) for t in range(5)]
    runs, fed = _feed(boxes)
    assert len(runs) == 1 and runs[0].slab == Slab.made((3,), (12,), (5,), (3,))
    _check_runs((60,), runs, fed)


def test_a_run_ends_in_a_block_in_progress() -> None:
    boxes = _round_robin_rows(0, 2, 6, 4, 1)[:-2]  # the last row half written
    runs, fed = _feed(boxes)
    assert len(runs) == 1 and not runs[0].whole
    assert runs[0].partial() == [Block((4, 0), (1, 2))]
    _check_runs((6, 4), runs, fed)


@settings(max_examples=200)
@given(st.lists(box_in((7, 6)), max_size=12))
def test_runs_hold_what_was_fed_in_its_order(boxes: list[Block]) -> None:
    boxes = [b for b in boxes if b.size]
    runs, fed = _feed(boxes)
    _check_runs((7, 6), runs, fed)


@settings(max_examples=400)
@given(st.lists(slabs(2), min_size=0, max_size=8), st.lists(slabs(1, 40), max_size=8))
def test_listed_apart_is_true_exactly_when_no_two_slabs_meet(
    found: list[Slab], lines: list[Slab]
) -> None:
    """The proof by listing runs (layout/runs.py, ``listed_apart``) against pairwise
    comparison, in 2-D and 1-D."""
    for group in (found, lines):
        meet = any(
            slabs_meet(group[i], group[j])
            for i in range(len(group))
            for j in range(i + 1, len(group))
        )
        assert listed_apart(group) == (not meet)

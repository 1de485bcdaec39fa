"""Which learned segments are rewritten at close, and how they are shared out
(layout/consolidation.py): fine interleaved runs are, runs cheap to read are not; the shares
cut a segment into C-order ranges, whole rows where they can; the boxes of a range, the runs
cut at the shares' bounds and the indices of runs select exactly the elements meant."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.layout.blocks import Block
from h5subfile.layout.consolidation import (
    MAX_SHARE,
    range_boxes,
    run_indices,
    shares,
    source_runs,
    split_runs,
    worth_consolidating,
)
from h5subfile.layout.hyperslab import Slab


def _rows(first: int, ranks: int, rows: int, width: int) -> Slab:
    """Rows ``first``, ``first + ranks``, ... of a (rows, width) dataset: round robin."""
    return Slab((first, 0), (ranks, 1), (rows // ranks, 1), (1, width))


def test_round_robin_rows_are_rewritten() -> None:
    """4 ranks in 2 subfiles, rows of 1,024 doubles: 16 KiB runs, thousands of them."""
    extent = Block((0, 0), (4096, 1024))
    sources = [[_rows(r, 4, 4096, 1024) for r in group] for group in ((0, 1), (2, 3))]
    assert source_runs(sources[0][0], extent) == 1024
    assert worth_consolidating(sources, extent, 8, 4)


def test_tiles_slabs_and_few_runs_stay_as_written() -> None:
    """Tiles whose group makes a strip of whole rows, slabs, and a small dataset whose runs are
    few (at most RUNS_PER_SOURCE per source) are cheap to read as written."""
    extent = Block((0, 0), (2048, 2048))
    tiles = [
        [Slab.of_box(Block((512 * i, 512 * j), (512, 512))) for j in range(4)] for i in range(4)
    ]
    assert sum(source_runs(t, extent) for t in tiles[0]) == 2048  # as written: row by row
    assert not worth_consolidating(tiles, extent, 8, 16)  # merged: one strip per source
    line = Block((0,), (4000,))
    slabs = [[Slab.of_box(Block((1000 * r,), (1000,)))] for r in range(4)]
    assert not worth_consolidating(slabs, line, 8, 4)
    few = [[_rows(r, 4, 16, 3) for r in group] for group in ((0, 1), (2, 3))]
    assert not worth_consolidating(few, Block((0, 0), (16, 3)), 8, 4)


def test_long_runs_and_huge_shares_stay_as_written() -> None:
    """Runs of a MiB or more read at the disk's speed; shares past MAX_SHARE stay in place."""
    extent = Block((0, 0), (64, 1 << 17))  # rows of 1 MiB
    sources = [[_rows(r, 2, 64, 1 << 17)] for r in range(2)]
    assert not worth_consolidating(sources, extent, 8, 2)
    huge = Block((0,), (2 * MAX_SHARE // 8 + 16,))
    element = [[Slab((r,), (2,), (huge.size // 2,), (1,))] for r in range(2)]
    assert not worth_consolidating(element, huge, 8, 2)
    # 5 rows over 4 ranks: shares of 1, 1, 1 and 2 rows; the largest decides, not the mean
    row = MAX_SHARE * 3 // 4 // 8
    uneven = Block((0, 0), (5, row))
    columns = [[Slab((0, r), (1, 4), (5, row // 4), (1, 1))] for r in range(4)]
    assert sum(s.size for c in columns for s in c) == uneven.size
    assert uneven.size * 8 < MAX_SHARE * 4
    assert not worth_consolidating(columns, uneven, 8, 4)


def test_shares_are_whole_rows_when_there_are_enough() -> None:
    assert shares(Block((0, 0), (10, 3)), 4) == [(0, 6), (6, 15), (15, 21), (21, 30)]
    assert shares(Block((0, 0), (2, 3)), 4) == [(0, 1), (1, 3), (3, 4), (4, 6)]
    assert shares(Block((5,), (3,)), 4) == [(0, 0), (0, 1), (1, 2), (2, 3)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.lists(st.integers(0, 3), min_size=3, max_size=3),
    st.data(),
)
def test_range_boxes_select_the_range_in_c_order(counts, origin, data) -> None:
    extent = Block(tuple(origin[: len(counts)]), tuple(counts))
    lo = data.draw(st.integers(0, extent.size))
    hi = data.draw(st.integers(lo, extent.size))
    flat = np.arange(extent.size).reshape(extent.count)
    got = [
        flat[box.relative_to(extent.start).slices].ravel() for box in range_boxes(extent, lo, hi)
    ]
    joined = np.concatenate(got) if got else np.empty(0, dtype=np.int64)
    np.testing.assert_array_equal(joined, np.arange(lo, hi))
    assert len(got) <= 2 * len(counts) - 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=20), st.data())
def test_runs_cut_at_the_shares_bounds_keep_every_element_once(lengths, data) -> None:
    gaps = data.draw(st.lists(st.integers(0, 4), min_size=len(lengths), max_size=len(lengths)))
    starts = np.cumsum(np.array(gaps) + np.r_[0, lengths[:-1]]).astype(np.int64)
    sizes = np.array(lengths, dtype=np.int64)
    end = int(starts[-1] + sizes[-1])
    cuts = sorted(set(data.draw(st.lists(st.integers(0, end), max_size=5))) | {0, end})
    share, begin, size, within = split_runs(starts, sizes, cuts)
    assert np.all(size > 0)
    elements = run_indices(begin, size)
    np.testing.assert_array_equal(np.sort(elements), run_indices(starts, sizes))
    for s, b, n in zip(share, begin, size):
        assert cuts[s] <= b and b + n <= cuts[s + 1]
    run = np.searchsorted(starts, begin - within)
    np.testing.assert_array_equal(starts[run] + within, begin)

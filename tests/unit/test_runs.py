"""box_runs: the one mapping from a box of a dataset to byte runs in storage and in memory."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.layout.blocks import Block
from h5subfile.layout.runs import box_runs, c_order_run


@st.composite
def placements(draw: st.DrawFn) -> tuple[Block, Block, Block, int]:
    """An extent and a memory buffer (boxes of one dataset) and a common box inside both."""
    ndim = draw(st.integers(0, 4))
    common_count = tuple(draw(st.integers(0, 4)) for _ in range(ndim))
    common_start = tuple(draw(st.integers(0, 5)) for _ in range(ndim))

    def around() -> Block:
        before = tuple(draw(st.integers(0, min(s, 3))) for s in common_start)
        after = tuple(draw(st.integers(0, 3)) for _ in range(ndim))
        start = tuple(s - b for s, b in zip(common_start, before))
        count = tuple(b + c + a for b, c, a in zip(before, common_count, after))
        return Block(start, count)

    itemsize = draw(st.sampled_from([1, 2, 4, 8, 12]))
    return around(), Block(common_start, common_count), around(), itemsize


@settings(max_examples=400, deadline=None)
@given(placements())
def test_every_byte_of_the_box_exactly_once_in_file_order(case) -> None:
    extent, common, buffer, itemsize = case
    runs = box_runs(extent, common, buffer, itemsize)
    # Bytes of the extent and of the buffer, each tagged with its own position.
    stored = np.arange(math.prod(extent.count) * itemsize, dtype=np.int64)
    memory = np.full(math.prod(buffer.count) * itemsize, -1, dtype=np.int64)
    file_hits = np.zeros(stored.size, dtype=np.int64)
    for file_at, memory_at, nbytes in runs:
        assert nbytes > 0
        memory[memory_at : memory_at + nbytes] = stored[file_at : file_at + nbytes]
        file_hits[file_at : file_at + nbytes] += 1
    # What numpy's own box copy gives, element by element (each element = itemsize bytes).
    stored_elements = stored.reshape(*extent.count, itemsize) if extent.count else stored
    want = np.full(memory.size, -1, dtype=np.int64).reshape(*buffer.count, itemsize)
    inside_extent = tuple(
        slice(s, s + c) for s, c in zip(common.relative_to(extent.start).start, common.count)
    )
    inside_buffer = tuple(
        slice(s, s + c) for s, c in zip(common.relative_to(buffer.start).start, common.count)
    )
    want[inside_buffer] = stored_elements.reshape(*extent.count, itemsize)[inside_extent]
    assert np.array_equal(memory, want.reshape(-1))
    # Every byte of the common box exactly once, nothing else; runs in increasing file order.
    assert int(file_hits.max(initial=0)) <= 1
    assert int(file_hits.sum()) == common.size * itemsize
    starts = [f for f, _, _ in runs]
    assert starts == sorted(starts)
    assert all(f + n <= g for (f, _, n), g in zip(runs, starts[1:]))


def test_a_block_of_whole_rows_is_one_run() -> None:
    extent = Block((10, 0), (10, 4))
    block = Block((12, 0), (3, 4))
    assert box_runs(extent, block, block, 8) == [(2 * 4 * 8, 0, 3 * 4 * 8)]


def test_a_column_is_one_run_per_row() -> None:
    extent = Block((0, 0), (3, 4))
    buffer = Block((0, 1), (3, 1))
    assert box_runs(extent, buffer, buffer, 4) == [(4, 0, 4), (20, 4, 4), (36, 8, 4)]


def test_empty_box_has_no_runs() -> None:
    box = Block((0, 0), (0, 4))
    assert box_runs(Block((0, 0), (3, 4)), box, box, 4) == []


@given(placements())
def test_a_box_is_one_c_order_run_exactly_when_its_elements_are_consecutive(case) -> None:
    extent, common, _, _ = case
    if not common.size:
        return
    index = np.arange(extent.size).reshape(extent.count)
    inside = index[common.relative_to(extent.start).slices].ravel()
    consecutive = bool(np.all(np.diff(inside) == 1))
    assert c_order_run(extent, common) == ((int(inside[0]), inside.size) if consecutive else None)

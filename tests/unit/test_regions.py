"""What is left to write of a block (layout/regions.py), against a numpy mask of the block."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from h5subfile.layout.blocks import Block
from h5subfile.layout.regions import Remaining, box_minus, c_order_tail, describe, subtract


@st.composite
def block_and_writes(draw: st.DrawFn) -> tuple[Block, list[Block]]:
    """A block and boxes written inside it (repeats, overlaps and empty boxes allowed)."""
    ndim = draw(st.integers(0, 3))
    start = tuple(draw(st.integers(0, 4)) for _ in range(ndim))
    count = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    block = Block(start, count)
    writes = []
    for _ in range(draw(st.integers(0, 6))):
        lo = [draw(st.integers(s, s + c)) for s, c in zip(start, count)]
        hi = [draw(st.integers(a, s + c)) for a, s, c in zip(lo, start, count)]
        writes.append(Block(tuple(lo), tuple(b - a for a, b in zip(lo, hi))))
    return block, writes


def _mask(block: Block, boxes: list[Block]) -> np.ndarray:
    """How many of ``boxes`` cover each element of ``block``."""
    mask = np.zeros(block.count, dtype=np.int64)
    for box in boxes:
        if box.size:
            mask[box.relative_to(block.start).slices] += 1
    return mask


@given(block_and_writes())
def test_remaining_is_exactly_what_no_write_covered(case: tuple[Block, list[Block]]) -> None:
    block, writes = case
    remaining = [block]
    for box in writes:
        remaining = subtract(remaining, box)
    covered = _mask(block, writes) > 0
    left = _mask(block, remaining)
    assert left.max(initial=0) <= 1, "remaining boxes overlap"
    assert np.array_equal(left == 1, ~covered)
    assert all(b.size and block.contains(b) for b in remaining)


@given(block_and_writes())
def test_box_minus_cuts_at_most_two_slabs_per_axis(case: tuple[Block, list[Block]]) -> None:
    block, writes = case
    for inner in writes:
        if inner.size:
            pieces = box_minus(block, inner)
            assert len(pieces) <= 2 * len(block.count)
            assert np.array_equal(
                _mask(block, pieces) + _mask(block, [inner]), np.ones(block.count)
            )


def test_the_same_half_twice_leaves_the_other_half() -> None:
    block = Block((10, 0), (10, 4))
    first_half = Block((10, 0), (5, 4))
    remaining = subtract(subtract([block], first_half), first_half)
    assert remaining == [Block((15, 0), (5, 4))]
    assert describe(remaining) == "[15:20, 0:4]"


def test_writing_rows_in_order_keeps_one_box() -> None:
    remaining = [Block((0, 0), (100, 8))]
    for row in range(99):
        remaining = subtract(remaining, Block((row, 0), (1, 8)))
        assert len(remaining) == 1
    assert subtract(remaining, Block((99, 0), (1, 8))) == []


def test_describe_says_how_many_more() -> None:
    boxes = [Block((i,), (1,)) for i in range(0, 10, 2)]
    assert describe(boxes, limit=2) == "[0:1], [2:3] and 3 more box(es)"


@given(block_and_writes(), st.integers(0, 130))
def test_the_c_order_tail_is_the_elements_from_an_index_on(
    case: tuple[Block, list[Block]], first: int
) -> None:
    block, _ = case
    tail = c_order_tail(block, first)
    expected = (np.arange(block.size) >= first).reshape(block.count)
    assert np.array_equal(_mask(block, tail), expected.astype(np.int64))
    assert len(tail) <= max(len(block.count), 1)


@given(block_and_writes())
def test_remaining_with_a_cursor_is_what_subtracting_leaves(
    case: tuple[Block, list[Block]],
) -> None:
    block, writes = case
    remaining, boxes = Remaining(block), [block]
    for box in writes:
        remaining.take(box)
        boxes = subtract(boxes, box)
        assert np.array_equal(_mask(block, remaining.boxes), _mask(block, boxes))
        assert remaining.done == (not boxes)


def test_rows_in_order_keep_a_cursor_and_one_out_of_order_turns_it_into_boxes() -> None:
    block = Block((10, 0), (100, 8))
    remaining = Remaining(block)
    for row in range(10, 60):
        remaining.take(Block((row, 0), (1, 8)))
    assert remaining.cursor == 50 * 8 and remaining.boxes == [Block((60, 0), (50, 8))]
    remaining.take(Block((100, 0), (10, 8)))  # the last rows first: out of order
    assert remaining.boxes == [Block((60, 0), (40, 8))]
    remaining.take(Block((60, 0), (40, 8)))
    assert remaining.done

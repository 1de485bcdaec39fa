"""What is left to write of a block: disjoint boxes, minus each box written.

A rank's block starts as one box still to write; each write (``dset[box] = ...``) subtracts its
box, so writing the same part twice leaves the rest missing (counting elements would not see
it). The common case, the whole block written at once, needs none of this (the caller drops
the entry), and pieces written in order keep the list short: writing row after row of a block
leaves one box.

:class:`Remaining` keeps a cursor while the pieces come in C order (:func:`c_order_tail` gives
the rest as boxes) and becomes disjoint boxes, each later write subtracted (:func:`subtract`),
once one comes out of order. Close reads it to name the regions never written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .blocks import Block
from .runs import c_order_run


def box_minus(box: Block, inner: Block) -> list[Block]:
    """``box`` without ``inner`` (a box inside it), as at most ``2 * ndim`` disjoint slabs.

    Axis by axis, the slabs before and after ``inner`` are cut off and the rest narrowed to
    ``inner``'s extent along that axis.
    """
    start, count = list(box.start), list(box.count)
    pieces = []
    for axis, (lo, hi) in enumerate(zip(inner.start, inner.stop)):
        if lo > start[axis]:
            before = count.copy()
            before[axis] = lo - start[axis]
            pieces.append(Block(tuple(start), tuple(before)))
        end = start[axis] + count[axis]
        if hi < end:
            after_start, after = start.copy(), count.copy()
            after_start[axis], after[axis] = hi, end - hi
            pieces.append(Block(tuple(after_start), tuple(after)))
        start[axis], count[axis] = lo, hi - lo
    return pieces


def subtract(remaining: Sequence[Block], written: Block) -> list[Block]:
    """The parts of the disjoint boxes ``remaining`` outside ``written`` (disjoint too).

    Costs O(len(remaining) * ndim); an empty ``written`` changes nothing.
    """
    if written.is_empty:
        return list(remaining)
    left: list[Block] = []
    for box in remaining:
        common = box.intersect(written)
        if common is None:
            left.append(box)
        elif common != box:
            left.extend(box_minus(box, common))
    return left


def c_order_tail(block: Block, first: int) -> list[Block]:
    """The elements of ``block`` from the C-order index ``first`` to its end, as at most
    ``ndim`` disjoint boxes: the rest of ``first``'s row, then of each outer axis in turn
    (one box when ``first`` starts a row, as after whole rows written in order)."""
    count = block.count
    if first >= math.prod(count):
        return []
    if not count:
        return [block]  # a 0-d block: its one element
    index, rest = [], first
    for extent in reversed(count):
        index.append(rest % extent)
        rest //= extent
    index.reverse()
    n = len(count)
    m = n - 1  # the rows from ``index`` on start where axes m+1.. are all at 0: one box
    while m > 0 and index[m] == 0:
        m -= 1
    boxes = []
    for axis in range(m, -1, -1):
        lo = index[axis] + (0 if axis == m else 1)
        if lo >= count[axis]:
            continue
        start = tuple(index[:axis]) + (lo,) + (0,) * (n - axis - 1)
        size = (1,) * axis + (count[axis] - lo,) + tuple(count[axis + 1 :])
        boxes.append(Block(tuple(s + o for s, o in zip(start, block.start)), size))
    return boxes


class Remaining:
    """What is left to write of one block. While the pieces come in C order, each starting
    where the last ended (a block written row after row, IOR's transfers), it is the block's
    tail from a cursor: one comparison per write. The first piece out of that order turns it
    into disjoint boxes, each later write subtracted (:func:`subtract`)."""

    __slots__ = ("block", "cursor", "_boxes")

    def __init__(self, block: Block) -> None:
        self.block = block
        self.cursor = 0  # elements written in order from the block's start
        self._boxes: list[Block] | None = None  # once a piece came out of order

    def take(self, box: Block) -> None:
        """``box`` (inside the block) was written."""
        if box.is_empty:
            return
        if self._boxes is None:
            run = c_order_run(self.block, box)
            if run is not None and run[0] <= self.cursor:
                self.cursor = max(self.cursor, run[0] + run[1])
                return
            self._boxes = c_order_tail(self.block, self.cursor)
        self._boxes = subtract(self._boxes, box)

    @property
    def boxes(self) -> list[Block]:
        """The disjoint boxes still to write."""
        if self._boxes is None:
            return c_order_tail(self.block, self.cursor)
        return list(self._boxes)

    @property
    def done(self) -> bool:
        if self._boxes is None:
            return self.cursor >= self.block.size
        return not self._boxes


def describe(boxes: Sequence[Block], limit: int = 3) -> str:
    """``[0:2, 0:4], [4:6, 0:4] and 3 more box(es)``: the first ``limit`` boxes, for messages."""
    shown = ", ".join(str(b) for b in boxes[:limit])
    more = len(boxes) - limit
    return shown + (f" and {more} more box(es)" if more > 0 else "")

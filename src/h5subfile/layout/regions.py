"""What is left to write of a block: disjoint boxes, minus each box written.

A rank's block starts as one box still to write; each write (``dset[box] = ...``) subtracts its
box, so writing the same part twice leaves the rest missing (counting elements would not see
it). The common case, the whole block written at once, needs none of this (the caller drops
the entry), and pieces written in order keep the list short: writing row after row of a block
leaves one box.
"""

from __future__ import annotations

from collections.abc import Sequence

from .blocks import Block


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


def describe(boxes: Sequence[Block], limit: int = 3) -> str:
    """``[0:2, 0:4], [4:6, 0:4] and 3 more box(es)``: the first ``limit`` boxes, for messages."""
    shown = ", ".join(str(b) for b in boxes[:limit])
    more = len(boxes) - limit
    return shown + (f" and {more} more box(es)" if more > 0 else "")

"""Blocks: the N-D region (start, count) of a dataset that one rank writes.

A block is given as slices (``block=``) or as a corner and a count (``start=``, ``count=``):
:func:`parse_block`. :func:`check_blocks` refuses blocks outside the shape or overlapping
(:func:`first_overlap` names two); :func:`prefix_blocks` places each rank's length along axis 0
at the exclusive prefix sum (``write_datasets`` without ``start``), :func:`corner_block` a local
array at a corner.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BlockError

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Block:
    """An N-D box ``[start, start + count)``; an empty block has a zero in ``count``."""

    start: Shape
    count: Shape

    @property
    def stop(self) -> Shape:
        return tuple(s + c for s, c in zip(self.start, self.count))

    @property
    def size(self) -> int:
        return math.prod(self.count)

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(s, s + c) for s, c in zip(self.start, self.count))

    def relative_to(self, origin: Sequence[int]) -> Block:
        """This box with its corner measured from ``origin`` (e.g. an extent's corner)."""
        return Block(tuple(s - o for s, o in zip(self.start, origin)), self.count)

    def contains(self, other: Block) -> bool:
        """Whether the box ``other`` lies inside this one (an empty box always does)."""
        if 0 in other.count:
            return True
        return all(
            lo <= s and s + c <= lo + n
            for lo, n, s, c in zip(self.start, self.count, other.start, other.count)
        )

    def intersect(self, other: Block) -> Block | None:
        """The common box of two blocks, or None when they do not meet."""
        if len(self.start) == 1:  # 1-D (particles, IOR): without the generic tuples
            lo, hi = (
                max(self.start[0], other.start[0]),
                min(self.start[0] + self.count[0], other.start[0] + other.count[0]),
            )
            return Block((lo,), (hi - lo,)) if lo < hi else None
        start = tuple(max(a, b) for a, b in zip(self.start, other.start))
        stop = tuple(min(a, b) for a, b in zip(self.stop, other.stop))
        if any(lo >= hi for lo, hi in zip(start, stop)):
            return None
        return Block(start, tuple(hi - lo for lo, hi in zip(start, stop)))

    def __str__(self) -> str:
        return "[" + ", ".join(f"{s}:{s + c}" for s, c in zip(self.start, self.count)) + "]"


def empty_block(ndim: int) -> Block:
    return Block((0,) * ndim, (0,) * ndim)


def _as_int(value: Any, what: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BlockError(f"{what} must be an integer, got {value!r}") from None
    if number != value:
        raise BlockError(f"{what} must be an integer, got {value!r}")
    return number


def parse_block(
    shape: Shape,
    block: Sequence[slice] | None = None,
    start: Sequence[int] | None = None,
    count: Sequence[int] | None = None,
) -> Block:
    """Turn ``block=(slice, ...)`` or ``start=, count=`` into a :class:`Block` of ``shape``.

    No block at all means this rank writes nothing (an empty block). Bounds are not checked
    here (see :func:`check_blocks`), only the form.
    """
    ndim = len(shape)
    if block is not None and (start is not None or count is not None):
        raise BlockError("give either block=(slices) or start= and count=, not both")
    if block is None and start is None and count is None:
        return empty_block(ndim)
    if block is not None:
        if isinstance(block, slice):
            block = (block,)
        block = tuple(block)
        if len(block) != ndim:
            raise BlockError(f"block has {len(block)} slices but the dataset has {ndim} dimensions")
        starts, counts = [], []
        for axis, item in enumerate(block):
            if not isinstance(item, slice):
                raise BlockError(f"block axis {axis}: expected a slice, got {item!r}")
            if item.step not in (None, 1):
                raise BlockError(f"block axis {axis}: steps are not supported ({item})")
            lo = 0 if item.start is None else _as_int(item.start, f"block axis {axis} start")
            hi = shape[axis] if item.stop is None else _as_int(item.stop, f"block axis {axis} stop")
            if lo < 0 or hi < lo:
                raise BlockError(f"block axis {axis}: {lo}:{hi} is not a valid region")
            starts.append(lo)
            counts.append(hi - lo)
        return Block(tuple(starts), tuple(counts))
    if start is None or count is None:
        raise BlockError("start= and count= go together")
    start_t = tuple(_as_int(v, "start") for v in start)
    count_t = tuple(_as_int(v, "count") for v in count)
    if len(start_t) != ndim or len(count_t) != ndim:
        raise BlockError(
            f"start has {len(start_t)} and count {len(count_t)} entries; the dataset has {ndim} "
            "dimensions"
        )
    if any(v < 0 for v in start_t + count_t):
        raise BlockError(f"start {start_t} and count {count_t} must not be negative")
    return Block(start_t, count_t)


def check_blocks(name: str, shape: Shape, blocks: Sequence[Block]) -> None:
    """Raise :class:`BlockError` if a block leaves ``shape`` or two non-empty blocks overlap.

    ``blocks[r]`` is rank r's block. The message names the ranks and their regions.
    """
    for rank, block in enumerate(blocks):
        if block.is_empty:
            continue
        if len(block.start) != len(shape) or any(hi > n for hi, n in zip(block.stop, shape)):
            raise BlockError(
                f"rank {rank} block {block} lies outside the shape {shape} of dataset {name}"
            )
    found = first_overlap(blocks)
    if found is not None:
        first, second = found
        raise BlockError(
            f"rank {second} region {blocks[second]} overlaps rank {first} region "
            f"{blocks[first]} in dataset {name}"
        )


def first_overlap(blocks: Sequence[Block]) -> tuple[int, int] | None:
    """Indices ``(i, j)``, ``i < j``, of two non-empty blocks that share an element, or None.

    A sweep along the axis where the blocks' starts differ most, so few blocks stay active.
    """
    ranked = [(index, b) for index, b in enumerate(blocks) if not b.is_empty]
    if len(ranked) < 2:
        return None
    ndim = len(ranked[0][1].start)
    axis = max(range(ndim), key=lambda a: len({b.start[a] for _, b in ranked}), default=0)
    ranked.sort(key=lambda rb: rb[1].start[axis] if ndim else 0)
    active: list[tuple[int, Block]] = []
    for index, block in ranked:
        if ndim:
            active = [(i, b) for i, b in active if b.stop[axis] > block.start[axis]]
        for other, seen in active:
            if ndim == 0 or block.intersect(seen) is not None:
                first, second = sorted((index, other))
                return first, second
        active.append((index, block))
    return None


def prefix_blocks(lengths: Sequence[int], trailing: Shape) -> list[Block]:
    """Rank r's block along axis 0 at the exclusive prefix sum of ``lengths`` (the VPIC pattern)."""
    blocks = []
    offset = 0
    for length in lengths:
        blocks.append(Block((offset,) + (0,) * len(trailing), (length,) + tuple(trailing)))
        offset += length
    return blocks


def corner_block(start: Sequence[int], local_shape: Shape) -> Block:
    """The block of a local array of ``local_shape`` placed with its corner at ``start``."""
    start_t = tuple(_as_int(v, "start") for v in start)
    if len(start_t) != len(local_shape):
        raise BlockError(
            f"start {start_t} has {len(start_t)} entries but the data has {len(local_shape)} "
            "dimensions"
        )
    if any(v < 0 for v in start_t):
        raise BlockError(f"start {start_t} must not be negative")
    return Block(start_t, tuple(local_shape))

"""Extents: the source datasets that hold a group's blocks in its subfile.

A group's blocks that are consecutive along axis 0 and cover the same region on the other axes
are coalesced into one extent (one source dataset, one VDS mapping). In C order each block is then
one contiguous byte range of its extent, so every rank writes its block with one positioned write.
For the VPIC pattern (1-D, prefix-sum blocks, contiguous groups) each group gets one extent.

:func:`plan_extent_map` finds every group's extents and each block's place in its extent with
numpy, O(P log P) in the ranks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .blockmap import BlockMap
from .blocks import Block, Shape
from .grouping import Grouping


@dataclass(frozen=True)
class Extent:
    """One source dataset: the box ``[start, start + shape)`` stored in subfile ``group``.

    ``index`` numbers the extents of one dataset within one group (0, 1, ...).
    """

    group: int
    index: int
    start: Shape
    shape: Shape
    ranks: tuple[int, ...]

    @property
    def block(self) -> Block:
        return Block(self.start, self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Placement:
    """Where a rank's block lives: extent number and element offset of its first element."""

    extent: int
    element_offset: int


@dataclass(frozen=True, eq=False)
class ExtentPlan:
    """A dataset's extents (by group, then position) and, per rank, the extent holding its
    block (``extent_of_rank``, -1 when it writes nothing) and the element offset of its first
    element there (``element_offset``)."""

    extents: list[Extent]
    extent_of_rank: np.ndarray
    element_offset: np.ndarray


def plan_extent_map(blocks: BlockMap, grouping: Grouping) -> ExtentPlan:
    """Coalesce each group's blocks into extents, with numpy (O(P log P), a few arrays).

    In each group the non-empty blocks are ordered by (other axes' start, their count, start
    along axis 0, rank); neighbours along axis 0 with the same other axes merge into a run; a
    group's runs are ordered by their first block's start. Every rank's block is then one
    contiguous range of its extent in C order.
    """
    ndim = blocks.ndim
    ranks = np.flatnonzero(blocks.nonempty())
    if len(ranks) == 0:
        return ExtentPlan([], np.full(blocks.size, -1, dtype=np.int64), np.zeros(blocks.size, int))
    if ndim < 1:
        raise ValueError("extents are planned for datasets of one or more dimensions")
    group = grouping.rank_groups[ranks]
    starts, counts = blocks.starts[ranks], blocks.counts[ranks]
    keys = [ranks, starts[:, 0]]
    keys += [counts[:, a] for a in range(ndim - 1, 0, -1)]
    keys += [starts[:, a] for a in range(ndim - 1, 0, -1)]
    order = np.lexsort([*keys, group])
    ranks, group, starts, counts = ranks[order], group[order], starts[order], counts[order]
    new = np.ones(len(ranks), dtype=bool)
    new[1:] = (
        (group[1:] != group[:-1])
        | (starts[1:, 1:] != starts[:-1, 1:]).any(axis=1)
        | (counts[1:, 1:] != counts[:-1, 1:]).any(axis=1)
        | (starts[:-1, 0] + counts[:-1, 0] != starts[1:, 0])
    )
    first = np.flatnonzero(new)  # each run's first block, runs in merge order
    bounds = np.append(first, len(ranks)).tolist()
    lengths = np.add.reduceat(counts[:, 0], first) if len(first) else first
    run_of_block = np.cumsum(new) - 1
    placed = np.lexsort([*(starts[first, a] for a in range(ndim - 1, -1, -1)), group[first]])
    number = np.empty(len(first), dtype=np.int64)  # each run's extent number
    number[placed] = np.arange(len(first))
    extent_of_rank = np.full(blocks.size, -1, dtype=np.int64)
    extent_of_rank[ranks] = number[run_of_block]
    row = np.prod(counts[:, 1:], axis=1)
    element_offset = np.zeros(blocks.size, dtype=np.int64)
    element_offset[ranks] = (starts[:, 0] - starts[first[run_of_block], 0]) * row
    extents: list[Extent] = []
    previous, index = -1, -1
    members = ranks.tolist()
    heads = first[placed]
    for run, g, start, length, trailing in zip(
        placed.tolist(),
        group[heads].tolist(),
        starts[heads].tolist(),
        lengths[placed].tolist(),
        counts[heads, 1:].tolist(),
    ):
        index = index + 1 if g == previous else 0
        previous = g
        run_ranks = tuple(members[bounds[run] : bounds[run + 1]])
        extents.append(Extent(g, index, tuple(start), (length, *trailing), run_ranks))
    return ExtentPlan(extents, extent_of_rank, element_offset)


def plan_extents(
    blocks: Sequence[Block], grouping: Grouping
) -> tuple[list[Extent], list[Placement | None]]:
    """:func:`plan_extent_map` for a list of blocks (``blocks[r]`` is rank r's): the extents
    and each rank's placement (None for an empty block)."""
    ndim = len(next((b.start for b in blocks if not b.is_empty), blocks[0].start if blocks else ()))
    planned = plan_extent_map(BlockMap.from_blocks(blocks, ndim), grouping)
    placements: list[Placement | None] = [
        None if extent < 0 else Placement(extent, offset)
        for extent, offset in zip(planned.extent_of_rank.tolist(), planned.element_offset.tolist())
    ]
    return planned.extents, placements

"""Extents: the source datasets that hold a group's blocks in its subfile.

A group's blocks that are consecutive along axis 0 and cover the same region on the other axes
are coalesced into one extent (one source dataset, one VDS mapping). In C order each block is then
one contiguous byte range of its extent, so every rank writes its block with one positioned write.
For the VPIC pattern (1-D, prefix-sum blocks, contiguous groups) each group gets one extent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


def _mergeable(previous: Block, block: Block) -> bool:
    return (
        previous.start[1:] == block.start[1:]
        and previous.count[1:] == block.count[1:]
        and previous.stop[0] == block.start[0]
    )


def plan_extents(
    blocks: Sequence[Block], grouping: Grouping
) -> tuple[list[Extent], list[Placement | None]]:
    """Coalesce each group's blocks into extents; return the extents and each rank's placement.

    ``blocks[r]`` is rank r's block; empty blocks get no placement (None). Extents are ordered by
    group, then by position.
    """
    extents: list[Extent] = []
    placements: list[Placement | None] = [None] * len(blocks)
    for group, members in enumerate(grouping.members):
        ranked = [(blocks[r], r) for r in members if not blocks[r].is_empty]
        ranked.sort(key=lambda br: (br[0].start[1:], br[0].count[1:], br[0].start[0]))
        runs: list[list[tuple[Block, int]]] = []
        for block, rank in ranked:
            if runs and _mergeable(runs[-1][-1][0], block):
                runs[-1].append((block, rank))
            else:
                runs.append([(block, rank)])
        runs.sort(key=lambda run: run[0][0].start)
        for index, run in enumerate(runs):
            first = run[0][0]
            length = sum(b.count[0] for b, _ in run)
            extent = Extent(
                group, index, first.start, (length,) + first.count[1:], tuple(r for _, r in run)
            )
            row = math.prod(first.count[1:])
            for block, rank in run:
                offset = (block.start[0] - first.start[0]) * row
                placements[rank] = Placement(len(extents), offset)
            extents.append(extent)
    return extents, placements

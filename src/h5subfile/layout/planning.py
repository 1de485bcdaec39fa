"""Rank 0's plan of one dataset from every rank's block (pure): where each block is stored.

:func:`place_dataset` is the step of dataset creation that grows with the rank count: it checks
the blocks against the shape and each other, and coalesces each group's blocks into extents
(one source dataset and one VDS mapping each), all with numpy on a :class:`~.blockmap.BlockMap`.
``engine/create.py`` calls it for every dataset a creation call names; the same call plans a
million ranks in ``tests/unit/test_million.py`` and ``benchmarks/plan_sizes.py``.

The datasets of one call whose blocks are alike (a VPIC step's eight: the same lengths per
rank) share one block map, checked and coalesced once (:func:`coalesce`); :func:`vds_sources`
turns the extents into the virtual dataset's mappings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .blockmap import BlockMap, check_block_map
from .blocks import Block
from .chunking import Member
from .extents import plan_extent_map
from .grouping import Grouping
from .names import source_name
from .record import StoredExtent

#: A VDS mapping: the source ``dataset`` in ``file``, mapped whole onto ``[start, start + shape)``.
VdsSource = tuple[str, str, tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, eq=False)
class DatasetPlacement:
    """One dataset placed: its extents (offsets still -1), the group whose leader creates each,
    every rank's block and the extent holding it (``extent_of_rank``, -1: writes nothing)."""

    path: str
    shape: tuple[int, ...]
    in_master: bool
    extents: tuple[StoredExtent, ...]
    groups: tuple[int, ...]
    blocks: BlockMap
    extent_of_rank: np.ndarray

    def block(self, rank: int) -> Block:
        return self.blocks.block(rank)

    def extent_of(self, rank: int) -> int | None:
        extent = int(self.extent_of_rank[rank])
        return None if extent < 0 else extent

    def members(self, extent: int) -> tuple[Member, ...]:
        """The ranks of an extent and their blocks in extent coordinates."""
        origin = self.extents[extent].start
        return tuple(
            (rank, self.block(rank).relative_to(origin)) for rank in self.extents[extent].ranks
        )


@dataclass(frozen=True, eq=False)
class Coalesced:
    """What the blocks of a dataset give, whatever its name and type: whether it is stored
    in the master, its extents' boxes, the group and the ranks of each, every rank's extent."""

    in_master: bool
    boxes: tuple[Block, ...]
    groups: tuple[int, ...]
    ranks: tuple[tuple[int, ...], ...]
    extent_of_rank: np.ndarray


#: Datasets of one creation call whose blocks are one :class:`BlockMap` (a VPIC step: eight
#: datasets of equal lengths) are checked and coalesced once: by (block map, shape), the block
#: map compared by identity (``BlockMap`` has ``eq=False``).
Coalescings = dict[tuple[BlockMap, tuple[int, ...]], Coalesced]


def place_dataset(
    path: str,
    shape: tuple[int, ...],
    blocks: BlockMap,
    grouping: Grouping,
    session_files: Callable[[int], str],
    done: Coalescings | None = None,
) -> DatasetPlacement:
    """Check the blocks of dataset ``path`` and plan its extents.

    A scalar (``shape == ()``) is written by rank 0 into the master; with one group, the
    dataset is one extent in the master (if any rank writes); otherwise each group's blocks
    are coalesced into extents in the group's subfile (``session_files(group)``), named
    ``path``, ``path@1``, ... within the group. Raises ``BlockError`` naming the ranks when a
    block leaves the shape or two overlap. ``done``: the block maps of this call (with the same
    ``grouping``) already checked and coalesced, which this one reuses and adds to.
    """
    key = (blocks, shape)
    coalesced = None if done is None else done.get(key)
    if coalesced is None:
        coalesced = coalesce(path, shape, blocks, grouping)
        if done is not None:
            done[key] = coalesced
    in_master = coalesced.in_master
    extents: list[StoredExtent] = []
    within: dict[int, int] = {}  # extents of each group so far: the k-th is named path@k
    for box, group, extent_ranks in zip(coalesced.boxes, coalesced.groups, coalesced.ranks):
        k = within[group] = within.get(group, -1) + 1
        file, name = ("", path) if in_master else (session_files(group), source_name(path, k))
        extents.append(StoredExtent(file, name, box.start, box.count, -1, extent_ranks))
    return DatasetPlacement(
        path,
        shape,
        in_master,
        tuple(extents),
        coalesced.groups,
        blocks,
        coalesced.extent_of_rank,
    )


def coalesce(path: str, shape: tuple[int, ...], blocks: BlockMap, grouping: Grouping) -> Coalesced:
    """The checks and the coalescing of :func:`place_dataset` (``path`` only in messages)."""
    scalar = not shape
    if not scalar:
        check_block_map(path, shape, blocks)
    in_master = grouping.ngroups == 1 or scalar
    written = blocks.nonempty()
    ranks: list[tuple[int, ...]]
    if scalar:
        boxes, groups, ranks = [Block((), ())], [grouping.group_of_rank[0]], [(0,)]
        extent_of_rank = np.full(blocks.size, -1, dtype=np.int64)
        extent_of_rank[0] = 0
    elif in_master:
        writers = tuple(np.flatnonzero(written).tolist())
        boxes = [Block((0,) * len(shape), shape)] if writers else []
        groups, ranks = [0] * len(boxes), [writers] * len(boxes)
        extent_of_rank = np.where(written, 0, -1).astype(np.int64)
    else:
        planned = plan_extent_map(blocks, grouping)
        boxes = [Block(e.start, e.shape) for e in planned.extents]
        groups, ranks = [e.group for e in planned.extents], [e.ranks for e in planned.extents]
        extent_of_rank = planned.extent_of_rank
    extent_of_rank.flags.writeable = False  # shared by the datasets of one block map
    return Coalesced(in_master, tuple(boxes), tuple(groups), tuple(ranks), extent_of_rank)


def vds_sources(extents: Sequence[StoredExtent]) -> list[VdsSource]:
    """The VDS mappings of a dataset stored in subfiles: one per extent, its source whole."""
    return [(e.file, e.dataset, e.start, e.shape) for e in extents]

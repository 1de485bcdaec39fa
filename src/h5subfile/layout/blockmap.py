"""Every rank's block of one dataset as two integer arrays (pure).

Rank 0 plans a dataset from every rank's block. Held as :class:`~.blocks.Block` objects that is
a few hundred bytes and several Python objects per rank; at a million ranks (and eight datasets)
that alone is gigabytes and seconds. A :class:`BlockMap` keeps the same blocks as ``starts`` and
``counts`` arrays of shape ``(ranks, ndim)``, and :func:`check_block_map` makes the checks of
:func:`~.blocks.check_blocks` with numpy, falling back to the exact sweep only when the blocks'
projections overlap on every axis (then two blocks may overlap, and its message names them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import BlockError
from .blocks import Block, Shape, first_overlap


@dataclass(frozen=True, eq=False)
class BlockMap:
    """Rank r's block is ``[starts[r], starts[r] + counts[r])`` (int64 arrays, shape (P, ndim))."""

    starts: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_blocks(cls, blocks: Sequence[Block], ndim: int) -> BlockMap:
        """The blocks of ``blocks[r]`` for every rank r, each with ``ndim`` axes."""
        try:
            starts = np.array([b.start for b in blocks], dtype=np.int64).reshape(len(blocks), ndim)
            counts = np.array([b.count for b in blocks], dtype=np.int64).reshape(len(blocks), ndim)
        except OverflowError:
            raise BlockError("a block's start or count is beyond 2**63 - 1") from None
        return cls(starts, counts)

    @classmethod
    def prefix(cls, lengths: Sequence[int] | np.ndarray, trailing: Shape) -> BlockMap:
        """Rank r's block along axis 0 at the exclusive prefix sum of ``lengths`` (VPIC)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        ranks = len(lengths)
        starts = np.zeros((ranks, 1 + len(trailing)), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:, 0])
        counts = np.empty_like(starts)
        counts[:, 0] = lengths
        counts[:, 1:] = np.asarray(trailing, dtype=np.int64)
        return cls(starts, counts)

    @classmethod
    def empty(cls, ranks: int, ndim: int) -> BlockMap:
        """No rank declares a block (a dataset whose layout is learned from the writes)."""
        zeros = np.zeros((ranks, ndim), dtype=np.int64)
        return cls(zeros, zeros)

    @property
    def size(self) -> int:
        """The number of ranks."""
        return int(self.starts.shape[0])

    @property
    def ndim(self) -> int:
        return int(self.starts.shape[1])

    def nonempty(self) -> np.ndarray:
        """Boolean per rank: whether its block holds an element."""
        return ~(self.counts == 0).any(axis=1)

    def block(self, rank: int) -> Block:
        return Block(tuple(self.starts[rank].tolist()), tuple(self.counts[rank].tolist()))

    def blocks(self) -> list[Block]:
        return [
            Block(tuple(s), tuple(c)) for s, c in zip(self.starts.tolist(), self.counts.tolist())
        ]


def check_block_map(name: str, shape: Shape, blocks: BlockMap) -> None:
    """:func:`~.blocks.check_blocks` on a :class:`BlockMap`: the same errors, the same messages
    (the first rank outside ``shape``; the overlapping pair the exact sweep finds)."""
    written = blocks.nonempty()
    if blocks.ndim != len(shape):
        if written.any():
            rank = int(np.argmax(written))
            raise BlockError(
                f"rank {rank} block {blocks.block(rank)} lies outside the shape {shape} of "
                f"dataset {name}"
            )
        return
    try:
        limit = np.array(shape, dtype=np.int64).reshape(1, len(shape))
    except OverflowError:
        limit = np.full((1, len(shape)), np.iinfo(np.int64).max, dtype=np.int64)
    outside = written & (blocks.counts > limit - blocks.starts).any(axis=1)
    if outside.any():
        rank = int(np.argmax(outside))
        raise BlockError(
            f"rank {rank} block {blocks.block(rank)} lies outside the shape {shape} of dataset "
            f"{name}"
        )
    if disjoint_on_some_axis(blocks, written):
        return
    found = first_overlap(blocks.blocks())
    if found is not None:
        first, second = found
        raise BlockError(
            f"rank {second} region {blocks.block(second)} overlaps rank {first} region "
            f"{blocks.block(first)} in dataset {name}"
        )


def disjoint_on_some_axis(blocks: BlockMap, written: np.ndarray | None = None) -> bool:
    """Whether, along some axis, no two non-empty blocks' intervals meet (then no two blocks
    share an element: boxes that do meet on every axis). ``written``: the blocks to look at
    (default: every non-empty one)."""
    ranks = np.flatnonzero(blocks.nonempty() if written is None else written)
    if len(ranks) < 2:
        return True
    for axis in range(blocks.ndim):
        lo = blocks.starts[ranks, axis]
        order = np.argsort(lo, kind="stable")
        lo = lo[order]
        hi = lo + blocks.counts[ranks, axis][order]  # inside the shape: no overflow
        if (lo[1:] >= np.maximum.accumulate(hi)[:-1]).all():
            return True
    return False

"""Chunk shapes and who compresses which chunk (pure).

Each extent (one source dataset in a subfile, or the whole dataset in a single file) has its own
chunk grid, starting at its origin. A chunk is compressed whole by one rank, its *owner*: the
lowest rank whose block intersects it. Other ranks whose blocks intersect the chunk send their
parts to the owner first. When the plan picks the chunk shape it prefers one that divides the
ranks' block offsets, so that no chunk straddles two blocks and nothing moves
(``ChunkChoice.aligned``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import PlanError
from .blocks import Block

#: A rank's block inside an extent, in extent coordinates.
Member = tuple[int, Block]


@dataclass(frozen=True)
class ChunkChoice:
    """A dataset's chunk shape and whether its chunks stay inside the ranks' blocks."""

    chunks: tuple[int, ...]
    aligned: bool
    picked: bool  # chosen by the plan (chunks=True, or compression without chunks)

    def describe(self) -> str:
        how = "picked by the plan" if self.picked else "given"
        where = (
            "aligned to rank blocks"
            if self.aligned
            else "straddling rank blocks (assembled by exchange before compressing)"
        )
        return f"chunks {self.chunks} ({how}, {where})"


def _largest_divisor_at_most(number: int, limit: int) -> int:
    best = 1
    for d in range(1, math.isqrt(number) + 1):
        if number % d == 0:
            for candidate in (d, number // d):
                if best < candidate <= limit:
                    best = candidate
    return best


def _target_shape(shape: Sequence[int], itemsize: int, target: int) -> list[int]:
    """About ``target`` bytes: whole rows (axes 1..) when a row fits, rows along axis 0."""
    dims = [max(n, 1) for n in shape]
    inner = dims[1:]
    while inner and math.prod(inner) * itemsize > target and max(inner) > 1:
        axis = inner.index(max(inner))
        inner[axis] = (inner[axis] + 1) // 2
    row_bytes = max(math.prod(inner) * itemsize, 1)
    return [max(1, min(target // row_bytes, dims[0]))] + inner


def chunks_aligned(members: Sequence[Sequence[Member]], chunks: Sequence[int]) -> bool:
    """True if every block starts on a chunk boundary of its extent (no chunk straddles)."""
    return all(
        start % c == 0
        for extent in members
        for _, block in extent
        for start, c in zip(block.start, chunks)
    )


def choose_chunks(
    shape: tuple[int, ...],
    itemsize: int,
    members: Sequence[Sequence[Member]],
    requested: bool | Sequence[int],
    target_bytes: int,
) -> ChunkChoice:
    """The chunk shape of a dataset of ``shape`` whose extents hold ``members``' blocks.

    ``requested`` True: the plan picks about ``target_bytes`` per chunk, along each axis the
    largest length within 4x of the target that divides the blocks' offsets (so chunks stay
    inside blocks), else the target itself. Or an explicit shape, checked like h5py does.
    """
    ndim = len(shape)
    if requested is True:
        chunks = _target_shape(shape, itemsize, target_bytes)
        for axis in range(ndim):
            starts = [b.start[axis] for extent in members for _, b in extent if b.start[axis]]
            if starts:
                fitting = _largest_divisor_at_most(math.gcd(*starts), chunks[axis])
                if fitting * 4 >= chunks[axis]:
                    chunks[axis] = fitting
        picked = tuple(chunks)
        return ChunkChoice(picked, chunks_aligned(members, picked), True)
    not_a_shape = f"chunks={requested!r}: expected True or a tuple of positive integers"
    if isinstance(requested, bool):  # False: a flag, not a shape
        raise PlanError(not_a_shape)
    try:
        given = tuple(int(n) for n in requested)
    except (TypeError, ValueError):
        raise PlanError(not_a_shape) from None
    if len(given) != ndim or any(n < 1 for n in given):
        raise PlanError(
            f"chunks={requested!r}: expected {ndim} positive integer(s) for a "
            f"dataset of shape {shape}"
        )
    if any(c > max(n, 1) for c, n in zip(given, shape)):
        raise PlanError(
            f"chunks={given}: a chunk must not be larger than the dataset's shape "
            f"{shape} in any dimension"
        )
    return ChunkChoice(given, chunks_aligned(members, given), False)


def extent_chunks(chunks: Sequence[int], extent_shape: Sequence[int]) -> tuple[int, ...]:
    """The chunk shape of one extent: the dataset's, clipped to the extent (HDF5 requires it)."""
    return tuple(max(1, min(c, n)) for c, n in zip(chunks, extent_shape))


def chunks_of(box: Block, chunks: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """The chunk indices (C order) whose chunks intersect ``box``."""
    if box.is_empty:
        return iter(())
    axes = [range(s // c, (s + n - 1) // c + 1) for s, n, c in zip(box.start, box.count, chunks)]
    return itertools.product(*axes)


def chunk_box(index: Sequence[int], chunks: Sequence[int], extent_shape: Sequence[int]) -> Block:
    """The box of chunk ``index`` inside its extent (edge chunks clipped to the extent)."""
    start = tuple(i * c for i, c in zip(index, chunks))
    return Block(start, tuple(min(c, n - s) for s, c, n in zip(start, chunks, extent_shape)))


@dataclass(frozen=True)
class ChunkWork:
    """One rank's share of the chunks of one extent.

    ``owned``: the chunks it compresses, each with the (rank, box) parts other ranks send it.
    ``send``: (owner, chunk index, box) parts of its block that belong to other ranks' chunks.
    Both in chunk order, which the two sides of the exchange share.
    """

    owned: tuple[tuple[tuple[int, ...], tuple[Member, ...]], ...]
    send: tuple[tuple[int, tuple[int, ...], Block], ...]


def chunk_work(
    members: Sequence[Member], chunks: Sequence[int], extent_shape: Sequence[int], rank: int
) -> ChunkWork:
    """Who compresses what, for ``rank``, in an extent holding ``members``' blocks."""
    mine = [block for r, block in members if r == rank and not block.is_empty]
    if not mine:
        return ChunkWork((), ())
    block = mine[0]
    owned = []
    send = []
    for index in chunks_of(block, chunks):
        box = chunk_box(index, chunks, extent_shape)
        parts = []
        for other, other_block in members:
            common = other_block.intersect(box)
            if common is not None and not common.is_empty:
                parts.append((other, common))
        owner = min(r for r, _ in parts)
        if owner == rank:
            owned.append((index, tuple(p for p in parts if p[0] != rank)))
        else:
            send.append((owner, index, next(c for r, c in parts if r == rank)))
    return ChunkWork(tuple(owned), tuple(send))

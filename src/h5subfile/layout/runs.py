"""Byte runs: how a box of a dataset maps onto contiguous pieces of its storage and of memory.

Both stored extents and numpy buffers are C-ordered boxes; moving a sub-box between them is a
list of contiguous runs whose length is set by the axes where the sub-box spans both outer boxes
fully. :func:`box_runs` is the one mapping every read and write goes through.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .blocks import Block
from .hyperslab import Slab, is_run_of


def contiguous_axis(outer: Sequence[int], count: Sequence[int]) -> int:
    """The first axis of a contiguous run of the sub-box ``count`` inside the box ``outer``.

    A run covers axes ``j..n-1`` (axis j partly, the rest fully); 0 for a 0-d box.
    """
    j = len(count) - 1
    while j > 0 and count[j] == outer[j]:
        j -= 1
    return max(j, 0)


def _strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def _offsets(
    outer: Sequence[int], start: Sequence[int], count: Sequence[int], j: int
) -> np.ndarray:
    strides = _strides(outer)
    offsets = np.array([sum(s * st for s, st in zip(start, strides))], dtype=np.int64)
    for axis in range(j):
        steps = np.arange(count[axis], dtype=np.int64) * strides[axis]
        offsets = (offsets[:, None] + steps[None, :]).ravel()
    return offsets


#: A byte run: (byte offset in the stored extent, byte offset in the memory buffer, length).
ByteRun = tuple[int, int, int]


def box_runs(extent: Block, common: Block, buffer: Block, itemsize: int) -> list[ByteRun]:
    """The byte runs that move the box ``common`` between storage and memory.

    The extent (box ``extent`` of a dataset) is stored in C order; the memory buffer holds
    the box ``buffer`` in C order; ``common`` lies inside both. A write passes the written
    box as both ``common`` and ``buffer``; a read passes the box read as ``buffer`` and its
    intersection with the extent as ``common``.

    Returns ``(extent byte offset, buffer byte offset, length in bytes)`` runs in file
    order, covering every byte of ``common`` exactly once: a single run when ``common`` is
    one contiguous range on both sides (a rank's block in a subfile always is).
    """
    count = common.count
    if count[1:] == extent.count[1:] == buffer.count[1:] and count:  # whole rows: one run
        row = math.prod(count[1:]) * itemsize
        if count[0] == 0 or row == 0:
            return []
        return [
            (
                (common.start[0] - extent.start[0]) * row,
                (common.start[0] - buffer.start[0]) * row,
                count[0] * row,
            )
        ]
    if math.prod(count) == 0:
        return []
    at_file = common.relative_to(extent.start).start
    at_memory = common.relative_to(buffer.start).start
    j = max(contiguous_axis(extent.count, count), contiguous_axis(buffer.count, count))
    if math.prod(count[:j]) == 1:  # one run: the common case, without numpy
        return [
            (
                _linear(extent.count, at_file) * itemsize,
                _linear(buffer.count, at_memory) * itemsize,
                math.prod(count) * itemsize,
            )
        ]
    nbytes = math.prod(count[j:]) * itemsize
    file_runs = _offsets(extent.count, at_file, count, j) * itemsize
    memory_runs = _offsets(buffer.count, at_memory, count, j) * itemsize
    return [(f, m, nbytes) for f, m in zip(file_runs.tolist(), memory_runs.tolist())]


def _linear(outer: Sequence[int], start: Sequence[int]) -> int:
    """The C-order element index of ``start`` in a box of shape ``outer``."""
    return sum(s * st for s, st in zip(start, _strides(outer)))


def c_order_run(outer: Block, box: Block) -> tuple[int, int] | None:
    """The box ``box`` (inside ``outer``) as one run of ``outer``'s elements in C order:
    ``(first element, elements)``, or None when it is not one contiguous run. A rank writing
    its block piece by piece in order (rows after rows, IOR's transfers) writes such runs,
    each starting where the last ended."""
    count = box.count
    if len(count) == 1:
        return box.start[0] - outer.start[0], count[0]
    if not count:
        return (0, 1)
    j = contiguous_axis(outer.count, count)
    if any(c != 1 for c in count[:j]):
        return None
    at = [s - o for s, o in zip(box.start, outer.start)]
    return _linear(outer.count, at), math.prod(count)


def slab_runs(
    slab: Slab, extent: Block, buffer: Block, itemsize: int
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """:func:`box_runs` of every block of ``slab`` at once, when each block is one run in
    the extent and in the buffer and the slab lies inside both: the blocks' byte offsets in
    the extent and in the buffer (in the slab's block order) and their common length; None
    otherwise (the caller goes block by block)."""
    first = Block(slab.start, slab.block)
    if not slab.ndim or not (extent.contains(slab.bounds) and buffer.contains(slab.bounds)):
        return None
    if not is_run_of(first, extent) or not is_run_of(first, buffer):
        return None
    grid = np.indices(slab.count, dtype=np.int64).reshape(slab.ndim, -1).T
    starts = np.asarray(slab.start, dtype=np.int64) + grid * np.asarray(slab.stride, np.int64)

    def offsets(outer: Block) -> np.ndarray:
        steps = np.asarray(_strides(outer.count), dtype=np.int64)
        return (starts - np.asarray(outer.start, dtype=np.int64)) @ steps * itemsize

    return offsets(extent), offsets(buffer), math.prod(slab.block) * itemsize


#: At most this many runs of elements are listed to prove slabs apart (past it, the caller
#: compares them pairwise).
LISTED_RUNS = 1 << 22


def listed_apart(slabs: Sequence[Slab]) -> bool:
    """Whether ``slabs`` are proven to share no element by listing the runs of elements they
    hold, in C order of their common bounds, and finding no two that overlap: one sort,
    whatever their shapes (thousands of small pieces of a rank's index-list writes compare
    in milliseconds). False when some overlap, or when listing would take more than
    :data:`LISTED_RUNS` runs: the caller then compares them pairwise.

    Slabs of one run each (every rank's slab of a dataset, most often) are listed without
    numpy: a model's close checks a thousand datasets of two pieces each."""
    found = [slab for slab in slabs if slab.size]
    if len(found) < 2:
        return True
    ndim = found[0].ndim
    if not ndim:
        return False
    bounds = [slab.bounds for slab in found]
    lows = tuple(min(b.start[axis] for b in bounds) for axis in range(ndim))
    highs = tuple(max(b.stop[axis] for b in bounds) for axis in range(ndim))
    outer = Block(lows, tuple(h - lo for h, lo in zip(highs, lows)))
    single: list[tuple[int, int]] = []  # (first element, end) of the slabs of one run
    firsts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    budget = LISTED_RUNS
    for slab in found:
        j = contiguous_axis(outer.count, slab.block)
        runs = slab.blocks_count * math.prod(slab.block[:j])
        budget -= runs
        if budget < 0:
            return False
        length = math.prod(slab.block[j:])
        at = [s - o for s, o in zip(slab.start, outer.start)]
        if runs == 1:
            offset = _linear(outer.count, at)
            single.append((offset, offset + length))
            continue
        grid = np.indices(slab.count, dtype=np.int64).reshape(slab.ndim, -1).T
        steps = np.asarray(_strides(outer.count), dtype=np.int64)
        corners = (grid * np.asarray(slab.stride, dtype=np.int64) + np.asarray(at)) @ steps
        inner = _offsets(outer.count, (0,) * slab.ndim, slab.block, j)
        every = (corners[:, None] + inner[None, :]).ravel()
        firsts.append(every)
        lengths.append(np.full(len(every), length, dtype=np.int64))
    if not firsts:
        single.sort()
        return all(end <= start for (_, end), (start, _) in zip(single, single[1:]))
    firsts.append(np.asarray([start for start, _ in single], dtype=np.int64))
    lengths.append(np.asarray([end - start for start, end in single], dtype=np.int64))
    starts = np.concatenate(firsts)
    ends = starts + np.concatenate(lengths)
    order = np.argsort(starts, kind="stable")
    return bool(np.all(starts[order][1:] >= ends[order][:-1]))

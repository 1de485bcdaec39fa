"""Consolidation of a learned layout at close (pure): which segments are worth rewriting as
one contiguous strip per subfile, and how their elements are shared out.

Ranks that interleave their writes finely (round-robin rows, ``d[rank::size]``, index lists
or masks) leave each subfile's source holding short runs of the dataset; a reader, HDF5's
virtual-dataset code or h5subfile's, then pays per run. At close, such a segment is
rewritten: its elements, in C order, are cut into one *share* per rank, the ranks of each
group next to each other, and every rank writes its share into its group's source at the
share's natural offsets. Each subfile then holds one strip of the segment, mapped as one box
(engine/consolidate.py moves the bytes).

- :func:`worth_consolidating`: whether a segment's pieces would cost a reader many small runs.
- :func:`shares`: each rank's C-order range of a segment.
- :func:`range_boxes`: a C-order range of a box as the few boxes that make it up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .blocks import Block
from .hyperslab import Slab, merged
from .runs import contiguous_axis

#: A segment is rewritten when reading it takes more than this many contiguous runs per
#: source ...
RUNS_PER_SOURCE = 4
#: ... and its runs average fewer bytes than this: past it, HDF5 reads a run at the disk's
#: speed, and moving the bytes would cost the writer more than it saves the readers.
SMALL_RUN = 1 << 20
#: Past this many pieces per source, a segment costly as written is rewritten without
#: counting the runs its mappings would merge into.
MERGED_AT_MOST = 1024
#: No rank's share of a rewritten segment is larger than this: while the bytes move, a rank
#: holds what it wrote there, a copy to send, what it receives and its share (about 4 times
#: this at most), on every rank of a node at once. Larger segments stay as written.
MAX_SHARE = 64 << 20


def source_runs(slab: Slab, extent: Block) -> int:
    """How many contiguous runs of the source (the C-ordered box ``extent``) hold ``slab``."""
    if not slab.size:
        return 0
    j = contiguous_axis(extent.count, slab.block)
    return slab.blocks_count * math.prod(slab.block[:j])


def worth_consolidating(
    sources: Sequence[Sequence[Slab]], extent: Block, itemsize: int, ranks: int
) -> bool:
    """Whether the segment ``extent``, every element of which the pieces in ``sources`` (one
    list per group's source) hold once, costs readers many small runs: more than
    :data:`RUNS_PER_SOURCE` per source, averaging fewer than :data:`SMALL_RUN` bytes, each
    rank's share within :data:`MAX_SHARE`. Counted on the pieces as written first (an upper
    bound), then on the mappings they merge into."""
    nbytes = extent.size * itemsize
    largest = max(hi - lo for lo, hi in shares(extent, ranks)) * itemsize
    if not sources or largest > MAX_SHARE:
        return False

    def costly(runs: int) -> bool:
        return runs > RUNS_PER_SOURCE * len(sources) and nbytes < runs * SMALL_RUN

    if not costly(sum(source_runs(s, extent) for slabs in sources for s in slabs)):
        return False
    if sum(len(slabs) for slabs in sources) > MERGED_AT_MOST * len(sources):
        return True  # so many pieces that merging them would take longer than moving them
    return costly(sum(source_runs(s, extent) for slabs in sources for s in merged(slabs)))


def shares(extent: Block, ranks: int) -> list[tuple[int, int]]:
    """Each of ``ranks`` consecutive C-order ranges of ``extent``'s elements, as even as whole
    rows allow (on the first axis, when there are at least as many rows as ranks: then each
    range is one box), else as even as elements allow."""
    total = extent.size
    rows = extent.count[0] if extent.count else 1
    if rows >= ranks:
        inner = total // rows if rows else 0
        cuts = [(i * rows // ranks) * inner for i in range(ranks + 1)]
    else:
        cuts = [i * total // ranks for i in range(ranks + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def range_boxes(extent: Block, lo: int, hi: int) -> list[Block]:
    """The elements ``lo`` to ``hi`` (excluded) of ``extent`` in C order, as boxes in that
    order: a partial row, whole rows, a partial row (recursively on the inner axes)."""
    if lo >= hi:
        return []
    if len(extent.count) <= 1:
        first = extent.start[0] if extent.count else 0
        return [Block((first + lo,), (hi - lo,))] if extent.count else [extent]
    inner_box = Block(extent.start[1:], extent.count[1:])
    inner = inner_box.size
    row0, col0 = divmod(lo, inner)
    row1, col1 = divmod(hi, inner)

    def on_row(row: int, a: int, b: int) -> list[Block]:
        return [
            Block((extent.start[0] + row,) + box.start, (1,) + box.count)
            for box in range_boxes(inner_box, a, b)
        ]

    if row0 == row1:
        return on_row(row0, col0, col1)
    boxes = []
    if col0:
        boxes.extend(on_row(row0, col0, inner))
        row0 += 1
    if row1 > row0:
        boxes.append(
            Block((extent.start[0] + row0,) + inner_box.start, (row1 - row0,) + inner_box.count)
        )
    if col1:
        boxes.extend(on_row(row1, 0, col1))
    return boxes


def split_runs(
    starts: np.ndarray, lengths: np.ndarray, cuts: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of elements (``starts``, ``lengths``: int64, disjoint) cut where they cross one of
    ``cuts`` (the shares' bounds, increasing, from :func:`shares`). Returns, for every part:
    the share it falls in, its start, its length, and its offset from its run's start."""
    bounds = np.asarray(cuts, dtype=np.int64)
    first = np.searchsorted(bounds, starts, side="right") - 1
    last = np.searchsorted(bounds, starts + lengths - 1, side="right") - 1
    whole = first == last
    share = [first[whole]]
    begin, size, within = [starts[whole]], [lengths[whole]], [np.zeros(int(whole.sum()), np.int64)]
    for i in np.flatnonzero(~whole).tolist():  # a run across shares (a few: long runs only)
        a, end = int(starts[i]), int(starts[i] + lengths[i])
        for s in range(int(first[i]), int(last[i]) + 1):
            lo, hi = max(a, int(bounds[s])), min(end, int(bounds[s + 1]))
            share.append(np.array([s]))
            begin.append(np.array([lo]))
            size.append(np.array([hi - lo]))
            within.append(np.array([lo - a]))
    return (
        np.concatenate(share).astype(np.int64),
        np.concatenate(begin).astype(np.int64),
        np.concatenate(size).astype(np.int64),
        np.concatenate(within).astype(np.int64),
    )


def run_indices(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every element of the runs (``starts``, ``lengths``), in order, as one index array."""
    if not len(lengths):
        return np.empty(0, dtype=np.int64)
    total = int(lengths.sum())
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(total, dtype=np.int64)

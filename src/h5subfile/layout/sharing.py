"""What a reading rank is sent: the catalogue without its large layouts, and the extents its
own selection touches.

Rank 0 scans the master once. It broadcasts every group and dataset, but a dataset's layout
only when it has at most ``BROADCAST_EXTENTS`` extents, and the subfiles' identities only for
the layouts it broadcasts: the catalogue every rank receives stays the same size whatever the
number of ranks that wrote the file. A collective read then sends each rank the extents its
selection touches (:func:`touched_layout`) with the identities of their subfiles
(:func:`identities_of`): no rank receives more than its own share plus a constant.

The limit is :data:`BROADCAST_EXTENTS` (256), or ``H5SUBFILE_BROADCAST_EXTENTS``;
:class:`ExtentIndex` finds the extents a box touches in O(log E) (extents sorted along the first
axis).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Iterable, Sequence

import numpy as np

from .blocks import Block
from .record import DatasetLayout, FileRecord, Session, StoredExtent

#: Layouts with more extents than this are not broadcast at open (a file per process of more
#: ranks than this); ``H5SUBFILE_BROADCAST_EXTENTS`` changes it (read on rank 0 only).
BROADCAST_EXTENTS = 256


def broadcast_limit() -> int:
    """``BROADCAST_EXTENTS``, or ``H5SUBFILE_BROADCAST_EXTENTS`` when set (0: send none)."""
    text = os.environ.get("H5SUBFILE_BROADCAST_EXTENTS", "").strip()
    return int(text) if text.isdigit() else BROADCAST_EXTENTS


class ExtentIndex:
    """The extents of one layout sorted along the first axis, to find those a box touches in
    O(log E + hits) instead of testing all E (rank 0 answers every reader in O(P log P))."""

    def __init__(self, extents: Sequence[StoredExtent]):
        order = sorted(range(len(extents)), key=lambda i: extents[i].start[:1])
        self.order = order
        self.extents = [extents[i] for i in order]
        self.starts = [e.start[0] if e.start else 0 for e in self.extents]
        stops = np.array(
            [(e.start[0] + e.shape[0]) if e.start else 1 for e in self.extents], dtype=np.int64
        )
        #: the largest end along the first axis of every extent up to each one (non-decreasing)
        self.reach = np.maximum.accumulate(stops).tolist() if len(stops) else []

    def touching(self, box: Block) -> list[int]:
        """Indices (into the layout's extents) of the extents sharing a point with ``box``."""
        if box.is_empty:
            return []
        if not box.start:  # a scalar: every extent (there is at most one)
            return list(self.order)
        first = bisect.bisect_right(self.reach, box.start[0])
        last = bisect.bisect_left(self.starts, box.start[0] + box.count[0])
        return [
            self.order[i]
            for i in range(first, last)
            if box.intersect(self.extents[i].block) is not None
        ]


def touched_layout(
    layout: DatasetLayout, boxes: Iterable[Block], index: ExtentIndex | None = None
) -> DatasetLayout:
    """``layout`` with only the extents that ``boxes`` touch (in their recorded order)."""
    index = ExtentIndex(layout.extents) if index is None else index
    keep = sorted({i for box in boxes for i in index.touching(box)})
    return dataclasses.replace(layout, extents=tuple(layout.extents[i] for i in keep))


def identities_of(record: FileRecord, files: Iterable[str]) -> FileRecord:
    """``record`` with each session's subfile list and identities cut down to ``files``."""
    return Identities(record).of(files)


class Identities:
    """A record's subfile identities looked up by name: built once (O(subfiles)), then each
    :meth:`of` costs O(files asked for x sessions), so that rank 0 answering every reader of a
    collective read does O(P) work in all, not O(P) per reader."""

    def __init__(self, record: FileRecord):
        self.record = record
        self.listed = [set(s.subfiles) for s in record.sessions]

    def of(self, files: Iterable[str]) -> FileRecord:
        wanted = sorted(set(files))
        return FileRecord(
            [
                dataclasses.replace(
                    s,
                    subfiles=[f for f in wanted if f in listed],
                    subfile_info={f: s.subfile_info[f] for f in wanted if f in s.subfile_info},
                )
                for s, listed in zip(self.record.sessions, self.listed)
            ],
            self.record.format,
        )


def listed_subfiles(sessions: Sequence[Session]) -> int:
    """How many subfile names and identities ``sessions`` list (to tell whether a cut record
    left any out)."""
    return sum(len(s.subfiles) + len(s.subfile_info) for s in sessions)

"""The group leader's side of a subfile: HDF5 creates the datasets, ranks write the bytes."""

from __future__ import annotations

import os

from .h5 import META_BLOCK_SIZE, Groups, SourceFile, create_file
from .posix import fsync_path


class SubfileWriter(SourceFile):
    """A subfile of one write session, open on its group's leader.

    The leader creates early-allocated, unfilled datasets and hands their byte offsets to the
    group's ranks, which write their blocks there with positioned writes.
    """

    def __init__(self, path: str, alignment: int | None = None):
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.h5 = create_file(path, alignment, META_BLOCK_SIZE)
        self.groups = Groups(self.h5)
        self.closed = False

    def close(self, fsync: bool = False) -> None:
        if self.closed:
            return
        self.h5.close()
        self.closed = True
        if fsync:
            fsync_path(self.path)

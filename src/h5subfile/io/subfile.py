"""The group leader's side of a subfile: HDF5 creates the datasets, ranks write the bytes.

The leader creates each source dataset early-allocated and unfilled and returns its byte
offset, where every rank of the group then writes its bytes itself (:mod:`.posix`); a chunked
source has no such offset: the leader writes the compressed chunks the ranks send it.
"""

from __future__ import annotations

import os

import numpy as np

from ..layout.integrity import IDENTITY_DATASET, SubfileInfo
from ..profiler.counters import Profile
from .causes import close_hdf5, hdf5_writing, let_go
from .h5 import META_BLOCK_SIZE, SourceFile, create_file
from .objects import Groups
from .posix import fsync_path


class SubfileWriter(SourceFile):
    """A subfile of one write session, open on its group's leader.

    The leader creates early-allocated, unfilled datasets and hands their byte offsets to the
    group's ranks, which write their blocks there with positioned writes. Its first dataset
    is its identity (``layout.integrity``), whose byte offset is kept for the record.
    """

    def __init__(
        self,
        path: str,
        identity: bytes,
        alignment: int | None = None,
        profile: Profile | None = None,
    ):
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.profile = profile
        with hdf5_writing(path, "create"):
            self.h5 = create_file(path, alignment, META_BLOCK_SIZE, profile)
        self.groups = Groups(self.h5)
        self.closed = False
        try:
            with hdf5_writing(path, "write"):
                offset = self.create(IDENTITY_DATASET, (len(identity),), np.dtype("u1"))
                self.h5[IDENTITY_DATASET][...] = np.frombuffer(identity, dtype=np.uint8)
        except BaseException:
            let_go(self.h5)
            raise
        self.identity_offset = offset

    def info(self) -> SubfileInfo:
        """Its size and identity offset, for the record (once closed)."""
        assert self.closed
        return SubfileInfo(os.path.getsize(self.path), self.identity_offset)

    def close(self, fsync: bool = False) -> None:
        if self.closed:
            return
        self.closed = True  # once HDF5 has let go of it, whether its close failed or not
        try:
            self.drop_set_aside()
        finally:
            close_hdf5(self.h5, self.path)
        if fsync:
            fsync_path(self.path, self.profile)

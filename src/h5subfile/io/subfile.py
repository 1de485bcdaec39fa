"""The group leader's side of a subfile: HDF5 creates the datasets, ranks write the bytes."""

from __future__ import annotations

import os

import h5py
import numpy as np

from .h5 import (
    META_BLOCK_SIZE,
    Groups,
    create_chunked_dataset,
    create_early_dataset,
    create_file,
)
from .posix import fsync_path


class SubfileWriter:
    """A subfile of one write session, open on its group's leader.

    The leader creates early-allocated, unfilled datasets and hands their byte offsets to the
    group's ranks, which write their blocks there with positioned writes.
    """

    def __init__(self, path: str, alignment: int | None = None):
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.h5: h5py.File | None = create_file(path, alignment, META_BLOCK_SIZE)
        self.groups = Groups(self.h5)

    def create(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> int:
        """Create source dataset ``name``; return its data's byte offset."""
        assert self.h5 is not None
        return create_early_dataset(self.groups, name, shape, dtype)

    def create_chunked(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        chunks: tuple[int, ...],
        filters: dict,
    ) -> h5py.Dataset:
        """Create chunked source dataset ``name`` (filled later with whole compressed chunks)."""
        assert self.h5 is not None
        return create_chunked_dataset(self.groups, name, shape, dtype, chunks, filters)

    def flush(self) -> None:
        if self.h5 is not None:
            self.h5.flush()

    def close(self, fsync: bool = False) -> None:
        if self.h5 is None:
            return
        self.h5.close()
        self.h5 = None
        if fsync:
            fsync_path(self.path)

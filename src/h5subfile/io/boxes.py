"""Moving boxes of a dataset between numpy buffers and the extents that store them."""

from __future__ import annotations

import time
from collections.abc import Callable

import h5py
import numpy as np

from ..layout.blocks import Block
from ..layout.names import SourcePaths, names_master
from ..layout.record import DatasetLayout, StoredExtent
from ..layout.runs import box_runs
from .filters import load_plugins
from .h5 import open_shared_read
from .posix import FilePool, IOStats, Piece, as_bytes


def box_pieces(data_offset: int, extent: Block, box: Block, data: np.ndarray) -> list[Piece]:
    """The (file offset, bytes) pieces that put ``data`` (C-contiguous, shape ``box.count``)
    into the extent stored at ``data_offset``, straight from the numpy buffer."""
    raw = as_bytes(data)
    return [
        (data_offset + at, raw[taken : taken + nbytes])
        for at, taken, nbytes in box_runs(extent, box, box, data.dtype.itemsize)
    ]


class BoxReader:
    """Reads boxes of datasets: straight from the stored bytes, or through h5py when needed.

    ``master_path`` is the master's final path (relative source paths are resolved from its
    folder); ``master_data_path`` is where the master's own bytes are now (a ``.partial`` file
    while a write session is open).
    """

    def __init__(
        self,
        master_path: str,
        master_data_path: str,
        stats: IOStats,
        transfer_size: int | None = None,
    ):
        self.paths = SourcePaths(master_path, master_data_path)
        self.pool = FilePool(writable=False, stats=stats, transfer_size=transfer_size)
        self._h5: h5py.File | None = None
        self.h5py_opener: Callable[[], h5py.File] = lambda: h5py.File(master_data_path, "r")
        #: h5py files this process has open for writing (a leader's subfile), by path.
        self.writer_files: dict[str, h5py.File] = {}
        self._sources: dict[str, h5py.File] = {}

    def plan(
        self, layout: DatasetLayout, itemsize: int, box: Block, out: memoryview
    ) -> tuple[dict[str, list[Piece]], list[tuple[StoredExtent, Block]], bool]:
        """How to read ``box`` into ``out`` (its C-order bytes): byte pieces per file, the
        chunked extents (read through HDF5), and whether the extents cover the whole box."""
        pieces: dict[str, list[Piece]] = {}
        chunked: list[tuple[StoredExtent, Block]] = []
        covered = 0
        for extent in layout.extents:
            stored = extent.block
            common = box.intersect(stored)
            if common is None:
                continue
            covered += common.size
            if extent.chunks:
                chunked.append((extent, common))
                continue
            into = pieces.setdefault(self.paths.resolve(extent.file), [])
            into.extend(
                (extent.offset + at, out[taken : taken + nbytes])
                for at, taken, nbytes in box_runs(stored, common, box, itemsize)
            )
        return pieces, chunked, covered >= box.size

    def read_direct(
        self, layout: DatasetLayout, dtype: np.dtype, box: Block, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Read ``box`` from the extents of ``layout``; unmapped parts read as zeros (fill).

        ``out`` (C-contiguous, shape ``box.count``, ``dtype``) receives the data without an
        extra allocation.
        """
        if out is None:
            out = np.empty(box.count, dtype=dtype)
        if out.size == 0:
            return out
        pieces, chunked, complete = self.plan(layout, dtype.itemsize, box, as_bytes(out))
        if not complete:
            out.reshape(-1).view(np.uint8).fill(0)  # zero bytes (fill(0) writes "0" into strings)
        for path, file_pieces in pieces.items():
            self.pool.get(path).read_pieces(file_pieces)
        self.read_chunked(chunked, box, out)
        return out

    def read_chunked(
        self, chunked: list[tuple[StoredExtent, Block]], box: Block, out: np.ndarray
    ) -> None:
        """Read the parts of ``box`` held by chunked extents; HDF5 decompresses them here."""
        for extent, common in chunked:
            started = time.perf_counter()
            source = self.source_dataset(extent)
            local = common.relative_to(extent.start)
            within = common.relative_to(box.start)
            source.read_direct(out, source_sel=local.slices, dest_sel=within.slices)
            stats = self.pool.stats  # HDF5 reads and decompresses: counted as reading
            stats.reads += 1
            stats.bytes_read += common.size * out.itemsize
            stats.read_seconds += time.perf_counter() - started

    def source_dataset(self, extent: StoredExtent) -> h5py.Dataset:
        """The HDF5 dataset holding a chunked extent (plugins loaded, so any filter decodes)."""
        load_plugins()
        if names_master(extent.file):
            return self.h5py_dataset(extent.dataset)
        path = self.paths.resolve(extent.file)
        h5 = self.writer_files.get(path) or self._sources.get(path)
        if h5 is None:
            h5 = self._sources[path] = open_shared_read(path)
        return h5[extent.dataset]

    def forget_sources(self) -> None:
        """Drop the h5py handles opened for reading (another process wrote to those files)."""
        sources, self._sources = self._sources, {}
        for h5 in sources.values():
            h5.close()
        if self._h5 is not None and not any(self._h5 is w for w in self.writer_files.values()):
            self._h5.close()
            self._h5 = None

    def h5py_dataset(self, path: str) -> h5py.Dataset:
        if self._h5 is None:
            self._h5 = self.h5py_opener()
        return self._h5[path]

    def read_h5py(self, path: str, dtype: np.dtype, box: Block) -> np.ndarray:
        """Read ``box`` through h5py (chunked, compressed, foreign virtual datasets...)."""
        if any(c == 0 for c in box.count):
            return np.zeros(box.count, dtype=dtype)
        return np.asarray(self.h5py_dataset(path)[box.slices])

    def close(self) -> None:
        self.pool.close_all()
        self.forget_sources()
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None

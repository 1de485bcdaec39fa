"""Moving boxes of a dataset between numpy buffers and the extents that store them."""

from __future__ import annotations

import math
from collections.abc import Callable

import h5py
import numpy as np

from .. import errors
from ..layout.blocks import Block
from ..layout.names import resolve_inside
from ..layout.record import DatasetLayout
from ..layout.runs import paired_runs
from .posix import FilePool, IOStats, RawFile, as_bytes


def _relative(start: tuple[int, ...], origin: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s - o for s, o in zip(start, origin))


def write_box(
    target: RawFile,
    data_offset: int,
    extent: Block,
    block: Block,
    data: np.ndarray,
) -> None:
    """Write ``data`` (C-contiguous, shape ``block.count``) into the extent stored at ``data_offset``.

    A block that is one contiguous range of the extent (always, for subfile extents) is one
    positioned write straight from the numpy buffer.
    """
    itemsize = data.dtype.itemsize
    raw = as_bytes(data)
    if block.count[1:] == extent.count[1:]:  # one contiguous run (always so in subfiles)
        row = math.prod(block.count[1:]) if len(block.count) > 1 else 1
        target.pwrite(raw, data_offset + (block.start[0] - extent.start[0]) * row * itemsize)
        return
    file_runs, data_runs, run = paired_runs(
        block.count, extent.count, _relative(block.start, extent.start), block.count,
        (0,) * len(block.count),
    )
    nbytes = run * itemsize
    for file_at, data_at in zip(file_runs.tolist(), data_runs.tolist()):
        target.pwrite(raw[data_at * itemsize : data_at * itemsize + nbytes],
                      data_offset + file_at * itemsize)


#: Describes why a dataset cannot be read: (error class name, message), raised at read time.
Problem = tuple[str, str]


def raise_problem(problem: Problem) -> None:
    name, message = problem
    cls = getattr(errors, name, errors.CorruptFileError)
    raise cls(message)


class BoxReader:
    """Reads boxes of datasets: straight from the stored bytes, or through h5py when needed.

    ``master_path`` is the master's final path (relative source paths are resolved from its
    folder); ``master_data_path`` is where the master's own bytes are now (a ``.partial`` file
    while a write session is open).
    """

    def __init__(self, master_path: str, master_data_path: str, stats: IOStats):
        self.master_path = master_path
        self.master_data_path = master_data_path
        self.pool = FilePool(writable=False, stats=stats)
        self._resolved: dict[str, str] = {}
        self._h5: h5py.File | None = None
        self.h5py_opener: Callable[[], h5py.File] = lambda: h5py.File(self.master_data_path, "r")

    def _file(self, relpath: str) -> RawFile:
        path = self._resolved.get(relpath)
        if path is None:
            path = (
                self.master_data_path
                if relpath in ("", ".")
                else resolve_inside(self.master_path, relpath)
            )
            self._resolved[relpath] = path
        return self.pool.get(path)

    def read_direct(
        self, layout: DatasetLayout, dtype: np.dtype, box: Block, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Read ``box`` from the extents of ``layout``; unmapped parts read as zeros (fill).

        ``out`` (C-contiguous, shape ``box.count``, ``dtype``) receives the data without an
        extra allocation.
        """
        commons = [(e, box.intersect(e.block)) for e in layout.extents]
        commons = [(e, c) for e, c in commons if c is not None]
        if out is None:
            out = np.zeros(box.count, dtype=dtype)
        elif sum(c.size for _, c in commons) < out.size:
            out.fill(0)
        if out.size == 0:
            return out
        raw = as_bytes(out)
        itemsize = dtype.itemsize
        for extent, common in commons:
            source = self._file(extent.file)
            if common.count[1:] == extent.shape[1:] == box.count[1:]:  # one contiguous run
                row = math.prod(box.count[1:]) * itemsize
                at = (common.start[0] - box.start[0]) * row
                source.pread_into(raw[at : at + common.count[0] * row],
                                  extent.offset + (common.start[0] - extent.start[0]) * row)
                continue
            file_runs, out_runs, run = paired_runs(
                common.count,
                extent.shape,
                _relative(common.start, extent.start),
                box.count,
                _relative(common.start, box.start),
            )
            nbytes = run * itemsize
            for file_at, out_at in zip(file_runs.tolist(), out_runs.tolist()):
                source.pread_into(
                    raw[out_at * itemsize : out_at * itemsize + nbytes],
                    extent.offset + file_at * itemsize,
                )
        return out

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
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None

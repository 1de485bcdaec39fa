"""The one check every write goes through (``write``, ``dset[box] = data``, ``write_dataset(s)``,
collective writes): validate here, then the transfer moves the bytes (see :mod:`.transfer`).

Conversion follows h5py where it cannot lose information: data that is not a numpy array
(scalars, lists) is converted to the dataset's dtype, as h5py does; a numpy array must have
the dataset's dtype or one numpy casts to it safely (``int32`` into ``int64``, ``float32``
into ``float64``); a lossy conversion (``float64`` into ``int32``), which h5py would leave to
HDF5, is refused with the ``astype`` to write instead. Compound types must match exactly. A
scalar fills a selection (h5py's ``dset[a:b] = 0``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DataShapeError, FileModeError, SelectionError
from ..layout.blocks import Block
from ..layout.selection import selection_box
from .messages import WHOLE_BLOCK, PreparedWrite, Transfer, WriteRequest
from .session import Session


def convert(data: Any, dtype: np.dtype, where: str) -> np.ndarray:
    """``data`` as a C-contiguous array of ``dtype``, or DataShapeError when converting it
    would lose information (``where`` names the rank and dataset). Numpy scalars and other
    array types (anything with a dtype and a shape) follow the rule for arrays."""
    if isinstance(data, np.generic) or (
        not isinstance(data, np.ndarray) and hasattr(data, "dtype") and hasattr(data, "shape")
    ):
        data = np.asarray(data)
    if not isinstance(data, np.ndarray):
        try:
            return np.asarray(data, dtype=dtype, order="C")
        except (TypeError, ValueError, OverflowError) as exc:
            raise DataShapeError(f"{where}: cannot convert the data to {dtype}: {exc}") from None
    if data.dtype != dtype:
        if dtype.fields is not None or not np.can_cast(data.dtype, dtype, "safe"):
            raise DataShapeError(
                f"{where}: data of dtype {data.dtype} cannot be written to a dataset of dtype "
                f"{dtype} without losing information; convert it first "
                f"(data.astype({str(dtype)!r}))"
            )
        data = data.astype(dtype)
    return np.asarray(data, order="C")  # keeps 0-d arrays 0-d (ascontiguousarray would not)


def prepare(session: Session, request: WriteRequest) -> PreparedWrite | None:
    """Check one write on this rank: the dataset, the box (inside this rank's block), the
    data's shape and dtype. None when this rank has nothing to write."""
    writing = session.require_writable("write")
    path, rank = request.path, session.rank
    if path not in writing.targets:
        raise FileModeError(
            f"dataset {path} was not created in this write session; h5subfile datasets "
            "are written once, by the session that creates them (File.commit ends a session)"
        )
    target = writing.targets[path]
    info = session.node(path)
    assert info.dtype is not None
    whole = request.selection is WHOLE_BLOCK
    if whole:
        if target is None:
            if not info.shape:
                return None  # a scalar dataset: rank 0 writes its value, the others' are ignored
            if request.data is not None and np.size(request.data) != 0:
                raise DataShapeError(
                    f"rank {rank} declared no block of {path} but passed "
                    f"{np.shape(request.data)} data"
                )
            return None
        box, shape, what = target.block, target.block.count, f"its block {target.block}"
    else:
        found = selection_box(info.shape, info.dtype.itemsize, request.selection)
        if found is None:
            raise SelectionError(f"{path}: writes take a box (integers and step-1 slices)")
        box, shape = found
        what = f"the selection {box}"
        _check_inside(target, box, rank, path)
        if target is None:
            return None  # an empty selection on a rank without a block
    if target.transfer is Transfer.CHUNKED and box != target.block and box.size:
        raise SelectionError(
            f"{path} is chunked: each rank writes its whole block at once "
            "(Dataset.write or write_dataset), so that chunks are compressed whole"
        )
    array = convert(request.data, info.dtype, f"rank {rank}")
    if array.shape != shape:
        if array.ndim != 0 or whole:
            raise DataShapeError(
                f"rank {rank}: data of shape {array.shape} does not match {what} "
                f"(shape {shape}) of dataset {path}"
            )
        array = np.full(shape, array, dtype=array.dtype)  # a scalar fills the selection
    if box.size == 0:
        return None
    return PreparedWrite(path, target, box, array.reshape(box.count))


def _check_inside(target: Any, box: Block, rank: int, path: str) -> None:
    """A selection written must lie inside the rank's block (an empty one always does)."""
    if target is None:
        if box.size:
            raise FileModeError(
                f"rank {rank} has no block of {path} in this write session; declare one "
                "with create_dataset(..., block=...) first"
            )
        return
    if not target.block.contains(box):
        raise SelectionError(f"rank {rank}: {box} is not inside its block {target.block} of {path}")

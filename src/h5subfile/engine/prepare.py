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

from ..errors import DataShapeError, FileModeError, H5SubfileError, SelectionError
from ..layout.blocks import Block
from ..layout.selection import broadcast_as_h5py, plan_write, selection_box
from .learned_state import LearnedTarget
from .messages import ROOT_WRITES, WHOLE_BLOCK, PreparedWrite, Transfer, WriteRequest
from .read import read
from .session import Session


def convert(data: Any, dtype: np.dtype, where: str, like_h5py: bool = False) -> np.ndarray:
    """``data`` as a C-contiguous array of ``dtype``, or DataShapeError when converting it
    would lose information (``where`` names the rank and dataset). Numpy scalars and other
    array types (anything with a dtype and a shape) follow the rule for arrays.

    ``like_h5py`` (datasets written as h5py programs write them): also the conversions HDF5
    makes where numpy makes the same (:func:`converts_like_hdf5`)."""
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
        safe = dtype.fields is None and np.can_cast(data.dtype, dtype, "safe")
        if not safe and not (like_h5py and converts_like_hdf5(data, dtype)):
            raise DataShapeError(
                f"{where}: data of dtype {data.dtype} cannot be written to a dataset of dtype "
                f"{dtype} without losing information; convert it first "
                f"(data.astype({str(dtype)!r}))"
            )
        data = data.astype(dtype)
    return np.asarray(data, order="C")  # keeps 0-d arrays 0-d (ascontiguousarray would not)


def converts_like_hdf5(data: np.ndarray, dtype: np.dtype) -> bool:
    """Whether numpy converts ``data`` to ``dtype`` as HDF5 does when h5py writes it: integers
    to floating point (rounded to nearest), floating point to a narrower one, or integers to
    a narrower integer type, as long as every value lies in the target's range (out of it,
    HDF5 clips where numpy wraps or overflows), and floating point to integers where every
    value is a whole number in range (HDF5 truncates and clips the others)."""
    source, target = data.dtype, dtype
    if target.fields is not None or source.fields is not None or data.size == 0:
        return data.size == 0 and target.fields is None and source.fields is None
    if source.kind in "iub" and target.kind in "f":
        return True
    if source.kind == "f" and target.kind == "f":
        finite = data[np.isfinite(data)]
        return not finite.size or float(np.abs(finite).max()) <= float(np.finfo(target).max)
    if source.kind in "iu" and target.kind in "iu":
        info = np.iinfo(target)
        return int(data.min()) >= info.min and int(data.max()) <= info.max
    if source.kind == "f" and target.kind in "iu":
        # Whole numbers in range only: there truncating changes nothing, as in HDF5 (what it
        # does with fractions and infinities is its own choice of rounding and clipping)
        info = np.iinfo(target)
        whole = bool(np.isfinite(data).all()) and bool((data == np.trunc(data)).all())
        return whole and float(data.min()) >= info.min and float(data.max()) <= info.max
    return False


def prepare(session: Session, request: WriteRequest) -> list[PreparedWrite]:
    """Check one write on this rank: the dataset, the selection (inside this rank's block, for
    a dataset whose ranks declared blocks), the data's shape and dtype. Empty when this rank
    has nothing to write."""
    writing = session.require_writable("write")
    session.take_announced(request.path)
    learned = writing.learned.get(request.path)
    if learned is not None:
        return prepare_learned(session, request, learned)
    found = _prepare_declared(session, request)
    return [] if found is None else [found]


def _prepare_declared(session: Session, request: WriteRequest) -> PreparedWrite | None:
    writing = session.require_writable("write")
    path, rank = request.path, session.rank
    if path not in writing.targets:
        if _as_stored(session, request):
            return None  # the same values again (as programs rewrite coordinates): nothing to do
        raise FileModeError(
            f"dataset {path} was not created in this write session, and these values are not "
            "those it holds; h5subfile datasets are written once, by the session that creates "
            "them (File.commit ends a session), or grown by a later one (resize)"
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
        box, shape = target.block, target.block.count
    else:
        found = selection_box(info.shape, info.dtype.itemsize, request.selection)
        if found is None:
            raise SelectionError(f"{path}: writes take a box (integers and step-1 slices)")
        box, shape = found
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
        # a block written whole takes its shape; a selection, what h5py broadcasts to it
        broadcast = None if whole else broadcast_as_h5py(array, shape)
        if broadcast is None:
            what = f"its block {box}" if whole else f"the selection {box}"
            raise DataShapeError(
                f"rank {rank}: data of shape {array.shape} does not match {what} "
                f"(shape {shape}) of dataset {path}"
            )
        array = np.ascontiguousarray(broadcast)
    if box.size == 0:
        return None
    return PreparedWrite(path, target, box, array.reshape(box.count))


def prepare_learned(
    session: Session, request: WriteRequest, learned: LearnedTarget
) -> list[PreparedWrite]:
    """A write of a dataset whose layout is learned: any selection h5py writes (integers,
    slices with steps, ``...``, one increasing index list), the data converted as for any
    write and broadcast to the selection's shape as numpy broadcasts; one write per box of the
    selection and source it falls in."""
    path, rank = request.path, session.rank
    info = session.node(path)
    assert info.dtype is not None
    selection = request.selection
    if selection is ROOT_WRITES:
        if rank != 0:
            return []
        selection = ()
    if selection is WHOLE_BLOCK:
        if info.shape and (request.data is None or np.size(request.data) == 0):
            return []  # nothing to write, as a rank without a block writes
        if info.shape:
            raise FileModeError(
                f"{path} was created without declared blocks (its layout is learned from the "
                "writes): write it with d[selection] = data, as with h5py"
            )
        if rank != 0:
            return []  # a scalar: rank 0 writes its value, the others' are ignored
        selection = ()
    plan = plan_write(info.shape, selection)
    array = convert(request.data, info.dtype, f"rank {rank}", like_h5py=True)
    if array.shape != plan.shape:
        broadcast = broadcast_as_h5py(array, plan.shape)
        if broadcast is None:
            raise DataShapeError(
                f"rank {rank}: data of shape {array.shape} does not match the selection "
                f"(shape {plan.shape}) of dataset {path}"
            )
        array = broadcast
    array = array.reshape(plan.full)
    chunked = learned.extents and learned.extents[0].transfer is Transfer.CHUNKED
    if chunked and sum(1 for box, _ in plan.boxes if not box.is_empty) > 1:
        raise SelectionError(
            f"{path} is compressed: each rank writes one box of it per collective call "
            "(chunks are compressed whole), not a strided or listed selection"
        )
    writes = []
    for box, index in plan.boxes:
        if box.is_empty:
            continue
        part = array[index]
        parts = learned.parts(box)
        if learned.kept and sum(common.size for _, common in parts) < box.size:
            raise FileModeError(
                f"rank {rank}: {box} of {path} holds elements an earlier write session wrote "
                f"(its shape then: {learned.floor}); h5subfile writes a dataset's elements "
                "once: write only what this session's resize added"
            )
        for k, common in parts:
            data = part[common.relative_to(box.start).slices] if common != box else part
            data = np.ascontiguousarray(data)
            writes.append(PreparedWrite(path, learned.extents[k], common, data))
    return writes


def _as_stored(session: Session, request: WriteRequest) -> bool:
    """Whether a write to a dataset of an earlier session passes the values it holds there,
    byte for byte after conversion (checked against the stored checksums as it is read)."""
    info = session.node(request.path)
    selection = request.selection
    if info.dtype is None or selection is WHOLE_BLOCK or selection is ROOT_WRITES:
        return False
    try:
        stored = np.asarray(read(session, request.path, selection, verify=True))
        data = convert(request.data, info.dtype, "the data", like_h5py=True)
        data = np.broadcast_to(data, stored.shape)
    except (H5SubfileError, ValueError, TypeError):
        return False
    return np.ascontiguousarray(stored).tobytes() == np.ascontiguousarray(data).tobytes()


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

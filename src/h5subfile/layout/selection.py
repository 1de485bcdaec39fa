"""Read selections: h5py/numpy-style indices turned into boxes to read and an in-memory index.

Supported, as in h5py: integers, slices with positive steps, ``...``, and one axis indexed with a
list/array of integers or a boolean mask of that axis. Integer lists may be in any order and repeat.
Along axis 0, a strided slice or an integer list is split into several boxes where the gaps are
large, so that a sparse selection does not read the whole range.

Writes: :func:`selection_box` turns a selection of integers and step-1 slices into one box
(writes into a declared block), and :func:`plan_write` any selection h5py writes (slices with
steps, one increasing index list, numpy broadcasting) into boxes, for datasets whose layout is
learned from the writes.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SelectionError
from .blocks import Block, Shape

#: A gap along axis 0 smaller than this (in bytes) is read and discarded rather than skipped.
GAP_BYTES = 256 * 1024


@dataclass(frozen=True)
class ReadPiece:
    """Read the box, then index the box's array with ``index`` (slices and at most one array)."""

    box: Block
    index: tuple[Any, ...]

    def selected(self) -> list[range | np.ndarray]:
        """The indices the piece takes along each axis, in dataset coordinates: a range, or
        increasing unique indices."""
        found: list[range | np.ndarray] = []
        for lo, n, item in zip(self.box.start, self.box.count, self.index):
            if isinstance(item, slice):
                found.append(range(lo, lo + n)[item])
            else:
                found.append(np.unique(np.asarray(item, dtype=np.int64)) + lo)
        return found


@dataclass(frozen=True)
class ReadPlan:
    """How to assemble a selection: pieces concatenated along ``concat_axis`` of the indexed result,
    then ``reorder`` taken along that axis, then reshaped to ``out_shape`` (drops integer axes)."""

    pieces: tuple[ReadPiece, ...]
    concat_axis: int
    reorder: np.ndarray | None
    out_shape: Shape


@dataclass(frozen=True)
class _Axis:
    lo: int  # box start
    count: int  # box length
    index: Any  # slice or int array, relative to lo
    scalar: bool  # an integer index: the axis is dropped
    points: np.ndarray | None  # sorted unique absolute indices when axis 0 may be split
    reorder: np.ndarray | None


def _expand(selection: Any, ndim: int) -> tuple[Any, ...]:
    if not isinstance(selection, tuple):
        selection = (selection,)
    if any(item is None for item in selection):
        raise SelectionError("np.newaxis is not supported in a dataset selection")
    ellipses = sum(1 for item in selection if item is Ellipsis)
    if ellipses > 1:
        raise SelectionError("a selection may contain only one Ellipsis (...)")
    if ellipses:
        at = next(i for i, item in enumerate(selection) if item is Ellipsis)
        fill = ndim - (len(selection) - 1)
        if fill < 0:
            raise SelectionError(f"too many indices for a dataset with {ndim} dimensions")
        selection = selection[:at] + (slice(None),) * fill + selection[at + 1 :]
    if len(selection) > ndim:
        raise SelectionError(f"{len(selection)} indices for a dataset with {ndim} dimension(s)")
    return selection + (slice(None),) * (ndim - len(selection))


def _axis(item: Any, n: int, axis: int) -> _Axis:
    if isinstance(item, slice):
        start, stop, step = item.indices(n)
        if step < 1:
            raise SelectionError(
                f"axis {axis}: steps must be positive (got {item.step}), as in h5py"
            )
        length = len(range(start, stop, step))
        if length == 0:
            return _Axis(0, 0, slice(0, 0), False, None, None)
        last = start + (length - 1) * step
        points = np.arange(start, last + 1, step, dtype=np.int64) if step > 1 else None
        return _Axis(start, last + 1 - start, slice(0, None, step), False, points, None)
    if _is_integer(item):
        index = _index(item, n, axis)
        return _Axis(index, 1, slice(0, 1), True, None, None)
    array = _index_list(item, n, axis)
    unique, inverse = np.unique(array, return_inverse=True)
    reorder = None if np.array_equal(unique, array) else inverse.astype(np.int64)
    if unique.size == 0:
        return _Axis(0, 0, np.zeros(0, dtype=np.int64), False, unique, reorder)
    lo = int(unique[0])
    return _Axis(lo, int(unique[-1]) + 1 - lo, unique - lo, False, unique, reorder)


def _is_integer(item: Any) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _index(item: Any, n: int, axis: int) -> int:
    """An integer index of an axis of length ``n`` (negative: from the end), checked."""
    index = operator.index(item)
    if not -n <= index < n:
        raise SelectionError(f"index {index} is out of range for axis {axis} with size {n}")
    return index % n


def _index_list(item: Any, n: int, axis: int) -> np.ndarray:
    """A list of integers or a boolean mask of an axis of length ``n`` as int64 indices
    (negative ones counted from the end), checked."""
    array = np.asarray(item)
    if array.dtype == bool:
        if array.shape != (n,):
            raise SelectionError(
                f"axis {axis}: a boolean mask must have the axis length {n}, got shape {array.shape}"
            )
        array = np.flatnonzero(array)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise SelectionError(f"axis {axis}: cannot index with {item!r}")
    array = array.astype(np.int64)
    if array.size and (array.min() < -n or array.max() >= n):
        raise SelectionError(f"axis {axis}: an index in the list is out of range for size {n}")
    return np.where(array < 0, array + n, array)


def _segments(points: np.ndarray, max_gap: int) -> list[np.ndarray]:
    if points.size == 0:
        return [points]
    cuts = np.flatnonzero(np.diff(points) > max_gap) + 1
    return np.split(points, cuts)


def plan_read(shape: Shape, itemsize: int, selection: Any = ()) -> ReadPlan:
    """Plan the read of ``selection`` from a dataset of ``shape`` with ``itemsize``-byte elements."""
    ndim = len(shape)
    items = _expand(selection, ndim)
    axes = [_axis(item, n, a) for a, (item, n) in enumerate(zip(items, shape))]
    arrays = [a for a, ax in enumerate(axes) if isinstance(ax.index, np.ndarray)]
    if len(arrays) > 1:
        raise SelectionError("only one axis can be indexed with a list or mask, as in h5py")
    out_shape = tuple(
        len(ax.index)
        if isinstance(ax.index, np.ndarray) and ax.reorder is None
        else (len(ax.reorder) if ax.reorder is not None else len(range(ax.count)[ax.index]))
        for ax in axes
        if not ax.scalar
    )
    reorder = next((ax.reorder for ax in axes if ax.reorder is not None), None)
    # Index arrays stay in their own position (one advanced index), integer axes drop in reshape.
    concat_axis = 0
    pieces: list[ReadPiece] = []
    first = axes[0] if axes else None
    if first is not None and first.points is not None and first.count > 0:
        row_bytes = itemsize * math.prod(shape[1:])
        max_gap = max(1, GAP_BYTES // max(row_bytes, 1))
        for segment in _segments(first.points, max_gap):
            lo = int(segment[0])
            box = Block(
                (lo,) + tuple(ax.lo for ax in axes[1:]),
                (int(segment[-1]) + 1 - lo,) + tuple(ax.count for ax in axes[1:]),
            )
            index = (segment - lo,) + tuple(ax.index for ax in axes[1:])
            if isinstance(first.index, slice):  # a strided slice: keep it a slice in memory
                step = first.index.step or 1
                index = (slice(0, None, step),) + index[1:]
            pieces.append(ReadPiece(box, index))
    else:
        box = Block(tuple(ax.lo for ax in axes), tuple(ax.count for ax in axes))
        pieces.append(ReadPiece(box, tuple(ax.index for ax in axes)))
    if reorder is not None:
        concat_axis = arrays[0]
    return ReadPlan(tuple(pieces), concat_axis, reorder, out_shape)


def assemble(plan: ReadPlan, arrays: Sequence[np.ndarray]) -> Any:
    """Combine the boxes read for ``plan.pieces`` into the selection's array."""
    parts = [array[piece.index] for piece, array in zip(plan.pieces, arrays)]
    result = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    if plan.reorder is not None:
        result = np.take(result, plan.reorder, axis=plan.concat_axis)
    result = result.reshape(plan.out_shape)
    return result[()] if plan.out_shape == () else result  # a scalar, as h5py and numpy give


def partition(n: int, size: int, rank: int) -> tuple[int, int]:
    """BD-CATS partition of n items: rank p gets ``[p*(n//size), (p+1)*(n//size))``, the last
    rank also the remainder. Returns (start, stop)."""
    share = n // size
    start = rank * share
    stop = n if rank == size - 1 else start + share
    return start, stop


def selection_box(shape: Shape, itemsize: int, selection: Any) -> tuple[Block, Shape] | None:
    """The box a selection covers and the selection's shape, if it is a box (integers and
    step-1 slices); None otherwise. A plain slice of a 1-D dataset takes a short cut."""
    if len(shape) == 1 and isinstance(selection, slice) and selection.step in (None, 1):
        start, stop, _ = selection.indices(shape[0])
        count = max(stop - start, 0)
        return Block((start if count else 0,), (count,)), (count,)
    plan = plan_read(shape, itemsize, selection)
    if (
        len(plan.pieces) != 1
        or plan.reorder is not None
        or not all(isinstance(i, slice) and i.step in (None, 1) for i in plan.pieces[0].index)
    ):
        return None
    return plan.pieces[0].box, plan.out_shape


@dataclass(frozen=True)
class WritePlan:
    """How a write's data lands on a dataset: ``shape`` the selection's shape (what the data
    must be, or broadcast to), ``full`` the same with each integer-indexed axis kept as 1, and
    the boxes written, each with its part of the data (slices of the ``full``-shaped array)."""

    shape: Shape
    full: Shape
    boxes: tuple[tuple[Block, tuple[slice, ...]], ...]


def _write_runs(item: Any, n: int, axis: int) -> tuple[list[tuple[int, int]], bool]:
    """One axis of a write selection as runs of consecutive indices, and whether it is an
    integer (dropped from the data's shape)."""
    if isinstance(item, slice):
        start, stop, step = item.indices(n)
        if step < 1:
            raise SelectionError(
                f"axis {axis}: steps must be positive (got {item.step}), as in h5py"
            )
        indices = range(start, stop, step)
        if step == 1:
            return ([(start, stop)] if stop > start else []), False
        return [(i, i + 1) for i in indices], False
    if _is_integer(item):
        index = _index(item, n, axis)
        return [(index, index + 1)], True
    array = _index_list(item, n, axis)
    if array.size > 1 and np.any(np.diff(array) <= 0):
        raise SelectionError(
            f"axis {axis}: a write's index list must increase (as in h5py: no repeats, in order)"
        )
    cuts = np.flatnonzero(np.diff(array) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(array, cuts) if r.size], False


def plan_write(shape: Shape, selection: Any) -> WritePlan:
    """The boxes a write of ``selection`` covers (h5py's write selections: integers, slices with
    positive steps, ``...``, one axis indexed with an increasing list or a mask)."""
    items = _expand(selection, len(shape))
    per_axis = [_write_runs(item, n, a) for a, (item, n) in enumerate(zip(items, shape))]
    if sum(1 for item in items if not isinstance(item, (slice, int, np.integer))) > 1:
        raise SelectionError("only one axis can be indexed with a list or mask, as in h5py")
    full = tuple(sum(hi - lo for lo, hi in runs) for runs, _ in per_axis)
    kept = tuple(n for n, (_, scalar) in zip(full, per_axis) if not scalar)
    memory = []
    for runs, _ in per_axis:
        at, spans = 0, []
        for lo, hi in runs:
            spans.append((lo, hi, slice(at, at + hi - lo)))
            at += hi - lo
        memory.append(spans)
    boxes = tuple(
        (
            Block(tuple(lo for lo, _, _ in combo), tuple(hi - lo for lo, hi, _ in combo)),
            tuple(index for _, _, index in combo),
        )
        for combo in itertools.product(*memory)
    )
    return WritePlan(kept, full, boxes)


def broadcast_as_h5py(array: np.ndarray, shape: Shape) -> np.ndarray | None:
    """``array`` as h5py writes it into a selection of ``shape`` (integer-indexed axes left
    out), or None where h5py raises: to a scalar selection, any array of one element; else
    ``array``'s axes matched to the selection's from the last, each 1 or the selection's
    length (missing ones taken as 1), and those left over all 1, then repeated as numpy
    broadcasts. So ``d[3] = np.array([7.0])`` and ``d[0:2] = np.ones((1, 2))`` are
    writes, as in h5py (numpy alone refuses the second)."""
    if not shape:
        return array.reshape(()) if array.size == 1 else None
    remaining = list(array.shape)
    expanded = []
    for n in reversed(shape):
        t = remaining.pop() if remaining else 1
        if t != 1 and t != n:
            return None
        expanded.append(t)
    if any(t != 1 for t in remaining):
        return None
    return np.broadcast_to(array.reshape(tuple(reversed(expanded))), shape)

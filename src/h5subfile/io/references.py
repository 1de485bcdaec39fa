"""HDF5 references in attribute values as :class:`~h5subfile.layout.references.ObjectRef`
(paths, which can travel between ranks), and back as references into a given file.

Object references anywhere in a value convert: a single one, an array of them, a
variable-length array of them (``DIMENSION_LIST``) and a compound with reference fields
(``REFERENCE_LIST``). A region reference becomes a note naming what it points at: h5subfile
reads regions through its own datasets.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from ..layout.references import ObjectRef, holds_refs


def _path(file: h5py.File, ref: h5py.Reference) -> ObjectRef:
    if not ref:
        return ObjectRef("")
    try:
        return ObjectRef(file[ref].name or "")
    except (KeyError, OSError, TypeError, ValueError):
        return ObjectRef("")  # points at nothing this file holds


def as_paths(file: h5py.File, value: Any) -> Any:
    """``value`` read from ``file`` with every object reference as an :class:`ObjectRef`,
    every region reference as a note; other values as they are."""
    if isinstance(value, h5py.RegionReference):
        try:
            target = file[value].name
        except (KeyError, OSError, TypeError, ValueError):
            target = "an object h5py cannot resolve"
        return f"<HDF5 region reference to {target}>"
    if isinstance(value, h5py.Reference):
        return _path(file, value)
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype.names is not None:
        objects = [n for n in value.dtype.names if value.dtype[n].kind == "O"]
        if not objects:
            return value
        converted = value.astype([(n, value.dtype[n]) for n in value.dtype.names])
        for name in objects:
            converted[name] = _each(file, value[name])
        return converted
    if value.dtype.kind != "O":
        return value
    return _each(file, value)


def _each(file: h5py.File, array: np.ndarray) -> np.ndarray:
    """An object array with its references (nested in variable-length arrays or not) as
    paths; strings and other objects as they are."""
    out = np.empty(array.shape, dtype=object)
    for index, item in np.ndenumerate(array):
        out[index] = as_paths(file, item)
    return out


def holds_any_refs(value: Any) -> bool:
    """Whether an attribute value a program sets holds object references, h5subfile's
    (:class:`ObjectRef`) or h5py's: itself, or in a list, tuple or array."""
    if isinstance(value, (ObjectRef, h5py.Reference)):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_any_refs(item) for item in value)
    if isinstance(value, np.ndarray) and (value.dtype.kind == "O" or value.dtype.names):
        return holds_refs(value) or any(holds_any_refs(item) for item in value.flat)
    return False


def stored_refs(value: Any, file: str) -> Any:
    """What an attribute a program sets to object references keeps in ``file``: an
    :class:`ObjectRef`, or an array of them (any shape; h5py's ``ref_dtype`` or object),
    copied. TypeError for anything else holding references: another file's, h5py's own
    (``h5py.Reference``), region references, references mixed with other values."""
    if isinstance(value, ObjectRef):
        if value.file and os.path.abspath(value.file) != os.path.abspath(file):
            raise TypeError(
                f"{value!r} is of another file ({value.file}): an HDF5 reference points into "
                "the file that holds it"
            )
        return value
    if isinstance(value, h5py.Reference):
        raise TypeError(
            f"{value!r} is h5py's: h5subfile stores references to this file's objects "
            "(obj.ref of h5subfile's objects)"
        )
    array = np.asarray(value, dtype=object)
    out = np.empty(array.shape, dtype=h5py.ref_dtype)
    for index, item in np.ndenumerate(array):
        if isinstance(item, ObjectRef):
            item = stored_refs(item, file)
        else:
            raise TypeError(
                "an attribute holding object references holds nothing else: an "
                f"h5subfile.ObjectRef (obj.ref) or an array of them, not {type(item).__name__}"
            )
        out[index] = item
    return out


def referenced(value: Any) -> list[str]:
    """The paths the references of a value :func:`stored_refs` kept point at (null ones left
    out)."""
    if isinstance(value, ObjectRef):
        return [value.path] if value else []
    return [ref.path for ref in value.flat if ref]


def as_references(
    file: h5py.File, value: Any, made: Callable[[str], None] = lambda path: None
) -> Any:
    """A value :func:`stored_refs` kept, with each :class:`ObjectRef` as a reference into
    ``file`` (``made(path)`` first: the object made if it is still to be); one to an object
    ``file`` does not hold is the null reference."""
    if isinstance(value, ObjectRef):
        if not value:
            return h5py.Reference()
        made(value.path)
        target = file.get(value.path)
        return h5py.Reference() if target is None else target.ref
    out = np.empty(value.shape, dtype=h5py.ref_dtype)
    for index, item in np.ndenumerate(value):
        out[index] = as_references(file, item, made)
    return out

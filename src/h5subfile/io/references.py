"""HDF5 references in attribute values as :class:`~h5subfile.layout.references.ObjectRef`
(paths, which can travel between ranks), and back as references into a given file.

Object references anywhere in a value convert: a single one, an array of them, a
variable-length array of them (``DIMENSION_LIST``) and a compound with reference fields
(``REFERENCE_LIST``). A region reference becomes a note naming what it points at: h5subfile
reads regions through its own datasets.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

from ..layout.references import ObjectRef


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

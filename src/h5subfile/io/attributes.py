"""Attribute values as HDF5 stores them, found on every rank alike without asking rank 0: a
metadata call makes no round (engine/structure.py), so each rank must know on its own what the
master will hold."""

from __future__ import annotations

import os
from typing import Any

import h5py
import numpy as np

#: One in-memory HDF5 file per process (the core driver, nothing on disk) where attribute
#: values are stored and read back, so that every rank knows what the master will hold: its
#: root group's attributes.
_SCRATCH: list[Any] = []


def _type_text(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    # a string's HDF5 type (length, encoding) is not in its numpy dtype's repr
    return f"{dtype.descr} {h5py.check_string_dtype(dtype) or ''} {shape}"


#: :func:`_type_text` of a variable-length UTF-8 string, as h5py stores a ``str``
_UTF8_TEXT = _type_text(h5py.string_dtype(), ())


def stored_attribute(value: Any) -> tuple[Any, str]:
    """``value`` as HDF5 stores an attribute of it and h5py reads it back, and its HDF5 type
    and shape as text: what every rank computes alike, without asking rank 0, for a metadata
    call made without a round (engine/structure.py). Raises what h5py raises for a value
    HDF5 cannot store, the same in every process. Strings, numbers and non-empty arrays of
    plain numbers come back as they went in, and skip HDF5 (h5py's string attributes cost
    about 0.2 ms each way; the unit tests compare both ways)."""
    if type(value) is str and "\0" not in value:  # not np.str_, which h5py refuses
        try:
            value.encode()  # a lone surrogate cannot be stored: HDF5's error, below
        except UnicodeEncodeError:
            return stored_through_hdf5(value)
        return str(value), _UTF8_TEXT
    if isinstance(value, (int, float, complex, np.number, np.bool_, np.ndarray)):
        array = np.asarray(value)
        dtype = array.dtype
        if dtype.kind in "biufc" and dtype.fields is None and array.size and not dtype.metadata:
            return (array[()] if array.ndim == 0 else array.copy()), _type_text(dtype, array.shape)
    return stored_through_hdf5(value)


def stored_through_hdf5(value: Any) -> tuple[Any, str]:
    """:func:`stored_attribute` asking HDF5: ``value`` stored in the in-memory file and read
    back."""
    if not _SCRATCH:
        name = f"h5subfile-attributes-{os.getpid()}-{id(_SCRATCH)}"
        scratch = h5py.File(name, "w", driver="core", backing_store=False)
        _SCRATCH.extend([scratch, scratch["/"].attrs])
    attrs = _SCRATCH[1]
    attrs["value"] = value
    stored = attrs.get_id("value")
    return attrs["value"], _type_text(stored.dtype, stored.shape)

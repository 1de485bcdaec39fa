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


#: :func:`_type_text` of plain number types by (dtype, shape): a model's attributes have few
_TYPE_TEXTS: dict[tuple[np.dtype, tuple[int, ...]], str] = {}


def _type_text(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    plain = dtype.fields is None and not dtype.hasobject and not dtype.metadata
    key = (dtype, shape)
    text = _TYPE_TEXTS.get(key) if plain else None  # equal dtypes of different strings
    if text is None:
        # a string's HDF5 type (length, encoding) is not in its numpy dtype's repr
        text = f"{dtype.descr} {h5py.check_string_dtype(dtype) or ''} {shape}"
        if plain:
            if len(_TYPE_TEXTS) > 1024:
                _TYPE_TEXTS.clear()
            _TYPE_TEXTS[key] = text
    return text


#: how h5py stores a ``str``: a variable-length UTF-8 string
_STRING = h5py.string_dtype()
#: :func:`_type_text` of a variable-length UTF-8 string, as h5py stores a ``str``
_UTF8_TEXT = _type_text(_STRING, ())


def stored_attribute(value: Any) -> tuple[Any, str]:
    """``value`` as HDF5 stores an attribute of it and h5py reads it back, and its HDF5 type
    and shape as text: what every rank computes alike, without asking rank 0, for a metadata
    call made without a round (engine/structure.py). Raises what h5py raises for a value
    HDF5 cannot store, the same in every process. Strings, numbers and non-empty arrays of
    plain numbers come back as they went in, and skip HDF5 (h5py's string attributes cost
    about 0.2 ms each way; the unit tests compare both ways)."""
    stored, text, _ = prepared_attribute(value)
    return stored, text


def prepared_attribute(value: Any) -> tuple[Any, str, np.ndarray | None]:
    """:func:`stored_attribute`, and the array :func:`set_attribute` writes of a plain value
    (None for others), made once for both."""
    plain = _plain(value)
    if plain is None:
        return (*stored_through_hdf5(value), None)
    if type(value) is str:
        return value, _UTF8_TEXT, plain
    stored = plain[()] if plain.ndim == 0 else plain.copy()
    return stored, _type_text(plain.dtype, plain.shape), plain


def _plain(value: Any) -> np.ndarray | None:
    """``value`` as the array h5py makes of it to store it, when it is a plain one: a ``str``
    HDF5 can store (not ``np.str_``, which h5py refuses), a number, or a non-empty array of
    plain numbers; None for anything else."""
    if type(value) is str:
        if "\0" in value:
            return None
        try:
            value.encode()  # a lone surrogate cannot be stored: HDF5's error, through h5py
        except UnicodeEncodeError:
            return None
        return np.array(value, dtype=_STRING)
    if isinstance(value, (int, float, complex, np.number, np.bool_, np.ndarray)):
        array = np.asarray(value, order="C")
        dtype = array.dtype
        if dtype.kind in "biufc" and dtype.fields is None and array.size and not dtype.metadata:
            return array
    return None


#: By numpy dtype, the HDF5 types h5py stores an attribute of it with and reads it through
_TYPES: dict[np.dtype, tuple[Any, Any]] = {}
_SCALAR = h5py.h5s.create(h5py.h5s.SCALAR)


def set_attribute(
    obj: Any, name: str, value: Any, data: np.ndarray | None = None, new: bool = False
) -> bool:
    """h5py's ``attrs[name] = value`` on the low-level object ``obj``, for a plain value (see
    :func:`_plain`): the same HDF5 calls h5py makes (an attribute of that name deleted, one
    created with h5py's type and shape, written), without h5py's conversions and with the
    types made once. A master's attributes are set one by one, thousands of them, and h5py
    spent longer than HDF5 on each. Returns False, doing nothing, for any other value.
    ``data``: the value's array, from :func:`prepared_attribute`; ``new``: the caller knows
    of no attribute of that name, so HDF5 is not asked first (it is when the creation fails)."""
    if data is None:
        data = _plain(value)
        if data is None:
            return False
    types = _TYPES.get(data.dtype)
    if types is None:
        types = (h5py.h5t.py_create(data.dtype, logical=True), h5py.h5t.py_create(data.dtype))
        _TYPES[data.dtype] = types
    stored, memory = types
    key = name.encode()
    if not new and h5py.h5a.exists(obj, key):
        h5py.h5a.delete(obj, key)
    space = h5py.h5s.create_simple(data.shape) if data.ndim else _SCALAR
    try:
        attr = h5py.h5a.create(obj, key, stored, space)
    except OSError:
        if not new or not h5py.h5a.exists(obj, key):
            raise
        h5py.h5a.delete(obj, key)  # there after all: replaced, as h5py replaces it
        attr = h5py.h5a.create(obj, key, stored, space)
    try:
        attr.write(data, mtype=memory)
    except BaseException:
        attr.close()
        h5py.h5a.delete(obj, key)
        raise
    return True


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

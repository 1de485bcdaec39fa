"""The rest of h5py's public object model on h5subfile's objects: what h5subfile does not
serve yet, each name with the reason, raised as :class:`UnsupportedAttributeError` when a
program reaches for it (never a silent ``AttributeError``: a ``hasattr`` test still says
False), and small read-only views h5py gives datasets (``astype``, ``asstr``, ``fields``).
``tests/unit/test_h5py_surface.py`` walks h5py's classes and holds every name to one of: served,
or listed here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import UnsupportedError

_OBJECT = "an attribute's HDF5 identifier is not served (obj.id is the object's)"
_REFS = "region references are not supported (read the region through the dataset)"

#: By class name, the public names of h5py's class that h5subfile's refuses, with why.
REFUSED: dict[str, dict[str, str]] = {
    "Group": {
        "regionref": _REFS,
        "build_virtual_dataset": "h5subfile makes the virtual datasets of its own masters",
        "create_virtual_dataset": "h5subfile makes the virtual datasets of its own masters",
    },
    "Dataset": {
        "regionref": _REFS,
        "virtual_sources": "a master's virtual datasets are h5subfile's storage (h5subfile info "
        "shows it)",
        "refresh": "SWMR is not supported (h5subfile.follow reads a file as it is written)",
        "filter_ids": "d.filters says every filter of the dataset",
        "filter_names": "d.filters says every filter of the dataset",
    },
    "AttributeManager": {"get_id": _OBJECT},
    "Datatype": {"regionref": _REFS},
}
REFUSED["File"] = dict(REFUSED["Group"])


class UnsupportedAttributeError(UnsupportedError, AttributeError):
    """An attribute of h5py's object model that h5subfile does not serve: the message says
    which and why; an ``AttributeError`` too, so ``hasattr`` and ``getattr(obj, name, default)``
    behave as for any missing attribute."""


def refuse(kind: str, name: str) -> UnsupportedAttributeError | None:
    """The error for ``kind``'s public attribute ``name`` if it is one h5py's class has and
    h5subfile refuses, else None."""
    why = REFUSED.get(kind, {}).get(name)
    if why is None:
        return None
    return UnsupportedAttributeError(f"{kind}.{name} (h5py's) is not served by h5subfile: {why}")


class ReadView:
    """A read-only view of a dataset that converts what is read (h5py's ``AsTypeWrapper``,
    ``AsStrWrapper``, ``FieldsWrapper``): ``view[sel]``, ``len(view)``, ``np.asarray(view)``."""

    def __init__(self, dataset: Any, convert: Callable[[Any], Any]):
        self._dataset = dataset
        self._convert = convert

    def __getitem__(self, selection: Any) -> Any:
        return self._convert(self._dataset[selection])

    def __len__(self) -> int:
        return len(self._dataset)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = np.asarray(self[()])
        return data if dtype is None else data.astype(dtype)


def as_str(encoding: str | None, errors: str) -> Callable[[Any], Any]:
    """h5py's ``asstr`` conversion: byte strings decoded (UTF-8 unless ``encoding``)."""
    codec = encoding or "utf-8"

    def convert(value: Any) -> Any:
        if isinstance(value, bytes):
            return value.decode(codec, errors)
        array = np.asarray(value)
        out = np.array([v.decode(codec, errors) for v in array.ravel()], dtype=object)
        return out.reshape(array.shape)

    return convert


def fields_of(dtype: np.dtype, names: str | list[str]) -> Callable[[Any], Any]:
    """h5py's ``fields`` conversion: one field of a compound dataset (its values), or several
    (a structured array of those)."""
    if dtype.names is None:
        raise TypeError("fields: the dataset is not of a compound type")
    if isinstance(names, str):
        if names not in dtype.names:
            raise ValueError(f"fields: no field {names!r} in {dtype.names}")
        return lambda value: np.asarray(value)[names]
    missing = [n for n in names if n not in dtype.names]
    if missing:
        raise ValueError(f"fields: no fields {missing} in {dtype.names}")
    chosen = list(names)
    fields = dtype.fields
    assert fields is not None

    def convert(value: Any) -> Any:
        array = np.asarray(value)
        out = np.empty(array.shape, dtype=[(n, fields[n][0]) for n in chosen])
        for n in chosen:
            out[n] = array[n]
        return out

    return convert

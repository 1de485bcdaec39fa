"""Which numpy dtypes h5subfile stores, with a clear error for the others.

:func:`check_dtype` accepts bool, integers, floats, complex, fixed-length byte strings,
compound types and sub-arrays of these, and refuses Unicode, object and datetime arrays with
advice; :func:`dtype_text` and :func:`dtype_from_text` carry a dtype through the JSON record.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..errors import UnsupportedDtypeError

_ADVICE = {
    "U": "numpy unicode strings have no fixed-length HDF5 equivalent; store bytes: "
    "array.astype('S<n>') (UTF-8 encoded)",
    "O": "object arrays (variable-length data) cannot be written in parallel at fixed offsets",
    "M": "datetime64 is not an HDF5 type; store it as int64 (array.view('int64'))",
    "m": "timedelta64 is not an HDF5 type; store it as int64 (array.view('int64'))",
}


def check_dtype(dtype: Any) -> np.dtype:
    """Return ``np.dtype(dtype)`` if h5subfile can store it, else raise UnsupportedDtypeError.

    Supported: bool, every integer, float and complex type, fixed-length byte strings (``S``),
    and structured (compound) types and sub-arrays made of these.
    """
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise UnsupportedDtypeError(f"{dtype!r} is not a numpy dtype: {exc}") from None
    _check(dt, dt)
    return dt


def _check(dt: np.dtype, top: np.dtype) -> None:
    if dt.subdtype is not None:
        _check(dt.subdtype[0], top)
        return
    if dt.fields is not None:
        if not dt.fields:
            raise UnsupportedDtypeError(f"dtype {top} is a structured type with no fields")
        for value in dt.fields.values():
            _check(value[0], top)
        return
    kind = dt.kind
    if kind in "biufc":
        return
    if kind == "S":
        if dt.itemsize == 0:
            raise UnsupportedDtypeError("fixed-length strings need a length, e.g. 'S16'")
        return
    advice = _ADVICE.get(kind, "supported: bool, integers, floats, complex, 'S<n>', compound")
    raise UnsupportedDtypeError(f"dtype {top} cannot be stored: {advice}")


def dtype_text(dtype: np.dtype) -> str:
    """The element type as recorded in a layout record: numpy's ``dtype.str`` (``"<f4"``), or
    for a structured type JSON of its names, formats, offsets and itemsize, from which
    :func:`dtype_from_text` rebuilds it exactly."""
    if dtype.fields is None:
        return dtype.str
    return json.dumps(_describe(dtype), separators=(",", ":"))


def _describe(dtype: np.dtype) -> Any:
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return {"base": _describe(base), "shape": list(shape)}
    if dtype.fields is None:
        return dtype.str
    names = list(dtype.names or ())
    return {
        "names": names,
        "formats": [_describe(dtype.fields[n][0]) for n in names],
        "offsets": [dtype.fields[n][1] for n in names],
        "itemsize": dtype.itemsize,
    }


def dtype_from_text(text: str) -> np.dtype:
    """The dtype :func:`dtype_text` recorded (ValueError, TypeError or KeyError if ``text`` is
    not one)."""
    return _build(json.loads(text)) if text.startswith("{") else np.dtype(text)


def _build(described: Any) -> np.dtype:
    if isinstance(described, str):
        return np.dtype(described)
    if "base" in described:
        return np.dtype((_build(described["base"]), tuple(described["shape"])))
    return np.dtype(
        {
            "names": described["names"],
            "formats": [_build(f) for f in described["formats"]],
            "offsets": described["offsets"],
            "itemsize": described["itemsize"],
        }
    )

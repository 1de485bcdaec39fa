"""HDF5 object references as h5subfile carries them: by the path of the object they point at.

An HDF5 reference is an address valid only in the process that opened the file, so it cannot
travel between ranks, and h5subfile's objects are not HDF5's. :class:`ObjectRef` is what
h5subfile hands a program where h5py hands an ``h5py.Reference`` (an attribute's value,
``obj.ref``, the dimension scales of ``ds.dims``): ``f[ref]`` opens the object, ``bool(ref)``
says whether it points anywhere. Pure: no HDF5 here (io/references.py converts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The attributes HDF5's dimension-scale code writes.
SCALE_ATTRS = ("CLASS", "NAME", "REFERENCE_LIST", "DIMENSION_LIST", "DIMENSION_LABELS")


@dataclass(frozen=True)
class ObjectRef:
    """An object reference: the absolute path of the object (``""``: the null reference);
    ``file``, where known, the file it belongs to (not compared: a reference is its path)."""

    path: str
    file: str = field(default="", compare=False)

    def __bool__(self) -> bool:
        return bool(self.path)

    @property
    def typecode(self) -> int:
        """0, h5py's ``Reference.typecode`` of an object reference."""
        return 0

    def __repr__(self) -> str:
        return f"<HDF5 object reference to {self.path or 'nothing'}>"


def holds_refs(value: Any) -> bool:
    """Whether a value (an attribute's, as h5subfile gives it) holds object references."""
    if isinstance(value, ObjectRef):
        return True
    # a numpy array, told by its dtype: numpy is not imported here (the command line loads it
    # first, with one BLAS thread)
    dtype = getattr(value, "dtype", None)
    if dtype is not None and (dtype.kind == "O" or dtype.names):
        flat = value.reshape(-1)
        columns = [flat[n] for n in value.dtype.names] if value.dtype.names else [flat]
        return any(holds_refs(item) for column in columns for item in column)
    return False

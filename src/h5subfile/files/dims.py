"""Dimension scales and HDF5 identifiers on h5subfile's objects: ``ds.dims`` (h5py's
``DimensionManager`` and its ``DimensionProxy``), ``make_scale``, ``is_scale``, ``obj.ref`` and
``obj.id``.

What scales a dataset has is read from its attributes as HDF5's dimension-scale code writes them
(``DIMENSION_LIST``, ``REFERENCE_LIST``, ``DIMENSION_LABELS``, ``CLASS``, ``NAME``), whose
references h5subfile holds as paths: the same in read and write sessions, on every rank.
Changes are collective without a round (engine/dims.py). ``obj.id`` is HDF5's identifier of the
object: of the master, read-only, in a read session; of every rank's in-memory image of the
metadata in a write session (io/image.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..engine import dims
from ..engine.session import Session
from ..io.image import DatasetShape
from ..layout.references import ObjectRef

SCALE_CLASS = b"DIMENSION_SCALE"


def _text(value: Any) -> str:
    value = value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value
    return value.decode() if isinstance(value, bytes) else str(value)


def is_scale(attrs: Any) -> bool:
    """Whether an object with these attributes is a dimension scale (``CLASS``)."""
    value = attrs.get("CLASS")
    return value is not None and _text(value).encode() == SCALE_CLASS


def scale_name(attrs: Any) -> str:
    """A scale's name (``NAME``), "" when it has none."""
    value = attrs.get("NAME")
    return "" if value is None else _text(value)


def shape_of(file: Any) -> dims.ShapeOf:
    """How the image makes its copy of a dataset of the open ``file``: as its facade says."""

    def made(path: str) -> DatasetShape:
        dataset = file[ObjectRef(path)]  # its own path, which may be a name no more
        return DatasetShape(
            tuple(dataset.shape),
            dataset.dtype,
            tuple(dataset.maxshape),
            dataset.chunks,
            dataset.fillvalue,
            file._session.node(path).track_order,
            file._session.catalog.typed.get(path, ""),
        )

    return made


def hdf5_id(obj: Any) -> Any:
    """``obj.id``: the master's (read session) or the metadata image's (write session)."""
    session, path = obj._session, obj._path
    session.require_open()
    if session.writing is None:
        master = session.reader.master()
        return master[path].id if path != "/" else master.id
    made = dims.image_object(session, path, shape_of(obj.file))
    return made.file.id if path == "/" else made.id


class DimensionProxy:
    """One dimension of a dataset (h5py's ``DimensionProxy``): its label and its scales."""

    def __init__(self, dataset: Any, dim: int):
        self._dataset = dataset
        self._dim = dim

    def _scales(self) -> list[ObjectRef]:
        listed = self._dataset.attrs.get("DIMENSION_LIST")
        if listed is None or self._dim >= len(listed):
            return []
        return [ref for ref in listed[self._dim] if isinstance(ref, ObjectRef) and ref]

    @property
    def label(self) -> str:
        labels = self._dataset.attrs.get("DIMENSION_LABELS")
        if labels is None or self._dim >= len(labels):
            return ""
        return _text(labels[self._dim]) if labels[self._dim] is not None else ""

    @label.setter
    def label(self, value: str) -> None:
        """Collective: label this dimension."""
        dims.set_label(
            self._dataset._session,
            self._dataset._path,
            self._dim,
            value,
            shape_of(self._dataset.file),
        )

    def attach_scale(self, dscale: Any) -> None:
        """Collective: attach dataset ``dscale`` (of the same file) as a scale of this
        dimension."""
        session = self._dataset._session
        path = _scale_path(session, dscale)
        dims.attach_scale(
            session, self._dataset._path, self._dim, path, shape_of(self._dataset.file)
        )

    def detach_scale(self, dscale: Any) -> None:
        """Collective: detach scale ``dscale`` from this dimension."""
        session = self._dataset._session
        path = _scale_path(session, dscale)
        dims.detach_scale(
            session, self._dataset._path, self._dim, path, shape_of(self._dataset.file)
        )

    def __len__(self) -> int:
        return len(self._scales())

    def __iter__(self) -> Iterator[Any]:
        for ref in self._scales():
            yield self._dataset.file[ref]

    def values(self) -> list[Any]:
        return list(self)

    def keys(self) -> list[str]:
        return [scale_name(scale.attrs) for scale in self]

    def items(self) -> list[tuple[str, Any]]:
        return [(scale_name(scale.attrs), scale) for scale in self]

    def __getitem__(self, item: int | str) -> Any:
        if isinstance(item, int):
            return self._dataset.file[self._scales()[item]]
        for name, scale in self.items():
            if name == item:
                return scale
        raise KeyError(f"no dimension scale named {item!r} on {self._dataset.name}[{self._dim}]")

    def __repr__(self) -> str:
        return f'<"{self.label}" dimension {self._dim} of {self._dataset.name}>'


class DimensionManager:
    """``ds.dims`` (h5py's ``DimensionManager``): one :class:`DimensionProxy` per axis."""

    def __init__(self, dataset: Any):
        self._dataset = dataset

    def __getitem__(self, index: int) -> DimensionProxy:
        ndim = self._dataset.ndim
        if not -ndim <= index < ndim:
            raise IndexError(f"dimension {index} of a {ndim}-dimensional dataset")
        return DimensionProxy(self._dataset, index % ndim)

    def __len__(self) -> int:
        return int(self._dataset.ndim)

    def __iter__(self) -> Iterator[DimensionProxy]:
        for dim in range(len(self)):
            yield self[dim]

    def create_scale(self, dset: Any, name: str = "") -> None:
        """h5py's deprecated spelling of ``dset.make_scale(name)``."""
        dset.make_scale(name)

    def __repr__(self) -> str:
        return f"<Dimensions of {self._dataset.name}>"


def _scale_path(session: Session, dscale: Any) -> str:
    if getattr(dscale, "_session", None) is not session:
        raise ValueError("a dimension scale must be a dataset of the same open file")
    return str(dscale._path)

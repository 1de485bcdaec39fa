"""A write session's metadata as a real HDF5 file in memory, on every rank: what ``obj.id``
gives a program, so that h5py's low-level API (creation property lists, datatype ids,
``h5py.h5ds.is_scale``) answers about h5subfile's objects as about h5py's.

The image is an HDF5 file of the ``core`` driver without a backing store, made on the first
``.id`` asked for, holding only the objects asked for and their parents: groups with their
creation order, datasets with their type, shape, maximum shape, chunks and fill value but no
data, and the attributes the catalogue holds (but references, which are paths there). It is a
view: what a program changes through it (data written with ``id.write``, attributes made
with ``h5py.h5a``) is not in the file, and :meth:`MetadataImage.changed` finds it, so that
the session raises instead of losing it silently.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from ..layout.references import ObjectRef
from .objects import track_creation_order

_NUMBERS = itertools.count()


@dataclass(frozen=True)
class DatasetShape:
    """What the image's copy of a dataset is made with."""

    shape: tuple[int, ...]
    dtype: np.dtype
    maxshape: tuple[int | None, ...]
    chunks: tuple[int, ...] | None
    fillvalue: Any
    track_order: bool
    named_type: str = ""  # the path of the named type it is made with, if any


def _plain(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes an image holds: all but those holding references (paths here)."""
    kept = {}
    for name, value in attrs.items():
        if isinstance(value, ObjectRef):
            continue
        if isinstance(value, np.ndarray) and value.dtype.kind == "O" and value.size:
            if any(isinstance(v, (ObjectRef, np.ndarray)) for v in value.flat):
                continue
        if isinstance(value, np.ndarray) and value.dtype.names is not None:
            if any(value.dtype[n].kind == "O" for n in value.dtype.names):
                continue
        kept[name] = value
    return kept


class MetadataImage:
    """One rank's in-memory HDF5 image of an open file's metadata (see the module)."""

    def __init__(self, track_order: bool):
        fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
        if track_order:
            track_creation_order(fcpl, links=True)
        name = f"h5subfile-image-{next(_NUMBERS)}.h5"
        fid = h5py.h5f.create(name.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=_in_memory())
        self.h5 = h5py.File(fid)
        #: the objects made here (others were made through ``.id``)
        self._given: set[str] = set()
        #: groups made as the parents of objects copied in (their own copies may follow)
        self._scaffold: set[str] = {"/"}
        #: objects whose attributes changed since they were copied in (refreshed when next asked)
        self.stale: set[str] = set()

    def group(self, path: str, track_order: bool, attrs: Mapping[str, Any]) -> h5py.Group:
        """The image's group ``path``, made (with its parents) if needed."""
        if path not in self.h5:
            self._parent(path).create_group(posixpath.basename(path), track_order=track_order)
        return self._synced(path, attrs)

    def dataset(self, path: str, made: DatasetShape, attrs: Mapping[str, Any]) -> h5py.Dataset:
        """The image's dataset ``path`` (metadata only: no storage is ever allocated), made
        if needed and given the shape it has now."""
        if path not in self.h5:
            resizable = made.maxshape != made.shape
            self._parent(path).create_dataset(
                posixpath.basename(path),
                shape=made.shape,
                dtype=self.h5[made.named_type] if made.named_type else made.dtype,
                maxshape=made.maxshape if resizable else None,
                chunks=made.chunks or (True if resizable else None),
                fillvalue=made.fillvalue,
                track_order=made.track_order,
            )
        dataset = self._synced(path, attrs)
        if dataset.shape != made.shape:
            dataset.resize(made.shape)
        return dataset

    def datatype(self, path: str, dtype: Any, attrs: Mapping[str, Any]) -> h5py.Datatype:
        """The image's named type ``path``, committed if needed."""
        if path not in self.h5:
            self._parent(path)[posixpath.basename(path)] = dtype
        return self._synced(path, attrs)

    def _parent(self, path: str) -> h5py.Group:
        parent = posixpath.dirname(path) or "/"
        self._scaffold.add(parent)  # made (if it was not) for its member, not a program's
        return self.h5.require_group(parent)

    def _synced(self, path: str, attrs: Mapping[str, Any]) -> Any:
        obj = self.h5[path]
        if path in self._given and path not in self.stale:
            return obj
        plain = _plain(attrs)
        for name in list(obj.attrs):
            if name not in attrs:  # deleted since (references stay: the image made them)
                del obj.attrs[name]
        for name, value in plain.items():
            obj.attrs[name] = value
        self._given.add(path)
        self.stale.discard(path)
        return obj

    def forget(self, path: str) -> None:
        """Group or dataset ``path`` was deleted from the file: from the image too."""
        if path in self.h5:
            del self.h5[path]
        below = path.rstrip("/") + "/"
        self._given = {p for p in self._given if p != path and not p.startswith(below)}

    def changed(self, attrs_of: Callable[[str], Mapping[str, Any]]) -> list[str]:
        """What a program changed through the image, which is not in the file: data written
        to a dataset, attributes made or deleted (``attrs_of(path)``: those the file has)."""
        found: list[str] = []
        known = self._given | self._scaffold
        made: list[str] = []
        self.h5.visit(lambda name: None if "/" + name in known else made.append(name))
        for name in made:  # made through a low-level call (h5g, h5d create, h5t commit)
            found.append(f"{type(self.h5[name]).__name__.lower()} /{name} made")
        for path in sorted(self._given):
            obj = self.h5.get(path)
            if obj is None:
                found.append(f"{path} deleted")
                continue
            if isinstance(obj, h5py.Dataset) and obj.id.get_storage_size():
                found.append(f"data written to {path}")
            if path not in self.stale and set(obj.attrs) != set(attrs_of(path)):
                found.append(f"attributes of {path} changed")
        return found

    def close(self) -> None:
        self.h5.close()


def _in_memory() -> Any:
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_fapl_core(backing_store=False)
    return fapl


# HDF5's dimension-scale calls, on the image's objects and on the master's alike --------------
def set_scale(dataset: h5py.Dataset, name: str | bytes) -> None:
    """``dataset`` becomes a dimension scale named ``name`` (h5py's ``make_scale``)."""
    h5py.h5ds.set_scale(dataset.id, name if isinstance(name, bytes) else name.encode())


def attach_scale(dataset: h5py.Dataset, dim: int, scale: h5py.Dataset) -> None:
    h5py.h5ds.attach_scale(dataset.id, scale.id, dim)


def detach_scale(dataset: h5py.Dataset, dim: int, scale: h5py.Dataset) -> None:
    h5py.h5ds.detach_scale(dataset.id, scale.id, dim)


def set_label(dataset: h5py.Dataset, dim: int, label: str) -> None:
    h5py.h5ds.set_label(dataset.id, dim, label.encode())


def attachments(dataset: h5py.Dataset) -> tuple[list[tuple[int, str]], list[tuple[str, int]]]:
    """The scales attached to ``dataset`` (dimension, scale path) and, for a scale, the
    datasets it is attached to (dataset path, dimension): what a dataset made again keeps."""
    file = dataset.file
    own = [
        (dim, file[ref].name)
        for dim, refs in enumerate(dataset.attrs.get("DIMENSION_LIST", ()))
        for ref in refs
        if ref
    ]
    listed = dataset.attrs.get("REFERENCE_LIST")
    users = [] if listed is None else [(file[row[0]].name, int(row[1])) for row in listed if row[0]]
    return own, users

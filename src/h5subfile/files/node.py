"""What every public object shares: its path in the file, its attributes (``obj.attrs``), and
the file and group it belongs to (h5py's ``name``, ``attrs``, ``file``, ``parent``)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any, ClassVar

import numpy as np

from ..engine import structure
from ..engine.session import Session
from ..errors import ObjectNotFoundError
from ..layout.references import ObjectRef
from . import dims
from .h5py_surface import refuse


def join(base: str, name: str) -> str:
    """The absolute path of ``name`` relative to group ``base``."""
    if isinstance(name, str) and name.startswith("/") and not name.strip("/"):
        return "/"  # the root group, as h5py names it
    if not isinstance(name, str) or not name.strip("/"):
        raise ObjectNotFoundError(f"invalid object name {name!r}")
    path = posixpath.normpath(name if name.startswith("/") else posixpath.join(base, name))
    return "/" + path.lstrip("/")


def valid_paths(base: str, names: Iterable[Any]) -> list[str]:
    """The absolute paths of the valid ``names`` (an invalid one fails the call itself, in its
    agreement round, the same on every rank)."""
    paths = []
    for name in names:
        try:
            paths.append(join(base, name))
        except ObjectNotFoundError:
            pass
    return paths


class AttributeManager(MutableMapping[str, Any]):
    """``obj.attrs``: attributes of a group or dataset. Setting and deleting are collective."""

    def __init__(self, session: Session, path: str):
        self._session = session
        self._path = path

    def __getattr__(self, name: str) -> Any:
        raise refuse("AttributeManager", name) or AttributeError(name)

    def create(self, name: str, data: Any = None, shape: Any = None, dtype: Any = None) -> None:
        """Collective: set attribute ``name`` to ``data`` as ``dtype`` and ``shape`` (h5py's
        ``attrs.create``; no ``data``: zeros of that shape and type)."""
        if data is None:
            value = np.zeros(() if shape is None else shape, dtype=dtype or "f8")
        else:
            value = np.asarray(data, dtype=dtype)
            if shape is not None:
                value = value.reshape(shape)
        structure.set_attr(self._session, self._path, name, value)

    def modify(self, name: str, value: Any) -> None:
        """Collective: change attribute ``name`` keeping its type and shape (h5py's
        ``attrs.modify``), or create it."""
        if name not in self:
            self[name] = value
            return
        old = np.asarray(self[name])
        if old.dtype.kind not in "OUS":
            new = np.asarray(value, dtype=None if isinstance(value, np.ndarray) else old.dtype)
            if new.shape != old.shape and not (new.size == 1 and old.size == 1):
                raise TypeError("Shape of data is incompatible with existing attribute")
            value = new.astype(old.dtype).reshape(old.shape)
            value = value[()] if value.ndim == 0 else value
        self[name] = value

    def _values(self) -> dict[str, Any]:
        return self._session.node(self._path).attrs

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values()[name]
        except KeyError:
            raise ObjectNotFoundError(f"no attribute {name!r} on {self._path}") from None

    def __setitem__(self, name: str, value: Any) -> None:
        """Collective: set attribute ``name`` (every rank passes the same value)."""
        structure.set_attr(self._session, self._path, name, value)

    def update(self, other: Any = (), /, **values: Any) -> None:
        """Collective: set several attributes (a mapping or (name, value) pairs, then the
        keywords) in one call, two rounds of coordination whatever their number, where
        setting them one by one takes two rounds each. Every rank passes the same names and
        values in the same order."""
        items = dict(other)
        items.update(values)
        structure.set_attrs(self._session, self._path, items)

    def __delitem__(self, name: str) -> None:
        """Collective: delete attribute ``name``."""
        structure.delete_attr(self._session, self._path, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._session.catalog.attribute_names(self._path))

    def __len__(self) -> int:
        return len(self._values())

    def __repr__(self) -> str:
        return f"<Attributes of {self._path}: {sorted(self._values())}>"


class Node:
    """A group or dataset of an open file (h5py's ``HLObject``)."""

    #: The h5py class this one stands for (h5py_surface.REFUSED names what it refuses).
    _h5py_kind: ClassVar[str] = ""

    def __getattr__(self, name: str) -> Any:
        raise refuse(self._h5py_kind, name) or AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
        )

    #: How a node makes its file and a group (``.file``, ``.parent``): set by files/file.py and
    #: files/group.py, whose classes are built on this one (so it cannot import them).
    file_of: ClassVar[Callable[[Session], Any]]
    group_at: ClassVar[Callable[[Session, str], Any]]

    def __init__(self, session: Session, path: str, name: str | None = None):
        """``path``: the object's own path (the catalogue's); ``name``: the path it was reached
        by, through soft or hard links (its ``name``, as HDF5 gives it), if another."""
        self._session = session
        self._path = path
        self._name = path if name is None else name

    @property
    def name(self) -> Any:  # str, or None once popped (h5py types it so)
        """The path this object was reached by (HDF5's name for it: kept when it is moved
        or unlinked since, as HDF5 keeps it); None once popped, as h5py's."""
        held = self._session.catalog.held
        if held and self._path in held:
            return None
        return self._name

    @property
    def attrs(self) -> AttributeManager:
        return AttributeManager(self._session, self._path)

    @property
    def id(self) -> Any:  # noqa: A003 - h5py's name
        """HDF5's identifier of this object, for h5py's low-level API (creation property lists,
        datatypes, ``h5py.h5ds``...): the master's, read-only, in a read session; in a write
        session, every rank's in-memory image of the file's metadata (changes made through it
        are not written to the file: the close raises if it finds any)."""
        return dims.hdf5_id(self)

    @property
    def ref(self) -> ObjectRef:
        """A reference to this object (``f[obj.ref]`` opens it): its path."""
        return ObjectRef(self._path, self._session.path)

    @property
    def file(self) -> Any:
        """The :class:`~.file.File` this object belongs to."""
        return Node.file_of(self._session)

    @property
    def parent(self) -> Any:
        """The :class:`~.group.Group` holding this object (the root group's is itself)."""
        if self._name != self._path:  # reached through a link: its group by that path
            return Node.file_of(self._session)[posixpath.dirname(self._name) or "/"]
        return Node.group_at(self._session, posixpath.dirname(self._path) or "/")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Node)
            and other._session is self._session
            and other._path == self._path
        )

    def __hash__(self) -> int:
        return hash((id(self._session), self._path))

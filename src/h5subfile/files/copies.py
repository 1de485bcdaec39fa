"""h5py's ``Group.copy`` on h5subfile: a group or dataset of any open file (plain h5py's,
h5subfile's, this one's) made again as new objects of a write session, through the public
calls: ``create_group``, ``create_dataset(data=...)``, ``attrs.update``, links and ``dims``.

As HDF5's ``H5Ocopy``: an object that several hard links in the copied group name is copied
once, and those links name the copy; references in attributes (a program's own, and the
dimension scales') point at the copies of the objects they point at when those are copied
too, else at the same objects of this file. Everything the copy would refuse (a type
h5subfile does not store, a reference to an object of another file that is not copied) is
found first, on every rank alike (each reads the same source), so that a refused copy makes
nothing."""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

from ..errors import UnsupportedError
from ..layout.dtypes import check_dtype
from ..layout.references import SCALE_ATTRS, ObjectRef
from .datatype import Datatype
from .dims import SCALE_CLASS, _text


def _is_group(obj: Any) -> bool:
    return isinstance(obj, h5py.Group) or hasattr(obj, "create_group")


def _is_type(obj: Any) -> bool:
    return isinstance(obj, (h5py.Datatype, Datatype))


def _identity(obj: Any) -> Any:
    """What tells one object from another, whatever names reach it: HDF5's for plain h5py's
    (its file and address), the session and own path for h5subfile's."""
    if isinstance(obj, h5py.HLObject):
        return ("h5py", obj.id)
    return ("h5subfile", id(obj._session), obj._path)


def _is_ref(value: Any) -> bool:
    return isinstance(value, (ObjectRef, h5py.Reference))


def _refs(value: Any) -> list[Any]:
    """The references a value holds (itself, or the items of an array of them)."""
    if _is_ref(value):
        return [value]
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":
        return [item for item in value.flat if _is_ref(item)]
    return []


def _scaled(obj: Any) -> bool:
    """Whether ``obj``'s scale attributes are HDF5's dimension scales' (made again through
    ``dims``, not copied as values)."""
    attrs = obj.attrs
    if "DIMENSION_LIST" in attrs or "REFERENCE_LIST" in attrs:
        return True
    value = attrs.get("CLASS")
    return value is not None and _text(value).encode() == SCALE_CLASS


class Copy:
    """One ``copy`` call: what it copies and how (h5py's keyword arguments)."""

    def __init__(self, shallow: bool, expand_soft: bool, expand_external: bool, no_attrs: bool):
        self.shallow = shallow
        self.expand_soft = expand_soft
        self.expand_external = expand_external
        self.no_attrs = no_attrs
        #: the source objects copied (by :func:`_identity`), known from the check
        self.inside: set[Any] = set()
        #: their copies, made (an object reached again by another hard link is linked)
        self.made: dict[Any, Any] = {}
        #: what is done once every object is made: (source, copy) of each object whose
        #: attributes hold references or that has dimension scales
        self.later: list[tuple[Any, Any]] = []

    def _members(self, group: Any, depth: int) -> list[tuple[str, Any, bool]]:
        """(name, link or object, is a link kept as it is) of a group copied at ``depth``."""
        if self.shallow and depth > 0:
            return []
        out = []
        for name in group:
            link = group.get(name, getlink=True)
            kept = (isinstance(link, h5py.SoftLink) and not self.expand_soft) or (
                isinstance(link, h5py.ExternalLink) and not self.expand_external
            )
            out.append((name, link if kept else group[name], kept))
        return out

    def check(self, source: Any, dest: Any) -> None:
        """Raise UnsupportedError for what the copy of ``source`` into ``dest``'s file could
        not make: first every object to copy is found, then what they refer to."""
        sources: list[Any] = []
        self._find(source, 0, sources)
        if self.no_attrs:
            return
        for obj in sources:
            found = [(key, ref) for key, value in _split(obj)[1].items() for ref in _refs(value)]
            if "DIMENSION_LIST" in obj.attrs:
                found += [
                    ("DIMENSION_LIST", scale.ref) for proxy in obj.dims for scale in proxy.values()
                ]
            for key, ref in found:
                if ref and self._target(obj, ref, dest) is None:
                    raise UnsupportedError(
                        f"copy: attribute {key!r} of {obj.name} refers to "
                        f"{obj.file[ref].name} of another file, which is not copied with "
                        "it (a reference points into the file that holds it)"
                    )

    def _find(self, source: Any, depth: int, found: list[Any]) -> None:
        identity = _identity(source)
        if identity in self.inside:
            return
        self.inside.add(identity)
        found.append(source)
        if _is_type(source):
            return
        if not _is_group(source):
            check_dtype(source.dtype)
            return
        for _, member, kept in self._members(source, depth):
            if not kept:
                self._find(member, depth + 1, found)

    def _target(self, owner: Any, ref: Any, dest: Any) -> Any:
        """What reference ``ref`` of ``owner``'s attribute points at in ``dest``'s file: the
        copy of its object (made, or to be made: its identity), or the object itself when it
        is of ``dest``'s file; None for another file's object that is not copied."""
        target = owner.file[ref]
        identity = _identity(target)
        if identity in self.inside:
            return self.made.get(identity, identity)
        if getattr(target, "_session", None) is dest._session:
            return target
        return None

    def copy(self, parent: Any, name: str, source: Any, depth: int = 0) -> None:
        """Collective: ``source`` made again as ``parent[name]``, then (at the top) what
        refers to objects: reference attributes and dimension scales."""
        identity = _identity(source)
        if identity in self.made:
            parent[name] = self.made[identity]  # another name of an object copied already
            return
        if _is_type(source):
            parent[name] = source.dtype
            made = parent[name]
            self.made[identity] = made
        elif _is_group(source):
            made = parent.create_group(name)
            self.made[identity] = made
            for member, value, kept in self._members(source, depth):
                if kept:
                    made[member] = value
                else:
                    self.copy(made, member, value, depth + 1)
        else:
            made = parent.create_dataset(name, data=_read(source), **_storage(source))
            self.made[identity] = made
        if not self.no_attrs and len(source.attrs):
            plain, referring = _split(source)
            made.attrs.update(plain)
            if referring or _scaled(source):
                self.later.append((source, made))
        if depth == 0:
            self._refer(parent)

    def _refer(self, dest: Any) -> None:
        """Reference attributes and dimension scales, once every object is made: scales
        first (a dataset's scales must be scales before they are attached)."""
        for source, made in self.later:
            if _is_scale(source):
                made.make_scale(_text(source.attrs.get("NAME", b"")))
        for source, made in self.later:
            _, referring = _split(source)
            for key, value in referring.items():
                made.attrs[key] = self._mapped(source, value, dest)
            if "DIMENSION_LIST" in source.attrs or "DIMENSION_LABELS" in source.attrs:
                for dim, proxy in enumerate(source.dims):
                    for scale in proxy.values():
                        made.dims[dim].attach_scale(self._object(source, scale.ref, dest))
                    if proxy.label:
                        made.dims[dim].label = proxy.label

    def _object(self, owner: Any, ref: Any, dest: Any) -> Any:
        target = self._target(owner, ref, dest)
        assert target is not None and not isinstance(target, tuple), "checked, then made"
        return target

    def _mapped(self, owner: Any, value: Any, dest: Any) -> Any:
        """An attribute value with each reference pointing where :meth:`_target` says."""
        if _is_ref(value):
            return self._object(owner, value, dest).ref if value else ObjectRef("")
        out = np.empty(value.shape, dtype=h5py.ref_dtype)
        for index, item in np.ndenumerate(value):
            out[index] = self._mapped(owner, item, dest)
        return out


def _is_scale(obj: Any) -> bool:
    value = obj.attrs.get("CLASS")
    return value is not None and _text(value).encode() == SCALE_CLASS


def _split(source: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``source``'s attributes: those copied as values, and those holding references (but the
    dimension scales', made again through ``dims``)."""
    scaled = _scaled(source)
    plain: dict[str, Any] = {}
    referring: dict[str, Any] = {}
    for key, value in source.attrs.items():
        if scaled and key in SCALE_ATTRS:
            continue
        (referring if _refs(value) or _is_ref(value) else plain)[key] = value
    return plain, referring


def _read(dataset: Any) -> np.ndarray:
    """A dataset's values, on every rank: collectively for one of h5subfile's."""
    if isinstance(dataset, h5py.Dataset):
        return np.asarray(dataset[()])
    with dataset.collective:
        return np.asarray(dataset[()])


def _storage(dataset: Any) -> dict[str, Any]:
    """The creation arguments that keep a dataset's storage as it is."""
    spec: dict[str, Any] = {"fillvalue": dataset.fillvalue}
    if dataset.maxshape != dataset.shape:
        spec["maxshape"] = dataset.maxshape
    if dataset.chunks is not None:
        spec.update(chunks=dataset.chunks, shuffle=dataset.shuffle, fletcher32=dataset.fletcher32)
        if dataset.compression is not None:
            spec.update(compression=dataset.compression, compression_opts=dataset.compression_opts)
    return spec

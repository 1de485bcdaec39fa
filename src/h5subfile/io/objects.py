"""The groups and datasets h5subfile makes in its files, through h5py's low-level API: their
creation properties (attributes kept in the object's header, creation order), link names as
h5py makes them, the groups of a file by path (:class:`Groups`), and the datasets the ranks
write into: early-allocated contiguous ones, written directly at their offsets, and chunked
ones, written chunk by chunk (:mod:`.h5` makes the virtual datasets over them)."""

from __future__ import annotations

import math
import os
import posixpath
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from ..layout.catalog import Link
from .posix import RawFile

#: (max_compact, min_dense) of HDF5's ``H5Pset_attr_phase_change`` for every group and dataset
#: h5subfile makes: up to 64 attributes stay in the object's header, as every attribute does
#: in a file of HDF5's oldest format (h5py's and parallel HDF5's default), before HDF5 moves
#: them to dense storage (a fractal heap and a B-tree of names per object). HDF5's default, 8,
#: put most of a model's variables in dense storage, which made a master's attributes slower
#: to write and the master about twice as large. An attribute too large for a header (64 KiB)
#: goes to dense storage whatever this says.
ATTRIBUTE_PHASE_CHANGE = (64, 48)


def creation_properties(kind: Any, track_order: bool = False, links: bool = False) -> Any:
    """A new creation property list of ``kind`` (``h5py.h5p.GROUP_CREATE``, ``DATASET_CREATE``
    or ``FILE_CREATE``) for an object h5subfile makes: :data:`ATTRIBUTE_PHASE_CHANGE`, and
    ``track_order`` as :func:`track_creation_order` sets it (``links``: of a group's members)."""
    plist = h5py.h5p.create(kind)
    plist.set_attr_phase_change(*ATTRIBUTE_PHASE_CHANGE)
    if track_order:
        track_creation_order(plist, links)
    return plist


#: Link creation properties of an ASCII name and of a UTF-8 one, made once (HDF5 only reads
#: them when it makes a link)
_LCPL: dict[bool, Any] = {}


def link_name(name: str) -> tuple[bytes, Any]:
    """A new link's name and link creation properties, as h5py makes them: ASCII when it can
    be, else UTF-8, flagged so."""
    ascii_name = name.isascii()
    lcpl = _LCPL.get(ascii_name)
    if lcpl is None:
        lcpl = _LCPL[ascii_name] = h5py.h5p.create(h5py.h5p.LINK_CREATE)
        if not ascii_name:
            lcpl.set_char_encoding(h5py.h5t.CSET_UTF8)
    return name.encode(), lcpl


def h5py_link(link: Link) -> Any:
    """h5py's object for a link of the catalogue (``SoftLink``, ``ExternalLink``, or for a
    further name of an object ``HardLink``)."""
    if link.kind == "soft":
        return h5py.SoftLink(link.target)
    if link.kind == "external":
        return h5py.ExternalLink(link.file, link.target)
    return h5py.HardLink()


def catalogue_link(value: Any) -> Link | None:
    """The catalogue's :class:`Link` of h5py's ``SoftLink`` or ``ExternalLink``; None for
    anything else (a hard link names an object, which only the caller can find)."""
    if isinstance(value, h5py.SoftLink):
        return Link("soft", value.path)
    if isinstance(value, h5py.ExternalLink):
        return Link("external", value.path, value.filename)
    return None


def track_creation_order(plist: Any, links: bool) -> None:
    """Make a creation property list keep (and index) the creation order of the object's
    attributes and, for a group (``links``), of its members: h5py's ``track_order=True``."""
    flags = h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED
    plist.set_attr_creation_order(flags)
    if links:
        plist.set_link_creation_order(flags)


def tracks_order(obj: Any) -> bool:
    """Whether an open group or dataset keeps its creation order (``track_order``)."""
    plist = obj.id.get_create_plist()
    return bool(plist.get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED)


def fill_array(dtype: np.dtype, fill: bytes | None) -> np.ndarray | None:
    """A fill value's bytes (one element) as HDF5 takes it (None: HDF5's zeros)."""
    return None if fill is None else np.frombuffer(fill, dtype=dtype).reshape(())


class Groups:
    """The groups of an open file by path, created on first use and remembered (so that creating
    many datasets does not ask HDF5 about the same parent group again and again).

    ``keep_made``: the datasets made here are kept open too (:meth:`remember`), for a file
    whose datasets get attributes (the master); a subfile's are closed once made."""

    def __init__(self, h5: h5py.File, keep_made: bool = False):
        self.h5 = h5
        self.keep_made = keep_made
        self._known: dict[str, h5py.Group] = {"/": h5["/"]}
        #: other objects' low-level identifiers, opened by :meth:`object_id` or remembered
        #: when made (:meth:`remember`)
        self._opened: dict[str, Any] = {}
        #: paths of the groups and datasets to be created keeping their creation order
        #: (h5py's ``track_order=True``)
        self.tracked: set[str] = set()
        #: datasets to be created with a named (committed) type: dataset path -> type path
        #: (h5py's ``create_dataset(..., dtype=f[type name])``)
        self.typed: dict[str, str] = {}

    def named_type(self, path: str) -> Any:
        """HDF5's identifier of the named type dataset ``path`` is created with, or None."""
        named = self.typed.get(path)
        return None if named is None else h5py.h5t.open(self.h5.id, named.encode())

    def require(self, path: str) -> h5py.Group:
        group = self._known.get(path)
        if group is None:
            if path in self.h5:  # not h5.get: HDF5's error for a missing path can be garbage
                group = self.h5[path]
                if not isinstance(group, h5py.Group):
                    raise TypeError(f"Incompatible object ({type(group).__name__}) at {path}")
            else:
                tracked = path in self.tracked
                gcpl = creation_properties(h5py.h5p.GROUP_CREATE, tracked, links=True)
                name, lcpl = link_name(posixpath.basename(path))
                made = h5py.h5g.create(self.parent_of(path).id, name, lcpl=lcpl, gcpl=gcpl)
                group = h5py.Group(made)
            self._known[path] = group
        return group

    def parent_of(self, path: str) -> h5py.Group:
        return self.require(posixpath.dirname(path) or "/")

    def object_id(self, path: str) -> Any:
        """The low-level identifier of group or dataset ``path``, opened once (a master's
        attributes are set one by one, thousands of them: HDF5's path lookup each time cost
        more than the write)."""
        group = self._known.get(path)
        if group is not None:
            return group.id
        found = self._opened.get(path)
        if found is None:
            found = self._opened[path] = h5py.h5o.open(self.h5.id, path.encode())
        return found

    def remember(self, path: str, made: Any) -> None:
        """Keep the identifier of dataset ``path``, just made, for :meth:`object_id` (with
        ``keep_made``)."""
        if self.keep_made:
            self._opened[path] = made

    def forget(self, path: str) -> None:
        """Forget ``path`` and the groups and datasets below it (unlinked from the file, or
        made again)."""
        if isinstance(self._opened.pop(path, None), h5py.h5d.DatasetID):
            return  # a dataset: nothing below it
        below = path.rstrip("/") + "/"
        for held in (self._known, self._opened):
            for known in [k for k in held if k == path or k.startswith(below)]:
                del held[known]


#: Creation property lists, dataspaces and types made for :func:`create_early_dataset`, by
#: what they were made of: a master of a thousand small datasets has few distinct ones, and
#: making them anew cost more than HDF5's creation (HDF5 copies what it keeps of each).
_MADE: dict[tuple[Any, ...], Any] = {}


def _made(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    found = _MADE.get(key)
    if found is None:
        if len(_MADE) > 1024:
            _MADE.clear()
        found = _MADE[key] = make()
    return found


def _plain_dtype(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a plain number type: one HDF5 type for every dtype numpy calls
    equal to it (not so for strings, enums or compounds, told apart by metadata)."""
    return dtype.fields is None and not dtype.hasobject and not dtype.metadata


def _dataspace(shape: tuple[int, ...]) -> Any:
    return h5py.h5s.create_simple(shape) if shape else h5py.h5s.create(h5py.h5s.SCALAR)


def _early_dcpl(tracked: bool, fill: np.ndarray | None) -> Any:
    dcpl = creation_properties(h5py.h5p.DATASET_CREATE, tracked)
    dcpl.set_layout(h5py.h5d.CONTIGUOUS)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    if fill is not None:
        dcpl.set_fill_value(fill)
    return dcpl


def create_early_dataset(
    groups: Groups,
    path: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    fill: bytes | None = None,
) -> int:
    """Create a contiguous dataset whose storage is allocated now and never filled by HDF5.

    Returns the byte offset of its data in the file, where ranks then write directly. Storage
    beyond the bytes the file holds on disk reads as zeros until written (HDF5 reserves room
    past the file's end, for its metadata block, so most small datasets land beyond them);
    storage below them (space freed earlier in this session: a dataset unlinked) is zeroed
    first, so that what nobody writes reads as zeros (HDF5's default fill value) there too.
    ``fill`` (one element's bytes, not all zeros): the dataset's fill value, written over its
    storage now (what nobody writes reads as it; only scalars and small datasets are made so).
    """
    value = fill_array(dtype, fill)
    tracked = path in groups.tracked
    named = groups.named_type(path)
    if named is not None:
        dcpl, type_id = _early_dcpl(tracked, value), named
    elif _plain_dtype(dtype):
        dcpl = _made(("dcpl", tracked, dtype, fill), lambda: _early_dcpl(tracked, value))
        type_id = _made(("type", dtype), lambda: h5py.h5t.py_create(dtype, logical=True))
    else:  # numpy calls dtypes equal that HDF5 stores differently (strings, enums)
        dcpl, type_id = _early_dcpl(tracked, value), h5py.h5t.py_create(dtype, logical=True)
    space = _made(("space", shape), lambda: _dataspace(shape))
    name, lcpl = link_name(posixpath.basename(path))
    end = _on_disk(groups.h5)
    dataset = h5py.h5d.create(groups.parent_of(path).id, name, type_id, space, dcpl=dcpl, lcpl=lcpl)
    groups.remember(path, dataset)
    offset = dataset.get_offset()
    if offset is None:
        raise OSError(f"HDF5 allocated no storage for {path} (shape {shape})")
    if value is not None or offset < end:
        element = fill if fill is not None else bytes(dtype.itemsize)
        _fill(groups.h5.filename, int(offset), math.prod(shape), element)
    return int(offset)


def _on_disk(h5: h5py.File) -> int:
    """How many bytes ``h5`` holds on disk now (beyond them, a file reads as zeros); HDF5's
    size of the file, which counts the room it reserved, where its driver has no descriptor."""
    try:
        return os.fstat(h5.id.get_vfd_handle()).st_size
    except (OSError, ValueError, TypeError):
        return int(h5.id.get_filesize())


#: Bytes written at a time by :func:`_fill` (a few MiB).
FILL_BYTES = 16 << 20


def _fill(path: str, offset: int, count: int, element: bytes) -> None:
    """Write ``element`` (one element's bytes) ``count`` times from byte ``offset`` of
    ``path``, in writes of at most :data:`FILL_BYTES`.

    Written directly, as the ranks write data, never through HDF5: HDF5 keeps what it writes
    to a contiguous dataset in its sieve buffer, up to 64 KiB around it, and writes the buffer
    out later, at the latest when the file closes, over whatever the ranks have written there
    by then (a dataset filled with zeros this way read back as zeros, not as its data)."""
    if not count or not element:
        return
    per_write = max(1, FILL_BYTES // len(element))
    block = element * min(per_write, count)
    raw = RawFile(path, writable=True)
    try:
        done = 0
        while done < count:
            n = min(per_write, count - done)
            raw.pwrite(memoryview(block)[: n * len(element)], offset + done * len(element))
            done += n
    finally:
        raw.close()


def commit_type(groups: Groups, path: str, dtype: np.dtype) -> None:
    """A named (committed) type at ``path``, as h5py's ``group[name] = dtype`` makes it."""
    groups.parent_of(path)[posixpath.basename(path)] = dtype


def committable(dtype: np.dtype) -> None:
    """TypeError (HDF5's words, through h5py) unless HDF5 can hold ``dtype`` as a type."""
    h5py.h5t.py_create(dtype, logical=True)


def create_chunked_dataset(
    groups: Groups,
    path: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    chunks: tuple[int, ...],
    filters: dict[str, Any],
    fill: bytes | None = None,
) -> h5py.Dataset:
    """Create a chunked dataset with h5py's filter arguments (``FilterSpec.h5py_kwargs()``)
    and fill value (``fill``: one element's bytes; None: zeros); its chunks are then written
    whole with ``write_direct_chunk``."""
    named = groups.typed.get(path)
    return groups.parent_of(path).create_dataset(
        posixpath.basename(path),
        shape=shape,
        dtype=dtype if named is None else groups.h5[named],
        chunks=chunks,
        fillvalue=fill_array(dtype, fill),
        dcpl=creation_properties(h5py.h5p.DATASET_CREATE, path in groups.tracked),
        **filters,
    )

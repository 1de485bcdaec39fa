"""``Group``: a group of an open file, like ``h5py.Group``; creating groups and datasets.

:meth:`Group.create_dataset` takes h5py's signature (``data=``, and ``g[name] = array``),
with declared blocks (``block=`` or ``start=``/``count=``) as a fast path; also
``require_dataset``, ``write_dataset(s)`` (create and write in one call), ``create_datasets``,
``create_group``/``require_group`` and h5py's navigation.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import h5py
import numpy as np

from ..engine import announced, commit, create, dims, learned, structure, transfer
from ..engine.messages import ROOT_WRITES, DatasetRequest, WriteRequest
from ..engine.prepare import convert
from ..errors import H5SubfileError, ObjectExistsError, ObjectNotFoundError, UnsupportedError
from ..io.h5 import open_external
from ..io.objects import catalogue_link, h5py_link
from ..layout.catalog import ExternalLinkReached, Link, NameTakenAway, freed_name
from ..layout.references import ObjectRef
from .copies import Copy
from .dataset import Dataset
from .datatype import Datatype
from .dims import shape_of
from .node import Node, join, valid_paths


def _tracking(track_order: bool | None) -> bool:
    """h5py's ``track_order`` argument: None is h5py's ``get_config().track_order``."""
    return bool(h5py.get_config().track_order if track_order is None else track_order)


class Group(Node):
    """A group: a container of groups and datasets, like ``h5py.Group``."""

    _h5py_kind = "Group"

    # navigation (local) ----------------------------------------------------------------------
    def __getitem__(self, name: str | ObjectRef) -> Group | Dataset | Any:
        """The object ``name`` names, through soft and hard links; through an external link,
        the other file's object as plain h5py opens it (read-only)."""
        self._session.require_open()
        catalog = self._session.catalog
        if isinstance(name, ObjectRef):
            if not name:
                raise ValueError("Invalid HDF5 object reference (a null reference)")
            name = name.path
            if name in catalog.nodes:  # an object's own path, a name of it or not (moved)
                kind = _class_of(self._session.node(name).kind)
                return kind(self._session, name, catalog.name_of(name))
        try:
            path = catalog.resolve(join(self._path, name))
        except ExternalLinkReached as reached:
            link = catalog.links[reached.link]
            return open_external(self._session.path, link.file, link.target, reached.rest)
        info = self._session.node(path)
        shown = join(self._name, name) if catalog.links or self._name != self._path else path
        return _class_of(info.kind)(self._session, path, shown)

    def _new_path(self, name: str) -> str:
        """Where a new object ``name`` goes: in its group reached through links, as HDF5
        creates it; refused where a name on the way was taken away in the session."""
        catalog = self._session.catalog
        if not catalog.links and not catalog.unnamed:
            return join(self._path, name)
        try:
            return self._link_path(name)
        except NameTakenAway as exc:  # the same on every rank
            freed = UnsupportedError(freed_name(join(self._name, name), exc.name))
            raise structure.agreed(freed) from None
        except H5SubfileError as exc:  # a dangling soft link on the way, as HDF5 refuses it
            raise structure.agreed(exc) from None

    def _link_path(self, name: str) -> str:
        """Where the link ``name`` itself is: its group reached through links, and its name."""
        path = join(self._path, name)
        if path == "/":
            return path
        try:
            parent = self._session.catalog.resolve(posixpath.dirname(path), within=True)
        except ExternalLinkReached:
            raise UnsupportedError(
                f"{path} lies in another file (through an external link): open that file"
            ) from None
        return posixpath.join(parent, posixpath.basename(path))

    def get(
        self, name: str, default: Any = None, getclass: bool = False, getlink: bool = False
    ) -> Any:
        """h5py's ``get``: the object (or ``default`` if there is none); ``getlink``: the
        link itself (``HardLink``, ``SoftLink`` or ``ExternalLink``), ``getclass``: its
        class (with ``getlink``, the link's class)."""
        if not (getclass or getlink):
            try:
                return self[name]
            except KeyError:  # and a dangling external link: h5py's KeyError
                return default
        if name not in self:
            return default
        if not getlink:
            return type(self[name])
        link = self._session.catalog.links.get(self._link_path(name))
        found = h5py.HardLink() if link is None else h5py_link(link)
        return type(found) if getclass else found

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` names a link (h5py's: a dangling soft link counts, a path that
        goes through one does not)."""
        if not isinstance(name, str):
            return False
        catalog = self._session.catalog
        try:
            path = self._link_path(name)
        except ObjectNotFoundError:
            return False
        except UnsupportedError:  # through an external link: as HDF5 finds it
            try:
                self[name]
            except (KeyError, OSError):
                return False
            return True
        return (path in catalog.nodes and path not in catalog.unnamed) or path in catalog.links

    def keys(self) -> list[str]:
        return self._session.catalog.children(self._path)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def values(self) -> list[Group | Dataset]:
        return [self[k] for k in self.keys()]

    def items(self) -> list[tuple[str, Group | Dataset]]:
        return [(k, self[k]) for k in self.keys()]

    def visititems(self, fn: Any) -> Any:
        """Call ``fn(relative_name, object)`` for every object below this group (h5py's
        ``visititems``)."""
        return self.visit(lambda name: fn(name, self[name]))

    def visit(self, fn: Any) -> Any:
        """Call ``fn(relative_name)`` for every object below this group, each once, by the
        first name met (h5py's ``visit``: depth first, members by name; soft and external
        links are not followed); a value other than None stops the visit and is returned."""
        return self._visit(fn, links=False)

    def visit_links(self, fn: Any) -> Any:
        """h5py's ``visit_links``: ``fn(relative_name)`` for every link below this group,
        soft and external ones too (a group reached by two hard links is entered once)."""
        return self._visit(fn, links=True)

    def _visit(self, fn: Any, links: bool) -> Any:
        self._session.require_open()
        for name, _ in self._session.catalog.walk(self._path, links):
            result = fn(name)
            if result is not None:
                return result
        return None

    def visititems_links(self, fn: Any) -> Any:
        """h5py's ``visititems_links``: ``fn(name, link)`` for every link below this group."""
        return self.visit_links(lambda name: fn(name, self.get(name, getlink=True)))

    def update(self, other: Any = (), /, **more: Any) -> None:
        """Collective: ``group[name] = value`` for each pair (a mapping or pairs, then the
        keywords), as ``MutableMapping.update`` does for h5py's groups."""
        pairs = list(other.items() if isinstance(other, Mapping) else other)
        for name, value in [*pairs, *more.items()]:
            self[name] = value

    def setdefault(self, name: str, default: Any = None) -> Any:
        """Collective: ``group[name]``, made from ``default`` first if missing."""
        if name not in self:
            self[name] = default
        return self[name]

    def copy(
        self,
        source: Any,
        dest: Any,
        name: str | None = None,
        shallow: bool = False,
        expand_soft: bool = False,
        expand_external: bool = False,
        expand_refs: bool = False,
        without_attrs: bool = False,
    ) -> None:
        """Collective: h5py's ``copy``: group or dataset ``source`` (a path in this file, or an
        object of this file or of a file plain h5py or h5subfile has open) copied to ``dest``
        (a path from this group, or a group of this file with ``name``: by default the
        source's own name), with its attributes (``without_attrs``: none) and, for a group,
        what lies below it (``shallow``: its members, themselves empty). A dataset keeps its
        shape, type, chunks, filters, maximum shape and fill value; every rank reads it whole
        (a dataset of this file collectively) and rank 0 writes the copy, as with
        ``create_dataset(data=...)``. Soft and external links in a copied group stay links
        (``expand_soft``, ``expand_external``: copied as what they point to); an object two
        hard links in it name is copied once. References in attributes, and dimension
        scales, point at the copies of what they point at where that is copied too, else at
        the same object of this file; one to another file's object that is not copied is
        refused before anything is made, as ``expand_refs``."""
        if expand_refs:
            raise UnsupportedError(
                "copy(expand_refs=True): h5subfile copies referenced objects only with the "
                "group that holds them"
            )
        if isinstance(source, str):
            source = self[source]
        if isinstance(dest, str):
            parent, target = self, dest
        else:
            if not isinstance(dest, Group) or dest._session is not self._session:
                raise UnsupportedError("copy: dest must be a path or a group of this file")
            parent = dest
            target = name or posixpath.basename(source.name.rstrip("/")) or "/"
        copying = Copy(shallow, expand_soft, expand_external, without_attrs)
        try:
            copying.check(source, parent)
        except H5SubfileError as exc:
            raise structure.agreed(exc) from None  # read alike on every rank
        copying.copy(parent, target, source)

    def move(self, source: str, dest: str) -> None:
        """Collective: h5py's ``move``: the link ``source`` renamed ``dest`` (paths from this
        group); a group or dataset keeps its data, attributes and members, and the objects a
        program holds of it keep working."""
        path, new = self._link_path(source), self._link_path(dest)
        catalog = self._session.catalog
        if path in catalog.links:
            structure.move_link(self._session, path, new)
        else:
            structure.move(self._session, path, new)

    def create_dataset_like(self, name: str, other: Any, **changes: Any) -> Dataset:
        """Collective: a dataset with ``other``'s shape, dtype, chunks, filters, maximum shape
        and fill value (h5py's or h5subfile's dataset), ``changes`` overriding them."""
        spec: dict[str, Any] = dict(
            shape=other.shape,
            dtype=other.dtype,
            maxshape=other.maxshape if other.maxshape != other.shape else None,
            fillvalue=other.fillvalue,
        )
        if other.chunks is not None:
            spec.update(chunks=other.chunks, compression=other.compression)
            spec.update(shuffle=other.shuffle, fletcher32=other.fletcher32)
            if other.compression is not None:
                spec["compression_opts"] = other.compression_opts
        spec.update(changes)
        return self.create_dataset(name, **spec)

    def __repr__(self) -> str:
        if self._session.closed:
            return f"<Closed h5subfile.Group {self._path!r}>"
        return f"<h5subfile.Group {self._path!r} ({len(self)} members)>"

    # structure (collective) ------------------------------------------------------------------
    def create_group(self, name: str, track_order: bool | None = None) -> Group:
        """Collective: create a group (and missing intermediate groups); ``track_order`` (by
        default h5py's ``get_config().track_order``): its members and attributes listed in
        creation order, in h5subfile and in the file, as h5py does."""
        path = self._new_path(name)
        commit.step_boundary(self._session, [path])
        structure.create_group(self._session, path, _tracking(track_order))
        return Group(self._session, path, join(self._name, name))

    def require_group(self, name: str) -> Group:
        """Collective: the group ``name``, created if missing."""
        path = self._new_path(name)
        info = self._session.catalog.nodes.get(path)
        if info is not None and path not in self._session.catalog.unnamed:
            if info.kind != "group":
                raise ObjectExistsError(f"{path} exists and is a dataset, not a group")
            return Group(self._session, path)
        return self.create_group(name)

    def create_dataset(
        self,
        name: str,
        shape: Sequence[int] | int | None = None,
        dtype: Any = None,
        data: Any = None,
        *,
        block: Sequence[slice] | None = None,
        start: Sequence[int] | None = None,
        count: Sequence[int] | None = None,
        chunks: bool | Sequence[int] | None = None,
        compression: Any = None,
        compression_opts: Any = None,
        shuffle: bool | None = None,
        fletcher32: bool | None = None,
        maxshape: Sequence[int | None] | None = None,
        fillvalue: Any = None,
        track_order: bool | None = None,
    ) -> Dataset:
        """Collective: create a dataset of ``shape`` and ``dtype`` (``"f4"`` by default), as
        h5py's ``create_dataset`` with the ``mpio`` driver.

        Without ``block``/``start``/``count`` on any rank (h5py's programs), the dataset's
        layout is learned from the writes: any rank writes any selection with
        ``dset[sel] = x``, independently or inside ``with dset.collective:``, and each group's
        subfile holds what its ranks wrote (docs/DESIGN-NOTES.md, *Datasets written where
        each rank writes*). ``maxshape`` (None: unlimited) lets :meth:`Dataset.resize` grow
        it; ``fillvalue`` is what elements never written read as. ``data`` (the same array on
        every rank, as with h5py's mpio driver) gives shape, dtype and content: rank 0
        writes it, collectively.

        Declaring a block is the fast path when each rank knows its region: ``block`` (a
        tuple of slices) or ``start`` + ``count`` give the region this rank will write with
        :meth:`Dataset.write` (a rank that writes nothing passes neither). Blocks must lie in
        ``shape`` and must not overlap (checked on all ranks together). A scalar
        (``shape=()``) is written by rank 0: the other ranks' values are ignored.

        Storage, as in h5py: ``chunks`` (True: the plan picks, aligned to the ranks' blocks when
        it can; or a shape), ``compression`` ("gzip", "lzf", "zstd", "lz4", "blosc", "blosc2",
        "bitshuffle", "name:level", an hdf5plugin filter object or a filter id),
        ``compression_opts``, ``shuffle``, ``fletcher32``. Without them the plan's default
        compression applies (none unless set). Chunks are compressed by the ranks that hold the
        data and written whole (direct chunk writes); without a filter, a dataset whose
        layout is learned is stored contiguous (``chunks`` is then None). ``track_order`` (by
        default h5py's ``get_config().track_order``): its attributes listed in creation order.
        """
        if shape is None and data is None:
            raise TypeError("create_dataset: give a shape, or data (as h5py asks)")
        spec = dict(
            shape=shape,
            block=block,
            start=start,
            count=count,
            chunks=chunks,
            compression=compression,
            compression_opts=compression_opts,
            shuffle=shuffle,
            fletcher32=fletcher32,
            maxshape=maxshape,
            fillvalue=fillvalue,
        )
        return self._create_one(name, spec, data, dtype, _tracking(track_order))

    def _create_one(
        self, name: str, spec: dict[str, Any], data: Any, dtype: Any, tracked: bool
    ) -> Dataset:
        """:meth:`create_dataset` once its arguments are gathered: a named type of this file
        chosen first (the dataset shares it), ``track_order`` set, then the dataset made."""
        session = self._session
        if isinstance(dtype, Datatype) and dtype._session is session:
            path = self._new_path(name)
            structure.use_type(session, path, dtype._path)
            try:
                return self._create_one(name, spec, data, dtype.dtype, tracked)
            except H5SubfileError:
                structure.forget_type(session, path)  # nothing made: on every rank
                raise
        if isinstance(dtype, (Datatype, h5py.Datatype)):
            dtype = dtype.dtype  # another file's: its type only
        if tracked:
            structure.track_order(session, self._new_path(name))
            made = self._create_one(name, spec, data, dtype, False)
            structure.tracking_order(session, made._path)
            return made
        spec = dict(spec, dtype=dtype)
        if data is None:
            spec["dtype"] = "f4" if dtype is None else dtype
            return self.create_datasets({name: spec})[0]
        return self._create_with_data(name, spec, data)

    def _create_with_data(self, name: str, spec: dict[str, Any], data: Any) -> Dataset:
        """Collective: create a dataset whose content every rank passes alike; rank 0 writes
        it (the ranks' copies are compared by checksum at creation), then every rank knows
        it is written (one round: every rank reads it back at once). The data is checked
        before the dataset is made, in the creation's round: data that does not fit the
        shape, or that converts to the dtype only with a loss, makes no dataset."""
        session = self._session
        array = np.asarray(data)
        error: BaseException | None = None
        spec = dict(spec, data_digest=create.data_digest(array))
        try:
            if any(spec[k] is not None for k in ("block", "start", "count")):
                raise TypeError(
                    "create_dataset: data= and a block are two ways of writing; give one"
                )
            array, spec["shape"], spec["dtype"] = _content(array, spec["shape"], spec["dtype"])
        except (H5SubfileError, ValueError, TypeError) as exc:
            error = exc
        dataset = self._create({name: spec}, error)[0]
        with dataset.collective:
            transfer.put(session, [WriteRequest(dataset._path, array, ROOT_WRITES)])
        learned.sync(session, "create_dataset", detail=dataset.name)
        return dataset

    def __setitem__(self, name: str, value: Any) -> None:
        """Collective: ``group[name] = value`` as h5py does it: an array makes dataset
        ``name`` holding it (the same on every rank); a ``SoftLink``, ``ExternalLink`` or an
        object of this file makes a link (a hard link for an object: another name of it)."""
        link = catalogue_link(value)
        if link is None and isinstance(value, Node) and value._session is self._session:
            link = Link("hard", value._path)
        if link is not None:
            structure.create_link(self._session, self._link_path(name), link)
            return
        if isinstance(value, (np.dtype, h5py.Datatype, Datatype)):  # a named type
            dtype = value if isinstance(value, np.dtype) else value.dtype
            structure.create_type(self._session, self._new_path(name), dtype)
            return
        if isinstance(value, (Node, h5py.HLObject, h5py.HardLink)):
            raise UnsupportedError(
                f"{type(value).__name__} as the value of {name!r}: a hard link must name an "
                "object of this file (HDF5 makes no hard link between files: use "
                "h5py.ExternalLink, or copy the data)"
            )
        self.create_dataset(name, data=value)

    def __delitem__(self, name: str) -> None:
        """Collective: unlink member ``name`` (a dataset's data stays in the subfiles, unused,
        as HDF5 leaves a deleted dataset's space in its file: h5subfile repack reclaims it;
        a link is removed, not what it points to)."""
        path = self._link_path(name)
        if path in self._session.catalog.links:
            structure.delete_link(self._session, path)
            return
        catalog = self._session.catalog
        if path in catalog.nodes and not catalog.other_names(path):  # (missing: delete's error)
            dims.detach_everything(self._session, path, shape_of(self.file))
        structure.delete(self._session, path)

    def pop(self, name: str, *default: Any) -> Any:
        """Collective: h5py's ``pop``: the object ``name`` names, which loses that name (a
        group or dataset stays readable through the object returned until the file is
        closed, as HDF5 keeps an object a program holds; a link is removed); ``default``, or
        KeyError, where there is no such name."""
        if name not in self:
            if default:
                return default[0]
            raise KeyError(name)
        value = self[name]
        path = self._link_path(name)
        if path in self._session.catalog.links:
            del self[name]
        else:
            structure.pop_name(self._session, path)
        return value

    def popitem(self) -> tuple[str, Any]:
        """Collective: h5py's ``popitem``: the first member listed, popped (KeyError if
        none)."""
        for name in self.keys():
            return name, self.pop(name)
        raise KeyError("popitem(): the group is empty")

    def clear(self) -> None:
        """Collective: unlink every member (``del`` each, in the order listed)."""
        for name in self.keys():
            del self[name]

    def require_dataset(
        self, name: str, shape: Sequence[int] | int, dtype: Any, exact: bool = False, **kwds: Any
    ) -> Dataset:
        """Collective when it creates: dataset ``name``, created (with ``kwds``, as
        :meth:`create_dataset`) if missing; an existing one must have ``shape`` and a dtype
        ``dtype`` converts to (``exact``: the same), else TypeError, as in h5py."""
        try:
            path = self._session.catalog.resolve(join(self._path, name))
        except ObjectNotFoundError:
            path = ""  # a name taken away in this session: create_dataset says why it is not free
        info = self._session.catalog.nodes.get(path)
        if info is None:
            return self.create_dataset(name, shape, dtype, **kwds)
        if info.kind != "dataset":
            raise TypeError(f"{path} exists and is a group, not a dataset")
        wanted: tuple[Any, ...] = (shape,) if np.isscalar(shape) else tuple(shape)  # type: ignore[arg-type]
        if tuple(info.shape) != tuple(int(n) for n in wanted):
            raise TypeError(f"shapes do not match (existing {info.shape} vs new {wanted})")
        assert info.dtype is not None
        wanted_dtype = np.dtype(dtype)
        if exact and wanted_dtype != info.dtype:
            raise TypeError(
                f"datatypes do not exactly match (existing {info.dtype} vs new {wanted_dtype})"
            )
        if not np.can_cast(wanted_dtype, info.dtype):
            raise TypeError(
                f"datatypes cannot be safely cast (existing {info.dtype} vs new {wanted_dtype})"
            )
        return Dataset(self._session, path)

    def create_datasets(self, specs: Mapping[str, Mapping[str, Any]]) -> list[Dataset]:
        """Collective: create many datasets with one round of coordination.

        ``specs`` maps names to the keyword arguments of :meth:`create_dataset` (``shape``,
        ``dtype``, and this rank's ``block`` or ``start`` + ``count``).
        """
        return self._create(specs)

    def _create(
        self, specs: Mapping[str, Mapping[str, Any]], error: BaseException | None = None
    ) -> list[Dataset]:
        """:meth:`create_datasets`, with this rank's ``error`` found before (raised by every
        rank in the creation's round, which then makes nothing)."""
        session = self._session
        session.require_writable("create_datasets")
        requests: list[DatasetRequest] | None = None
        try:
            requests = [
                create.shape_request(session, self._new_path(name), **spec)
                for name, spec in specs.items()
            ]
        except (H5SubfileError, ValueError, TypeError) as exc:
            error = error or exc
        commit.step_boundary(session, valid_paths(self._path, specs))
        if announced.eligible(session, requests, error):
            assert requests is not None
            paths = announced.create_datasets(session, requests)
        else:
            paths = create.create_datasets(session, requests, error).paths
        return [Dataset(session, p) for p in paths]

    def write_dataset(
        self, name: str, data: Any, start: Sequence[int] | None = None, **storage: Any
    ) -> Dataset:
        """Collective: create a dataset from every rank's local array and write it.

        Without ``start``, rank r's array goes at the exclusive prefix sum of the ranks' lengths
        along axis 0 (the VPIC pattern; uneven and empty lengths allowed; the other axes must
        agree). With ``start``, the array is an N-D block with its corner at ``start``; the
        dataset's shape is the end of the union of the blocks. A 0-d array makes a scalar
        dataset holding rank 0's value. ``storage``: ``chunks``,
        ``compression``, ``compression_opts``, ``shuffle``, ``fletcher32`` as in
        :meth:`create_dataset`.
        """
        corners = None if start is None else {name: start}
        return self.write_datasets({name: data}, start=corners, **storage)[0]

    def write_datasets(
        self,
        datasets: Mapping[str, Any],
        start: Mapping[str, Sequence[int]] | Sequence[int] | None = None,
        chunks: bool | Sequence[int] | None = None,
        compression: Any = None,
        compression_opts: Any = None,
        shuffle: bool | None = None,
        fletcher32: bool | None = None,
    ) -> list[Dataset]:
        """Collective: create and write many datasets with one round of coordination.

        Like HDF5's H5Dwrite_multi: ``datasets`` maps names to this rank's local arrays (every
        rank passes the same names in the same order). ``start`` is None (prefix sum along axis
        0), one corner for all datasets, or a mapping name -> corner. The storage arguments
        (as in :meth:`create_dataset`) apply to every dataset. A rank's pieces that are
        neighbours on disk go out in one vectored write.
        """
        session = self._session
        session.require_writable("write_datasets")
        storage_args = dict(
            chunks=chunks,
            compression=compression,
            compression_opts=compression_opts,
            shuffle=shuffle,
            fletcher32=fletcher32,
        )
        requests: list[DatasetRequest] | None = None
        arrays: list[np.ndarray] = []
        error = None
        try:
            requests = []
            for name, data in datasets.items():
                array = np.asarray(data, order="C")  # a 0-d array stays 0-d: a scalar dataset
                corner = start.get(name) if isinstance(start, Mapping) else start
                storage = create.parse_storage(session.plan, array.ndim, **storage_args)
                path = self._new_path(name)
                requests.append(create.data_request(session, path, array, corner, storage))
                arrays.append(array)
        except (H5SubfileError, ValueError, TypeError) as exc:
            requests, error = None, exc
        commit.step_boundary(session, valid_paths(self._path, datasets))
        created = create.create_datasets(session, requests, error, writes=True)
        writes = [WriteRequest(p, a) for p, a in zip(created.paths, arrays)]
        try:
            transfer.put(
                session, writes, entered=True, failed=created.error, skip=not created.learnt
            )
        except H5SubfileError as exc:
            create.settle(session, created, exc)
            raise
        return [Dataset(session, p) for p in created.paths]


def _content(
    data: np.ndarray, shape: Sequence[int] | int | None, dtype: Any
) -> tuple[np.ndarray, tuple[int, ...], np.dtype]:
    """``create_dataset(shape, dtype, data=...)``'s content as h5py takes it: the data fills
    ``shape`` in C order when the sizes agree (ValueError, h5py's, when they do not), and
    converts to ``dtype`` as writes convert (DataShapeError when that would lose information)."""
    if shape is None:
        wanted: tuple[int, ...] = data.shape
    elif isinstance(shape, (int, np.integer)):
        wanted = (int(shape),)
    else:
        wanted = tuple(int(n) for n in shape)
    if math.prod(wanted) != data.size:
        raise ValueError(
            f"Shape tuple is incompatible with data: shape {wanted} holds {math.prod(wanted)} "
            f"elements, the data {data.size} (shape {data.shape})"
        )
    numpy_dtype = data.dtype if dtype is None else np.dtype(dtype)
    converted = convert(data, numpy_dtype, "create_dataset(data=...)", like_h5py=True)
    return converted.reshape(wanted), wanted, numpy_dtype


Node.group_at = Group


def _class_of(kind: str) -> type[Group | Dataset | Datatype]:
    """The class of h5subfile's objects of a catalogue kind."""
    return Group if kind == "group" else Datatype if kind == "datatype" else Dataset

"""The master as readers see it: rank 0 scans it (every group, dataset, attribute and layout
record, each record checked against HDF5's view of the file and the subfiles it names) into
the catalogue broadcast to every rank, and ranks read records checked at open again.

:func:`open_for_reading` is that scan on rank 0. Another rank that needs a layout withheld
from the broadcast reads it again with :func:`read_record` (and the sessions naming its
subfiles with :func:`read_sessions`), refused unless its SHA-256 is the one rank 0 computed
when it checked it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
from collections.abc import Iterable
from typing import Any

import h5py
import numpy as np

from ..errors import (
    CorruptFileError,
    FileBusyError,
    H5SubfileError,
    IncompleteFileError,
    MissingFileError,
    UnsafePathError,
    error_class,
)
from ..layout.catalog import Catalog, Link, NodeInfo, Problem
from ..layout.names import SourcePaths, names_master, partial_path
from ..layout.record import (
    LAYOUT_ATTR,
    ROOT_ATTR,
    DatasetLayout,
    FileRecord,
    StoredExtent,
    is_reserved,
    session_sha,
)
from ..layout.validate import ByteRange, byte_overlaps, byte_ranges, layout_problem
from ..profiler.counters import Profile
from .claim import claim_state
from .filters import FilterSpec
from .h5 import (
    direct_offset,
    hdf5_facts,
    open_shared_read,
    read_attrs,
    read_text_attr,
    virtual_sources,
)
from .objects import catalogue_link, tracks_order
from .posix import probe_file
from .regular import require_regular


def describe_storage(layout: DatasetLayout) -> str:
    """How a dataset written by h5subfile is stored, in a few words (for ``info``)."""
    if layout.learned:
        return _describe_learned(layout)
    if not layout.extents:
        return "unwritten (fill values)"
    files = {e.file for e in layout.extents}
    if all(names_master(e.file) for e in layout.extents):
        where = "in the master"
    else:
        where = f"virtual: {len(layout.extents)} extent(s) in {len(files)} subfile(s)"
    if not layout.chunks:
        return where if where != "in the master" else "contiguous in the master"
    aligned = "aligned to rank blocks" if layout.chunks_aligned else "straddling rank blocks"
    return (
        f"{where}, chunks {layout.chunks} ({aligned}), "
        f"{FilterSpec.from_dict(layout.filters).describe()}"
    )


def _describe_learned(layout: DatasetLayout) -> str:
    """A layout learned from the writes: where, how many pieces by how many ranks."""
    pieces = [p for e in layout.extents for p in e.pieces]
    files = {e.file for e in layout.extents if e.pieces}
    where = (
        "in the master" if not layout.mapped_by_pieces else f"virtual over {len(files)} subfile(s)"
    )
    ranks = {p.rank for p in pieces}
    grows = ", resizable" if layout.maxshape else ""
    return (
        f"written where each rank wrote ({where}{grows}): {len(pieces)} piece(s) from "
        f"{len(ranks)} rank(s)"
    )


def dataset_node(
    shape: tuple[int, ...],
    dtype: np.dtype,
    layout: DatasetLayout,
    storage: str | None = None,
    fill: bytes | None = None,
) -> NodeInfo:
    """What every rank learns of a dataset published over ``layout`` (``storage``: as
    :func:`describe_storage` says it of the whole layout, when ``layout`` holds part of it;
    ``fill``: its fill value's bytes, None for zeros)."""
    if storage is None:
        storage = describe_storage(layout)
    return NodeInfo("dataset", {}, shape, dtype, layout, storage=storage, fill=fill)


def fill_bytes_of(dataset: h5py.Dataset) -> bytes | None:
    """A dataset's fill value as one element's bytes, None when it is zeros (what elements
    never written read as; a dataset whose layout was learned may have another)."""
    try:
        value = np.asarray(dataset.fillvalue, dtype=dataset.dtype).tobytes()
    except (TypeError, ValueError, OSError):
        return None
    return value if any(value) else None


def _user_attrs(obj: h5py.HLObject) -> dict[str, Any]:
    return read_attrs(obj, skip=is_reserved)  # in h5py's order: by name, or as created


def _group(obj: h5py.Group) -> NodeInfo:
    """A group as readers know it; one that keeps its creation order (``track_order``) also
    lists its members in that order."""
    if not tracks_order(obj):
        return NodeInfo("group", _user_attrs(obj))
    return NodeInfo("group", _user_attrs(obj), track_order=True, order=tuple(obj))


class _SizeCheck:
    """Checks the files that extents name, stat()ing each file once."""

    def __init__(
        self,
        master_path: str,
        master_data_path: str,
        record: FileRecord,
        profile: Profile | None = None,
    ):
        self.paths = SourcePaths(master_path, master_data_path)
        self.profile = profile  # where the probes' open, fstat and close are counted
        self.sizes: dict[str, int | None] = {}
        self.errors: dict[str, OSError | None] = {}
        #: the exact size each subfile had when its writer closed it (format 3)
        self.recorded = {
            relpath: int(info["bytes"])
            for session in record.sessions
            for relpath, info in session.subfile_info.items()
        }

    def problem(
        self, dataset: str, extents: Iterable[StoredExtent], itemsize: int
    ) -> Problem | None:
        for extent in extents:
            try:
                path = self.paths.resolve(extent.file)
            except UnsafePathError as exc:
                return "UnsafePathError", f"dataset {dataset}: {exc}"
            if path not in self.sizes:
                self.sizes[path], self.errors[path] = probe_file(path, self.profile)
            size, error = self.sizes[path], self.errors[path]
            if isinstance(error, FileNotFoundError):
                return (
                    "MissingFileError",
                    f"subfile {extent.file} of dataset {dataset} is missing ({path}); the data "
                    "it holds cannot be read (a VDS reader would silently return fill values)",
                )
            if size is None:
                return (
                    error_class(type(error).__name__, getattr(error, "errno", None)).__name__,
                    f"subfile {extent.file} of dataset {dataset} cannot be read ({path}: "
                    f"{getattr(error, 'strerror', None) or error})",
                )
            end = extent.offset + extent.nbytes(itemsize)
            if not extent.chunks and size < end:  # chunks: HDF5 checks them when reading
                return (
                    "TruncatedFileError",
                    f"{extent.file or 'the master'} of dataset {dataset} is truncated: it has "
                    f"{size} bytes, the data needs {end}",
                )
            recorded = self.recorded.get(extent.file)
            if recorded is not None and size != recorded:
                shorter = size < recorded
                return (
                    "TruncatedFileError" if shorter else "SubfileMismatchError",
                    f"subfile {extent.file} of dataset {dataset} "
                    f"{'is truncated: it ' if shorter else ''}has {size} bytes, the master "
                    f"recorded {recorded}: it is not the subfile this file's writer closed",
                )
        return None


class _Scan:
    """Rank 0's walk over a master: a :class:`NodeInfo` per object, each layout record checked
    (docs/FORMAT.md, "Checks made by readers") before any data is read."""

    def __init__(
        self, h5: h5py.File, master_path: str, master_data_path: str, profile: Profile | None
    ):
        self.master_path = master_path
        self.record = FileRecord()
        if ROOT_ATTR in h5.attrs:
            self.record = FileRecord.from_json(read_text_attr(h5, ROOT_ATTR), master_path)
        self.open_sessions = {s.id for s in self.record.open_sessions}
        self.check = _SizeCheck(master_path, master_data_path, self.record, profile)
        self.nodes: dict[str, NodeInfo] = {"/": _group(h5["/"])}
        self.ranges: list[ByteRange] = []  # bytes read directly, by file (overlaps: damage)
        self.members: dict[str, int] = {"/": len(h5)}  # each group's number of links
        self.links: dict[str, Link] = {}
        self.typed: dict[str, str] = {}

    def visit(self, name: str, obj: h5py.HLObject) -> None:
        path = "/" + name
        try:
            if isinstance(obj, h5py.Group):
                self.nodes[path] = _group(obj)
                self.members[path] = len(obj)
            elif isinstance(obj, h5py.Dataset):
                self.nodes[path] = self.dataset(path, obj)
                kind = obj.id.get_type()
                if kind.committed():  # made with a named type, which it shares
                    self.typed[path] = (h5py.h5i.get_name(kind) or b"").decode()
            elif isinstance(obj, h5py.Datatype):
                self.nodes[path] = NodeInfo("datatype", _user_attrs(obj), dtype=obj.dtype)
        except H5SubfileError:
            raise
        except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
            raise CorruptFileError(f"{self.master_path}: cannot read {path}: {exc}") from None

    def find_links(self, h5: h5py.File) -> None:
        """The soft, external and hard links of the file (HDF5's walk over objects names each
        object once): looked for only in groups holding more links than objects found."""
        found = dict.fromkeys(self.members, 0)
        for path in self.nodes:
            if path != "/":
                found[posixpath.dirname(path)] += 1
        objects: dict[int, str] = {}
        for group, count in self.members.items():
            if found[group] == count:
                continue
            for name in h5[group]:
                path = posixpath.join(group, name)
                if path in self.nodes or path in self.links:
                    continue
                link = catalogue_link(h5[group].get(name, getlink=True))
                if link is not None:
                    self.links[path] = link
                else:  # another name of an object
                    if not objects:
                        objects = {hash(h5[p].id): p for p in self.nodes}
                    target = objects.get(hash(h5[path].id))
                    if target is not None:
                        self.links[path] = Link("hard", target)
                        self.own_name(h5, path, target)

    def own_name(self, h5: h5py.File, path: str, target: str) -> None:
        """A dataset stored in the master, known by the name its layout record gives it
        (``path``) where HDF5's walk met it by another (``target``, a hard link to it)."""
        info = self.nodes[target]
        layout = info.__dict__.get("layout")
        extents = [] if layout is None else list(layout.extents)
        if len(extents) != 1 or extents[0].dataset != path or not names_master(extents[0].file):
            return
        self.nodes[path] = self.dataset(path, h5[path])
        del self.nodes[target]
        del self.links[path]
        self.links[target] = Link("hard", path)
        for name, link in self.links.items():
            if link.kind == "hard" and link.target == target:
                self.links[name] = Link("hard", path)

    def dataset(self, path: str, obj: h5py.Dataset) -> NodeInfo:
        info = NodeInfo("dataset", _user_attrs(obj), tuple(obj.shape), obj.dtype)
        info.track_order = tracks_order(obj)
        if LAYOUT_ATTR in obj.attrs:
            self.recorded(path, obj, info, read_text_attr(obj, LAYOUT_ATTR))
        else:
            self.plain(path, obj, info)
        return info

    def recorded(self, path: str, obj: h5py.Dataset, info: NodeInfo, text: str) -> None:
        """A dataset with a layout record: read straight from its extents, once checked."""
        try:
            layout = DatasetLayout.from_json(text, f"{self.master_path}:{path}")
        except CorruptFileError as exc:
            info.problem, info.storage = ("CorruptFileError", str(exc)), "damaged layout record"
            return
        layout = _renamed(layout, obj, path)
        moved = _moved(layout, obj)
        if moved is not None:
            layout = moved
        info.layout = layout
        info.record_sha = text_sha(text)
        info.storage = describe_storage(layout)
        if moved is not None:
            info.storage += " (moved: the master was rewritten by another tool)"
            info.moved = True
        if layout.learned:
            info.fill = fill_bytes_of(obj)
        if layout.session in self.open_sessions:
            info.problem = (
                "IncompleteFileError",
                f"dataset {path} was created by write session {layout.session}, which did "
                "not finish (the job stopped before closing the file); its data is incomplete",
            )
        elif not layout.complete and layout.learned:
            info.problem = (
                "IncompleteFileError",
                f"dataset {path} cannot be trusted: when it was written, two ranks wrote the "
                "same elements or a rank's write failed (the close that published it said which)",
            )
        elif not layout.complete:
            info.problem = (
                "IncompleteFileError",
                f"dataset {path} was not completely written: some ranks never wrote their "
                "blocks before the file was closed",
            )
        else:
            info.problem = self.check.problem(path, layout.extents, obj.dtype.itemsize)
        # A file too short for a damaged record's offsets is a damaged record, not a truncation.
        if info.problem is None or info.problem[0] == "TruncatedFileError":
            found = layout_problem(path, text, layout, hdf5_facts(obj), self.record.sessions)
            if found is not None:
                info.problem = ("CorruptFileError", found)
            elif info.problem is None:
                self.ranges.extend(byte_ranges(path, layout, obj.dtype.itemsize))

    def plain(self, path: str, obj: h5py.Dataset, info: NodeInfo) -> None:
        """A dataset without a layout record (written by anything): contiguous data is read
        directly; anything else through h5py, once its source files are checked."""
        offset = direct_offset(obj)
        sources = virtual_sources(obj)
        if offset is not None and obj.dtype.kind != "O":
            extent = StoredExtent("", path, (0,) * obj.ndim, tuple(obj.shape), offset)
            info.layout = DatasetLayout(-1, (extent,))
            info.storage = "contiguous (plain HDF5)"
            info.problem = self.check.problem(path, [extent], obj.dtype.itemsize)
            if info.problem is None:
                self.ranges.extend(byte_ranges(path, info.layout, obj.dtype.itemsize))
            return
        info.via_h5py = True
        info.storage = "virtual (plain HDF5)" if sources else "read through h5py"
        for source in sources:
            if names_master(source):
                continue
            try:
                target = self.check.paths.resolve(source)
            except UnsafePathError as exc:
                info.problem = ("UnsafePathError", f"dataset {path}: {exc}")
                return
            if not os.path.isfile(target):
                info.problem = (
                    "MissingFileError",
                    f"source file {source} of virtual dataset {path} is missing",
                )
                return

    def overlaps(self) -> None:
        """Datasets reading the same bytes of one file: an offset moved onto other data."""
        for first, second in byte_overlaps(self.ranges):
            where = f"{first.file or 'the master'}"
            for one, other in ((first, second), (second, first)):
                info = self.nodes[one.path]
                if info.problem is None:
                    info.problem = (
                        "CorruptFileError",
                        f"dataset {one.path}: its bytes [{one.start}, {one.stop}) of {where} "
                        f"overlap bytes [{other.start}, {other.stop}) read by {other.path}; "
                        "a layout record is damaged",
                    )


def scan(
    h5: h5py.File, master_path: str, master_data_path: str, profile: Profile | None = None
) -> Catalog:
    """Read every group, dataset, attribute and layout record of an open master (rank 0), and
    check every layout record against HDF5's view of the file (the subfiles' probes counted
    in ``profile`` when given)."""
    try:
        walk = _Scan(h5, master_path, master_data_path, profile)
        h5.visititems(walk.visit)
        walk.find_links(h5)
    except H5SubfileError:
        raise
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise CorruptFileError(
            f"{master_path}: cannot read its groups and records: {exc}"
        ) from None
    walk.overlaps()
    problems = [info.problem[1] for info in walk.nodes.values() if info.problem]
    for session in walk.record.open_sessions:
        problems.insert(
            0,
            f"write session {session.id} (started {session.started}, {session.ranks} rank(s)) "
            "did not finish; datasets it created are incomplete",
        )
    shas = {s.id: session_sha(s) for s in walk.record.sessions if s.closed is not None}
    catalog = Catalog(walk.nodes, walk.record, problems, session_shas=shas, links=walk.links)
    catalog.typed = {path: catalog.resolve(named) for path, named in walk.typed.items()}
    return catalog


def open_for_reading(path: str, profile: Profile | None = None) -> Catalog:
    """Scan a master for reading (rank 0), with clear errors for missing or unfinished files;
    HDF5's reads counted in ``profile`` when given."""
    path = os.path.abspath(path)
    partial = partial_path(path)
    if not os.path.exists(path):
        if os.path.exists(partial):
            state, owner = claim_state(path)
            if state == "alive" and owner is not None:
                raise IncompleteFileError(
                    f"{path} is being written for the first time and its writer has not closed "
                    f"it yet ({owner.describe()}); open it once the writer has closed it"
                )
            raise IncompleteFileError(
                f"{path} was never completed: its writer did not close it ({partial} is the "
                "unfinished master); rerun the writer"
            )
        raise MissingFileError(f"{path} does not exist")
    require_regular(path, "master file")
    try:
        h5 = open_shared_read(path, profile)
    except (OSError, KeyError, RuntimeError, ValueError) as exc:
        if "locking flag values don't match" in str(exc):
            raise FileBusyError(
                f"{path} is open in this process already (h5py.File, with HDF5's file "
                "locking): HDF5 refuses to open it again without the lock; close it first"
            ) from None
        raise CorruptFileError(f"{path} cannot be opened as HDF5: {exc}") from None
    with h5:
        catalog = scan(h5, path, path, profile)
    if os.path.exists(partial) and claim_state(path)[0] != "alive":  # not a writer at work
        catalog.problems.append(
            f"an unfinished write session left {partial}; its data is not part of the file"
        )
    return catalog


def text_sha(text: str) -> str:
    """SHA-256 (hex) of a record's text: a rank reading a record rank 0 checked at open compares
    it, so that a record changed since is refused instead of trusted."""
    return hashlib.sha256(text.encode()).hexdigest()


def _renamed(layout: DatasetLayout, obj: h5py.Dataset, path: str) -> DatasetLayout:
    """``layout`` with ``path`` as its dataset's name, for a dataset stored in the master whose
    record names it by a name it has no more (moved by ``move``, or its first name deleted
    while a hard link kept it: HDF5 keeps the object, the record keeps the name it was written
    under). A record of another dataset of the master is not this one's: HDF5's storage of
    the object at ``path`` must match it as for any record (its offset, its extent's shape)."""
    if len(layout.extents) != 1:
        return layout
    (extent,) = layout.extents
    if not names_master(extent.file) or extent.dataset == path:
        return layout
    if extent.dataset in obj.file and obj.file[extent.dataset] == obj:
        return layout  # a hard link met first: :meth:`_Scan.own_name` sorts the names
    return dataclasses.replace(layout, extents=(dataclasses.replace(extent, dataset=path),))


def _moved(layout: DatasetLayout, obj: h5py.Dataset) -> DatasetLayout | None:
    """``layout`` with HDF5's offset, for a dataset stored whole and contiguous in the master
    whose data HDF5 now has elsewhere: a tool that rewrites files (h5repack) moved it, and
    HDF5's offset is where every reader finds its bytes. None for any other dataset, or one
    where HDF5 agrees. The record's checksums still hold the bytes to what was written
    (``verify``, verifying reads), and its other facts are checked as for any record."""
    if len(layout.extents) != 1:
        return None
    (extent,) = layout.extents
    if not names_master(extent.file) or extent.chunks or extent.offset < 0:
        return None
    offset = direct_offset(obj)
    if offset is None or offset == extent.offset:
        return None
    return dataclasses.replace(layout, extents=(extent.changed(offset=offset),))


def read_record(h5: h5py.File, path: str, expected_sha: str) -> str:
    """The text of the layout record of dataset ``path`` in an open master, refused unless it
    is the text rank 0 checked at open (``expected_sha``)."""
    try:
        text = read_text_attr(h5[path], LAYOUT_ATTR)
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise CorruptFileError(f"{h5.filename}: cannot read the record of {path}: {exc}") from None
    if text_sha(text) != expected_sha:
        raise CorruptFileError(f"{h5.filename}: the record of {path} {_CHANGED}")
    return text


_CHANGED = (
    "is not the one read when the file was opened (the file was changed or replaced since); "
    "open it again"
)


def read_sessions(h5: h5py.File, expected: dict[int, str]) -> FileRecord:
    """The write sessions ``expected`` names (id -> :func:`session_sha`) from the root record of
    an open master, each refused unless unchanged; sessions closed since are left out."""
    try:
        record = FileRecord.from_json(read_text_attr(h5, ROOT_ATTR), h5.filename)
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise CorruptFileError(f"{h5.filename}: cannot read its record: {exc}") from None
    found = {s.id: s for s in record.sessions}
    kept = []
    for number, sha in sorted(expected.items()):
        session = found.get(number)
        if session is None or session_sha(session) != sha:
            raise CorruptFileError(f"{h5.filename}: write session {number} {_CHANGED}")
        kept.append(session)
    return FileRecord(kept, record.format)

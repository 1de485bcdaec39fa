"""Small helpers over h5py's low-level API shared by the subfile and master writers.

- Our files' access properties: library version bounds, alignment, metadata blocks, and no
  small-data aggregation, set in the HDF5 library h5py runs on, which h5py does not expose.
- Early-allocated, unfilled datasets (the ranks write their bytes at their offsets), chunked
  ones with filters, virtual datasets, and whether a dataset's bytes can be read directly
  (:func:`direct_offset`).
- What HDF5 says of a dataset, for the record checks (:func:`hdf5_facts`), and whether a file's
  HDF5 structure is damaged (:func:`structure_problem`, for ``verify``).
- In profiled sessions, HDF5's log driver (:func:`logged`, :func:`collect_hdf5_logs`): HDF5's
  own reads and writes replayed into the profile.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import posixpath
import re
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import h5py
import numpy as np

from ..layout.blocks import Block
from ..layout.hyperslab import Slab
from ..layout.names import SET_ASIDE
from ..layout.validate import Hdf5Facts, Mapping
from ..profiler.counters import PosixRecord, Profile, replay_hdf5_log
from .causes import hdf5_writes
from .objects import (
    Groups,
    create_chunked_dataset,
    create_early_dataset,
    creation_properties,
    link_name,
)
from .posix import block_size
from .references import as_paths
from .regular import require_regular

#: Library version bounds (set in :func:`_file_access`): 1.8-style object headers (large
#: attributes) and nothing newer than 1.10, so that HDF5 1.10 tools (Debian's h5dump 1.10.8)
#: read every file we write.
LIBVER = (h5py.h5f.LIBVER_V18, h5py.h5f.LIBVER_V110)
LIBVER_NAMES = ("v108", "v110")  # the same, as h5py names them (``File.libver``)


#: h5py's name for HDF5's log driver with the flags profiling needs: every read and write with
#: its offset, length, kind, duration and start (docs/PROFILING.md)
LOG_DRIVER = "h5subfile-log"
_LOG_FLAGS = h5py.h5fd.LOG_LOC_IO | h5py.h5fd.LOG_NUM_IO | h5py.h5fd.LOG_TIME_IO
_log_numbers = itertools.count()


def _set_fapl_log(plist: Any, logfile: str = "", **_: Any) -> None:
    plist.set_fapl_log(logfile.encode(), _LOG_FLAGS, 0)


if LOG_DRIVER not in h5py.registered_drivers():
    h5py.register_driver(LOG_DRIVER, _set_fapl_log)


#: The permission bits HDF5's POSIX drivers create files with (``H5_POSIX_CREATE_MODE_RW``).
HDF5_CREATE_MODE = 0o666


def log_for(profile: Profile | None, path: str, created: bool = False) -> str | None:
    """In a profiled session, the log file HDF5 is to write for this open of ``path`` (noted
    in the profile with the open's start and whether it creates the file, read by
    :func:`collect_hdf5_logs` after the file is closed); None otherwise."""
    if profile is None:
        return None
    name = f"h5subfile-{os.getpid()}-{next(_log_numbers)}.log"
    log = os.path.join(tempfile.gettempdir(), name)
    profile.hdf5_logs.append((os.path.abspath(path), log, profile.clock(), created))
    profile.record(os.path.abspath(path)).keep_events()  # to merge HDF5's stream in by time
    return log


def logged(profile: Profile | None, path: str) -> dict[str, Any]:
    """h5py.File's driver arguments: HDF5's log driver when profiling, else none."""
    log = log_for(profile, path)
    return {} if log is None else {"driver": LOG_DRIVER, "logfile": log}


def collect_hdf5_logs(profile: Profile) -> None:
    """Replay into the profile the logs of the HDF5 files opened while profiling (all closed
    by now) and delete them: an open (with HDF5's open time, from the open's start), the
    operations, the stat, the close (from the end of the last operation), counted in a record
    of their own, then added to the file's (so each stream's timers see it in order; the
    sequence counters are counted again over both streams merged by time)."""
    pending, profile.hdf5_logs = profile.hdf5_logs, []
    for path, log, opened, created in pending:
        try:
            with open(log) as lines:
                text = lines.read()
            os.remove(log)
        except OSError:
            profile.unparsed += 1
            continue
        record = PosixRecord(path, profile.origin, profile.trace, profile.mem_alignment)
        record.keep_events()
        record.record_open(opened, opened + _took(text, "Open"), block_size(path))
        # HDF5 also lstat()s the path outside its driver at every open (resolving symbolic
        # links, H5F__build_actual_name): not in the log, but a stat Darshan counts.
        record.record_stat(opened, opened)
        if created:
            record.record_mode(HDF5_CREATE_MODE)
        profile.unparsed += replay_hdf5_log(record, text)
        if "Close took" in text:
            last = max(profile.origin + t for t in record.last_end.values())
            record.record_close(last, last + _took(text, "Close"))
        profile.record(path).absorb(record)


def _took(text: str, what: str) -> float:
    """The seconds of HDF5's log line ``<what> took: (<s> s)``; 0 if it has none."""
    match = re.search(rf"^{what} took: \(([\d.eE+-]+) s\)", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def open_shared_read(
    path: str, profile: Profile | None = None, what: str = "HDF5 file"
) -> h5py.File:
    """Open a file read-only while another process may hold it open (for writing, or for
    reading with HDF5's lock); NotRegularFileError naming it as ``what`` if it is a FIFO, a
    device or a folder (HDF5 would block on some).

    HDF5 >= 1.12.1 locks files; the lock is turned off here (the writer is one of our ranks).
    """
    require_regular(path, what)
    if h5py.version.hdf5_version_tuple >= (1, 12, 1):
        return h5py.File(path, "r", locking=False, **logged(profile, path))
    return h5py.File(path, "r", **logged(profile, path))


#: Metadata block size of our files: room for many object headers, so that the raw data of
#: consecutive datasets ends up adjacent (a rank's pieces then coalesce into one write).
META_BLOCK_SIZE = 64 * 1024


def open_external(master: str, file: str, target: str, rest: str = "") -> Any:
    """The object an external link of ``master`` names (``rest``: a path below it), opened
    read-only (as parallel h5py opens it from a file open for reading) as HDF5 opens it: the link is made again in an in-memory file named as
    if beside the master, so that HDF5 finds a relative file name as it would from the
    master itself."""
    folder = os.path.dirname(os.path.abspath(master))
    holder = h5py.File(
        os.path.join(folder, f".{os.path.basename(master)}.link"),
        "w",
        driver="core",
        backing_store=False,
    )
    holder["link"] = h5py.ExternalLink(file, target)
    found = holder.get("link/" + rest if rest else "link", elink_mode="r")
    if found is None:
        raise KeyError(f"no object {target}{'/' + rest if rest else ''} in {file}")
    return found


def structure_problem(path: str) -> str | None:
    """Why HDF5 cannot read the file ``path``'s structure, or None: it is opened, and every
    object's header (with its checksum), every dataset's type, shape and layout and every
    attribute are read, as a reader of any object would (plain h5py fails on a damaged one)."""
    try:
        with open_shared_read(path, what="subfile") as h5:
            _touch(h5)
            return _first_damaged(h5)
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        return f"HDF5 cannot read it: {exc}"


#: Bytes :func:`read_problem` reads at a time.
READ_BYTES = 16 << 20


def read_problem(path: str, dataset: str) -> str | None:
    """Why HDF5 cannot read dataset ``dataset`` of the file ``path`` whole, or None: its
    values are read as a reader would, in slabs of about :data:`READ_BYTES` along its first
    axis, so that HDF5's own checks (a filter's, Fletcher32's) run on every chunk."""
    try:
        with open_shared_read(path, what="master") as h5:
            obj = h5[dataset]
            if not obj.shape or not obj.size:
                _ = obj[()]
                return None
            row = max(obj.dtype.itemsize * math.prod(obj.shape[1:]), 1)
            step = max(1, READ_BYTES // row)
            for start in range(0, obj.shape[0], step):
                _ = obj[start : start + step]
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
        return f"HDF5 cannot read it: {exc}"
    return None


def _touch(obj: h5py.HLObject) -> None:
    """Read ``obj``'s attributes and, for a dataset, its type, shape and creation properties."""
    read = [obj.attrs[name] for name in obj.attrs]
    if isinstance(obj, h5py.Dataset):
        read += [obj.id.get_create_plist().get_layout(), obj.dtype, obj.shape]


def _first_damaged(h5: h5py.File) -> str | None:
    """The first object of ``h5`` whose header or attributes HDF5 cannot read, said, or None."""
    names: list[str] = []
    h5.visit(names.append)  # the links, from the groups' own structures
    for name in names:
        try:
            _touch(h5[name])
        except (OSError, KeyError, RuntimeError, ValueError, TypeError) as exc:
            return f"HDF5 cannot read its object /{name}: {exc}"
    return None


def _file_access(
    alignment: int | None, meta_block_size: int | None, log: str | None
) -> h5py.h5p.PropFAID:
    """Our files' access properties: version bounds, ``alignment`` (every object of at least
    one byte, so every dataset's data and every chunk, starts at a multiple of it:
    H5Pset_alignment with threshold 1), the metadata block size, no small-data aggregation
    (see :func:`_no_small_data_block`), no HDF5 file lock and, when profiling, HDF5's log
    driver.

    HDF5's lock would make a writer fail (``BlockingIOError``) while any reader holds the
    file open, and a reader fail while the writer does; one writer at a time is h5subfile's
    own claim (io/claim.py), and readers never see a master before it is committed, unless it
    is changed in place, under a marker they report."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(*LIBVER)
    if h5py.version.hdf5_version_tuple >= (1, 12, 1):
        fapl.set_file_locking(False, True)
    if alignment:
        fapl.set_alignment(1, alignment)
    if meta_block_size:
        fapl.set_meta_block_size(meta_block_size)
    _no_small_data_block(fapl)
    if log is not None:
        _set_fapl_log(fapl, log)
    return fapl


def create_file(
    path: str,
    alignment: int | None = None,
    meta_block_size: int | None = None,
    profile: Profile | None = None,
    track_order: bool = False,
) -> h5py.File:
    """Create (truncate) an HDF5 file with our properties (:func:`_file_access`), through the
    low-level API; ``track_order``: its root group keeps its links' and attributes' creation
    order (h5py's ``File(..., track_order=True)``)."""
    fapl = _file_access(alignment, meta_block_size, log_for(profile, path, created=True))
    fcpl = creation_properties(h5py.h5p.FILE_CREATE, track_order, links=True)
    return h5py.File(h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fapl=fapl, fcpl=fcpl))


def open_file_rw(
    path: str, alignment: int | None = None, profile: Profile | None = None
) -> h5py.File:
    """Open an existing HDF5 file for writing (appending) with our properties."""
    require_regular(path, "master file")
    fapl = _file_access(alignment, None, log_for(profile, path))
    return h5py.File(h5py.h5f.open(path.encode(), h5py.h5f.ACC_RDWR, fapl=fapl))


def _hdf5_library() -> ctypes.CDLL | None:
    """The HDF5 library h5py runs on, as loaded in this process (found in /proc/self/maps),
    for the two calls h5py does not expose (:func:`_no_small_data_block`,
    :func:`compact_selections`); None where it cannot be found."""
    global _HDF5_LIBRARY
    if _HDF5_LIBRARY is False:
        try:
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps if "/libhdf5" in line})
        except OSError:
            paths = []
        _HDF5_LIBRARY = None
        for path in paths:
            name = os.path.basename(path)
            if ".so" not in name or name.startswith(("libhdf5_hl", "libhdf5_cpp")):
                continue
            library = ctypes.CDLL(path)  # already loaded: the same library h5py calls
            if hasattr(library, "H5Pset_small_data_block_size"):
                library.H5Pset_small_data_block_size.argtypes = [ctypes.c_int64, ctypes.c_uint64]
                library.H5Fset_libver_bounds.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int]
                _HDF5_LIBRARY = library
                break
    return _HDF5_LIBRARY


_HDF5_LIBRARY: Any = False  # not looked for yet


def _no_small_data_block(fapl: h5py.h5p.PropFAID) -> None:
    """Turn off HDF5's aggregation of small raw data (H5Pset_small_data_block_size 0): each
    small dataset's data is allocated on its own. With it on, the unused end of the last
    small-data block is given back at close by the default driver but kept by the log driver
    (its own ``free`` callback), so a profiled file would end up to 2 KiB longer than the same
    file written unprofiled. Where the library cannot be reached (not Linux), left on."""
    library = _hdf5_library()
    if library is not None and library.H5Pset_small_data_block_size(fapl.id, 0) < 0:
        raise RuntimeError("H5Pset_small_data_block_size failed")


@contextlib.contextmanager
def compact_selections(h5: h5py.File) -> Iterator[None]:
    """While a virtual dataset is made in ``h5``: the file's lower version bound at 1.10
    (H5Fset_libver_bounds), so that HDF5 stores each mapping's regular hyperslab (a strided
    piece: every P-th element) as its start, stride, count and block. Under our bounds it lists
    every block instead, and HDF5 rebuilds such a list block by block when it opens the dataset,
    in time that grows with the square of the blocks: a dataset written round-robin by 2 ranks,
    16,384 elements each, took 28 s to open in plain h5py and in h5subfile alike (0.001 s
    now). HDF5 1.10 reads the compact form (every reader of virtual datasets), and the file's
    superblock and other objects are as before. Where the library cannot be reached, nothing
    changes. Each change of the bounds flushes HDF5's metadata: a caller making many virtual
    datasets raises them once around all (inside, this does nothing)."""
    library = _hdf5_library()
    file_id = h5.id.id
    low, high = h5.id.get_access_plist().get_libver_bounds()
    raised = (
        library is not None
        and low < h5py.h5f.LIBVER_V110
        and library.H5Fset_libver_bounds(file_id, h5py.h5f.LIBVER_V110, high) >= 0
    )
    try:
        yield
    finally:
        if raised and library is not None and library.H5Fset_libver_bounds(file_id, low, high) < 0:
            raise RuntimeError("H5Fset_libver_bounds failed to restore the file's bounds")


def write_text_attr(obj: Any, name: str, text: str) -> None:
    """Set attribute ``name`` to ``text`` as a fixed-length ASCII string (JSON records).

    Several times cheaper than h5py's variable-length strings; large values go to dense
    attribute storage (v1.8 object headers), which HDF5 1.10 tools read.
    """
    data = text.encode()
    key = name.encode()
    obj_id = obj.id if isinstance(obj, h5py.HLObject) else obj  # high- or low-level object
    if h5py.h5a.exists(obj_id, key):
        h5py.h5a.delete(obj_id, key)
    type_id = h5py.h5t.C_S1.copy()
    type_id.set_size(max(len(data), 1))
    type_id.set_strpad(h5py.h5t.STR_NULLPAD)
    attr = h5py.h5a.create(obj_id, key, type_id, h5py.h5s.create(h5py.h5s.SCALAR))
    attr.write(np.array(data or b" ", dtype=f"S{max(len(data), 1)}"))


def read_text_attr(obj: h5py.HLObject, name: str) -> str:
    """The text of an attribute written by :func:`write_text_attr` (or as any h5py string)."""
    value = obj.attrs[name]
    return value.decode() if isinstance(value, bytes) else str(value)


#: One mapping of a virtual dataset: the source ``dataset`` in ``file`` (a dataset of
#: ``source_shape`` holding the box at ``source_start`` of the virtual one), and the ``slab``
#: of the virtual dataset it gives, taken from the same elements of the source; a source
#: mapped whole, onto the box ``slab``, has no ``source_shape`` (None).
Mapped = tuple[str, str, Slab, tuple[int, ...], "tuple[int, ...] | None"]


def whole_sources(
    sources: list[tuple[str, str, tuple[int, ...], tuple[int, ...]]],
) -> list[Mapped]:
    """Sources mapped whole, each ``(file, dataset, start, count)`` onto ``[start, start + count)``."""
    return [
        (file, dataset, Slab.of_box(Block(start, count)), start, None)
        for file, dataset, start, count in sources
    ]


def create_virtual_dataset(
    groups: Groups,
    path: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    sources: list[Mapped],
    maxshape: tuple[int, ...] | None = None,
    fill: np.ndarray | None = None,
) -> None:
    """Create a virtual dataset with one mapping per source (:data:`Mapped`), through the
    low-level API; ``maxshape`` (-1: unlimited) and ``fill`` (one element) when given. A
    source mapped whole takes its dataspace as it is; a part of a source is the same slab
    shifted by the source's corner. HDF5 copies the dataspaces of each mapping, so one
    virtual dataspace is selected again for every mapping and one source dataspace made for
    each source shape (a quarter of the time of new ones for each mapping: rank 0 maps every
    extent of every dataset it publishes)."""
    dcpl = creation_properties(h5py.h5p.DATASET_CREATE, path in groups.tracked)
    if fill is not None:
        dcpl.set_fill_value(np.asarray(fill, dtype=dtype).reshape(()))
    limits = None if not maxshape else tuple(h5py.h5s.UNLIMITED if n < 0 else n for n in maxshape)
    selection = h5py.h5s.create_simple(shape, limits)
    if not sources:
        dcpl.set_layout(h5py.h5d.VIRTUAL)
    spaces: dict[tuple[int, ...], h5py.h5s.SpaceID] = {}
    for file, dataset, slab, start, count in sources:
        # replaces the previous selection
        selection.select_hyperslab(slab.start, slab.count, slab.stride, slab.block)
        dims = slab.block if count is None else count
        source = spaces.get(dims)
        if source is None:
            source = spaces[dims] = h5py.h5s.create_simple(dims)
        if count is None:
            source.select_all()
        else:
            local = slab.shifted(start)
            source.select_hyperslab(local.start, local.count, local.stride, local.block)
        dcpl.set_virtual(selection, file.encode(), dataset.encode(), source)
    type_id = groups.named_type(path)
    if type_id is None:
        type_id = h5py.h5t.py_create(dtype, logical=True)
    name, lcpl = link_name(posixpath.basename(path))
    space = h5py.h5s.create_simple(shape, limits)
    parent = groups.parent_of(path)
    with compact_selections(groups.h5):
        h5py.h5d.create(parent.id, name, type_id, space, dcpl=dcpl, lcpl=lcpl)


def copy_attributes(source: h5py.HLObject, target: h5py.HLObject) -> None:
    """Every attribute of ``source`` onto ``target``, with its HDF5 type and dataspace as
    stored (values read with the type h5py gives them, variable-length strings included)."""
    for name in source.attrs:
        key = name.encode()
        attr = h5py.h5a.open(source.id, key)
        value = np.empty(attr.shape, dtype=attr.dtype)
        attr.read(value)
        if h5py.h5a.exists(target.id, key):
            h5py.h5a.delete(target.id, key)
        copied = h5py.h5a.create(target.id, key, attr.get_type(), attr.get_space())
        copied.write(value)


def direct_offset(dataset: h5py.Dataset) -> int | None:
    """The byte offset of a dataset's data if its raw bytes can be read directly, else None.

    Direct reading needs contiguous, allocated storage without filters or external files, and a
    file type identical to the one h5py makes for the dataset's numpy dtype.
    """
    try:
        dcpl = dataset.id.get_create_plist()
        if dcpl.get_layout() != h5py.h5d.CONTIGUOUS:
            return None
        if dcpl.get_nfilters() or dcpl.get_external_count():
            return None
        offset = dataset.id.get_offset()
        if offset is None:
            return None
        if not dataset.id.get_type().equal(h5py.h5t.py_create(dataset.dtype, logical=True)):
            return None
        return int(offset)
    except (TypeError, ValueError):
        return None


def virtual_sources(dataset: h5py.Dataset) -> list[str]:
    """The source file names of a virtual dataset ("." is the file itself)."""
    dcpl = dataset.id.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.VIRTUAL:
        return []
    return [dcpl.get_virtual_filename(i) for i in range(dcpl.get_virtual_count())]


_STORAGE = {
    h5py.h5d.COMPACT: "compact",
    h5py.h5d.CONTIGUOUS: "contiguous",
    h5py.h5d.CHUNKED: "chunked",
    h5py.h5d.VIRTUAL: "virtual",
}


def hdf5_facts(dataset: h5py.Dataset) -> Hdf5Facts:
    """What HDF5 says of a dataset's storage (to cross-check a layout record against): shape,
    dtype, layout, the offset of directly readable data, every VDS mapping."""
    dcpl = dataset.id.get_create_plist()
    storage = _STORAGE.get(dcpl.get_layout(), "other")
    mappings = []
    if storage == "virtual":
        for i in range(dcpl.get_virtual_count()):
            vspace, source = dcpl.get_virtual_vspace(i), dcpl.get_virtual_srcspace(i)
            box_count = vspace.get_select_npoints()
            if box_count:
                low, high = vspace.get_select_bounds()
            else:
                low = high = (-1,) * vspace.get_simple_extent_ndims()
            count = tuple(int(b) - int(a) + 1 for a, b in zip(low, high))
            dims = tuple(int(n) for n in source.get_simple_extent_dims())
            whole = source.get_select_type() == h5py.h5s.SEL_ALL or (
                dims == count and source.get_select_npoints() == math.prod(count)
            )
            name, file = dcpl.get_virtual_dsetname(i), dcpl.get_virtual_filename(i)
            start = tuple(int(v) for v in low)
            mappings.append(
                Mapping(
                    file,
                    name,
                    start,
                    count,
                    whole,
                    int(box_count),
                    _regular(vspace),
                    _regular(source, dims),
                )
            )
    offset = direct_offset(dataset) if storage == "contiguous" else None
    return Hdf5Facts(tuple(dataset.shape), dataset.dtype, storage, offset, tuple(mappings))


def _regular(space: Any, dims: tuple[int, ...] | None = None) -> Slab | None:
    """A dataspace's selection as a regular hyperslab (all of a source of ``dims`` as one box),
    or None when it is not one."""
    kind = space.get_select_type()
    if kind == h5py.h5s.SEL_ALL:  # a source mapped whole (HDF5 may keep no shape for it)
        return Slab.of_box(Block((0,) * len(dims), dims)) if dims else None
    if kind != h5py.h5s.SEL_HYPERSLABS or not space.is_regular_hyperslab():
        return None
    start, stride, count, block = space.get_regular_hyperslab()
    return Slab.made(
        tuple(int(v) for v in start),
        tuple(int(v) for v in stride),
        tuple(int(v) for v in count),
        tuple(int(v) for v in block),
    )


#: How :func:`read_attrs` shows an attribute whose value it cannot pass on: a note of this form.
_NOTE = re.compile(
    r"<(unreadable attribute: .*|HDF5 (object|region) reference to .*|array of \d+ HDF5 references)>",
    re.DOTALL,
)


def is_attribute_note(value: Any) -> bool:
    """Whether ``value`` is :func:`read_attrs`' note for an attribute it could not pass on."""
    return isinstance(value, str) and _NOTE.fullmatch(value) is not None


def read_attrs(obj: h5py.HLObject, skip: Any = None) -> dict[str, Any]:
    """The attributes of an object (but those whose name ``skip(name)`` rejects), object
    references as paths (io/references.py); an attribute h5py cannot read becomes a short
    note."""
    values: dict[str, Any] = {}
    for name in obj.attrs:
        if skip is not None and skip(name):
            continue
        try:
            values[name] = as_paths(obj.file, obj.attrs[name])
        except (OSError, TypeError, ValueError) as exc:
            values[name] = f"<unreadable attribute: {exc}>"
    return values


class SourceFile:
    """An HDF5 file open on one rank in which source datasets are created: a group leader's
    subfile, or the master of a single-group session. Subclasses open ``h5``; a failure of
    HDF5's writes names ``path`` and its cause (:mod:`.causes`)."""

    h5: h5py.File
    groups: Groups
    path: str  # the file, as its user knows it

    @hdf5_writes("write")
    def set_aside(self, paths: Iterable[str]) -> None:
        """The objects ``paths`` (a deleted group, or a deleted dataset's sources) moved out of
        the way, their space kept until :meth:`drop_set_aside`: writes to them may still be in
        flight, and HDF5 would give freed space to new datasets. Those missing are skipped."""
        for path in paths:
            if path in self.h5:  # not h5.get: HDF5's error for a missing path can be garbage
                aside = self.h5.require_group(SET_ASIDE)
                self.h5.move(path, f"/{SET_ASIDE}/{len(aside)}")
            self.groups.forget(path)

    @hdf5_writes("write")
    def drop_set_aside(self) -> None:
        """Unlink what :meth:`set_aside` kept (no write is in flight any more)."""
        if SET_ASIDE in self.h5:
            del self.h5[SET_ASIDE]

    @hdf5_writes("write")
    def create(
        self, path: str, shape: tuple[int, ...], dtype: np.dtype, fill: bytes | None = None
    ) -> int:
        """A contiguous, early-allocated dataset (filled only with a ``fill`` value); returns
        its data's byte offset."""
        return create_early_dataset(self.groups, path, shape, dtype, fill)

    @hdf5_writes("write")
    def create_chunked(
        self,
        path: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        chunks: tuple[int, ...],
        filters: dict[str, Any],
        fill: bytes | None = None,
    ) -> h5py.Dataset:
        """A chunked dataset, filled later with whole compressed chunks."""
        return create_chunked_dataset(self.groups, path, shape, dtype, chunks, filters, fill)

    @hdf5_writes("write")
    def flush(self) -> None:
        self.h5.flush()

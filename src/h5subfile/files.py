"""Public objects: File, Group, Dataset, AttributeManager (h5py-like).

Every structural call (open, close, create_group, create_dataset, write_dataset(s), attribute
changes, Dataset.write) is collective: every rank of the file's communicator calls it with the same
arguments (a block or local data may differ per rank). Each one follows the same recipe: parse
locally -> rank 0 gathers, checks and plans (pure layout code) -> the plan is scattered or
broadcast -> I/O. Any failure becomes the same exception on every rank. Reads are independent:
any rank reads any selection at any time, without communication.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import time
import warnings
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpi4py import MPI

from ._version import __version__
from .errors import (
    DataShapeError,
    FileModeError,
    H5SubfileError,
    IncompleteFileError,
    ObjectExistsError,
    ObjectNotFoundError,
    PlanError,
    SelectionError,
)
from .exchange import exchange_bytes, read_two_phase, write_two_phase
from .io.boxes import BoxReader, box_pieces, raise_problem
from .io.filters import Compressors, FilterSpec, resolve_filters
from .io.h5 import open_shared_read
from .io.master import (
    Catalog,
    MasterWriter,
    NodeInfo,
    describe_storage,
    open_for_reading,
    source_name,
)
from .io.posix import FilePool, IOStats, Piece, as_bytes
from .io.subfile import SubfileWriter
from .layout.blocks import Block, check_blocks, corner_block, parse_block, prefix_blocks
from .layout.chunking import (
    ChunkChoice,
    ChunkWork,
    Member,
    choose_chunks,
    chunk_box,
    chunk_work,
    extent_chunks,
)
from .layout.dtypes import check_dtype
from .layout.extents import plan_extents
from .layout.grouping import Grouping, aggregators_of, plan_groups
from .layout.names import resolve_inside, subfile_relpath
from .layout.record import DatasetLayout, StoredExtent, is_reserved
from .layout.selection import assemble, partition, plan_read
from .layout.twophase import Run, plan_two_phase
from .mpi.collective import agree, check_same, checked_collective, root_decides, root_only
from .mpi.nodes import node_of_ranks
from .plan import READ_FIELDS, Plan

MODES = ("r", "r+", "w", "w-", "x", "a")


def _join(base: str, name: str) -> str:
    if not isinstance(name, str) or not name.strip("/"):
        raise ObjectNotFoundError(f"invalid object name {name!r}")
    path = posixpath.normpath(name if name.startswith("/") else posixpath.join(base, name))
    return "/" + path.lstrip("/")


def _value_signature(value: Any) -> Any:
    """A small, comparable summary of an attribute value (to check collective agreement)."""
    try:
        array = np.asarray(value)
        if array.dtype.kind != "O":
            digest = hashlib.sha1(array.tobytes()).hexdigest()[:16]
            return (array.dtype.str, array.shape, digest)
    except (TypeError, ValueError):
        pass
    return repr(value)


@dataclass
class _Chunked:
    """What this rank does for a chunked dataset: its chunk work, and where chunks go."""

    work: ChunkWork
    chunks: tuple[int, ...]  # the extent's chunk shape
    extent_shape: tuple[int, ...]
    filters: FilterSpec
    leader: int  # the rank whose HDF5 handle writes the chunks (the group's leader)
    sink: str  # the dataset's name in the leader's file


@dataclass
class _Target:
    """Where this rank writes its block of a dataset created in this session."""

    block: Block
    file: str  # absolute path
    offset: int  # byte offset of the extent's data in the file (-1 if chunked)
    extent: Block  # the extent's box, in dataset coordinates
    group: int = 0
    chunked: _Chunked | None = None


#: How a dataset is stored: (None | True | chunk shape, filters); None: contiguous.
Storage = tuple[Any, FilterSpec]
CONTIGUOUS: Storage = (None, FilterSpec())


def _storage_request(
    plan: Plan | None,
    ndim: int,
    chunks: Any = None,
    compression: Any = None,
    compression_opts: Any = None,
    shuffle: bool | None = None,
    fletcher32: bool | None = None,
) -> Storage:
    """Resolve a dataset's chunks and filters (h5py's arguments), the plan giving the default
    compression when ``compression`` is None."""
    if compression is None and plan is not None and plan.compression is not None:
        spec = resolve_filters(
            plan.compression, None, plan.shuffle if shuffle is None else shuffle, fletcher32
        )
    else:
        spec = resolve_filters(compression, compression_opts, shuffle, fletcher32)
    if chunks is None or chunks is False:
        if spec.is_empty:
            return CONTIGUOUS
        chunks = True
    if ndim == 0:
        raise PlanError("a scalar dataset cannot be chunked or compressed")
    if chunks is not True:
        try:
            chunks = tuple(int(n) for n in chunks)
        except (TypeError, ValueError):
            raise PlanError(
                f"chunks={chunks!r}: expected True or a tuple of positive integers"
            ) from None
    return chunks, spec


@dataclass(frozen=True)
class _Request:
    """One rank's request to create a dataset (what create_dataset/write_dataset were given).

    kind "explicit": shape given, block per rank; "prefix": blocks placed along axis 0 at the
    prefix sum of the ranks' lengths; "corner": blocks at given corners, shape = their union's end.
    """

    path: str
    dtype: np.dtype
    kind: str
    shape: tuple[int, ...] | None
    block: Block
    storage: Storage = CONTIGUOUS

    @property
    def signature(self) -> tuple[Any, ...]:
        common = (
            self.path,
            self.dtype.str if self.dtype.fields is None else self.dtype.descr,
            self.kind,
            self.storage,
        )
        if self.kind == "explicit":
            return common + (self.shape,)
        if self.kind == "prefix":
            return common + (self.block.count[1:],)
        return common + (len(self.block.count),)


@dataclass
class _PlannedDataset:
    """Rank 0's plan for one dataset being created."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    in_master: bool
    extents: list[Block]  # boxes, in dataset coordinates
    extent_groups: list[int]
    extent_ranks: list[tuple[int, ...]]
    offsets: dict[int, int] = field(default_factory=dict)
    choice: ChunkChoice | None = None  # chunked datasets
    filters: FilterSpec = FilterSpec()

    def chunks_of_extent(self, index: int) -> tuple[int, ...]:
        """Extent ``index``'s chunk shape (the dataset's, clipped to it); () if contiguous."""
        if self.choice is None:
            return ()
        return extent_chunks(self.choice.chunks, self.extents[index].count)


class _State:
    """Everything one open file holds on one rank (shared by its Group/Dataset facades)."""

    def __init__(self, path: str, mode: str, comm: MPI.Comm):
        self.path = os.path.abspath(path)
        self.mode = mode
        self.comm = comm
        self.writable = mode != "r"
        self.stats = IOStats()
        self.catalog: Catalog
        self.plan: Plan | None = None
        self.grouping: Grouping | None = None
        self.master: MasterWriter | None = None
        self.subfile: SubfileWriter | None = None
        self.session = -1
        self.data_path = self.path
        self.pool = FilePool(writable=True, stats=self.stats)
        self.reader: BoxReader
        self.targets: dict[str, _Target | None] = {}
        self.unwritten: set[str] = set()
        self.partly_written: dict[str, int] = {}  # elements written by dset[...] = data
        self.planned: list[_PlannedDataset] = []  # rank 0, between plan and publish
        self.chunk_sinks: dict[str, Any] = {}  # a leader's chunked datasets (h5py), by name
        self.compressors = Compressors()
        self._group_comm: MPI.Comm | None = None
        self.collective_depth = 0
        self.closed = False

    @property
    def group_comm(self) -> MPI.Comm:
        """The ranks of this rank's subfile (its leader is rank 0); made on first use (collective)."""
        if self._group_comm is None:
            assert self.grouping is not None
            self._group_comm = self.comm.Split(
                self.grouping.group_of_rank[self.comm.rank], self.comm.rank
            )
        return self._group_comm

    def release(self) -> None:
        """Free the communicator and compressors of this session (local)."""
        self.compressors.close()
        self.chunk_sinks.clear()
        if self._group_comm is not None:
            self._group_comm.Free()
            self._group_comm = None

    def node(self, path: str) -> NodeInfo:
        info = self.catalog.nodes.get(path)
        if info is None:
            raise ObjectNotFoundError(f"no object {path!r} in {self.path}")
        return info

    def require_writable(self, what: str) -> None:
        if self.closed:
            raise FileModeError(f"{what}: {self.path} is closed")
        if not self.writable:
            raise FileModeError(f"{what}: {self.path} is open read-only (mode 'r')")

    def require_open(self) -> None:
        if self.closed:
            raise FileModeError(f"{self.path} is closed")


class AttributeManager(MutableMapping[str, Any]):
    """``obj.attrs``: attributes of a group or dataset. Setting and deleting are collective."""

    def __init__(self, state: _State, path: str):
        self._state = state
        self._path = path

    def _values(self) -> dict[str, Any]:
        return self._state.node(self._path).attrs

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values()[name]
        except KeyError:
            raise ObjectNotFoundError(f"no attribute {name!r} on {self._path}") from None

    def __setitem__(self, name: str, value: Any) -> None:
        """Collective: set attribute ``name`` (every rank passes the same value)."""
        state = self._state
        state.require_writable(f"setting attribute {name!r}")
        if not isinstance(name, str) or not name or is_reserved(name):
            raise ValueError(f"attribute name {name!r} is invalid or reserved for h5subfile")
        signature = ("attrs.set", self._path, name, _value_signature(value))

        def set_on_root() -> Any:
            assert state.master is not None
            return state.master.set_attr(self._path, name, value)

        stored = checked_collective(
            state.comm, f"{self._path}.attrs[{name!r}] = ...", signature, set_on_root
        )
        self._values()[name] = stored

    def __delitem__(self, name: str) -> None:
        """Collective: delete attribute ``name``."""
        state = self._state
        state.require_writable(f"deleting attribute {name!r}")
        if name not in self._values():
            raise ObjectNotFoundError(f"no attribute {name!r} on {self._path}")

        def delete_on_root() -> None:
            assert state.master is not None
            state.master.delete_attr(self._path, name)

        checked_collective(
            state.comm,
            f"del {self._path}.attrs[{name!r}]",
            ("attrs.del", self._path, name),
            delete_on_root,
        )
        del self._values()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._values()))

    def __len__(self) -> int:
        return len(self._values())

    def __repr__(self) -> str:
        return f"<Attributes of {self._path}: {sorted(self._values())}>"


class _Object:
    def __init__(self, state: _State, path: str):
        self._state = state
        self._path = path

    @property
    def name(self) -> str:
        return self._path

    @property
    def attrs(self) -> AttributeManager:
        return AttributeManager(self._state, self._path)

    @property
    def file(self) -> File:
        return File._from_state(self._state)

    @property
    def parent(self) -> Group:
        return Group(self._state, posixpath.dirname(self._path) or "/")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Object) and other._state is self._state and other._path == self._path
        )

    def __hash__(self) -> int:
        return hash((id(self._state), self._path))


class Group(_Object):
    """A group: a container of groups and datasets, like ``h5py.Group``."""

    # navigation (local) ----------------------------------------------------------------------
    def __getitem__(self, name: str) -> Group | Dataset:
        self._state.require_open()
        path = _join(self._path, name)
        info = self._state.node(path)
        return Group(self._state, path) if info.kind == "group" else Dataset(self._state, path)

    def get(self, name: str, default: Any = None) -> Group | Dataset | Any:
        try:
            return self[name]
        except ObjectNotFoundError:
            return default

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return _join(self._path, name) in self._state.catalog.nodes
        except ObjectNotFoundError:
            return False

    def keys(self) -> list[str]:
        return self._state.catalog.children(self._path)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def values(self) -> list[Group | Dataset]:
        return [self[k] for k in self.keys()]

    def items(self) -> list[tuple[str, Group | Dataset]]:
        return [(k, self[k]) for k in self.keys()]

    def visit(self, fn: Any) -> Any:
        """Call ``fn(relative_name)`` for every object below this group (h5py's visit)."""
        prefix = self._path.rstrip("/") + "/"
        for path in sorted(self._state.catalog.nodes):
            if path.startswith(prefix) and path != self._path:
                result = fn(path[len(prefix) :])
                if result is not None:
                    return result
        return None

    def __repr__(self) -> str:
        return f"<h5subfile.Group {self._path!r} ({len(self)} members)>"

    # structure (collective) ------------------------------------------------------------------
    def create_group(self, name: str) -> Group:
        """Collective: create a group (and missing intermediate groups)."""
        state = self._state
        state.require_writable("create_group")
        path = _join(self._path, name)

        def create_on_root() -> list[str]:
            if path in state.catalog.nodes:
                raise ObjectExistsError(f"{path} already exists in {state.path}")
            new = _missing_groups(state.catalog, path)
            assert state.master is not None
            state.master.create_group(path)
            return new

        for new_path in checked_collective(
            state.comm, "create_group", ("create_group", path), create_on_root
        ):
            state.catalog.nodes[new_path] = NodeInfo("group")
        return Group(state, path)

    def require_group(self, name: str) -> Group:
        """Collective: the group ``name``, created if missing."""
        path = _join(self._path, name)
        info = self._state.catalog.nodes.get(path)
        if info is not None:
            if info.kind != "group":
                raise ObjectExistsError(f"{path} exists and is a dataset, not a group")
            return Group(self._state, path)
        return self.create_group(name)

    def create_dataset(
        self,
        name: str,
        shape: Sequence[int] | int,
        dtype: Any = "f4",
        *,
        block: Sequence[slice] | None = None,
        start: Sequence[int] | None = None,
        count: Sequence[int] | None = None,
        chunks: bool | Sequence[int] | None = None,
        compression: Any = None,
        compression_opts: Any = None,
        shuffle: bool | None = None,
        fletcher32: bool | None = None,
    ) -> Dataset:
        """Collective: create a dataset of ``shape`` and ``dtype``; each rank declares its block.

        ``block`` (a tuple of slices) or ``start`` + ``count`` give the region this rank will write
        with :meth:`Dataset.write`; a rank that writes nothing passes neither. Blocks must lie in
        ``shape`` and must not overlap (checked on all ranks together).

        Storage, as in h5py: ``chunks`` (True: the plan picks, aligned to the ranks' blocks when
        it can; or a shape), ``compression`` ("gzip", "lzf", "zstd", "lz4", "blosc", "blosc2",
        "bitshuffle", "name:level", an hdf5plugin filter object or a filter id),
        ``compression_opts``, ``shuffle``, ``fletcher32``. Without them the plan's default
        compression applies (none unless set). Chunks are compressed by the ranks that hold the
        data and written whole (direct chunk writes).
        """
        spec = dict(
            shape=shape,
            dtype=dtype,
            block=block,
            start=start,
            count=count,
            chunks=chunks,
            compression=compression,
            compression_opts=compression_opts,
            shuffle=shuffle,
            fletcher32=fletcher32,
        )
        return self.create_datasets({name: spec})[0]

    def create_datasets(self, specs: Mapping[str, Mapping[str, Any]]) -> list[Dataset]:
        """Collective: create many datasets with one round of coordination.

        ``specs`` maps names to the keyword arguments of :meth:`create_dataset` (``shape``,
        ``dtype``, and this rank's ``block`` or ``start`` + ``count``).
        """
        state = self._state
        state.require_writable("create_datasets")
        requests: list[_Request] = []
        error = None
        try:
            for name, spec in specs.items():
                requests.append(self._request(name, **spec))
        except (H5SubfileError, ValueError, TypeError) as exc:
            error = exc
        paths = _create(state, requests if error is None else None, error)
        return [Dataset(state, p) for p in paths]

    def _request(
        self,
        name: str,
        shape: Sequence[int] | int,
        dtype: Any = "f4",
        block: Sequence[slice] | None = None,
        start: Sequence[int] | None = None,
        count: Sequence[int] | None = None,
        **storage: Any,
    ) -> _Request:
        """Parse one rank's arguments for a dataset with an explicit shape."""
        path = _join(self._path, name)
        shape_t = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape_t):
            raise ValueError(f"shape {shape_t} has a negative dimension")
        return _Request(
            path,
            check_dtype(dtype),
            "explicit",
            shape_t,
            parse_block(shape_t, block, start, count),
            _storage_request(self._state.plan, len(shape_t), **storage),
        )

    def write_dataset(
        self, name: str, data: Any, start: Sequence[int] | None = None, **storage: Any
    ) -> Dataset:
        """Collective: create a dataset from every rank's local array and write it.

        Without ``start``, rank r's array goes at the exclusive prefix sum of the ranks' lengths
        along axis 0 (the VPIC pattern; uneven and empty lengths allowed; the other axes must
        agree). With ``start``, the array is an N-D block with its corner at ``start``; the
        dataset's shape is the end of the union of the blocks. ``storage``: ``chunks``,
        ``compression``, ``compression_opts``, ``shuffle``, ``fletcher32`` as in
        :meth:`create_dataset`.
        """
        return self.write_datasets(
            {name: data}, start=None if start is None else {name: start}, **storage
        )[0]

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
        storage_args = dict(
            chunks=chunks,
            compression=compression,
            compression_opts=compression_opts,
            shuffle=shuffle,
            fletcher32=fletcher32,
        )
        state = self._state
        state.require_writable("write_datasets")
        requests: list[_Request] = []
        arrays: list[np.ndarray] = []
        error = None
        try:
            for name, data in datasets.items():
                array = np.ascontiguousarray(data)
                dt = check_dtype(array.dtype)
                if array.ndim == 0:
                    raise DataShapeError(f"{name}: data must have at least one dimension")
                corner = start.get(name) if isinstance(start, Mapping) else start
                path = _join(self._path, name)
                storage = _storage_request(state.plan, array.ndim, **storage_args)
                if corner is None:
                    block = Block((0,) * array.ndim, array.shape)
                    requests.append(_Request(path, dt, "prefix", None, block, storage))
                else:
                    requests.append(
                        _Request(
                            path, dt, "corner", None, corner_block(corner, array.shape), storage
                        )
                    )
                arrays.append(array)
        except (H5SubfileError, ValueError, TypeError) as exc:
            error = exc
        paths = _create(state, requests if error is None else None, error)
        _write(state, list(zip(paths, arrays)) if error is None else [])
        return [Dataset(state, p) for p in paths]


def _missing_groups(catalog: Catalog, path: str) -> list[str]:
    """Groups to create so that ``path`` (a new object) has its parents; refuses datasets."""
    new: list[str] = []
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/" + "/".join(parts[:depth])
        info = catalog.nodes.get(prefix)
        if info is None:
            new.append(prefix)
        elif info.kind != "group" and depth < len(parts):
            raise ObjectExistsError(f"cannot create {path}: {prefix} is a dataset, not a group")
    return new


def _create(
    state: _State, requests: list[_Request] | None, error: BaseException | None
) -> list[str]:
    """Collective: create the requested datasets (planning on rank 0, subfiles on leaders)."""
    local = None if requests is None else requests
    answer = root_decides(
        state.comm, local, error, lambda gathered: _plan_creation(state, gathered)
    )
    # answer: (paths, this rank's blocks, extent index per dataset, chunk info, leader tasks)
    paths, blocks, placements, chunk_infos, tasks = answer
    offsets: dict[tuple[int, int], int] = {}
    error = None
    try:
        for dataset_index, extent_index, in_master, name, shape, dtype, chunked in tasks:
            offsets[(dataset_index, extent_index)] = _create_source(
                state, in_master, name, shape, dtype, chunked
            )
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by root_decides
        error = exc
    nodes = root_decides(
        state.comm, offsets, error, lambda gathered: _publish(state, gathered), per_rank=False
    )
    for path, info in nodes.items():
        for new_group in _missing_groups(state.catalog, path)[:-1]:
            state.catalog.nodes[new_group] = NodeInfo("group")
        state.catalog.nodes[path] = info
    assert state.grouping is not None
    group = state.grouping.group_of_rank[state.comm.rank]
    for path, block, placement, chunk_info in zip(paths, blocks, placements, chunk_infos):
        info = state.catalog.nodes[path]
        if placement is None or info.layout is None:
            state.targets[path] = None
            continue
        extent = info.layout.extents[placement]
        file = state.data_path if extent.file == "" else resolve_inside(state.path, extent.file)
        chunked = None
        if chunk_info is not None:
            members, leader, filters = chunk_info
            chunked = _Chunked(
                chunk_work(members, extent.chunks, extent.shape, state.comm.rank),
                extent.chunks,
                extent.shape,
                filters,
                leader,
                extent.dataset,
            )
        state.targets[path] = _Target(block, file, extent.offset, extent.block, group, chunked)
        state.unwritten.add(path)
    return paths


def _create_source(
    state: _State,
    in_master: bool,
    name: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    chunked: tuple[tuple[int, ...], FilterSpec] | None,
) -> int:
    """A leader creates one source dataset (in its subfile, or the master); returns its byte
    offset, or -1 for a chunked dataset (kept open to receive whole chunks)."""
    assert state.plan is not None
    if in_master:
        assert state.master is not None
        writer: Any = state.master
    else:
        if state.subfile is None:
            assert state.grouping is not None
            group = state.grouping.group_of_rank[state.comm.rank]
            relpath = subfile_relpath(state.path, state.session, group)
            state.subfile = SubfileWriter(resolve_inside(state.path, relpath), state.plan.alignment)
            assert state.subfile.h5 is not None
            state.reader.writer_files[state.subfile.path] = state.subfile.h5
        writer = state.subfile
    if chunked is None:
        return (
            writer.create(name, shape, dtype)
            if not in_master
            else writer.create_in_master(name, shape, dtype)
        )
    chunks, filters = chunked
    state.chunk_sinks[name] = writer.create_chunked(
        name, shape, dtype, chunks, filters.h5py_kwargs()
    )
    return -1


def _plan_creation(state: _State, gathered: list[list[_Request] | None]) -> list[Any]:
    """Rank 0: check the ranks' requests, place the blocks, plan extents and leader tasks."""
    assert state.grouping is not None and state.plan is not None
    grouping = state.grouping
    size = len(gathered)
    signatures = [[r.signature for r in requests or ()] for requests in gathered]
    check_same("create_dataset/write_datasets", signatures)
    reference = gathered[0] or []
    seen: set[str] = set()
    planned: list[_PlannedDataset] = []
    per_rank_blocks: list[list[Block]] = [[] for _ in range(size)]
    per_rank_placement: list[list[int | None]] = [[] for _ in range(size)]
    per_rank_chunks: list[list[Any]] = [[] for _ in range(size)]
    tasks: list[list[Any]] = [[] for _ in range(size)]
    for index, first in enumerate(reference):
        path = first.path
        if path in seen:
            raise ObjectExistsError(f"dataset {path} is named twice in one call")
        seen.add(path)
        existing = state.catalog.nodes.get(path)
        if existing is not None and not _unfinished(existing):
            raise ObjectExistsError(f"{path} already exists in {state.path}")
        _missing_groups(state.catalog, path)
        requests = [gathered[rank][index] for rank in range(size)]  # type: ignore[index]
        if first.kind == "prefix":
            lengths = [r.block.count[0] for r in requests]
            blocks = prefix_blocks(lengths, first.block.count[1:])
            shape = (sum(lengths),) + first.block.count[1:]
        elif first.kind == "corner":
            blocks = [r.block for r in requests]
            ndim = len(first.block.count)
            shape = tuple(
                max((b.stop[a] for b in blocks if not b.is_empty), default=0) for a in range(ndim)
            )
        else:
            blocks = [r.block for r in requests]
            assert first.shape is not None
            shape = first.shape
        check_blocks(path, shape, blocks)
        in_master = grouping.ngroups == 1
        if in_master:
            written = [r for r, b in enumerate(blocks) if not b.is_empty]
            boxes = [Block((0,) * len(shape), shape)] if written else []
            groups, ranks = [0] * len(boxes), [tuple(written)] * len(boxes)
            placements: list[int | None] = [0 if not b.is_empty else None for b in blocks]
        else:
            extents, placed = plan_extents(blocks, grouping)
            boxes = [e.block for e in extents]
            groups = [e.group for e in extents]
            ranks = [e.ranks for e in extents]
            placements = [None if p is None else p.extent for p in placed]
        plan = _PlannedDataset(path, shape, first.dtype, in_master, boxes, groups, ranks)
        requested, filters = first.storage
        members: list[list[Member]] = []
        if requested is not None and boxes:
            members = [
                [(r, blocks[r].relative_to(box.start)) for r in extent_ranks]
                for box, extent_ranks in zip(boxes, ranks)
            ]
            plan.choice = choose_chunks(
                shape, first.dtype.itemsize, members, requested, state.plan.chunk_bytes
            )
            plan.filters = filters
        if existing is not None:
            assert state.master is not None
            state.master.replace_unfinished(path)
        planned.append(plan)
        for rank in range(size):
            per_rank_blocks[rank].append(blocks[rank])
            per_rank_placement[rank].append(placements[rank])
            extent = placements[rank]
            chunk_info = None
            if plan.choice is not None and extent is not None:
                leader = grouping.leaders[groups[extent]]
                chunk_info = (members[extent], leader, filters)
            per_rank_chunks[rank].append(chunk_info)
        counters: dict[int, int] = {}
        for extent_index, (box, group) in enumerate(zip(boxes, groups)):
            within = counters.get(group, 0)
            counters[group] = within + 1
            name = path if in_master else source_name(path, within)
            leader = grouping.leaders[group]
            chunked = (
                None if plan.choice is None else (plan.chunks_of_extent(extent_index), filters)
            )
            tasks[leader].append(
                (index, extent_index, in_master, name, box.count, first.dtype, chunked)
            )
    state.planned = planned
    paths = [p.path for p in planned]
    return [
        (paths, per_rank_blocks[r], per_rank_placement[r], per_rank_chunks[r], tasks[r])
        for r in range(size)
    ]


def _unfinished(info: NodeInfo) -> bool:
    return (
        info.kind == "dataset"
        and info.problem is not None
        and info.problem[0] == "IncompleteFileError"
    )


def _publish(state: _State, gathered: list[dict[tuple[int, int], int]]) -> dict[str, NodeInfo]:
    """Rank 0: write the master's datasets (VDS or contiguous) and layout records."""
    assert state.master is not None and state.grouping is not None
    offsets: dict[tuple[int, int], int] = {}
    for part in gathered:
        offsets.update(part)
    nodes: dict[str, NodeInfo] = {}
    for index, plan in enumerate(state.planned):
        stored = []
        within: dict[int, int] = {}
        for extent_index, (box, group, ranks) in enumerate(
            zip(plan.extents, plan.extent_groups, plan.extent_ranks)
        ):
            k = within.get(group, 0)
            within[group] = k + 1
            file = "" if plan.in_master else subfile_relpath(state.path, state.session, group)
            name = plan.path if plan.in_master else source_name(plan.path, k)
            chunks = plan.chunks_of_extent(extent_index)
            stored.append(
                StoredExtent(
                    file, name, box.start, box.count, offsets[(index, extent_index)], ranks, chunks
                )
            )
        master = state.master
        if not stored:
            master.create_unwritten(plan.path, plan.shape, plan.dtype)
        elif not plan.in_master:
            master.create_virtual(plan.path, plan.shape, plan.dtype, stored)
        layout = DatasetLayout(state.session, tuple(stored), complete=True)
        if plan.choice is not None and stored:
            layout = dataclasses.replace(
                layout,
                chunks=plan.choice.chunks,
                chunks_aligned=plan.choice.aligned,
                filters=plan.filters.to_dict(),
            )
        master.write_layout(plan.path, layout)
        nodes[plan.path] = NodeInfo(
            "dataset", {}, plan.shape, plan.dtype, layout, storage=describe_storage(layout)
        )
    if state.master.commit_mode == "in-place":
        state.master.flush()  # the new datasets are on disk before any rank writes data
    state.planned = []
    return nodes


def _write(state: _State, items: Sequence[tuple[Any, ...]]) -> None:
    """Collective: every rank writes its blocks (or, with a third item, a box inside its block)
    of the given datasets; everything is checked and agreed first."""
    prepared: list[tuple[_Target, np.ndarray, str, Block]] = []
    error = None
    try:
        state.require_writable("write")
        for path, data, *rest in items:
            if path not in state.targets:
                raise FileModeError(
                    f"dataset {path} was not created in this write session; h5subfile datasets "
                    "are written once, by the session that creates them"
                )
            if rest and rest[0] is None:
                continue  # a collective dset[sel] = data with an empty selection on this rank
            info = state.node(path)
            target = state.targets[path]
            box = rest[0] if rest else None
            if target is None:
                if data is not None and np.size(data) != 0:
                    raise DataShapeError(
                        f"rank {state.comm.rank} declared no block of {path} but passed "
                        f"{np.shape(data)} data"
                    )
                continue
            if box is None:
                box = target.block
            elif target.chunked is not None and box != target.block:
                raise SelectionError(
                    f"{path} is chunked: each rank writes its whole block at once "
                    "(Dataset.write or write_dataset), so that chunks are compressed whole"
                )
            array = np.asarray(data)
            assert info.dtype is not None
            if array.dtype != info.dtype:
                if info.dtype.fields is None and np.can_cast(array.dtype, info.dtype, "safe"):
                    array = array.astype(info.dtype)
                else:
                    raise DataShapeError(
                        f"rank {state.comm.rank}: data of dtype {array.dtype} cannot be written "
                        f"to {path} of dtype {info.dtype} without losing information; convert "
                        f"it first (data.astype({str(info.dtype)!r}))"
                    )
            if array.shape != box.count:
                raise DataShapeError(
                    f"rank {state.comm.rank}: data of shape {array.shape} does not match its "
                    f"block {box} (shape {box.count}) of dataset {path}"
                )
            prepared.append((target, np.ascontiguousarray(array), path, box))
    except (H5SubfileError, ValueError, TypeError) as exc:
        error = exc
    agree(state.comm, error)
    chunked_call = any(_is_chunked(state, item[0]) for item in items)
    contiguous = [p for p in prepared if p[0].chunked is None]
    pieces = [
        (target.file, target.group, piece)
        for target, array, _, box in contiguous
        for piece in box_pieces(target.offset, target.extent, box, array)
    ]
    assert state.plan is not None
    if state.plan.aggregators is not None:
        error = _write_aggregated(state, pieces)
    else:
        try:
            by_file: dict[str, list[Piece]] = {}
            for file, _, piece in pieces:
                by_file.setdefault(file, []).append(piece)
            for file, file_pieces in by_file.items():
                state.pool.get(file).write_pieces(file_pieces)
        except Exception as exc:  # noqa: BLE001 - agreed on every rank below
            error = exc
    if chunked_call:
        error = _write_chunks(state, [p for p in prepared if p[0].chunked is not None]) or error
    if error is None:
        for target, _, path, box in prepared:
            if box == target.block:
                state.unwritten.discard(path)
            else:
                _count_written(state, path, target, box)
    agree(state.comm, error)


def _is_chunked(state: _State, path: Any) -> bool:
    info = state.catalog.nodes.get(path) if isinstance(path, str) else None
    return info is not None and info.layout is not None and bool(info.layout.chunks)


def _count_written(state: _State, path: str, target: _Target, box: Block) -> None:
    done = state.partly_written.get(path, 0) + box.size
    state.partly_written[path] = done
    if done >= target.block.size:
        state.unwritten.discard(path)


def _plan_aggregated(
    state: _State, local: list[tuple[str, int | None, int, int]], aggregators_of_file: Any
) -> tuple[list[list[Any]], list[str]]:
    """Every rank's (file, group or None, offset, length) pieces, gathered; the same two-phase
    rounds computed on every rank, ``aggregators_of_file(index, group)`` choosing each file's
    aggregators. Returns the rounds and the files by index."""
    assert state.plan is not None
    gathered = state.comm.allgather(local)
    files = sorted({run[0] for rank_runs in gathered for run in rank_runs})
    number = {file: i for i, file in enumerate(files)}
    aggregators = {
        number[file]: aggregators_of_file(number[file], group)
        for rank_runs in gathered
        for file, group, _, _ in rank_runs
    }
    runs: list[list[Run]] = [
        [(number[f], o, n) for f, _, o, n in rank_runs] for rank_runs in gathered
    ]
    return plan_two_phase(runs, aggregators, state.plan.buffer_bytes), files


def _write_aggregated(state: _State, pieces: list[tuple[str, int, Piece]]) -> BaseException | None:
    """Collective two-phase write: the plan's aggregators of each subfile write its bytes."""
    assert state.plan is not None and state.grouping is not None
    grouping, count = state.grouping, state.plan.aggregators or 1
    started, written = time.perf_counter(), state.stats.write_seconds
    rounds, files = _plan_aggregated(
        state,
        [(file, group, offset, len(data)) for file, group, (offset, data) in pieces],
        lambda _, group: aggregators_of(grouping.members[group], count),
    )
    error = write_two_phase(
        state.comm, rounds, [data for _, _, (_, data) in pieces], lambda i: state.pool.get(files[i])
    )
    state.stats.exchange_seconds += (
        time.perf_counter() - started - (state.stats.write_seconds - written)
    )
    return error


def _write_chunks(
    state: _State, items: list[tuple[_Target, np.ndarray, str, Block]]
) -> BaseException | None:
    """Collective: chunked datasets. Ranks send the parts of chunks others own to their owners,
    compress their own chunks (in parallel), and send the compressed chunks, in rounds of about
    ``buffer_size`` raw bytes per rank, to their group's leader, which writes them whole."""
    assert state.plan is not None
    comm = state.comm
    stats = state.stats
    started, busy = time.perf_counter(), stats.write_seconds + stats.compress_seconds
    error: BaseException | None = None
    local_blocks = [t.block.relative_to(t.extent.start) for t, _, _, _ in items]
    # 1. Parts of chunks owned by other ranks go to their owners (one Alltoallv).
    outgoing: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    incoming = [0] * comm.size
    for (target, array, _, _), mine in zip(items, local_blocks):
        chunked = target.chunked
        assert chunked is not None
        for owner, _, box in chunked.work.send:
            outgoing[owner].append(array[box.relative_to(mine.start).slices])
        for _, parts in chunked.work.owned:
            for source, box in parts:
                incoming[source] += box.size * array.itemsize
    receive, cursor = exchange_bytes(comm, outgoing, incoming)
    del outgoing
    received: dict[tuple[int, tuple[int, ...]], list[tuple[Block, np.ndarray]]] = {}
    for source in range(comm.size):
        at = cursor[source]
        for item, (target, array, _, _) in enumerate(items):
            assert target.chunked is not None
            for index, parts in target.chunked.work.owned:
                for sender, box in parts:
                    if sender == source:
                        nbytes = box.size * array.itemsize
                        part = receive[at : at + nbytes].view(array.dtype).reshape(box.count)
                        received.setdefault((item, index), []).append((box, part))
                        at += nbytes
    # 2. Batches of owned chunks, about buffer_size raw bytes each; one round per batch.
    owned = [
        (item, index)
        for item, (target, _, _, _) in enumerate(items)
        for index, _ in target.chunked.work.owned
    ]  # type: ignore[union-attr]
    batches: list[list[tuple[int, tuple[int, ...]]]] = []
    size = state.plan.buffer_bytes
    for item, index in owned:
        target, array = items[item][0], items[item][1]
        assert target.chunked is not None
        nbytes = int(np.prod(target.chunked.chunks)) * array.itemsize
        if not batches or size + nbytes > state.plan.buffer_bytes:
            batches.append([])
            size = 0
        batches[-1].append((item, index))
        size += nbytes
    group_comm = state.group_comm
    rounds = group_comm.allreduce(len(batches), op=MPI.MAX)
    for round_number in range(rounds):
        payload: list[tuple[str, tuple[int, ...], int, bytes]] | str = []
        try:
            for item, index in batches[round_number] if round_number < len(batches) else ():
                target, array = items[item][0], items[item][1]
                payload.append(
                    _compress_chunk(
                        state,
                        target,
                        array,
                        local_blocks[item],
                        index,
                        received.pop((item, index), []),
                    )
                )
        except Exception as exc:  # noqa: BLE001 - reported to the leader, agreed later
            error = exc
            payload = f"rank {comm.rank}: compressing failed: {exc}"
        gathered = group_comm.gather(payload, root=0)
        if gathered is None:
            continue
        try:
            for chunks in gathered:
                if isinstance(chunks, str):
                    raise OSError(chunks)
                for sink, offset, mask, data in chunks:
                    t = time.perf_counter()
                    state.chunk_sinks[sink].id.write_direct_chunk(offset, data, mask)
                    stats.write_seconds += time.perf_counter() - t
                    stats.writes += 1
                    stats.bytes_written += len(data)
        except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
            error = error or exc
    writer = state.subfile if state.subfile is not None else state.master
    if group_comm.rank == 0 and writer is not None:
        try:
            writer.flush()  # readers in this session open the file anew and see the chunks
        except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
            error = error or exc
    state.reader.forget_sources()  # reopen files written by other processes when reading
    stats.exchange_seconds += (
        time.perf_counter() - started - (stats.write_seconds + stats.compress_seconds - busy)
    )
    return error


def _compress_chunk(
    state: _State,
    target: _Target,
    array: np.ndarray,
    mine: Block,
    index: tuple[int, ...],
    parts: list[tuple[Block, np.ndarray]],
) -> tuple[str, tuple[int, ...], int, bytes]:
    """Assemble one whole chunk (own data + parts received; zeros beyond the extent's edge)
    and compress it: (sink name, chunk offset, filter mask, stored bytes)."""
    chunked = target.chunked
    assert chunked is not None
    box = chunk_box(index, chunked.chunks, chunked.extent_shape)
    if box.count == chunked.chunks and mine.intersect(box) == box and array.flags.c_contiguous:
        chunk = np.ascontiguousarray(array[box.relative_to(mine.start).slices])
    else:
        chunk = np.zeros(chunked.chunks, dtype=array.dtype)
        common = mine.intersect(box)
        if common is not None:
            chunk[common.relative_to(box.start).slices] = array[
                common.relative_to(mine.start).slices
            ]
        for part_box, part in parts:
            chunk[part_box.relative_to(box.start).slices] = part
    compressor = state.compressors.get(array.dtype, chunked.chunks, chunked.filters)
    started = time.perf_counter()
    mask, data = compressor.compress(chunk)
    state.stats.compress_seconds += time.perf_counter() - started
    return chunked.sink, box.start, mask, data


def _box_of(info: NodeInfo, selection: Any) -> tuple[Block, tuple[int, ...]] | None:
    """The box a selection covers and the selection's shape, if it is a box (integers and
    step-1 slices); None otherwise. A plain slice of a 1-D dataset takes a short cut."""
    shape = info.shape
    if len(shape) == 1 and isinstance(selection, slice) and selection.step in (None, 1):
        start, stop, _ = selection.indices(shape[0])
        count = max(stop - start, 0)
        return Block((start if count else 0,), (count,)), (count,)
    assert info.dtype is not None
    plan = plan_read(shape, info.dtype.itemsize, selection)
    if (
        len(plan.pieces) != 1
        or plan.reorder is not None
        or not all(isinstance(i, slice) and i.step in (None, 1) for i in plan.pieces[0].index)
    ):
        return None
    return plan.pieces[0].box, plan.out_shape


class Dataset(_Object):
    """A dataset, like ``h5py.Dataset``. Reading is independent; writing is collective."""

    def _info(self) -> NodeInfo:
        self._state.require_open()
        return self._state.node(self._path)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._info().shape

    @property
    def dtype(self) -> np.dtype:
        dtype = self._info().dtype
        assert dtype is not None
        return dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def layout(self) -> DatasetLayout | None:
        """Where the data is stored (extents: file, dataset, box, byte offset), if read directly."""
        return self._info().layout

    @property
    def storage(self) -> str:
        """A short description of the storage (virtual over subfiles, contiguous, ...)."""
        return self._info().storage

    @property
    def problem(self) -> str | None:
        """Why reading this dataset would fail (missing subfile, unfinished session...), or None."""
        problem = self._info().problem
        return None if problem is None else problem[1]

    @property
    def block(self) -> Block | None:
        """This rank's block, for a dataset created in the current write session."""
        target = self._state.targets.get(self._path)
        return None if target is None else target.block

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a scalar dataset")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<h5subfile.Dataset {self._path!r}: shape {self.shape}, type {self.dtype.str!r}>"

    @property
    def chunks(self) -> tuple[int, ...] | None:
        """The chunk shape (each extent's chunks are this, clipped to the extent), or None."""
        layout = self._info().layout
        if layout is not None and layout.chunks:
            return layout.chunks
        if self._info().via_h5py and self.shape:
            return self._state.reader.h5py_dataset(self._path).chunks
        return None

    @property
    def compression(self) -> str | None:
        """The compression filter's name (``"gzip"``, ``"zstd"``...), or None."""
        layout = self._info().layout
        if layout is not None and layout.chunks:
            return FilterSpec.from_dict(layout.filters).name
        if self._info().via_h5py and self.shape:
            return self._state.reader.h5py_dataset(self._path).compression
        return None

    @property
    def filters(self) -> FilterSpec:
        """Every filter of a dataset written by h5subfile (name, HDF5 id, options, shuffle...)."""
        layout = self._info().layout
        return FilterSpec.from_dict(layout.filters if layout is not None else None)

    @property
    def collective(self) -> _Collective:
        """``with dset.collective: dset[sel] = data`` / ``x = dset[sel]``: the transfers inside
        are collective (as in h5py's mpio driver): every rank calls them, each with its own
        selection, and the plan's aggregators (two-phase I/O) serve them when it has any."""
        return _Collective(self._state)

    def write(self, data: Any) -> None:
        """Collective: write this rank's block (ranks with an empty block pass None or nothing)."""
        _write(self._state, [(self._path, data)])

    def __setitem__(self, selection: Any, data: Any) -> None:
        """Write part of this rank's block: ``dset[lo:hi, ...] = data``.

        Unlike :meth:`write` this is independent: each rank writes pieces of its own block
        when it likes (in any order, of any size), e.g. as a simulation produces them. The
        selection must be a box (integers and step-1 slices) inside this rank's block. Inside
        ``with dset.collective:`` it is collective instead (every rank calls it).
        """
        state = self._state
        collective = state.collective_depth > 0
        if collective:
            error = None
            try:
                box, array = self._piece(selection, data)
            except (H5SubfileError, ValueError, TypeError) as exc:
                error = exc
                box, array = None, None
            agree(state.comm, error)
            _write(state, [(self._path, array, box)])
            return
        box, array = self._piece(selection, data)
        if box is None:
            return
        target = state.targets[self._path]
        assert target is not None
        if target.chunked is not None:
            raise SelectionError(
                f"{self._path} is chunked: chunks are compressed whole, so each rank writes its "
                "whole block collectively (Dataset.write, write_dataset)"
            )
        state.pool.get(target.file).write_pieces(
            box_pieces(target.offset, target.extent, box, array)
        )
        _count_written(state, self._path, target, box)

    def _piece(self, selection: Any, data: Any) -> tuple[Block | None, np.ndarray | None]:
        """Check a write of part of this rank's block: (box, data shaped like it)."""
        state = self._state
        state.require_writable("writing to a dataset")
        target = state.targets.get(self._path)
        if target is None:
            raise FileModeError(
                f"rank {state.comm.rank} has no block of {self._path} in this write session; "
                "declare one with create_dataset(..., block=...) first"
            )
        info = self._info()
        assert info.dtype is not None
        found = _box_of(info, selection)
        if found is None:
            raise SelectionError(f"{self._path}: writes take a box (integers and step-1 slices)")
        box, out_shape = found
        if box.size and target.block.intersect(box) != box:
            raise SelectionError(
                f"rank {state.comm.rank}: {box} is not inside its block {target.block} of "
                f"{self._path}"
            )
        array = np.ascontiguousarray(data, dtype=info.dtype if np.isscalar(data) else None)
        if array.dtype != info.dtype:
            raise DataShapeError(
                f"data of dtype {array.dtype} for {self._path} of dtype "
                f"{info.dtype}; convert it first"
            )
        if array.shape != out_shape:
            raise DataShapeError(
                f"data of shape {array.shape} for a selection of shape {out_shape} of {self._path}"
            )
        if box.size == 0:
            return None, None
        return box, array.reshape(box.count)

    def __getitem__(self, selection: Any) -> np.ndarray:
        if self._state.collective_depth > 0:
            return self.read_collective(selection)
        return self.read(selection)

    def read_direct(self, dest: np.ndarray, source_sel: Any = ()) -> None:
        """Read ``source_sel`` straight into the array ``dest`` (as h5py's ``read_direct``).

        For a box selection into a C-contiguous ``dest`` of the dataset's dtype the bytes land in
        ``dest`` without an intermediate array.
        """
        info = self._info()
        assert info.dtype is not None
        if info.problem is not None:
            raise_problem(info.problem)
        found = _box_of(info, source_sel) if info.shape else None
        if (
            found is not None
            and not info.via_h5py
            and info.layout is not None
            and dest.dtype == info.dtype
            and dest.flags.c_contiguous
            and dest.shape == found[1]
        ):
            box = found[0]
            self._state.reader.read_direct(info.layout, info.dtype, box, dest.reshape(box.count))
            return
        dest[...] = self.read(source_sel)

    def read(self, selection: Any = ()) -> np.ndarray:
        """Read a selection (numpy/h5py style) on this rank only; no communication."""
        info = self._info()
        if info.problem is not None:
            raise_problem(info.problem)
        assert info.dtype is not None
        if info.dtype.kind == "O" or not info.shape:
            # Variable-length or scalar data: h5py reads it (and checks the selection).
            return np.asarray(self._state.reader.h5py_dataset(self._path)[selection])
        plan = plan_read(info.shape, info.dtype.itemsize, selection)
        reader = self._state.reader
        arrays = []
        for piece in plan.pieces:
            if info.via_h5py or info.layout is None:
                arrays.append(reader.read_h5py(self._path, info.dtype, piece.box))
            else:
                arrays.append(reader.read_direct(info.layout, info.dtype, piece.box))
        return assemble(plan, arrays)

    def read_partition(self) -> np.ndarray:
        """This rank's share along axis 0 (BD-CATS): rank p of P reads
        ``[p*N//P, (p+1)*N//P)``, the last rank also the remainder. Collective when the plan
        has aggregators (two-phase reads); otherwise every rank reads its share itself."""
        if not self.shape:
            raise SelectionError(f"{self._path} is a scalar dataset; it has no axis 0 to split")
        comm = self._state.comm
        start, stop = partition(self.shape[0], comm.size, comm.rank)
        plan = self._state.plan
        if plan is not None and plan.aggregators is not None:
            return self.read_collective(slice(start, stop))
        return self.read(slice(start, stop))

    def read_collective(self, selection: Any = ()) -> np.ndarray:
        """Collective read: every rank calls it with its own selection.

        With the plan's ``aggregators`` (``File(path, "r", aggregators=...)``), a few ranks
        per file read large contiguous pieces (at most ``buffer_size`` bytes each) and send
        every rank its bytes (two-phase I/O); otherwise each rank reads its own bytes.
        """
        state = self._state
        info = self._info()
        error = None
        plan = None
        try:
            if info.problem is not None:
                raise_problem(info.problem)
            assert info.dtype is not None
            if info.dtype.kind == "O" or not info.shape:
                raise SelectionError(
                    f"{self._path}: collective reads take N-D datasets of fixed-size types"
                )
            plan = plan_read(info.shape, info.dtype.itemsize, selection)
        except H5SubfileError as exc:
            error = exc
        agree(state.comm, error)
        assert plan is not None and info.dtype is not None
        aggregated = state.plan is not None and state.plan.aggregators is not None
        if not aggregated or info.via_h5py or info.layout is None:
            return self.read(selection)
        reader = state.reader
        outputs = [np.empty(piece.box.count, dtype=info.dtype) for piece in plan.pieces]
        pieces: list[tuple[str, Piece]] = []
        for piece, out in zip(plan.pieces, outputs):
            if out.size == 0:
                continue
            by_file, chunked, complete = reader.plan(
                info.layout, info.dtype.itemsize, piece.box, as_bytes(out)
            )
            if not complete:
                out.reshape(-1).view(np.uint8).fill(
                    0
                )  # zero bytes (fill(0) writes "0" into strings)
            pieces.extend((file, p) for file, file_pieces in by_file.items() for p in file_pieces)
            reader.read_chunked(chunked, piece.box, out)
        error = _read_aggregated(state, pieces)
        agree(state.comm, error)
        return assemble(plan, outputs)


class _Collective:
    """The context of ``with dset.collective:`` (nestable; per open file)."""

    def __init__(self, state: _State):
        self._state = state

    def __enter__(self) -> None:
        self._state.collective_depth += 1

    def __exit__(self, *exc: Any) -> None:
        self._state.collective_depth -= 1


def _read_aggregated(state: _State, pieces: list[tuple[str, Piece]]) -> BaseException | None:
    """Collective two-phase read: ``aggregators`` ranks per file (spread over the readers)
    read, then scatter."""
    assert state.plan is not None
    size = state.comm.size
    count = min(state.plan.aggregators or 1, size)
    started, read = time.perf_counter(), state.stats.read_seconds
    rounds, files = _plan_aggregated(
        state,
        [(file, None, offset, len(buffer)) for file, (offset, buffer) in pieces],
        lambda i, _: tuple(sorted({(i * count + j) % size for j in range(count)})),
    )
    error = read_two_phase(
        state.comm,
        rounds,
        [buffer for _, (_, buffer) in pieces],
        lambda i: state.reader.pool.get(files[i]),
    )
    state.stats.exchange_seconds += (
        time.perf_counter() - started - (state.stats.read_seconds - read)
    )
    return error


class File(Group):
    """An h5subfile file: ``File(path, mode, comm=None, **plan)``.

    Collective: every rank of ``comm`` (default ``MPI.COMM_WORLD``) opens it with the same
    arguments. Modes as in h5py: ``"r"`` read, ``"r+"`` append to an existing file, ``"w"``
    create or truncate, ``"w-"``/``"x"`` create (fail if it exists), ``"a"`` append or create.
    The plan (``subfiles``, ``ranks_per_subfile``, ``fsync``, ``compression``, ``shuffle``,
    ``chunk_size``, ``aggregators``, ``buffer_size``, ``alignment``, ``transfer_size``: see
    :class:`~h5subfile.plan.Plan`; each also read from its ``H5SUBFILE_*`` environment
    variable) applies to what this session writes; for reading, ``aggregators``,
    ``buffer_size`` and ``transfer_size`` apply. The file can be read and appended to with
    any number of ranks.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str = "r",
        comm: MPI.Comm | None = None,
        subfiles: int | str | None = None,
        ranks_per_subfile: int | None = None,
        fsync: bool | None = None,
        **plan_fields: Any,
    ):
        comm = MPI.COMM_WORLD if comm is None else comm
        path = os.fspath(path)
        error = None
        plan = None
        try:
            if mode not in MODES:
                raise FileModeError(f"mode {mode!r} is not one of {', '.join(MODES)}")
            if mode != "r":
                plan = Plan.parse(
                    subfiles=subfiles,
                    ranks_per_subfile=ranks_per_subfile,
                    fsync=fsync,
                    **plan_fields,
                )
            else:
                ignored = sorted(
                    k
                    for k, v in dict(
                        plan_fields,
                        subfiles=subfiles,
                        ranks_per_subfile=ranks_per_subfile,
                        fsync=fsync,
                    ).items()
                    if v is not None and k not in READ_FIELDS
                )
                if ignored:
                    raise PlanError(
                        f"{', '.join(ignored)}: only apply when writing (mode 'r' "
                        f"takes {', '.join(READ_FIELDS)})"
                    )
                plan = Plan.parse(**plan_fields).read_only()
        except H5SubfileError as exc:
            error = exc
        agree(comm, error)
        state = _State(path, mode, comm)
        super().__init__(state, "/")
        # Every rank must open the same file the same way before any mode-specific collective
        # (for reading, the check and rank 0's scan of the master share one round).
        signature = ("open", state.path, mode, None if plan is None else plan.to_dict())
        scan = (lambda: open_for_reading(state.path)) if mode == "r" else (lambda: None)
        catalog = checked_collective(comm, "File(path, mode, ...)", signature, scan)
        assert plan is not None
        state.pool.transfer_size = plan.transfer_size
        if mode == "r":
            state.catalog = catalog
            state.plan = plan
        else:
            nodes = node_of_ranks(comm) if plan.grouping == "node" else None
            grouping, error = None, None
            try:
                grouping = plan_groups(comm.size, plan, nodes)
            except H5SubfileError as exc:
                error = exc
            agree(comm, error)
            assert grouping is not None
            state.plan, state.grouping = plan, grouping
            info = {
                "ranks": comm.size,
                "plan": plan.to_dict(),
                "grouping": grouping.describe(),
                "subfiles": [],
                "version": __version__,
            }

            def begin() -> tuple[Catalog, int, str]:
                state.master = MasterWriter(state.path, mode, info, plan.alignment)
                return state.master.catalog, state.master.session.id, state.master.data_path

            state.catalog, state.session, state.data_path = root_only(comm, begin)
        state.reader = BoxReader(state.path, state.data_path, state.stats, plan.transfer_size)
        if state.master is not None:
            master = state.master
            state.reader.h5py_opener = lambda: master.h5
            state.reader.writer_files[state.data_path] = master.h5
        else:
            state.reader.h5py_opener = lambda: open_shared_read(state.data_path)
        if comm.rank == 0:
            for problem in state.catalog.problems:
                warnings.warn(f"{state.path}: {problem}", RuntimeWarning, stacklevel=2)

    @classmethod
    def _from_state(cls, state: _State) -> File:
        obj = cls.__new__(cls)
        Group.__init__(obj, state, "/")
        return obj

    # properties ----------------------------------------------------------------------------
    @property
    def filename(self) -> str:
        return self._state.path

    @property
    def mode(self) -> str:
        return self._state.mode

    @property
    def comm(self) -> MPI.Comm:
        return self._state.comm

    @property
    def plan(self) -> Plan | None:
        """The plan of the current write session (None when reading)."""
        return self._state.plan

    @property
    def grouping(self) -> Grouping | None:
        return self._state.grouping

    @property
    def stats(self) -> IOStats:
        """This rank's data I/O counters (bytes, calls, seconds in positioned reads/writes)."""
        return self._state.stats

    @property
    def problems(self) -> list[str]:
        """What is wrong with the file (unfinished sessions, missing subfiles...), per the scan."""
        return list(self._state.catalog.problems)

    @property
    def sessions(self) -> list[dict[str, Any]]:
        """The write sessions recorded in the file (plan, ranks, grouping, times)."""
        import dataclasses

        return [dataclasses.asdict(s) for s in self._state.catalog.record.sessions]

    def __repr__(self) -> str:
        status = "closed" if self._state.closed else f"mode {self._state.mode!r}"
        return f"<h5subfile.File {self._state.path!r} ({status})>"

    # closing -------------------------------------------------------------------------------
    def close(self) -> None:
        """Collective (in write modes): finish the session and publish the master.

        Raises IncompleteFileError (after publishing everything else) when some rank never wrote
        a block it declared; the datasets concerned then refuse to be read.
        """
        state = self._state
        if state.closed:
            return
        if not state.writable:
            state.reader.close()
            state.closed = True
            return
        error = None
        try:
            plan = state.plan
            assert plan is not None
            if plan.fsync:
                state.pool.sync_all()
            state.pool.close_all()
            state.release()
            if state.subfile is not None:
                state.subfile.close(fsync=plan.fsync)
        except Exception as exc:  # noqa: BLE001 - agreed below
            error = exc
        try:
            agree(state.comm, error)
            message = root_decides(
                state.comm,
                sorted(state.unwritten),
                None,
                lambda unwritten: _commit(state, unwritten),
                per_rank=False,
            )
        except BaseException:
            self._abandon()
            raise
        state.reader.close()
        state.closed = True
        if message:
            exc = IncompleteFileError(message)
            exc.collective = True
            raise exc

    def _abandon(self) -> None:
        """Close this rank's handles without publishing anything (no communication)."""
        state = self._state
        state.closed = True
        state._group_comm = None  # not freed: freeing is collective, and other ranks are elsewhere
        for closer in (state.pool.close_all, state.reader.close, state.release):
            try:
                closer()
            except Exception:  # noqa: BLE001 - best effort
                pass
        if state.subfile is not None:
            try:
                state.subfile.close()
            except Exception:  # noqa: BLE001 - best effort
                pass
        if state.master is not None:
            state.master.abandon()

    def __enter__(self) -> File:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or getattr(exc, "collective", False):
            # Every rank is here (no error, or one agreed on all ranks): publish what was written.
            self.close()
        else:
            # An error on this rank only: a collective close could hang. Leave the old file
            # untouched (the unfinished session is reported by readers).
            self._abandon()


def _commit(state: _State, unwritten: list[list[str]]) -> str | None:
    """Rank 0: mark datasets some ranks never wrote, then publish the master."""
    assert state.master is not None and state.plan is not None
    missing: dict[str, list[int]] = {}
    for rank, paths in enumerate(unwritten):
        for path in paths:
            missing.setdefault(path, []).append(rank)
    for path in missing:
        info = state.catalog.nodes[path]
        assert info.layout is not None
        info.layout = dataclasses.replace(info.layout, complete=False)
        state.master.write_layout(path, info.layout)
    subfiles = sorted(
        {
            e.file
            for info in state.catalog.nodes.values()
            if info.layout is not None and info.layout.session == state.session
            for e in info.layout.extents
            if e.file
        }
    )
    state.master.commit(subfiles, state.plan.fsync)
    if not missing:
        return None
    described = "; ".join(
        f"{path} (rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r[:8]))}"
        f"{', ...' if len(r) > 8 else ''})"
        for path, r in sorted(missing.items())
    )
    return (
        f"{state.path} was closed but some ranks never wrote the blocks they declared: "
        f"{described}; these datasets are marked incomplete and refuse to be read"
    )


__all__ = ["AttributeManager", "Dataset", "File", "Group"]

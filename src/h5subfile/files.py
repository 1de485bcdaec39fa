"""Public objects: File, Group, Dataset, AttributeManager (h5py-like).

Every structural call (open, close, create_group, create_dataset, write_dataset(s), attribute
changes, Dataset.write) is collective: every rank of the file's communicator calls it with the same
arguments (a block or local data may differ per rank). Each one follows the same recipe: parse
locally -> rank 0 gathers, checks and plans (pure layout code) -> the plan is scattered or
broadcast -> I/O. Any failure becomes the same exception on every rank. Reads are independent:
any rank reads any selection at any time, without communication.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
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
    SelectionError,
)
from .io.boxes import BoxReader, raise_problem, write_box
from .io.h5 import open_shared_read
from .io.master import (
    Catalog,
    MasterWriter,
    NodeInfo,
    describe_storage,
    open_for_reading,
    source_name,
)
from .io.posix import FilePool, IOStats
from .io.subfile import SubfileWriter
from .layout.blocks import Block, check_blocks, corner_block, parse_block, prefix_blocks
from .layout.dtypes import check_dtype
from .layout.extents import plan_extents
from .layout.grouping import Grouping, plan_groups
from .layout.names import resolve_inside, subfile_relpath
from .layout.record import DatasetLayout, StoredExtent, is_reserved
from .layout.selection import assemble, partition, plan_read
from .mpi.collective import agree, check_same, checked_collective, root_decides, root_only
from .mpi.nodes import node_of_ranks
from .plan import Plan

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
class _Target:
    """Where this rank writes its block of a dataset created in this session."""

    block: Block
    file: str  # absolute path
    offset: int  # byte offset of the extent's data in the file
    extent: Block  # the extent's box, in dataset coordinates


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

    @property
    def signature(self) -> tuple[Any, ...]:
        common = (self.path, self.dtype.str if self.dtype.fields is None else self.dtype.descr,
                  self.kind)
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
        self.closed = False

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

        stored = checked_collective(state.comm, f"{self._path}.attrs[{name!r}] = ...", signature,
                                    set_on_root)
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

        checked_collective(state.comm, f"del {self._path}.attrs[{name!r}]",
                           ("attrs.del", self._path, name), delete_on_root)
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
                result = fn(path[len(prefix):])
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

        for new_path in checked_collective(state.comm, "create_group", ("create_group", path),
                                           create_on_root):
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
    ) -> Dataset:
        """Collective: create a dataset of ``shape`` and ``dtype``; each rank declares its block.

        ``block`` (a tuple of slices) or ``start`` + ``count`` give the region this rank will write
        with :meth:`Dataset.write`; a rank that writes nothing passes neither. Blocks must lie in
        ``shape`` and must not overlap (checked on all ranks together).
        """
        spec = dict(shape=shape, dtype=dtype, block=block, start=start, count=count)
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
    ) -> _Request:
        """Parse one rank's arguments for a dataset with an explicit shape."""
        path = _join(self._path, name)
        shape_t = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape_t):
            raise ValueError(f"shape {shape_t} has a negative dimension")
        return _Request(path, check_dtype(dtype), "explicit", shape_t,
                        parse_block(shape_t, block, start, count))

    def write_dataset(
        self, name: str, data: Any, start: Sequence[int] | None = None
    ) -> Dataset:
        """Collective: create a dataset from every rank's local array and write it.

        Without ``start``, rank r's array goes at the exclusive prefix sum of the ranks' lengths
        along axis 0 (the VPIC pattern; uneven and empty lengths allowed; the other axes must
        agree). With ``start``, the array is an N-D block with its corner at ``start``; the
        dataset's shape is the end of the union of the blocks.
        """
        return self.write_datasets({name: data}, start=None if start is None else {name: start})[0]

    def write_datasets(
        self,
        datasets: Mapping[str, Any],
        start: Mapping[str, Sequence[int]] | Sequence[int] | None = None,
    ) -> list[Dataset]:
        """Collective: create and write many datasets with one round of coordination.

        Like HDF5's H5Dwrite_multi: ``datasets`` maps names to this rank's local arrays (every
        rank passes the same names in the same order). ``start`` is None (prefix sum along axis
        0), one corner for all datasets, or a mapping name -> corner.
        """
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
                if corner is None:
                    block = Block((0,) * array.ndim, array.shape)
                    requests.append(_Request(path, dt, "prefix", None, block))
                else:
                    requests.append(
                        _Request(path, dt, "corner", None, corner_block(corner, array.shape))
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


def _create(state: _State, requests: list[_Request] | None, error: BaseException | None) -> list[str]:
    """Collective: create the requested datasets (planning on rank 0, subfiles on leaders)."""
    local = None if requests is None else requests
    answer = root_decides(
        state.comm, local, error, lambda gathered: _plan_creation(state, gathered)
    )
    # answer: (paths, shapes, dtypes, this rank's blocks, extent index per dataset, leader tasks)
    paths, blocks, placements, tasks = answer
    offsets: dict[tuple[int, int], int] = {}
    error = None
    try:
        for dataset_index, extent_index, in_master, name, shape, dtype in tasks:
            if in_master:
                assert state.master is not None
                offset = state.master.create_in_master(name, shape, dtype)
            else:
                if state.subfile is None:
                    assert state.grouping is not None
                    group = state.grouping.group_of_rank[state.comm.rank]
                    relpath = subfile_relpath(state.path, state.session, group)
                    state.subfile = SubfileWriter(resolve_inside(state.path, relpath))
                offset = state.subfile.create(name, shape, dtype)
            offsets[(dataset_index, extent_index)] = offset
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by root_decides
        error = exc
    nodes = root_decides(
        state.comm, offsets, error, lambda gathered: _publish(state, gathered), per_rank=False
    )
    for path, info in nodes.items():
        for new_group in _missing_groups(state.catalog, path)[:-1]:
            state.catalog.nodes[new_group] = NodeInfo("group")
        state.catalog.nodes[path] = info
    for path, block, placement in zip(paths, blocks, placements):
        info = state.catalog.nodes[path]
        if placement is None or info.layout is None:
            state.targets[path] = None
            continue
        extent = info.layout.extents[placement]
        file = state.data_path if extent.file == "" else resolve_inside(state.path, extent.file)
        state.targets[path] = _Target(block, file, extent.offset, extent.block)
        state.unwritten.add(path)
    return paths


def _plan_creation(state: _State, gathered: list[list[_Request] | None]) -> list[Any]:
    """Rank 0: check the ranks' requests, place the blocks, plan extents and leader tasks."""
    assert state.grouping is not None
    grouping = state.grouping
    size = len(gathered)
    signatures = [[r.signature for r in requests or ()] for requests in gathered]
    check_same("create_dataset/write_datasets", signatures)
    reference = gathered[0] or []
    seen: set[str] = set()
    planned: list[_PlannedDataset] = []
    per_rank_blocks: list[list[Block]] = [[] for _ in range(size)]
    per_rank_placement: list[list[int | None]] = [[] for _ in range(size)]
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
        if existing is not None:
            assert state.master is not None
            state.master.replace_unfinished(path)
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
        planned.append(plan)
        for rank in range(size):
            per_rank_blocks[rank].append(blocks[rank])
            per_rank_placement[rank].append(placements[rank])
        counters: dict[int, int] = {}
        for extent_index, (box, group) in enumerate(zip(boxes, groups)):
            within = counters.get(group, 0)
            counters[group] = within + 1
            name = path if in_master else source_name(path, within)
            leader = grouping.leaders[group]
            tasks[leader].append((index, extent_index, in_master, name, box.count, first.dtype))
    state.planned = planned
    paths = [p.path for p in planned]
    return [(paths, per_rank_blocks[r], per_rank_placement[r], tasks[r]) for r in range(size)]


def _unfinished(info: NodeInfo) -> bool:
    return info.kind == "dataset" and info.problem is not None and info.problem[0] == "IncompleteFileError"


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
            stored.append(
                StoredExtent(file, name, box.start, box.count, offsets[(index, extent_index)], ranks)
            )
        master = state.master
        if not stored:
            master.create_unwritten(plan.path, plan.shape, plan.dtype)
        elif not plan.in_master:
            master.create_virtual(plan.path, plan.shape, plan.dtype, stored)
        layout = DatasetLayout(state.session, tuple(stored), complete=True)
        master.write_layout(plan.path, layout)
        nodes[plan.path] = NodeInfo("dataset", {}, plan.shape, plan.dtype, layout,
                                    storage=describe_storage(layout))
    if state.master.commit_mode == "in-place":
        state.master.flush()  # the new datasets are on disk before any rank writes data
    state.planned = []
    return nodes


def _write(state: _State, items: list[tuple[str, Any]]) -> None:
    """Collective: every rank writes its blocks of the given datasets (checked first)."""
    prepared: list[tuple[_Target, np.ndarray, str]] = []
    error = None
    try:
        state.require_writable("write")
        for path, data in items:
            if path not in state.targets:
                raise FileModeError(
                    f"dataset {path} was not created in this write session; h5subfile datasets "
                    "are written once, by the session that creates them"
                )
            info = state.node(path)
            target = state.targets[path]
            if target is None:
                if data is not None and np.size(data) != 0:
                    raise DataShapeError(
                        f"rank {state.comm.rank} declared no block of {path} but passed "
                        f"{np.shape(data)} data"
                    )
                continue
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
            if array.shape != target.block.count:
                raise DataShapeError(
                    f"rank {state.comm.rank}: data of shape {array.shape} does not match its "
                    f"block {target.block} (shape {target.block.count}) of dataset {path}"
                )
            prepared.append((target, np.ascontiguousarray(array), path))
    except (H5SubfileError, ValueError, TypeError) as exc:
        error = exc
    agree(state.comm, error)
    try:
        for target, array, path in prepared:
            write_box(state.pool.get(target.file), target.offset, target.extent, target.block,
                      array)
            state.unwritten.discard(path)
    except Exception as exc:  # noqa: BLE001 - agreed on every rank below
        error = exc
    agree(state.comm, error)


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
    if len(plan.pieces) != 1 or plan.reorder is not None or not all(
        isinstance(i, slice) and i.step in (None, 1) for i in plan.pieces[0].index
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

    def write(self, data: Any) -> None:
        """Collective: write this rank's block (ranks with an empty block pass None or nothing)."""
        _write(self._state, [(self._path, data)])

    def __setitem__(self, selection: Any, data: Any) -> None:
        """Write part of this rank's block: ``dset[lo:hi, ...] = data`` (independent).

        Unlike :meth:`write` this is not collective: each rank writes pieces of its own block
        when it likes (in any order, of any size), e.g. as a simulation produces them. The
        selection must be a box (integers and step-1 slices) inside this rank's block.
        """
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
            raise DataShapeError(f"data of dtype {array.dtype} for {self._path} of dtype "
                                 f"{info.dtype}; convert it first")
        if array.shape != out_shape:
            raise DataShapeError(f"data of shape {array.shape} for a selection of shape "
                                 f"{out_shape} of {self._path}")
        if box.size == 0:
            return
        write_box(state.pool.get(target.file), target.offset, target.extent, box,
                  array.reshape(box.count))
        done = state.partly_written.get(self._path, 0) + box.size
        state.partly_written[self._path] = done
        if done >= target.block.size:
            state.unwritten.discard(self._path)

    def __getitem__(self, selection: Any) -> np.ndarray:
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
        ``[p*N//P, (p+1)*N//P)``, the last rank also the remainder."""
        if not self.shape:
            raise SelectionError(f"{self._path} is a scalar dataset; it has no axis 0 to split")
        comm = self._state.comm
        start, stop = partition(self.shape[0], comm.size, comm.rank)
        return self.read(slice(start, stop))


class File(Group):
    """An h5subfile file: ``File(path, mode, comm=None, subfiles=None, ranks_per_subfile=None)``.

    Collective: every rank of ``comm`` (default ``MPI.COMM_WORLD``) opens it with the same
    arguments. Modes as in h5py: ``"r"`` read, ``"r+"`` append to an existing file, ``"w"``
    create or truncate, ``"w-"``/``"x"`` create (fail if it exists), ``"a"`` append or create.
    The grouping of ranks into subfiles (``subfiles``, ``ranks_per_subfile``, ``fsync``: see
    :class:`~h5subfile.plan.Plan`) applies to what this session writes; the file can be read
    and appended to with any number of ranks.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str = "r",
        comm: MPI.Comm | None = None,
        subfiles: int | str | None = None,
        ranks_per_subfile: int | None = None,
        fsync: bool | None = None,
    ):
        comm = MPI.COMM_WORLD if comm is None else comm
        path = os.fspath(path)
        error = None
        plan = None
        try:
            if mode not in MODES:
                raise FileModeError(f"mode {mode!r} is not one of {', '.join(MODES)}")
            if mode != "r":
                plan = Plan.parse(subfiles=subfiles, ranks_per_subfile=ranks_per_subfile,
                                  fsync=fsync)
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
        if mode == "r":
            state.catalog = catalog
        else:
            assert plan is not None
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
                state.master = MasterWriter(state.path, mode, info)
                return state.master.catalog, state.master.session.id, state.master.data_path

            state.catalog, state.session, state.data_path = root_only(comm, begin)
        state.reader = BoxReader(state.path, state.data_path, state.stats)
        if state.master is not None:
            master = state.master
            state.reader.h5py_opener = lambda: master.h5
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
            if state.subfile is not None:
                state.subfile.close(fsync=plan.fsync)
        except Exception as exc:  # noqa: BLE001 - agreed below
            error = exc
        try:
            agree(state.comm, error)
            message = root_decides(
                state.comm, sorted(state.unwritten), None,
                lambda unwritten: _commit(state, unwritten), per_rank=False,
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
        for closer in (state.pool.close_all, state.reader.close):
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
        info.layout = DatasetLayout(info.layout.session, info.layout.extents, complete=False)
        state.master.write_layout(path, info.layout)
    subfiles = sorted({
        e.file
        for info in state.catalog.nodes.values()
        if info.layout is not None and info.layout.session == state.session
        for e in info.layout.extents
        if e.file
    })
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

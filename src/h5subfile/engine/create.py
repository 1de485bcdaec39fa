"""Creating datasets (collective), in four steps with one message type each (see
:mod:`.messages`): requests go to rank 0, which plans; leaders create the source datasets;
rank 0 publishes the master; every rank learns where its bytes go.

Four collectives (gather, scatter, gather, broadcast), O(P) in total, for any number of
datasets. :func:`plan_creation` is pure: it reads the catalogue and the requests only.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BlockError, H5SubfileError, ObjectExistsError, PlanError
from ..io.filters import resolve_filters
from ..io.h5 import SourceFile
from ..layout.blockmap import BlockMap
from ..layout.blocks import Block, corner_block, parse_block
from ..layout.catalog import Catalog, NodeInfo
from ..layout.chunking import Member, choose_chunks, chunk_work, extent_chunks
from ..layout.dtypes import check_dtype, dtype_text
from ..layout.grouping import Grouping
from ..layout.names import subfile_relpath
from ..layout.planning import Coalescings, DatasetPlacement, place_dataset
from ..layout.record import DatasetLayout, StoredExtent
from ..mpi.collective import check_same, root_decides, root_plans
from ..plan import Plan
from .messages import (
    CONTIGUOUS,
    BlockAssignment,
    ChunkPlacement,
    ChunkTarget,
    DatasetRequest,
    LeaderTask,
    PlannedDataset,
    RankAssignment,
    RequestKind,
    SourceOffsets,
    Storage,
    Transfer,
    WriteTarget,
)
from .profiling import phase
from .session import Session


# Requests (every rank, local) ----------------------------------------------------------------
def parse_storage(
    plan: Plan,
    ndim: int,
    chunks: Any = None,
    compression: Any = None,
    compression_opts: Any = None,
    shuffle: bool | None = None,
    fletcher32: bool | None = None,
) -> Storage:
    """A dataset's chunks and filters from h5py's arguments; the plan gives the default
    compression when ``compression`` is None."""
    if compression is None and plan.compression is not None and ndim > 0:
        shuffle = plan.shuffle if shuffle is None else shuffle
        spec = resolve_filters(plan.compression, None, shuffle, fletcher32)
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
    return Storage(chunks, spec)


def shape_request(
    session: Session,
    path: str,
    shape: Sequence[int] | int,
    dtype: Any = "f4",
    block: Sequence[slice] | None = None,
    start: Sequence[int] | None = None,
    count: Sequence[int] | None = None,
    **storage: Any,
) -> DatasetRequest:
    """One rank's request for a dataset of a given shape (``create_dataset``'s arguments)."""
    if np.isscalar(shape):  # as before: 10, 10.0 and "10" all mean (10,)
        shape_t: tuple[int, ...] = (int(shape),)  # type: ignore[arg-type]
    else:
        shape_t = tuple(int(n) for n in shape)  # type: ignore[union-attr]
    if any(n < 0 for n in shape_t):
        raise ValueError(f"shape {shape_t} has a negative dimension")
    return DatasetRequest(
        path,
        check_dtype(dtype),
        RequestKind.EXPLICIT,
        shape_t,
        parse_block(shape_t, block, start, count),
        parse_storage(session.plan, len(shape_t), **storage),
    )


def data_request(
    session: Session, path: str, array: np.ndarray, corner: Sequence[int] | None, storage: Storage
) -> DatasetRequest:
    """One rank's request for a dataset made of every rank's array (``write_dataset``)."""
    dtype = check_dtype(array.dtype)
    if array.ndim == 0:  # a scalar dataset: rank 0's value is written
        if corner is not None and tuple(corner) != ():
            raise BlockError(f"{path}: start={tuple(corner)!r} for a scalar (0-d) array")
        return DatasetRequest(path, dtype, RequestKind.EXPLICIT, (), Block((), ()), storage)
    if corner is None:
        block = Block((0,) * array.ndim, array.shape)
        return DatasetRequest(path, dtype, RequestKind.PREFIX, None, block, storage)
    block = corner_block(corner, array.shape)
    return DatasetRequest(path, dtype, RequestKind.CORNER, None, block, storage)


# Rank 0's plan (pure) ------------------------------------------------------------------------
def _shape_and_blocks(requests: Sequence[DatasetRequest]) -> tuple[tuple[int, ...], BlockMap]:
    """The dataset's shape and every rank's block, from the ranks' requests."""
    first = requests[0]
    ndim = len(first.block.count)
    if first.kind is RequestKind.PREFIX:
        lengths = [r.block.count[0] for r in requests]
        blocks = BlockMap.prefix(lengths, first.block.count[1:])
        return (sum(lengths), *first.block.count[1:]), blocks
    blocks = BlockMap.from_blocks([r.block for r in requests], ndim)
    if not ndim:  # a scalar: whatever the kind of request, rank 0 writes it
        return (), blocks
    if first.kind is RequestKind.CORNER:
        written = blocks.nonempty()
        stops = (blocks.starts + blocks.counts)[written]
        return tuple(int(n) for n in stops.max(axis=0, initial=0)), blocks
    assert first.shape is not None
    return first.shape, blocks


@dataclass(frozen=True)
class RequestedDataset:
    """One dataset of a creation call as rank 0 plans it: rank 0's request (the arguments every
    rank passed alike), the shape, and every rank's block."""

    request: DatasetRequest
    shape: tuple[int, ...]
    blocks: BlockMap


@dataclass(frozen=True)
class _Placed:
    """One dataset placed: its plan, its placement, each extent's members (chunked only)."""

    dataset: PlannedDataset
    placement: DatasetPlacement
    members: list[tuple[Member, ...]]  # every extent's ranks and their blocks in it


def _place(
    requested: RequestedDataset,
    grouping: Grouping,
    session_files: Callable[[int], str],
    chunk_bytes: int,
    done: Coalescings,
) -> _Placed:
    """Check the blocks of one dataset and plan its extents (and chunks); ``done``: the block
    maps of this call already checked and coalesced."""
    first = requested.request
    placement = place_dataset(
        first.path, requested.shape, requested.blocks, grouping, session_files, done
    )
    extents = placement.extents
    choice, members = None, []
    if first.storage.chunked and extents:
        assert first.storage.chunks is not None
        members = [placement.members(k) for k in range(len(extents))]
        choice = choose_chunks(
            requested.shape, first.dtype.itemsize, members, first.storage.chunks, chunk_bytes
        )
        extents = tuple(
            dataclasses.replace(e, chunks=extent_chunks(choice.chunks, e.shape)) for e in extents
        )
    dataset = PlannedDataset(
        first.path,
        requested.shape,
        first.dtype,
        placement.in_master,
        extents,
        placement.groups,
        choice,
        first.storage.filters,
    )
    return _Placed(dataset, placement, members)


@dataclass(frozen=True)
class CreationPlan:
    """Rank 0's plan of one creation call: the datasets, and what each rank is told
    (:meth:`assignment`: its block of each dataset, and a leader's tasks)."""

    datasets: tuple[PlannedDataset, ...]
    placed: tuple[_Placed, ...]
    tasks: dict[int, tuple[LeaderTask, ...]]  # by leader rank
    grouping: Grouping

    def assignment(self, rank: int) -> RankAssignment:
        """What rank 0 sends ``rank``: O(datasets) for any rank, plus a leader's tasks."""
        return RankAssignment(
            tuple(p.dataset.path for p in self.placed),
            tuple(_assignment(p, self.grouping, rank) for p in self.placed),
            self.tasks.get(rank, ()),
        )

    @property
    def assignments(self) -> list[RankAssignment]:
        return [self.assignment(rank) for rank in range(self.grouping.size)]


def plan_creation(
    where: str,
    catalog: Catalog,
    grouping: Grouping,
    plan: Plan,
    session_files: Callable[[int], str],
    gathered: list[list[DatasetRequest] | None],
) -> CreationPlan:
    """Rank 0: check the ranks' requests, place the blocks, plan extents and leader tasks.

    ``where`` names the file in messages; ``session_files(group)`` names the subfile of a
    group in this session. Pure: no I/O.
    """
    size = len(gathered)
    check_same(
        "create_dataset/write_datasets", [[r.signature for r in reqs or ()] for reqs in gathered]
    )
    present = [reqs for reqs in gathered if reqs is not None]  # None only with an error
    assert len(present) == size, "root_plans raises before planning when a rank failed"
    requested = []
    # Datasets placed by prefix sum with the same lengths (a VPIC step's eight) share one
    # block map, which plan_datasets then checks and coalesces once.
    prefix_maps: dict[tuple[Any, ...], tuple[tuple[int, ...], BlockMap]] = {}
    for index, first in enumerate(gathered[0] or []):
        requests = [reqs[index] for reqs in present]
        if first.kind is RequestKind.PREFIX:
            key = (tuple(r.block.count[0] for r in requests), first.block.count[1:])
            found = prefix_maps.get(key)
            if found is None:
                found = prefix_maps[key] = _shape_and_blocks(requests)
            shape, blocks = found
        else:
            shape, blocks = _shape_and_blocks(requests)
        requested.append(RequestedDataset(first, shape, blocks))
    return plan_datasets(where, catalog, grouping, plan, session_files, requested)


def plan_datasets(
    where: str,
    catalog: Catalog,
    grouping: Grouping,
    plan: Plan,
    session_files: Callable[[int], str],
    requested: Sequence[RequestedDataset],
) -> CreationPlan:
    """Rank 0, once the requests agree: place each dataset, and plan the leaders' tasks.
    Pure; O(P log P) per dataset with numpy (a million ranks in seconds)."""
    seen: set[str] = set()
    placed: list[_Placed] = []
    names: dict[int, str] = {}
    done: Coalescings = {}  # block maps checked and coalesced, shared by datasets

    def subfile_of(group: int) -> str:  # each group's subfile named once, for every dataset
        found = names.get(group)
        if found is None:
            found = names[group] = session_files(group)
        return found

    for one in requested:
        path = one.request.path
        if path in seen:
            raise ObjectExistsError(f"dataset {path} is named twice in one call")
        seen.add(path)
        existing = catalog.nodes.get(path)
        if existing is not None and not existing.unfinished:
            raise ObjectExistsError(f"{path} already exists in {where}")
        catalog.missing_groups(path)
        one_placed = _place(one, grouping, subfile_of, plan.chunk_bytes, done)
        if existing is not None:
            one_placed = dataclasses.replace(
                one_placed,
                dataset=dataclasses.replace(one_placed.dataset, replaces_unfinished=True),
            )
        placed.append(one_placed)
    return CreationPlan(
        tuple(p.dataset for p in placed), tuple(placed), _tasks(placed, grouping), grouping
    )


def _assignment(placed: _Placed, grouping: Grouping, rank: int) -> BlockAssignment:
    extent = placed.placement.extent_of(rank)
    dataset = placed.dataset
    block = placed.placement.block(rank)
    if dataset.choice is None or extent is None:
        return BlockAssignment(block, extent)
    leader = grouping.leaders[dataset.groups[extent]]
    chunks = ChunkPlacement(placed.members[extent], leader, dataset.filters)
    return BlockAssignment(block, extent, chunks)


def _tasks(placed: Sequence[_Placed], grouping: Grouping) -> dict[int, tuple[LeaderTask, ...]]:
    """The source datasets each leader creates for its group, by leader (one pass over the
    extents of every dataset)."""
    tasks: dict[int, list[LeaderTask]] = {}
    leaders = grouping.leaders
    for index, one in enumerate(placed):
        dataset = one.dataset
        chunked = dataset.choice is not None
        for k, (extent, group) in enumerate(zip(dataset.extents, dataset.groups)):
            tasks.setdefault(leaders[group], []).append(
                LeaderTask(
                    index,
                    k,
                    dataset.in_master,
                    extent.dataset,
                    extent.shape,
                    dataset.dtype,
                    extent.chunks if chunked else None,
                    dataset.filters,
                )
            )
    return {rank: tuple(found) for rank, found in tasks.items()}


# The protocol (collective) -------------------------------------------------------------------
@phase("create")
def create_datasets(
    session: Session, requests: list[DatasetRequest] | None, error: BaseException | None
) -> list[str]:
    """Collective: create the requested datasets (``requests`` is None on a rank whose
    arguments failed, with ``error``: then every rank raises it). Returns their paths. An
    agreed error marks the session as failed (see :func:`.commit.close`)."""
    writing = session.require_writable("create_datasets")
    try:
        return _create_datasets(session, requests, error)
    except H5SubfileError as exc:
        writing.note_failure(exc)
        raise


def _create_datasets(
    session: Session, requests: list[DatasetRequest] | None, error: BaseException | None
) -> list[str]:
    writing = session.require_writable("create_datasets")
    comm = session.comm

    def plan_on_root(gathered: list[Any]) -> tuple[list[RankAssignment], CreationPlan]:
        creation = plan_creation(
            session.path,
            session.catalog,
            writing.grouping,
            session.plan,
            lambda group: subfile_relpath(session.path, writing.number, writing.session_id, group),
            gathered,
        )
        assert writing.root is not None
        for dataset in creation.datasets:
            if dataset.replaces_unfinished:
                writing.root.master.replace_unfinished(dataset.path)
        return creation.assignments, creation

    named = "" if requests is None else ", ".join(r.path for r in requests)
    session.enter("create_dataset", error, detail=named)
    assignment, creation = root_plans(comm, requests, None, plan_on_root)
    offsets, error = create_sources(session, assignment.tasks)

    def publish_on_root(gathered: list[SourceOffsets]) -> list[dict[str, Any]]:
        assert creation is not None
        return rank_views(publish(session, creation, gathered), creation)

    views: dict[str, tuple[NodeInfo, StoredExtent | None]] = root_decides(
        comm, offsets, error, publish_on_root
    )
    for path, (info, _) in views.items():
        for new_group in session.catalog.missing_groups(path)[:-1]:
            session.catalog.nodes[new_group] = NodeInfo("group")
        session.catalog.nodes[path] = info
    for path, block in zip(assignment.paths, assignment.blocks):
        writing.targets[path] = _target(session, path, block, views[path][1])
        target = writing.targets[path]
        if target is not None:
            writing.unwritten[path] = [target.block]
    return list(assignment.paths)


def create_sources(
    session: Session, tasks: Sequence[LeaderTask]
) -> tuple[SourceOffsets, BaseException | None]:
    """A leader creates its source datasets (in its subfile, or the master): their byte
    offsets (-1 for a chunked one, kept open to receive whole chunks), or the error."""
    offsets: SourceOffsets = {}
    writing = session.writing
    assert writing is not None
    try:
        for task in tasks:
            assert writing.leader is not None
            writer = _source_file(session, task.in_master)
            if task.chunks is None:
                offsets[(task.dataset, task.extent)] = writer.create(
                    task.name, task.shape, task.dtype
                )
                continue
            sink = writer.create_chunked(
                task.name, task.shape, task.dtype, task.chunks, task.filters.h5py_kwargs()
            )
            writing.leader.chunk_sinks[task.name] = sink
            offsets[(task.dataset, task.extent)] = -1
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by the next step
        return offsets, exc
    return offsets, None


def _source_file(session: Session, in_master: bool) -> SourceFile:
    """Where a leader creates a source: the master (single-group sessions), or its subfile,
    created on first use and from then on also read through the same handle."""
    writing = session.writing
    assert writing is not None and writing.leader is not None
    if in_master:
        assert writing.root is not None
        return writing.root.master
    if writing.leader.subfile is None:
        subfile = writing.leader.open_subfile(session.reader.paths)
        session.reader.writer_files[subfile.path] = subfile.h5
    return writing.leader.open_subfile(session.reader.paths)


def publish(
    session: Session, creation: CreationPlan | None, gathered: list[SourceOffsets]
) -> dict[str, NodeInfo]:
    """Rank 0: record the new datasets in the master (VDS, layout records)."""
    writing = session.writing
    assert writing is not None and writing.root is not None and creation is not None
    master = writing.root.master
    offsets: SourceOffsets = {}
    for part in gathered:
        offsets.update(part)
    nodes: dict[str, NodeInfo] = {}
    try:
        for index, dataset in enumerate(creation.datasets):
            stored = tuple(
                dataclasses.replace(extent, offset=offsets[(index, k)])
                for k, extent in enumerate(dataset.extents)
            )
            layout = DatasetLayout(
                writing.number, stored, complete=True, dtype=dtype_text(dataset.dtype)
            )
            if dataset.choice is not None and stored:
                layout = dataclasses.replace(
                    layout,
                    chunks=dataset.choice.chunks,
                    chunks_aligned=dataset.choice.aligned,
                    filters=dataset.filters.to_dict(),
                )
            nodes[dataset.path] = master.publish_dataset(
                dataset.path, dataset.shape, dataset.dtype, layout
            )
    except Exception:
        # No rank learns of this call's datasets: none may stay in the master.
        for dataset in creation.datasets[: len(nodes) + 1]:
            with contextlib.suppress(Exception):
                master.unlink(dataset.path)
        raise
    if master.commit_mode == "in-place":
        master.flush()  # the new datasets are on disk before any rank writes data
    return nodes


def rank_views(
    nodes: dict[str, NodeInfo], creation: CreationPlan
) -> list[dict[str, tuple[NodeInfo, StoredExtent | None]]]:
    """Rank 0: what each rank learns of the new datasets: each node with only the rank's own
    extent when there are several (rank 0 keeps them all), and that extent. O(1) per rank and
    dataset, so the metadata sent grows linearly with the ranks (whole layouts: O(P) each)."""
    views = []
    for rank in range(creation.grouping.size):
        view = {}
        for (path, info), placed in zip(nodes.items(), creation.placed):
            layout = info.layout
            extent = placed.placement.extent_of(rank)
            own = None if layout is None or extent is None else layout.extents[extent]
            trimmed = layout is not None and len(layout.extents) > 1  # the same on every rank
            if trimmed and rank != 0:
                assert layout is not None
                layout = dataclasses.replace(layout, extents=() if own is None else (own,))
            view[path] = (dataclasses.replace(info, layout=layout, local_view=trimmed), own)
        views.append(view)
    return views


def transfer_for(layout: DatasetLayout | None, plan: Plan) -> Transfer:
    """How the bytes of a dataset created in this session are written: the same on every
    rank (from the catalogue and the plan)."""
    if layout is not None and layout.chunks:
        return Transfer.CHUNKED
    return Transfer.TWO_PHASE if plan.aggregators is not None else Transfer.DIRECT


def _target(
    session: Session, path: str, assigned: BlockAssignment, extent: StoredExtent | None
) -> WriteTarget | None:
    """Where this rank writes its block of ``path`` into ``extent`` (None: it writes nothing)."""
    info = session.catalog.nodes[path]
    if extent is None or info.layout is None:
        return None
    writing = session.writing
    assert writing is not None
    chunked = None
    if assigned.chunks is not None:
        placement = assigned.chunks
        work = chunk_work(list(placement.members), extent.chunks, extent.shape, session.rank)
        chunked = ChunkTarget(
            work, extent.chunks, extent.shape, placement.filters, placement.leader, extent.dataset
        )
    return WriteTarget(
        assigned.block,
        session.reader.paths.resolve(extent.file),
        extent.offset,
        extent.block,
        writing.grouping.group_of_rank[session.rank],
        transfer_for(info.layout, session.plan),
        chunked,
    )

"""Rank 0's plan of a dataset-creation call (pure: it reads the requests and the catalogue,
no I/O, no messages): each dataset checked and placed, the leaders' tasks, and what each rank is
told (:class:`CreationPlan`: its assignment; :func:`own_views` with file per process;
:func:`rank_view` once the datasets are published). The protocol that runs it is
:mod:`.create`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ObjectExistsError, PlanError
from ..io.filters import FilterSpec
from ..io.master_read import dataset_node, describe_storage
from ..layout.blockmap import BlockMap
from ..layout.catalog import Catalog, NodeInfo
from ..layout.chunking import Member, choose_chunks, extent_chunks
from ..layout.dtypes import dtype_text
from ..layout.grouping import Grouping
from ..layout.names import source_name
from ..layout.planning import Coalescings, DatasetPlacement, place_dataset
from ..layout.record import DatasetLayout, StoredExtent
from ..mpi.collective import check_same
from ..mpi.slots import one_slot_bytes
from ..plan import Plan
from .messages import (
    BlockAssignment,
    ChunkPlacement,
    DatasetRequest,
    LeaderTask,
    OwnView,
    PlannedDataset,
    RankAssignment,
    RequestKind,
    SourceOffsets,
)


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
    learned: bool = False  # no rank declared a block: the layout is learned from the writes


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
    if requested.learned:
        return _place_learned(requested, grouping, session_files, chunk_bytes)
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


def _place_learned(
    requested: RequestedDataset,
    grouping: Grouping,
    session_files: Callable[[int], str],
    chunk_bytes: int,
) -> _Placed:
    """A dataset whose layout is learned from the writes: every group's subfile gets a source
    of the whole dataset (engine/learned.py). It is the master's own dataset instead (as
    parallel HDF5 would write it) in a single-group session, or for a scalar, unless it can
    grow (``maxshape``) or has a fill value other than zeros and is not chunked (a
    contiguous dataset reads its unwritten bytes as they are on disk: zeros)."""
    first = requested.request
    shape = requested.shape
    ndim = len(shape)
    growing = bool(first.maxshape) and tuple(first.maxshape) != shape
    compressed = first.storage.chunked and not first.storage.filters.is_empty
    single = grouping.ngroups == 1 and not growing and (compressed or not first.fill)
    in_master = not shape or single
    origin = (0,) * ndim
    groups: tuple[int, ...] = ()
    extents: list[StoredExtent] = []  # none while the dataset is empty (a resize makes room)
    if in_master and all(shape):
        groups = (int(grouping.group_of_rank[0]),)
        extents = [StoredExtent("", first.path, origin, shape, -1)]
    elif not in_master and all(shape):
        groups = tuple(range(grouping.ngroups))
        extents = [
            StoredExtent(session_files(g), source_name(first.path, 0), origin, shape, -1)
            for g in groups
        ]
    choice = None
    # Chunks without a filter buy nothing here (each group's source is written in place,
    # independently): the sources stay contiguous. With a filter, chunks are compressed whole.
    if first.storage.chunked and not first.storage.filters.is_empty and extents:
        assert first.storage.chunks is not None
        choice = choose_chunks(shape, first.dtype.itemsize, [], first.storage.chunks, chunk_bytes)
        extents = [
            dataclasses.replace(e, chunks=extent_chunks(choice.chunks, e.shape)) for e in extents
        ]
    blocks = requested.blocks
    placement = DatasetPlacement(
        first.path,
        shape,
        in_master,
        tuple(extents),
        groups,
        blocks,
        np.full(blocks.size, -1, dtype=np.int64),
    )
    dataset = PlannedDataset(
        first.path,
        shape,
        first.dtype,
        in_master,
        tuple(extents),
        groups,
        choice,
        learned=True,
        maxshape=first.maxshape,
        fill=first.fill,
        filters=first.storage.filters if choice is not None else FilterSpec(),
    )
    return _Placed(dataset, placement, [])


@dataclass(frozen=True)
class CreationPlan:
    """Rank 0's plan of one creation call: the datasets, and what each rank is told
    (:meth:`assignment`: its block of each dataset, and a leader's tasks)."""

    datasets: tuple[PlannedDataset, ...]
    placed: tuple[_Placed, ...]
    tasks: dict[int, tuple[LeaderTask, ...]]  # by leader rank
    grouping: Grouping

    def assignment(self, rank: int, own: tuple[OwnView, ...] | None = None) -> RankAssignment:
        """What rank 0 sends ``rank``: O(datasets) for any rank, plus a leader's tasks."""
        return RankAssignment(
            tuple(p.dataset.path for p in self.placed),
            tuple(_assignment(p, self.grouping, rank) for p in self.placed),
            self.tasks.get(rank, ()),
            own,
        )

    def assignments(self, own: list[tuple[OwnView, ...]] | None = None) -> list[RankAssignment]:
        """Every rank's assignment (with its :func:`own_views` when given)."""
        return [
            self.assignment(rank, None if own is None else own[rank])
            for rank in range(self.grouping.size)
        ]


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
    assert len(present) == size, "the agreement raises before planning when a rank failed"
    requested = []
    # Datasets placed by prefix sum with the same lengths (a VPIC step's eight) share one
    # block map, which plan_datasets then checks and coalesces once.
    prefix_maps: dict[tuple[Any, ...], tuple[tuple[int, ...], BlockMap]] = {}
    for index, first in enumerate(gathered[0] or []):
        requests = [reqs[index] for reqs in present]
        if first.kind is RequestKind.EXPLICIT and not any(r.declared for r in requests):
            assert first.shape is not None
            blocks = BlockMap.empty(size, len(first.shape))
            requested.append(RequestedDataset(first, first.shape, blocks, True))
            continue
        if first.maxshape:
            raise PlanError(
                f"{first.path}: maxshape is for datasets whose ranks declare no blocks (their "
                "layout is learned from the writes); some ranks declared blocks"
            )
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
        catalog.missing_groups(path)
        existing = catalog.nodes.get(path)
        if existing is not None and not existing.unfinished:
            raise ObjectExistsError(f"{path} already exists in {where}")
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
                    dataset.fill if dataset.in_master else None,
                )
            )
    return {rank: tuple(found) for rank, found in tasks.items()}


def dataset_layout(
    number: int, dataset: PlannedDataset, extents: Sequence[StoredExtent]
) -> DatasetLayout:
    """The layout record of a dataset created in session ``number`` over ``extents``."""
    layout = DatasetLayout(
        number,
        tuple(extents),
        complete=True,
        dtype=dtype_text(dataset.dtype),
        learned=dataset.learned,
        maxshape=dataset.maxshape,
    )
    if dataset.choice is not None and extents:
        layout = dataclasses.replace(
            layout,
            chunks=dataset.choice.chunks,
            chunks_aligned=dataset.choice.aligned,
            filters=dataset.filters.to_dict(),
        )
    return layout


def published_nodes(
    creation: CreationPlan, number: int, offsets: SourceOffsets
) -> dict[str, NodeInfo]:
    """What the master records of a creation planned in session ``number`` once its sources
    are made at ``offsets`` (by task: dataset index, extent index): each dataset's node over
    its layout. Pure: rank 0 publishes these, and a rank that planned the same call makes the
    same from the offsets alone (engine/announced.py)."""
    nodes: dict[str, NodeInfo] = {}
    for index, dataset in enumerate(creation.datasets):
        stored = tuple(
            extent.changed(offset=offsets[(index, k)]) for k, extent in enumerate(dataset.extents)
        )
        layout = dataset_layout(number, dataset, stored)
        nodes[dataset.path] = dataset_node(dataset.shape, dataset.dtype, layout, fill=dataset.fill)
    return nodes


def rank_view(
    nodes: dict[str, NodeInfo], creation: CreationPlan, rank: int
) -> dict[str, tuple[NodeInfo, StoredExtent | None]]:
    """Rank 0: what ``rank`` learns of the new datasets: each node with only the rank's own
    extent when there are several (rank 0 keeps them all), and that extent. O(1) per rank and
    dataset, so the metadata sent grows linearly with the ranks (whole layouts: O(P) each)."""
    view: dict[str, tuple[NodeInfo, Any]] = {}
    for (path, info), placed in zip(nodes.items(), creation.placed):
        if placed.dataset.learned:
            view[path] = _learned_view(info, placed.dataset, creation.grouping, rank)
            continue
        layout = info.layout
        extent = placed.placement.extent_of(rank)
        own = None if layout is None or extent is None else layout.extents[extent]
        trimmed = layout is not None and len(layout.extents) > 1  # the same on every rank
        if trimmed and rank != 0:
            assert layout is not None
            layout = dataclasses.replace(layout, extents=() if own is None else (own,))
        view[path] = (dataclasses.replace(info, layout=layout, local_view=trimmed), own)
    return view


def _learned_view(
    info: NodeInfo, dataset: PlannedDataset, grouping: Grouping, rank: int
) -> tuple[NodeInfo, tuple[StoredExtent, ...]]:
    """What ``rank`` learns of a new dataset whose layout is learned: the sources of its group
    (every source when the dataset is the master's own), which it writes; rank 0 keeps the
    whole layout."""
    layout = info.layout
    assert layout is not None
    group = int(grouping.group_of_rank[rank])
    own = tuple(
        e for e, g in zip(layout.extents, dataset.groups) if dataset.in_master or g == group
    )
    trimmed = len(own) < len(layout.extents)
    if not trimmed and not info.local_view:
        return info, own  # the node as published (one group: every rank writes every source)
    if trimmed and rank != 0:
        layout = dataclasses.replace(layout, extents=own)
    return dataclasses.replace(info, layout=layout, local_view=trimmed), own


#: Bytes a rank's offsets take at most in the round that sends them to rank 0, per source
#: dataset it creates and in all (pickled ints, and the list and tuple around them).
OFFSET_BYTES, OFFSETS_OVERHEAD = 10, 64


def own_views(creation: CreationPlan, number: int, plan: Plan) -> list[tuple[OwnView, ...]] | None:
    """Rank 0: what each rank will know of the new datasets but its own extent's offset (the
    views :func:`rank_view` gives once the datasets are published), when each rank can make
    its view alone: every rank creates the only extent it holds (file per process: each rank
    its group's leader), writes it directly (contiguous, no aggregators), and its offsets fit
    the one round that sends them to rank 0. None otherwise. Pure; O(P) per dataset."""
    size = creation.grouping.size
    leaders = np.asarray(creation.grouping.leaders)
    if plan.aggregators is not None:
        return None
    most = max((len(tasks) for tasks in creation.tasks.values()), default=0)
    if most * OFFSET_BYTES + OFFSETS_OVERHEAD > one_slot_bytes(size):
        return None
    for placed in creation.placed:
        dataset = placed.dataset
        if dataset.choice is not None or (len(dataset.extents) == 1 and size > 1):
            return None
        holders = _holders(placed, creation.grouping)
        holding = np.flatnonzero(holders >= 0)
        creators = leaders[np.asarray(dataset.groups, dtype=np.int64)[holders[holding]]]
        if not np.array_equal(creators, holding):
            return None
    views: list[list[OwnView]] = [[] for _ in range(size)]
    for placed in creation.placed:
        dataset = placed.dataset
        whole = dataset_layout(number, dataset, dataset.extents)  # offsets still -1
        storage = describe_storage(whole)
        bare = dataclasses.replace(whole, extents=())
        trimmed = len(dataset.extents) > 1
        extents = dataset.extents
        for rank, extent in enumerate(_holders(placed, creation.grouping).tolist()):
            held = None if extent < 0 else extents[extent]
            view = OwnView(dataset.shape, storage, bare, held, trimmed, dataset.fill)
            views[rank].append(view)
    return [tuple(found) for found in views]


def _holders(placed: _Placed, grouping: Grouping) -> np.ndarray:
    """The extent each rank writes (-1: none): its block's, or for a dataset whose layout is
    learned, its group's source."""
    dataset = placed.dataset
    if not dataset.learned:
        return placed.placement.extent_of_rank
    index = {group: k for k, group in enumerate(dataset.groups)}
    return np.array([index.get(int(g), -1) for g in grouping.group_of_rank], dtype=np.int64)


def completed_view(
    view: OwnView, dtype: np.dtype, offset: int | None
) -> tuple[NodeInfo, StoredExtent | None]:
    """A rank's view of a new dataset from its :class:`OwnView` and the offset of the extent
    it created (None when it holds none): what :func:`rank_view` would have sent it."""
    layout, own = view.layout, None
    if view.extent is not None:
        assert offset is not None
        own = view.extent.changed(offset=offset)
        layout = dataclasses.replace(layout, extents=(own,))
    info = dataset_node(view.shape, dtype, layout, view.storage, view.fill)
    return dataclasses.replace(info, local_view=view.local_view), own

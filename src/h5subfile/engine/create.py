"""Creating datasets (collective), in four steps with one message type each (see
:mod:`.messages`): requests go to rank 0, which plans (:mod:`.creation_plan`, pure); leaders
create the source datasets; rank 0 publishes the master; every rank learns where its bytes go.

Four collectives (gather, scatter, gather, scatter), O(P) in total, for any number of
datasets. In a call that writes, when every rank creates the only extent it holds (file per
process), the last scatter goes. Each rank's assignment then already says what the rank will
know of the datasets, all but the offset of its extent, which it learns by creating its source
(:func:`~.creation_plan.own_views`); a failure to publish is raised by the write's closing
round (:class:`Created`).

After such a call failed, :func:`settle` has rank 0 say whether it published; if not, every
rank forgets the call's datasets and the groups made for them, as rank 0 removed them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import (
    BlockError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    H5SubfileError,
    PlanError,
)
from ..io.filters import resolve_filters
from ..io.h5 import SourceFile
from ..io.posix import as_bytes
from ..layout.blocks import Block, corner_block, parse_block
from ..layout.catalog import NodeInfo
from ..layout.chunking import chunk_work
from ..layout.dtypes import check_dtype
from ..layout.integrity import checksum
from ..layout.names import subfile_relpath
from ..layout.record import DatasetLayout, StoredExtent
from ..layout.regions import Remaining
from ..mpi.collective import (
    Question,
    bcast,
    root_collects,
    root_decides,
)
from ..plan import Plan
from . import structure
from .creation_plan import (
    CreationPlan,
    completed_view,
    own_views,
    plan_creation,
    published_nodes,
    rank_view,
)
from .learned_state import LearnedTarget
from .messages import (
    CONTIGUOUS,
    BlockAssignment,
    ChunkTarget,
    DatasetRequest,
    LeaderTask,
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
    maxshape: Sequence[int | None] | None = None,
    fillvalue: Any = None,
    data_digest: str = "",
    **storage: Any,
) -> DatasetRequest:
    """One rank's request for a dataset of a given shape (``create_dataset``'s arguments).
    A rank that gives no block lets the others decide: when no rank gives one, the layout is
    learned from the writes (engine/learned.py)."""
    if np.isscalar(shape):  # as before: 10, 10.0 and "10" all mean (10,)
        shape_t: tuple[int, ...] = (int(shape),)  # type: ignore[arg-type]
    else:
        shape_t = tuple(int(n) for n in shape)  # type: ignore[union-attr]
    if any(n < 0 for n in shape_t):
        raise ValueError(f"shape {shape_t} has a negative dimension")
    numpy_dtype = check_dtype(dtype)
    limits = parse_maxshape(shape_t, maxshape)
    return DatasetRequest(
        path,
        numpy_dtype,
        RequestKind.EXPLICIT,
        shape_t,
        parse_block(shape_t, block, start, count),
        parse_storage(session.plan, len(shape_t), **storage),
        declared=block is not None or start is not None or count is not None,
        maxshape=limits,
        fill=fill_bytes(numpy_dtype, fillvalue),
        data_digest=data_digest,
    )


def data_digest(data: np.ndarray) -> str:
    """What ranks compare of the data they each pass to ``create_dataset(data=...)``: its
    shape, type and the checksum of its bytes."""
    array = np.ascontiguousarray(data)
    return f"{array.shape} {array.dtype.str} {checksum(as_bytes(array) if array.dtype.kind != 'O' else repr(array.tolist()).encode())}"


def parse_maxshape(
    shape: tuple[int, ...], maxshape: Sequence[int | None] | None
) -> tuple[int, ...]:
    """h5py's ``maxshape`` (None per unlimited axis) as the record keeps it (-1 unlimited);
    () when the dataset cannot grow."""
    if maxshape is None:
        return ()
    given: tuple[Any, ...] = (maxshape,) if np.isscalar(maxshape) else tuple(maxshape)
    limits = tuple(-1 if n is None else int(n) for n in given)
    if len(limits) != len(shape):
        raise PlanError(f"maxshape {given} does not match the shape {shape}")
    for n, limit in zip(shape, limits):
        if limit != -1 and limit < n:
            raise PlanError(f"maxshape {given} is smaller than the shape {shape}")
    return () if limits == shape else limits


def fill_bytes(dtype: np.dtype, fillvalue: Any) -> bytes | None:
    """The fill value's bytes (one element of ``dtype``), None for zeros (HDF5's default)."""
    if fillvalue is None:
        return None
    try:
        value = np.asarray(fillvalue, dtype=dtype).reshape(())
    except (TypeError, ValueError) as exc:
        raise PlanError(f"fillvalue {fillvalue!r} is not a value of {dtype}: {exc}") from None
    data = value.tobytes()
    return None if not any(data) else data


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


# The protocol (collective) -------------------------------------------------------------------
@dataclass(frozen=True)
class Created:
    """What a creation call left on this rank: the datasets' paths and, when each rank made
    its own view of them (``local``: no answer from rank 0 after the sources were created),
    what the write that follows in the same call must know. ``error``: this rank's failure,
    which that write's closing round raises on every rank; ``learnt``: this rank learnt the
    datasets and writes its part (False on a rank that failed, and on rank 0 when it did not
    publish: the failing ranks bring their errors). ``groups``: the groups this rank added to
    its catalogue for them."""

    paths: list[str]
    local: bool = False
    error: BaseException | None = None
    learnt: bool = True
    groups: tuple[str, ...] = ()


@phase("create")
def create_datasets(
    session: Session,
    requests: list[DatasetRequest] | None,
    error: BaseException | None,
    writes: bool = False,
) -> Created:
    """Collective: create the requested datasets (``requests`` is None on a rank whose
    arguments failed, with ``error``: then every rank raises it). An agreed error marks the
    session as failed (see :func:`.commit.close`). ``writes``: every rank writes the datasets
    next in the same call (``write_datasets``), whose closing round can then raise a failure
    of this step (:class:`Created`; :func:`settle` after it raised)."""
    writing = session.require_writable("create_datasets")
    try:
        return _create_datasets(session, requests, error, writes)
    except H5SubfileError as exc:
        writing.note_failure(exc)
        raise


def _create_datasets(
    session: Session,
    requests: list[DatasetRequest] | None,
    error: BaseException | None,
    writes: bool,
) -> Created:
    writing = session.require_writable("create_datasets")
    comm = session.comm

    planned: list[CreationPlan] = []  # rank 0's, kept for publishing

    def plan_on_root(gathered: list[Any]) -> list[RankAssignment]:
        creation = plan_on(session, gathered)
        planned.append(creation)
        own = own_views(creation, writing.number, session.plan) if writes else None
        assignments = creation.assignments(own)
        if own is None and all(not a.tasks for a in assignments[1:]):
            return _published_at_once(session, creation, assignments)
        return assignments

    named = "" if requests is None else ", ".join(r.path for r in requests)
    # Every rank's requests go to rank 0 with the call's agreement, which rank 0 answers with
    # each rank's assignment (in the same round where the rounds are stars).
    assignment: RankAssignment = session.enter(
        "write_datasets" if writes else "create_dataset",
        error,
        detail=named,
        question=Question(requests, plan_on_root),
    )
    creation = planned[0] if planned else None
    if assignment.views is not None:
        _learn(session, assignment, assignment.views)
        return Created(list(assignment.paths))
    offsets, error = create_sources(session, assignment.tasks)
    if assignment.own is not None:
        assert requests is not None  # the agreement round raised otherwise
        return _own_views_made(session, assignment, creation, requests, offsets, error)

    def publish_on_root(gathered: list[SourceOffsets]) -> list[dict[str, Any]]:
        assert creation is not None
        nodes = publish(session, creation, gathered)
        return [rank_view(nodes, creation, rank) for rank in range(comm.size)]

    views: dict[str, tuple[NodeInfo, StoredExtent | None]] = root_decides(
        comm, offsets, error, publish_on_root
    )
    _learn(session, assignment, views)
    return Created(list(assignment.paths))


def plan_on(session: Session, gathered: list[Any]) -> CreationPlan:
    """Rank 0: the plan of a creation call from every rank's requests; the unfinished datasets
    of an earlier session that it replaces are unlinked from the master."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    creation = _planned(session, gathered)
    for dataset in creation.datasets:
        if dataset.replaces_unfinished:
            writing.root.master.replace_unfinished(dataset.path)
    return creation


def plan_alike(session: Session, requests: list[DatasetRequest]) -> CreationPlan:
    """Any rank, in a session with one group, for a call every rank makes alike: rank 0's plan
    of it (the planning is pure, and its inputs are the same on every rank)."""
    return _planned(session, [requests] * session.comm.size)


def _planned(session: Session, gathered: list[Any]) -> CreationPlan:
    writing = session.writing
    assert writing is not None
    whole = writing.grouping.known_whole
    assert whole is not None  # rank 0 holds the whole grouping; one group is known to all
    return plan_creation(
        session.path,
        session.catalog,
        whole,
        session.plan,
        lambda group: subfile_relpath(session.path, writing.number, writing.session_id, group),
        gathered,
    )


def _published_at_once(
    session: Session, creation: CreationPlan, assignments: list[RankAssignment]
) -> list[RankAssignment]:
    """Rank 0, planning a call whose every source it leads (one group, the default on one
    node): it makes the sources and publishes the datasets right away, and each rank's answer
    holds its views, which otherwise take a second round. A failure is every rank's."""
    offsets, error = create_sources(session, assignments[0].tasks)
    if error is not None:
        raise error
    nodes = publish(session, creation, [offsets])
    return [
        dataclasses.replace(a, tasks=(), views=rank_view(nodes, creation, rank))
        for rank, a in enumerate(assignments)
    ]


def _own_views_made(
    session: Session,
    assignment: RankAssignment,
    creation: CreationPlan | None,
    requests: list[DatasetRequest],
    offsets: SourceOffsets,
    error: BaseException | None,
) -> Created:
    """The last step of a creation whose ranks make their own views: each rank sends rank 0
    its offsets (in its tasks' order), in one round without an answer; rank 0 publishes when
    no rank failed. Every rank that can (not failed; rank 0: published) learns the datasets."""
    assert assignment.own is not None
    paths = list(assignment.paths)
    published: list[dict[str, NodeInfo]] = []

    def publish_on_root(gathered: list[list[int]]) -> None:
        assert creation is not None
        found: SourceOffsets = {}
        for rank, sent in enumerate(gathered):
            for task, offset in zip(creation.tasks.get(rank, ()), sent):
                found[(task.dataset, task.extent)] = offset
        published.append(publish(session, creation, [found]))

    mine = [offsets[(t.dataset, t.extent)] for t in assignment.tasks] if error is None else None
    error = root_collects(session.comm, mine, error, publish_on_root)
    if session.rank == 0:
        if not published:
            return Created(paths, True, error, learnt=False)
        assert creation is not None
        views = rank_view(published[0], creation, 0)
    elif error is not None:
        return Created(paths, True, error, learnt=False)
    else:
        views = {}
        for index, (path, view, request, block) in enumerate(
            zip(paths, assignment.own, requests, assignment.blocks)
        ):
            offset = None if block.extent is None else offsets[(index, block.extent)]
            views[path] = completed_view(view, request.dtype, offset)
    return Created(paths, True, groups=_learn(session, assignment, views))


def _learn(
    session: Session,
    assignment: RankAssignment,
    views: dict[str, tuple[NodeInfo, Any]],
) -> tuple[str, ...]:
    """Put the new datasets (and the groups they need) into this rank's catalogue and note
    where its bytes go. Returns the groups added."""
    writing = session.writing
    assert writing is not None
    added: list[str] = []
    for path, (info, _) in views.items():
        for new_group in session.catalog.missing_groups(path)[:-1]:
            session.catalog.nodes[new_group] = NodeInfo("group")
            added.append(new_group)
        session.catalog.nodes[path] = info
    for path, block in zip(assignment.paths, assignment.blocks):
        info, held = views[path]
        if info.layout is not None and info.layout.learned:
            learn_sources(session, path, info, held)
            continue
        writing.targets[path] = _target(session, path, block, held)
        target = writing.targets[path]
        if target is not None:
            writing.unwritten[path] = Remaining(target.block)
    return tuple(added)


def learn_sources(session: Session, path: str, info: NodeInfo, held: Any) -> None:
    """Note where this rank writes dataset ``path``, whose layout is learned: the sources
    ``held`` (one extent, several, or None) its view gave it."""
    writing = session.writing
    assert writing is not None and info.dtype is not None
    stored = list(held) if isinstance(held, tuple) else [] if held is None else [held]
    targets = [learned_target(session, path, extent) for extent in stored]
    writing.learned[path] = LearnedTarget(path, info.dtype, stored, targets)


def settle(session: Session, created: Created, error: BaseException) -> None:
    """Collective, after the write that followed a creation whose ranks made their own views
    raised ``error`` on every rank: rank 0 says whether it published the datasets, and when
    it did not, every rank forgets them (they are not in the master), as after a creation
    that failed. Nothing to do otherwise, or when the ranks are out of step."""
    if not created.local or session.closed:
        return
    if isinstance(error, (CollectiveMismatchError, CollectiveTimeoutError)):
        return
    published = bcast(session.comm, created.learnt if session.rank == 0 else None)
    if published:
        return
    writing = session.writing
    assert writing is not None
    for path in created.paths:
        structure.forget_dataset(session, path)
    for group in created.groups:
        session.catalog.nodes.pop(group, None)


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
                    task.name, task.shape, task.dtype, task.fill
                )
                continue
            sink = writer.create_chunked(
                task.name,
                task.shape,
                task.dtype,
                task.chunks,
                task.filters.h5py_kwargs(),
                task.fill,
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
    """Rank 0: record the new datasets in the master (VDS, layout records); returns their
    nodes (:func:`.creation_plan.published_nodes`)."""
    writing = session.writing
    assert writing is not None and writing.root is not None and creation is not None
    master = writing.root.master
    offsets: SourceOffsets = {}
    for part in gathered:
        offsets.update(part)
    nodes = published_nodes(creation, writing.number, offsets)
    made = 0
    virtual = any(not d.in_master and d.extents and not d.learned for d in creation.datasets)
    try:
        with master.mapping() if virtual else contextlib.nullcontext():
            for dataset in creation.datasets:
                info = nodes[dataset.path]
                assert info.layout is not None
                made += 1
                master.publish_dataset(
                    dataset.path,
                    dataset.shape,
                    dataset.dtype,
                    info.layout,
                    virtual=dataset.learned and not dataset.in_master,
                    fill=dataset.fill,
                )
        if master.commit_mode == "in-place":
            master.flush()  # a master changed in place: the new datasets on disk now
    except Exception:
        # No rank learns of this call's datasets: none may stay in the master, nor the
        # groups made for them (not in the catalogue yet).
        catalog = session.catalog
        new_groups = {g for d in creation.datasets for g in catalog.missing_groups(d.path)[:-1]}
        for dataset in creation.datasets[:made]:
            with contextlib.suppress(Exception):
                master.unlink(dataset.path)
        with contextlib.suppress(Exception):
            master.unlink_empty_groups(new_groups)
        raise
    return nodes


def transfer_for(layout: DatasetLayout | None, plan: Plan) -> Transfer:
    """How the bytes of a dataset created in this session are written: the same on every
    rank (from the catalogue and the plan)."""
    if layout is not None and layout.chunks:
        return Transfer.CHUNKED
    return Transfer.TWO_PHASE if plan.aggregators is not None else Transfer.DIRECT


def learned_target(session: Session, path: str, extent: StoredExtent) -> WriteTarget:
    """Where this rank writes its part of a source of a dataset whose layout is learned
    (its group's, or the master's own dataset)."""
    writing = session.writing
    assert writing is not None
    info = session.catalog.nodes[path]
    return WriteTarget(
        extent.block,
        session.reader.paths.resolve(extent.file),
        extent.offset,
        extent.block,
        writing.grouping.group,
        transfer_for(info.layout, session.plan),
        learned=True,
    )


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
        writing.grouping.group,
        transfer_for(info.layout, session.plan),
        chunked,
    )

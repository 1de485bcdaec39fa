"""Resizing a dataset (collective): h5py's ``Dataset.resize`` for datasets created with a
``maxshape`` whose layout is learned from the writes (engine/learned.py).

Each group's sources cover the dataset's *capacity*: a box at least as large as its shape.
Growing beyond it along an axis doubles the capacity there (up to ``maxshape``), so a
dataset grown step by step (a time series) gets O(log steps) sources per group, not one per
step; the new part of the capacity (at most one box per axis) becomes a new source in every
group's subfile, allocated and never filled like the first. Shrinking keeps the sources:
what the ranks wrote beyond the new shape is dropped from their pieces, and reads as the
fill value if the dataset grows back, as in HDF5.

One agreement round carries rank 0's plan of the new sources (the new shape is the same on
every rank, and checked there); the leaders create them, and rank 0 gathers their offsets
and answers every rank with its group's new sources.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..errors import H5SubfileError, PlanError, UnsupportedError
from ..io.filters import FilterSpec
from ..layout.blocks import Block
from ..layout.chunking import extent_chunks
from ..layout.hyperslab import Run
from ..layout.names import source_name, subfile_relpath
from ..layout.record import GROWN_FORMAT, DatasetLayout, StoredExtent
from ..layout.regions import box_minus
from ..mpi.collective import Question, root_decides
from . import learned_state
from .create import create_sources, learned_target
from .messages import LeaderTask
from .session import Session


def new_shape(
    shape: tuple[int, ...], size: int | Sequence[int], axis: int | None
) -> tuple[int, ...]:
    """h5py's ``resize(size, axis=None)``: a whole new shape, or one axis' new length."""
    if axis is None:
        try:
            found = tuple(int(n) for n in size)  # type: ignore[union-attr]
        except TypeError:
            raise PlanError(
                f"resize({size!r}): give the new shape, or a length and an axis"
            ) from None
    else:
        if not -len(shape) <= axis < len(shape):
            raise PlanError(f"resize: axis {axis} is out of range for {len(shape)} dimension(s)")
        found = tuple(int(size) if a == axis % len(shape) else n for a, n in enumerate(shape))  # type: ignore[arg-type]
    if len(found) != len(shape) or any(n < 0 for n in found):
        raise PlanError(f"resize: {found} is not a shape of {len(shape)} dimension(s)")
    return found


def _check(session: Session, path: str, shape: tuple[int, ...]) -> DatasetLayout:
    """The dataset may take ``shape``: learned (in this session, or grown from an earlier
    one's, which keeps its elements), within its ``maxshape``."""
    info = session.node(path)
    writing = session.writing
    layout = info.layout
    resizable = layout is not None and layout.learned and bool(layout.maxshape)
    if writing is None or not resizable or path in writing.targets:
        raise UnsupportedError(
            f"{path} cannot be resized: only a dataset created with a maxshape, and without "
            "declared blocks, can (as h5py resizes only datasets created with maxshape)"
        )
    assert layout is not None
    if path not in writing.learned:
        if not layout.complete:
            raise UnsupportedError(
                f"{path} cannot be grown: its earlier session left it incomplete"
            )
        if any(n < m for n, m in zip(shape, info.shape)):
            raise UnsupportedError(
                f"resize of {path} to {shape}: smaller than {info.shape}, what an earlier "
                "session wrote (h5subfile keeps an earlier session's elements)"
            )
    else:
        floor = writing.learned[path].floor
        if any(n < m for n, m in zip(shape, floor)):
            raise UnsupportedError(
                f"resize of {path} to {shape}: smaller than {floor}, what an earlier session "
                "wrote (h5subfile keeps an earlier session's elements)"
            )
    limits = layout.maxshape
    if any(m >= 0 and n > m for n, m in zip(shape, limits)):
        shown = tuple(None if m < 0 else m for m in limits)
        raise PlanError(f"resize of {path} to {shape}: beyond its maxshape {shown}")
    return layout


def capacity(layout: DatasetLayout, ndim: int) -> tuple[int, ...]:
    """The box the sources cover, from the origin (their union's far corner)."""
    stops = [0] * ndim
    for extent in layout.extents:
        for a, (s, c) in enumerate(zip(extent.start, extent.shape)):
            stops[a] = max(stops[a], s + c)
    return tuple(stops)


def _grown_format(session: Session) -> None:
    """The file's record says format 5 from now on: a reader of an older format would check a
    grown layout's ranks against its first session's only (docs/FORMAT.md)."""
    records = [session.catalog.record]
    writing = session.writing
    if writing is not None and writing.root is not None:
        records.append(writing.root.master.catalog.record)
    for record in records:
        record.format = max(record.format, GROWN_FORMAT)


def _capacity(session: Session, path: str, layout: DatasetLayout) -> tuple[int, ...]:
    """The box this session's sources of ``path`` cover, from the origin: an earlier
    session's dataset grown here counts its shape then (its sources are closed, and this
    session's lie beyond it)."""
    writing = session.writing
    assert writing is not None
    info = session.node(path)
    target = writing.learned.get(path)
    if target is None:
        return info.shape
    own = capacity(
        dataclasses.replace(layout, extents=layout.extents[target.kept :]), len(info.shape)
    )
    return tuple(max(a, b) for a, b in zip(own, target.floor)) if target.floor else own


def grown(old: tuple[int, ...], shape: tuple[int, ...], limits: tuple[int, ...]) -> tuple[int, ...]:
    """The capacity that holds ``shape``: doubled along each axis it outgrows, up to the
    axis' limit."""
    if all(n <= c for n, c in zip(shape, old)):
        return old
    found = []
    for n, c, m in zip(shape, old, limits):
        want = max(n, 2 * c) if n > c else max(c, n)
        found.append(want if m < 0 else min(want, max(m, n)))
    return tuple(found)


def new_segments(old: tuple[int, ...], new: tuple[int, ...]) -> list[Block]:
    """The boxes of the capacity ``new`` outside ``old`` (disjoint, at most one per axis)."""
    ndim = len(new)
    whole = Block((0,) * ndim, new)
    if any(n == 0 for n in old):
        return [whole] if whole.size else []
    return [b for b in box_minus(whole, Block((0,) * ndim, old)) if b.size]


def resize(session: Session, path: str, size: int | Sequence[int], axis: int | None) -> None:
    """Collective: give dataset ``path`` a new shape (every rank passes the same)."""
    writing = session.require_writable("resize")
    info = session.node(path)
    shape, layout, error = info.shape, None, None
    try:
        shape = new_shape(info.shape, size, axis)
        layout = _check(session, path, shape)
    except H5SubfileError as exc:
        error = exc
    planned: list[list[StoredExtent]] = []

    def plan_on_root(_: object) -> list[tuple[LeaderTask, ...]]:
        assert layout is not None
        old = _capacity(session, path, layout)
        segments = new_segments(old, grown(old, shape, layout.maxshape))
        whole = writing.grouping.whole
        assert whole is not None
        extents, tasks = _plan_sources(session, path, layout, segments, whole.ngroups)
        planned.append(extents)
        by_leader: list[list[LeaderTask]] = [[] for _ in range(session.comm.size)]
        for _, task, group in tasks:
            by_leader[whole.leaders[group]].append(task)
        return [tuple(found) for found in by_leader]

    question = Question(None, plan_on_root)
    tasks = session.enter("resize", error, detail=path, args=f"{path} {shape}", question=question)
    if path not in writing.learned:  # an earlier session's dataset, grown from here on
        assert info.dtype is not None and info.layout is not None
        writing.learned[path] = learned_state.LearnedTarget(
            path, info.dtype, [], [], kept=len(info.layout.extents), floor=info.shape
        )
        _grown_format(session)
    offsets, failed = create_sources(session, tasks)
    sent = (
        [(task.name, offsets[(task.dataset, task.extent)]) for task in tasks]
        if not failed
        else None
    )

    def answer_on_root(gathered: list[list[tuple[str, int]] | None]) -> list[list[StoredExtent]]:
        return _publish(session, path, shape, planned[0] if planned else [], gathered)

    own: list[StoredExtent] = root_decides(session.comm, sent, failed, answer_on_root)
    _learn(session, path, shape, own)


def _plan_sources(
    session: Session, path: str, layout: DatasetLayout, segments: list[Block], ngroups: int
) -> tuple[list[StoredExtent], list[tuple[StoredExtent, LeaderTask, int]]]:
    """Rank 0: every group's source of every new segment, named after those the dataset has."""
    writing = session.writing
    assert writing is not None
    info = session.node(path)
    assert info.dtype is not None
    taken = len(layout.extents) // max(ngroups, 1)
    filters = FilterSpec.from_dict(layout.filters)
    extents, tasks = [], []
    for k, segment in enumerate(segments):
        name = source_name(path, taken + k)
        chunks = extent_chunks(layout.chunks, segment.count) if layout.chunks else ()
        for group in range(ngroups):
            file = subfile_relpath(session.path, writing.number, writing.session_id, group)
            extent = StoredExtent(file, name, segment.start, segment.count, -1, chunks=chunks)
            extents.append(extent)
            task = LeaderTask(
                0, len(extents) - 1, False, name, segment.count, info.dtype, chunks or None, filters
            )
            tasks.append((extent, task, group))
    return extents, tasks


def _publish(
    session: Session,
    path: str,
    shape: tuple[int, ...],
    extents: list[StoredExtent],
    gathered: list[list[tuple[str, int]] | None],
) -> list[list[StoredExtent]]:
    """Rank 0: the new sources with their offsets into the dataset's layout; each rank is
    answered with its group's."""
    writing = session.writing
    assert writing is not None and writing.grouping.whole is not None
    offsets = {}
    for rank, sent in enumerate(gathered):
        group = writing.grouping.whole.group_of_rank[rank]
        for name, offset in sent or ():
            offsets[(int(group), name)] = offset
    files = {
        subfile_relpath(session.path, writing.number, writing.session_id, g): g
        for g in range(writing.grouping.whole.ngroups)
    }
    made = [e.changed(offset=offsets[(files[e.file], e.dataset)]) for e in extents]
    info = session.catalog.nodes[path]
    assert info.layout is not None
    info.layout = dataclasses.replace(info.layout, extents=info.layout.extents + tuple(made))
    group_of = writing.grouping.whole.group_of_rank
    return [
        [e for e in made if files[e.file] == int(group_of[rank])]
        for rank in range(session.comm.size)
    ]


def _learn(session: Session, path: str, shape: tuple[int, ...], own: list[StoredExtent]) -> None:
    """Every rank: the new shape, its group's new sources, its pieces beyond a smaller shape
    dropped."""
    writing = session.writing
    assert writing is not None
    info = session.catalog.nodes[path]
    target = writing.learned[path]
    target.add_extents(own, [learned_target(session, path, e) for e in own])
    if session.rank != 0:
        assert info.layout is not None
        info.layout = dataclasses.replace(info.layout, extents=info.layout.extents + tuple(own))
    shrunk = any(n < m for n, m in zip(shape, info.shape))
    layout = info.layout
    if shrunk:
        inside = Block((0,) * len(shape), shape)
        _clip(target, inside)
        assert layout is not None
        layout = learned_state.clip_layout(layout, inside)  # the other ranks' pieces as last synced
    session.catalog.nodes[path] = dataclasses.replace(info, shape=shape, layout=layout)


def _clip(target: learned_state.LearnedTarget, inside: Block) -> None:
    """Drop the parts of this rank's pieces outside ``inside`` (a dataset made smaller); what
    is left is hashed from the file at close."""
    for written in target.take_pieces():
        if inside.contains(written.bounds()):
            target.add_piece(written)
            continue
        target.changed = True
        for box in (part for slab in written.slabs() for part in slab.within(inside)):
            target.add_piece(learned_state.Written(written.extent, Run(box), None))
    target.version += 1

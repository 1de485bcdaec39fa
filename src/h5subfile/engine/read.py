"""Reads: independent (any rank, any selection, no communication) or collective (two-phase
through the plan's aggregators). :func:`route` decides once how a dataset is read.

In a write session that writes behind (``async_writes``), every read first waits for this
rank's background writes (:func:`settle`), so that it sees what this rank wrote and no count
is updated from two threads; a collective read waits on every rank before its agreement round,
so it sees every rank's bytes.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import FileModeError, H5SubfileError, SelectionError, mapped
from ..io.boxes import fill_with
from ..io.posix import Piece, as_bytes
from ..layout.blocks import Block
from ..layout.catalog import NodeInfo, raise_problem
from ..layout.record import DatasetLayout, FileRecord, extents_files
from ..layout.selection import assemble, partition, plan_read, selection_box
from ..layout.sharing import ExtentIndex, Identities, touched_layout
from ..mpi.collective import agree, root_decides, root_only
from . import learned, learned_state
from .exchange import plan_aggregated, read_two_phase
from .messages import FileRun
from .profiling import phase
from .session import Session


class Route(enum.Enum):
    """How a dataset's bytes are read."""

    DIRECT = "direct"  # straight from the stored bytes (layout record or contiguous storage)
    H5PY = "h5py"  # through h5py: chunked, compressed, foreign virtual, variable-length, scalar


def settle(session: Session) -> None:
    """Wait for this rank's background writes; raise the first error they met (a read of
    bytes that may never have been written fails instead)."""
    error = session.wait_writes()
    if error is not None:
        raise error


def route(info: NodeInfo) -> Route:
    """How to read a dataset, or the error it must raise (missing subfile, unfinished...)."""
    if info.problem is not None:
        raise_problem(info.problem)
    assert info.dtype is not None
    if info.via_h5py or not info.has_layout or info.dtype.kind == "O" or not info.shape:
        return Route.H5PY
    return Route.DIRECT


def refuse_local_view(info: NodeInfo, path: str, boxes: Iterable[Block]) -> None:
    """A dataset created in the open write session over several extents: this rank holds only
    its own extent (rank 0 all), so an independent read reaching beyond it is refused rather
    than read as unwritten (zeros)."""
    if not info.local_view:
        return
    assert info.layout is not None
    known = [e.block for e in info.layout.extents]
    for box in boxes:
        covered = 0
        for block in known:
            common = box.intersect(block)
            covered += 0 if common is None else common.size
        if covered < box.size:
            raise FileModeError(
                f"{path} was created in this write session, and each rank holds only the "
                "part of its layout it writes (so that metadata grows linearly with the "
                f"ranks): {box} reaches beyond it; read it collectively "
                "(Dataset.read_collective, or d[...] inside 'with d.collective:'), or after "
                "closing the file"
            )


def share_layout(session: Session, path: str) -> NodeInfo:
    """Collective: every rank gets rank 0's whole entry of ``path`` (a dataset created in the
    open session, read collectively: O(extents) per rank, on demand)."""
    info = session.node(path)
    if info.local_view:
        info = root_only(session.comm, lambda: session.node(path))
        info = session.catalog.nodes[path] = dataclasses.replace(info, local_view=False)
    return info


def sent_layout(session: Session, info: NodeInfo, boxes: list[Block]) -> DatasetLayout:
    """Collective, for a layout rank 0 did not broadcast (layout/sharing.py): every rank sends
    rank 0 the boxes it reads and receives only the extents they touch, with the identities
    of their subfiles."""
    layouts = {"layout": info.layout} if session.rank == 0 else {}  # rank 0 holds them all

    def answer(gathered: list[list[Block]]) -> list[tuple[DatasetLayout, FileRecord]]:
        whole = layouts["layout"]
        assert whole is not None
        index, identities = ExtentIndex(whole.extents), Identities(session.catalog.record)
        answers = []
        for wanted in gathered:
            part = touched_layout(whole, wanted, index)
            answers.append((part, identities.of(extents_files(part.extents))))
        return answers

    part, identities = root_decides(session.comm, boxes, None, answer)
    session.add_identities(identities)
    assert isinstance(part, DatasetLayout)
    return part


@mapped
@phase("transfer")
def read(
    session: Session,
    path: str,
    selection: Any = (),
    verify: bool | None = None,
    layout: DatasetLayout | None = None,
    known: bool = False,
) -> Any:
    """Read a selection (numpy/h5py style) on this rank only; with ``verify`` (default: the
    file's), the checksum of every stored piece it touches is checked. ``layout``: the
    extents to read from (a collective read's :func:`sent_layout`), instead of the dataset's."""
    settle(session)
    info = session.node(path)
    verify = (session.verify if verify is None else verify) or info.moved
    reader = session.reader
    assert info.dtype is not None
    if learned.learned_info(session, path) is not None:
        return _read_learned(session, path, info, selection, verify, known)
    if route(info) is Route.H5PY:
        if not info.shape and verify and info.has_layout and info.dtype.kind != "O":
            return _read_scalar_checked(session, path, info, selection)
        if info.dtype.kind == "O" or not info.shape:
            # Variable-length or scalar data: h5py reads it (and checks the selection).
            return np.asarray(reader.h5py_dataset(path)[selection])
        plan = plan_read(info.shape, info.dtype.itemsize, selection)
        refuse_local_view(info, path, (piece.box for piece in plan.pieces))
        arrays = [reader.read_h5py(path, info.dtype, piece.box) for piece in plan.pieces]
        return assemble(plan, arrays)
    layout = info.layout if layout is None else layout
    assert layout is not None
    if len(info.shape) == 1 and isinstance(selection, slice) and selection.step in (None, 1):
        box = selection_box(info.shape, info.dtype.itemsize, selection)[0]  # type: ignore[index]
        refuse_local_view(info, path, [box])  # a plain slice of a 1-D dataset: one box
        return reader.read_direct(layout, info.dtype, box, None, verify, path, info.fill)
    plan = plan_read(info.shape, info.dtype.itemsize, selection)
    refuse_local_view(info, path, (piece.box for piece in plan.pieces))
    arrays = [
        reader.read_direct(layout, info.dtype, piece.box, verify=verify, name=path, fill=info.fill)
        for piece in plan.pieces
    ]
    return assemble(plan, arrays)


def _read_scalar_checked(session: Session, path: str, info: NodeInfo, selection: Any) -> Any:
    """A scalar dataset read with ``verify``: its one element read from the stored piece and
    checked against its checksum (h5py, which reads scalars otherwise, checks nothing); the
    selection (``()`` or ``...``) is applied by numpy, as h5py applies it."""
    assert info.dtype is not None and info.layout is not None
    out = session.reader.read_direct(
        info.layout, info.dtype, Block((), ()), verify=True, name=path, fill=info.fill
    )
    return np.asarray(out[selection])


def _read_learned(
    session: Session, path: str, info: NodeInfo, selection: Any, verify: bool, known: bool
) -> Any:
    """A read in the write session of a dataset whose layout is learned: from what this rank
    wrote and every rank's pieces as of the last sync (:func:`.learned_state.read_layout`). An
    independent read refuses elements beyond them; after a collective sync (``known``)
    every write is known, and what nobody wrote is the fill value."""
    target = learned.learned_info(session, path)
    assert info.dtype is not None and info.layout is not None
    layout = learned_state.read_layout(target, info.layout, session.rank, path)
    plan = plan_read(info.shape, info.dtype.itemsize, selection)
    if not known:
        learned_state.refuse_unknown(layout, path, plan.pieces)
    arrays = [
        session.reader.read_direct(
            layout, info.dtype, piece.box, verify=verify, name=path, fill=info.fill
        )
        for piece in plan.pieces
    ]
    return assemble(plan, arrays)


@mapped
@phase("transfer")
def read_into(session: Session, path: str, dest: np.ndarray, selection: Any = ()) -> None:
    """Read ``selection`` into ``dest`` (h5py's ``read_direct``): for a box selection into a
    C-contiguous ``dest`` of the dataset's dtype, without an intermediate array."""
    settle(session)
    info = session.node(path)
    if learned.learned_info(session, path) is not None:
        dest[...] = read(session, path, selection)
        return
    if route(info) is Route.DIRECT and dest.dtype == info.dtype and dest.flags.c_contiguous:
        assert info.dtype is not None and info.layout is not None
        found = selection_box(info.shape, info.dtype.itemsize, selection)
        if found is not None and dest.shape == found[1]:
            box = found[0]
            refuse_local_view(info, path, [box])
            out = dest.reshape(box.count)
            verify = session.verify or info.moved
            session.reader.read_direct(info.layout, info.dtype, box, out, verify, path, info.fill)
            return
    dest[...] = read(session, path, selection)


@mapped
@phase("transfer")
def read_partition(session: Session, path: str) -> np.ndarray:
    """This rank's BD-CATS share along axis 0. Collective when the plan has aggregators or rank
    0 did not broadcast the dataset's layout (both the same on every rank)."""
    info = session.node(path)
    if not info.shape:
        raise SelectionError(f"{path} is a scalar dataset; it has no axis 0 to split")
    start, stop = partition(info.shape[0], session.comm.size, session.rank)
    if session.plan.aggregators is not None or info.withheld:
        return read_collective(session, path, slice(start, stop))
    result: np.ndarray = read(session, path, slice(start, stop))
    return result


@mapped
@phase("transfer")
def read_collective(session: Session, path: str, selection: Any = ()) -> Any:
    """Collective: every rank reads its own selection; with the plan's aggregators, a few
    ranks per file read large pieces and send every rank its bytes (two-phase I/O)."""
    session.wait_writes()  # every rank's, before the round: its error is agreed there
    info = session.node(path)
    plan, how = None, None
    error: BaseException | None = None
    try:
        how = route(info)
        assert info.dtype is not None
        if info.dtype.kind == "O" or not info.shape:
            raise SelectionError(f"{path}: collective reads take N-D datasets of fixed-size types")
        plan = plan_read(info.shape, info.dtype.itemsize, selection)
    except Exception as exc:  # noqa: BLE001 - agreed on every rank
        error = exc
    if learned.learned_info(session, path) is not None:  # the same on every rank
        learned.sync(session, "read_collective", path, error, path)  # every rank's writes
    else:
        session.enter("read_collective", error, detail=path, args=path)
    info = share_layout(session, path)
    assert plan is not None and info.dtype is not None
    layout = None
    if how is Route.DIRECT and info.withheld:
        layout = sent_layout(session, info, [piece.box for piece in plan.pieces])
    if session.plan.aggregators is None or how is not Route.DIRECT or session.verify or info.moved:
        result = None
        try:
            result = read(session, path, selection, layout=layout, known=True)
        except H5SubfileError as exc:  # read maps every failure into the hierarchy
            error = exc
        agree(session.comm, error)  # a collective read ends the same way on every rank
        return result
    layout = info.layout if layout is None else layout
    assert layout is not None
    reader = session.reader
    outputs = [np.empty(piece.box.count, dtype=info.dtype) for piece in plan.pieces]
    pieces: list[tuple[str, Piece]] = []
    try:
        for piece, out in zip(plan.pieces, outputs):
            if out.size == 0:
                continue
            by_file, chunked, complete = reader.plan(
                layout, info.dtype.itemsize, piece.box, as_bytes(out)
            )
            if not complete:
                fill_with(out, info.fill)
            pieces.extend((file, p) for file, file_pieces in by_file.items() for p in file_pieces)
            reader.read_chunked(chunked, piece.box, out)
    except Exception as exc:  # noqa: BLE001 - agreed below, after the collective exchange
        error = exc
        pieces = []  # this rank reads nothing more, but takes part in the exchange
    agree(session.comm, _read_aggregated(session, pieces) or error)
    return assemble(plan, outputs)


def _read_aggregated(session: Session, pieces: list[tuple[str, Piece]]) -> BaseException | None:
    """Collective two-phase read: ``aggregators`` ranks per file (spread over the readers)
    read, then scatter."""
    size = session.comm.size
    count = min(session.plan.aggregators or 1, size)
    stats = session.stats
    started, read_before = time.perf_counter(), stats.read_seconds
    rounds, files = plan_aggregated(
        session.comm,
        [FileRun(file, -1, offset, len(buffer)) for file, (offset, buffer) in pieces],
        lambda i, _: tuple(sorted({(i * count + j) % size for j in range(count)})),
        session.plan.buffer_bytes,
    )
    error = read_two_phase(
        session.comm,
        rounds,
        [buffer for _, (_, buffer) in pieces],
        lambda i: session.reader.open_file(files[i]),
    )
    stats.exchange_seconds += time.perf_counter() - started - (stats.read_seconds - read_before)
    return error

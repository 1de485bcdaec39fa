"""Writes: validate every request (:mod:`.prepare`), agree, then dispatch each dataset to the
transfer chosen for it when it was created (:class:`~.messages.Transfer`), as ADIOS2's
engines do ``Put`` -> ``DoPut``:

- ``DIRECT``: every rank writes its own bytes at their file offsets; no gather, no copy
  (writing behind, one copy: the write-behind queue's, ``io/writebehind.py``). A whole block
  of at least a hash slice goes out slice by slice, each hashed just before it is written
  (:mod:`.integrity`); smaller pieces that are neighbours go out in one vectored call.
- ``TWO_PHASE``: the plan's aggregators of each subfile gather its bytes and write large
  pieces (:mod:`.exchange`).
- ``CHUNKED``: ranks compress whole chunks; the group's leader writes them (:mod:`.chunks`).

:func:`put_independent` (``dset[box] = data``) writes without communication, its failures
mapped on this rank. A collective write whose datasets all have their layout learned and are
written directly makes no closing round: the error it meets is kept and raised by every rank at
the next collective call (:func:`_writes_in_place`). :func:`note_learned` accounts for each
write of such a dataset and feeds its piece's hasher; :func:`flush` (collective) waits for the
background writes, agrees their errors and shares what every rank wrote of such datasets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import H5SubfileError, SelectionError, as_error, mapped
from ..io.boxes import box_pieces
from ..io.posix import HASH_SLICE, Piece, as_bytes
from ..layout.blocks import Block
from ..layout.grouping import aggregators_of
from ..mpi.collective import agree
from . import integrity, learned, learned_state
from .chunks import plan_learned, write_chunks
from .create import transfer_for
from .exchange import plan_aggregated, write_two_phase
from .messages import FileRun, PreparedWrite, Transfer, WriteRequest
from .prepare import prepare
from .profiling import phase
from .session import Session


@phase("transfer")
def put(
    session: Session,
    requests: Sequence[WriteRequest],
    entered: bool = False,
    failed: BaseException | None = None,
    skip: bool = False,
) -> None:
    """Collective: every rank writes its part of the given datasets (the same datasets, in
    the same order, on every rank); everything is checked and agreed first. An agreed error
    marks the session as failed (see :func:`.commit.close`).

    ``entered``: the call's agreement round was made by the step before it in the same call
    (``write_datasets`` creates the datasets first, which agreed the call and its names), so
    the write takes no round of its own: a rank whose request fails writes nothing, and the
    closing round raises its error on every rank. That step may also say this rank does not
    know the datasets (``skip``, with its failure if it has one, ``failed``): the rank then
    writes nothing and only joins the closing round, which some rank's failure makes raise
    (only direct writes, which make no rounds of their own, happen in such a call)."""
    try:
        if skip:
            agree(session.comm, failed)
            raise AssertionError("a rank skipped a write that no rank's failure stopped")
        _put(session, requests, entered)
    except H5SubfileError as exc:
        if session.writing is not None:
            session.writing.note_failure(exc)
        raise


def _put(session: Session, requests: Sequence[WriteRequest], entered: bool) -> None:
    prepared: list[PreparedWrite] = []
    error: BaseException | None = None
    try:
        prepared = [p for r in requests for p in prepare(session, r)]
    except (H5SubfileError, ValueError, TypeError) as exc:
        error = exc
    writing = session.writing
    assert writing is not None
    if not entered:
        paths = ", ".join(r.path for r in requests)
        session.enter("write", error, detail=paths, args=paths)
    # The transfers used by this call, from the catalogue and the plan: the same on every rank.
    used = {transfer_for(session.node(r.path).layout, session.plan) for r in requests}
    if Transfer.CHUNKED in used and any(r.path in writing.learned for r in requests):
        prepared = plan_learned(session, prepared)  # chunk work, from every rank's boxes
    nbytes = sum(p.data.nbytes for p in prepared)
    with writing.pool.call(nbytes, choose=used == {Transfer.DIRECT}):
        _open_direct_files(session, prepared)
        hashing = _start_hashing(session, prepared)  # runs while the bytes are written
        note_learned(session, prepared, hashing)
        for transfer in Transfer:
            if transfer in used:
                mine = [p for p in prepared if p.target.transfer is transfer]
                error = TRANSFERS[transfer](session, mine, hashing) or error
        integrity.finish_hashing(session, hashing, ok=error is None)
    if error is None:
        for write in prepared:
            record_written(session, write)
    else:
        learned_failed(session, prepared, error)
    if entered or not _writes_in_place(session, requests):
        agree(session.comm, error)
    elif error is not None and writing.kept is None:
        writing.kept = as_error(error)  # raised by every rank at the next collective call


def _writes_in_place(session: Session, requests: Sequence[WriteRequest]) -> bool:
    """Whether a collective write only writes datasets whose layout is learned, directly (the
    same on every rank: from the catalogue and the plan). Each rank's bytes then go to their
    own place without an exchange, and the call has no closing round: no rank writes before
    every rank has entered the call (its agreement round), but a rank leaves it without
    waiting for the slowest one's write (docs/BENCHMARKS.md, *Datasets without declared
    blocks*); what this rank's writes meet is raised by every rank at the next collective
    call, as writing behind raises its errors."""
    writing = session.writing
    assert writing is not None
    if not requests or session.plan.aggregators is not None:
        return False
    for request in requests:
        target = writing.learned.get(request.path)
        info = session.catalog.nodes.get(request.path)
        if target is None or info is None or info.layout is None or info.layout.chunks:
            return False
    return True


def _open_direct_files(session: Session, writes: Sequence[PreparedWrite]) -> None:
    """Open the files this rank writes directly before the hashing thread starts: with as
    many busy threads as cores, an open made after it waits for a core behind the hashing
    (docs/BENCHMARKS-HISTORY.md, *Metadata at scale*, run *after shared coalescing and early opens*).
    Writing behind, this only makes the queue's handles (its thread opens the files). Errors
    are left for the write itself to meet (and agree)."""
    writing = session.writing
    if writing is None:
        return
    for write in writes:
        if write.target.transfer is Transfer.DIRECT:
            try:
                writing.pool.writer(write.target.file)
            except Exception:  # noqa: BLE001 - the write meets it again and reports it
                return


@mapped
@phase("transfer")
def put_independent(session: Session, request: WriteRequest) -> None:
    """Write part of this rank's block, or any selection of a dataset whose layout is learned,
    without communication (``dset[box] = data``)."""
    writes = prepare(session, request)
    if not writes:
        return
    if writes[0].target.transfer is Transfer.CHUNKED:
        raise SelectionError(
            f"{request.path} is chunked: chunks are compressed whole, so each rank writes its "
            "part collectively (Dataset.write, write_dataset, or d[...] = x inside "
            "'with d.collective:', as parallel HDF5 writes compressed datasets)"
        )
    writing = session.writing
    assert writing is not None  # prepare checked it
    if len(writes) == 1 and _put_next_piece(session, writes[0]):
        return
    with writing.pool.call(sum(w.data.nbytes for w in writes)):
        for write in writes:
            writing.pool.writer(write.target.file)  # opened before the hashing starts
        hashing = _start_hashing(session, writes)
        note_learned(session, writes, hashing)
        try:
            _write_direct_pieces(session, writes, hashing)
        except BaseException as exc:
            learned_failed(session, writes, exc)
            raise
        integrity.finish_hashing(session, hashing, ok=True)
    for write in writes:
        record_written(session, write)


def _put_next_piece(session: Session, write: PreparedWrite) -> bool:
    """The commonest independent write, made at the cost of the write itself: the next piece
    of this rank's declared block (IOR's transfers, a time series' rows), smaller than a hash
    slice, written directly by the caller, continuing its block's checksum stream (or without
    checksums). What :func:`put_independent`'s general way does for it, without its
    per-call bookkeeping: the stream hashes the piece now (``integrity.start_hashing``), the
    piece is written, the block's earlier whole-block checksum is dropped
    (``integrity.piece_written``, as ``finish_hashing`` does) and the piece is taken from
    what is left to write. False, doing nothing, for any other write."""
    writing = session.writing
    assert writing is not None
    target, data = write.target, write.data
    if (
        target.learned
        or target.transfer is not Transfer.DIRECT
        or writing.pool.queue is not None
        or write.box == target.block
        or data.nbytes >= HASH_SLICE
    ):
        return False
    stream = None
    if writing.checksums:
        stream = writing.streams.get(write.path)
        if stream is None or not stream.continues(target.block, write.box, data.itemsize):
            return False
    writer = writing.pool.writer(target.file)  # opened before the hashing starts
    if stream is not None:
        stream.claimed += data.nbytes
        stream.update(data)
    writer.write_pieces(box_pieces(target.offset, target.extent, write.box, data))
    if stream is not None:
        integrity.piece_written(writing, write)
    record_written(session, write)
    return True


def note_learned(
    session: Session, writes: Sequence[PreparedWrite], hashing: integrity.Hashing
) -> None:
    """Account for this rank's writes of datasets whose layout is learned (engine/learned.py),
    each feeding its piece's hasher: as it is written when it is a large direct write this
    rank makes itself (slice by slice, as whole blocks are hashed), now otherwise. Without
    checksums (the plan's ``checksums=False``) the pieces are still accounted for: they are
    what the master maps."""
    writing = session.writing
    assert writing is not None
    fresh = _fresh(session, writes)
    regular = {  # each such call's boxes as one piece, when they step regularly
        (path, k): learned_state.note_progression(writing.learned[path], k, boxes)
        for (path, k), boxes in fresh.items()
    }
    for write in writes:
        if not write.target.learned:
            continue
        target = writing.learned[write.path]
        k = target.index_of(write.target)
        hasher = regular.get((write.path, k))
        if hasher is None:
            hasher = learned_state.note_write(target, k, write.box, (write.path, k) in fresh)
        if hasher is None:
            # hashed from the file at close, which proves nothing about the bytes passed:
            # written from a copy, never from the caller's array (async_zero_copy), which
            # the caller may change before it is written
            hashing.copied.add(id(write))
            continue
        if not writing.checksums:
            continue
        as_written = (
            write.target.transfer is Transfer.DIRECT
            and writing.pool.writes_in_caller
            and write.data.nbytes >= HASH_SLICE
        )
        if as_written:
            hashing.feed(write, hasher)
        else:
            hasher.update(as_bytes(write.data))


def _fresh(session: Session, writes: Sequence[PreparedWrite]) -> dict[tuple[str, int], list[Block]]:
    """The (dataset, extent) pairs where this call writes many boxes (a selection with steps,
    an index list, a mask: disjoint by construction) and none of this rank's pieces meets
    their bounds, with those boxes: then no box needs looking for the pieces it may touch."""
    writing = session.writing
    assert writing is not None
    boxes: dict[tuple[str, int], list[Block]] = {}
    for write in writes:
        if write.target.learned:
            target = writing.learned[write.path]
            boxes.setdefault((write.path, target.index_of(write.target)), []).append(write.box)
    fresh = {}
    for (path, k), found in boxes.items():
        if len(found) < 2:
            continue
        lows = np.min([box.start for box in found], axis=0)
        highs = np.max([box.stop for box in found], axis=0)
        bounds = Block(tuple(lows.tolist()), tuple((highs - lows).tolist()))
        if not writing.learned[path].touching(k, bounds):
            fresh[(path, k)] = found
    return fresh


def learned_failed(session: Session, writes: Sequence[PreparedWrite], error: BaseException) -> None:
    """Writes of datasets whose layout is learned failed on this rank: what they stored is
    unknown, so those datasets are published incomplete."""
    writing = session.writing
    if writing is None:
        return
    for write in writes:
        target = writing.learned.get(write.path)
        if target is not None:
            learned_state.note_failure(target, error)


def _start_hashing(session: Session, writes: Sequence[PreparedWrite]) -> integrity.Hashing:
    writing = session.writing
    assert writing is not None
    if not writing.checksums:
        return integrity.no_hashing(writes)
    # Writing behind with a copy, the queue's thread hashes its copy as it writes it (the
    # caller only copies); without a copy, it hashes whole blocks from the caller's arrays
    # and compares a sample taken at the call, and the other pieces are hashed at the call,
    # so that an array changed before it is written is caught.
    queued = not writing.pool.writes_in_caller
    as_written = not queued or not writing.pool.zero_copy
    hashing = integrity.start_hashing(
        writes, as_written, writing.streams, queued, from_arrays=writing.pool.zero_copy
    )
    if hashing.broke:
        integrity.check_broken_streams(session, hashing)
    return hashing


def record_written(session: Session, write: PreparedWrite) -> None:
    """Subtract the box written from what this rank has still to write of its block (close
    names the regions never written). Writing the whole block at once costs a lookup."""
    writing = session.writing
    assert writing is not None
    remaining = writing.unwritten.get(write.path)
    if remaining is None or write.target.learned:
        return
    if write.box == write.target.block:
        del writing.unwritten[write.path]
        return
    remaining.take(write.box)
    if remaining.done:
        del writing.unwritten[write.path]


def _pieces(writes: Sequence[PreparedWrite]) -> list[tuple[str, int, Piece]]:
    """(file, group, piece) of every byte run of the given writes."""
    return [
        (w.target.file, w.target.group, piece)
        for w in writes
        for piece in box_pieces(w.target.offset, w.target.extent, w.box, w.data)
    ]


def write_direct(
    session: Session, writes: Sequence[PreparedWrite], hashing: integrity.Hashing
) -> BaseException | None:
    """Every rank writes its own pieces. Local: returns the error for the caller to agree."""
    try:
        _write_direct_pieces(session, writes, hashing)
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
        return exc
    return None


def _write_direct_pieces(
    session: Session, writes: Sequence[PreparedWrite], hashing: integrity.Hashing
) -> None:
    """A write to be hashed as written goes out slice by slice, each slice hashed just before
    (:meth:`~..io.posix.RawFile.write_hashed`); the others' pieces go out in one vectored call
    per file where they are neighbours."""
    writing = session.writing
    assert writing is not None
    # async_zero_copy: the caller keeps its arrays unchanged until flush/commit/close; those
    # hashed from the file at close are copied all the same (Hashing.copied)
    owned = writing.pool.zero_copy
    if len(writes) == 1 and not hashing.fed:  # one independent write: dset[box] = x
        target = writes[0].target
        pieces = box_pieces(target.offset, target.extent, writes[0].box, writes[0].data)
        owned = owned and id(writes[0]) not in hashing.copied
        writing.pool.writer(target.file).write_pieces(pieces, owned=owned)
        return
    by_file: dict[tuple[str, bool], list[Piece]] = {}
    for write in writes:
        target = write.target
        pieces = box_pieces(target.offset, target.extent, write.box, write.data)
        fed = hashing.fed_by(write)
        own = owned and id(write) not in hashing.copied
        if fed is None:
            by_file.setdefault((target.file, own), []).extend(pieces)
        else:
            writing.pool.writer(target.file).write_hashed(pieces, fed, owned=own)
    for (file, own), together in by_file.items():
        writing.pool.writer(file).write_pieces(together, owned=own)


def write_aggregated(
    session: Session, writes: Sequence[PreparedWrite], hashing: integrity.Hashing
) -> BaseException | None:
    """Collective two-phase write: the plan's aggregators of each subfile write its bytes.
    ``hashing`` (the call's) hashes these writes in its thread, from the callers' buffers."""
    writing = session.writing
    assert writing is not None
    grouping, count = writing.grouping, session.plan.aggregators or 1
    stats = session.stats
    started, written = time.perf_counter(), stats.foreground_write_seconds
    pieces = _pieces(writes)
    runs = [FileRun(file, group, offset, len(data)) for file, group, (offset, data) in pieces]
    rounds, files = plan_aggregated(
        session.comm,
        runs,
        lambda _, group: aggregators_of(grouping.members_of(group), count),
        session.plan.buffer_bytes,
    )
    error = write_two_phase(
        session.comm,
        rounds,
        [data for _, _, (_, data) in pieces],
        lambda i: writing.pool.writer(files[i]),
    )
    writing_time = stats.foreground_write_seconds - written
    stats.exchange_seconds += time.perf_counter() - started - writing_time
    return error


def flush(session: Session) -> None:
    """Collective in write modes (nothing to do when reading): wait until this rank's
    background writes (``async_writes``) are done, then agree, so that every rank raises the
    first error any rank's background writes met (the session then fails) and, once it
    returns, every rank's bytes are written (to the operating system: the plan's ``fsync``
    makes them durable at close). The round carries what each rank wrote of the datasets
    whose layout is learned: two ranks' writes of the same element raise OverlapError on
    every rank, and afterwards every rank reads what every rank wrote."""
    session.require_open()
    writing = session.writing
    if writing is None:
        return
    session.wait_writes()  # its error is this rank's part of the round
    if not writing.learned:  # the same datasets on every rank
        session.enter("flush")
        return
    try:
        learned.sync(session, "flush")  # every rank's writes, seen by every rank after it
    except H5SubfileError as exc:
        writing.note_failure(exc)
        raise


#: Each transfer's writer: (session, its writes, the call's hashing) -> this rank's error.
TRANSFERS: dict[
    Transfer,
    Callable[[Session, Sequence[PreparedWrite], integrity.Hashing], BaseException | None],
] = {
    Transfer.DIRECT: write_direct,
    Transfer.TWO_PHASE: write_aggregated,
    Transfer.CHUNKED: write_chunks,
}

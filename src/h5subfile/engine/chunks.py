"""The chunked transfer (collective): ranks send the parts of chunks other ranks own to their
owners (one ``Alltoallv``), compress their own chunks in parallel, and send the compressed
chunks, in rounds of about ``buffer_size`` raw bytes per rank, to their group's leader, which
writes them whole (``write_direct_chunk``). Writing behind (``async_writes``), the leader's
writes, and its flush after them, are jobs of its write-behind queue (the compressed chunks are
handed over, not copied)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ..errors import UnsupportedError
from ..io.causes import hdf5_writing
from ..io.filters import FilterSpec
from ..io.h5 import SourceFile
from ..io.writebehind import Lost
from ..layout.blocks import Block
from ..layout.chunking import chunk_box, chunk_work
from ..layout.integrity import PieceSum, checksum
from ..mpi.collective import allgather
from .exchange import exchange_bytes
from .integrity import Hashing, note_chunk
from .messages import ChunkTarget, CompressedChunk, CompressionFailed, PreparedWrite, Transfer
from .session import Session

#: A chunk this rank owns: (index of the write, chunk index).
OwnedChunk = tuple[int, tuple[int, ...]]
#: Parts of a chunk received from other ranks: (box in extent coordinates, data).
Parts = list[tuple[Block, np.ndarray]]


@dataclass(frozen=True)
class _ChunkWrite:
    """One chunked write on this rank: its data, and its block in extent coordinates."""

    chunked: ChunkTarget
    data: np.ndarray
    block: Block
    path: str  # the dataset
    origin: tuple[int, ...]  # its extent's start, in dataset coordinates


def write_chunks(
    session: Session, writes: Sequence[PreparedWrite], hashing: Hashing
) -> BaseException | None:
    """Collective: write chunked datasets (every rank calls it, with or without writes of its
    own). Returns this rank's first error for the caller to agree. ``hashing`` (the call's)
    has nothing to do here: each chunk is hashed by the rank that compresses it."""
    stats = session.stats
    started = time.perf_counter()
    busy = stats.foreground_write_seconds + stats.compress_seconds
    items = []
    for write in writes:
        assert write.target.chunked is not None
        block = write.box.relative_to(write.target.extent.start)
        origin = write.target.extent.start
        items.append(_ChunkWrite(write.target.chunked, write.data, block, write.path, origin))
    received = _exchange_parts(session.comm, items)
    batches = _batches(items, session.plan.buffer_bytes)
    error = _compress_and_store(session, items, batches, received)
    session.reader.forget_sources()  # reopen files written by other processes when reading
    stats.exchange_seconds += (
        time.perf_counter()
        - started
        - (stats.foreground_write_seconds + stats.compress_seconds - busy)
    )
    return error


def _exchange_parts(comm: MPI.Comm, items: Sequence[_ChunkWrite]) -> dict[OwnedChunk, Parts]:
    """Send the parts of chunks owned by other ranks to their owners (one ``Alltoallv``);
    returns the parts received, by owned chunk."""
    outgoing: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    incoming = [0] * comm.size
    for item in items:
        for owner, _, box in item.chunked.work.send:
            outgoing[owner].append(item.data[box.relative_to(item.block.start).slices])
        for _, parts in item.chunked.work.owned:
            for source, box in parts:
                incoming[source] += box.size * item.data.itemsize
    receive, cursor = exchange_bytes(comm, outgoing, incoming)
    del outgoing
    received: dict[OwnedChunk, Parts] = {}
    for source in range(comm.size):
        at = cursor[source]
        for number, item in enumerate(items):
            for index, parts in item.chunked.work.owned:
                for sender, box in parts:
                    if sender != source:
                        continue
                    nbytes = box.size * item.data.itemsize
                    part = receive[at : at + nbytes].view(item.data.dtype).reshape(box.count)
                    received.setdefault((number, index), []).append((box, part))
                    at += nbytes
    return received


def _batches(items: Sequence[_ChunkWrite], buffer_bytes: int) -> list[list[OwnedChunk]]:
    """This rank's owned chunks in batches of about ``buffer_bytes`` raw bytes (one round each)."""
    batches: list[list[OwnedChunk]] = []
    size = buffer_bytes
    for number, item in enumerate(items):
        nbytes = int(np.prod(item.chunked.chunks)) * item.data.itemsize
        for index, _ in item.chunked.work.owned:
            if not batches or size + nbytes > buffer_bytes:
                batches.append([])
                size = 0
            batches[-1].append((number, index))
            size += nbytes
    return batches


def _compress_and_store(
    session: Session,
    items: Sequence[_ChunkWrite],
    batches: list[list[OwnedChunk]],
    received: dict[OwnedChunk, Parts],
) -> BaseException | None:
    """One round per batch (as many rounds as the busiest rank of the group needs): compress
    this rank's batch, gather the group's chunks on the leader, which writes them."""
    comm, group_comm = session.comm, session.group_comm()
    error: BaseException | None = None
    rounds = group_comm.allreduce(len(batches), op=MPI.MAX)
    for number in range(rounds):
        payload: list[CompressedChunk] | CompressionFailed = []
        try:
            payload = [
                _compress_chunk(session, items[i], index, received.pop((i, index), []))
                for i, index in (batches[number] if number < len(batches) else ())
            ]
        except Exception as exc:  # noqa: BLE001 - reported to the leader, agreed later
            error = exc
            payload = CompressionFailed(comm.rank, str(exc))
        gathered = group_comm.gather(payload, root=0)
        if gathered is not None:
            stored = _store(session, gathered)  # keeps writing later rounds after an error
            error = error or stored
    if group_comm.rank == 0:
        flushed = _flush_leader(session)
        error = error or flushed
    return error


def _store(
    session: Session, gathered: list[list[CompressedChunk] | CompressionFailed]
) -> BaseException | None:
    """The leader writes the compressed chunks of its group, whole (writing behind: queues
    their writes)."""
    writing = session.writing
    assert writing is not None
    queue = writing.pool.queue
    try:
        for chunks in gathered:
            if isinstance(chunks, CompressionFailed):
                raise OSError(f"rank {chunks.rank}: compressing failed: {chunks.message}")
            if queue is None:
                _write_chunks(session, chunks)
            elif chunks:
                _, file = _sink_file(session)
                sinks = sorted({chunk.sink for chunk in chunks})
                queue.submit_call(
                    functools.partial(_write_chunks, session, chunks),
                    sum(len(chunk.data) for chunk in chunks),
                    tuple(Lost(file, dataset=sink) for sink in sinks),
                    file,
                )
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
        return exc
    return None


def _write_chunks(session: Session, chunks: Sequence[CompressedChunk]) -> None:
    """Store compressed chunks in the leader's file (counted as its writes). A chunk is
    written once: a second write of it (a dataset whose layout is learned, written again
    where it was) would replace the first whole, losing what only the first held."""
    writing = session.writing
    assert writing is not None and writing.leader is not None
    stats = session.stats
    written = writing.leader.chunks_written
    for chunk in chunks:
        key = (chunk.sink, chunk.offset)
        if key in written:
            raise UnsupportedError(
                f"the chunk at {list(chunk.offset)} of {chunk.sink} (in "
                f"{_sink_file(session)[1]}) was written by an earlier collective write: "
                "compressed chunks are written whole, once (h5subfile does not read a chunk "
                "back to merge a second write into it); write each chunk in one collective "
                "call, with chunks= that match your writes"
            )
        written.add(key)
        started = time.perf_counter()
        sink = writing.leader.chunk_sinks[chunk.sink]
        with hdf5_writing(_sink_file(session)[1], "write"):
            sink.id.write_direct_chunk(chunk.offset, chunk.data, chunk.mask)
        stats.write_seconds += time.perf_counter() - started
        stats.writes += 1
        stats.bytes_written += len(chunk.data)


def _sink_file(session: Session) -> tuple[SourceFile | None, str]:
    """The file the leader stores chunks in (a single-group session's: the master), and its
    path as the layout records resolve it."""
    writing = session.writing
    assert writing is not None
    leader, root = writing.leader, writing.root
    if leader is not None and leader.subfile is not None:
        return leader.subfile, leader.subfile.path
    if root is not None:
        return root.master, session.reader.paths.resolve("")
    return None, ""


def _flush_leader(session: Session) -> BaseException | None:
    """The leader flushes its file, so that readers in this session (opening it anew) see
    the chunks (writing behind: after the queued chunks, in the background)."""
    writing = session.writing
    assert writing is not None
    writer, file = _sink_file(session)
    try:
        if writer is None:
            pass
        elif writing.pool.queue is None:
            writer.flush()
        else:
            writing.pool.queue.submit_call(writer.flush, 0, (Lost(file),), file)
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
        return exc
    return None


def _compress_chunk(
    session: Session, item: _ChunkWrite, index: tuple[int, ...], parts: Parts
) -> CompressedChunk:
    """Assemble one whole chunk (own data + parts received; elsewhere the dataset's fill
    value: beyond the extent's edge, and where nobody wrote in a dataset whose layout is
    learned) and compress it."""
    chunked, data, mine = item.chunked, item.data, item.block
    box = chunk_box(index, chunked.chunks, chunked.extent_shape)
    if box.count == chunked.chunks and mine.intersect(box) == box and data.flags.c_contiguous:
        chunk = np.ascontiguousarray(data[box.relative_to(mine.start).slices])
    else:
        fill = session.catalog.nodes[item.path].fill
        chunk = (
            np.zeros(chunked.chunks, dtype=data.dtype)
            if fill is None
            else np.full(chunked.chunks, np.frombuffer(fill, dtype=data.dtype)[0])
        )
        common = mine.intersect(box)
        if common is not None:
            chunk[common.relative_to(box.start).slices] = data[
                common.relative_to(mine.start).slices
            ]
        for part_box, part in parts:
            chunk[part_box.relative_to(box.start).slices] = part
    writing = session.writing
    assert writing is not None
    compressor = writing.compressors.get(data.dtype, chunked.chunks, chunked.filters)
    started = time.perf_counter()
    mask, stored = compressor.compress(chunk)
    if item.path not in writing.learned and writing.checksums:  # learned: its pieces' sums
        start = tuple(o + s for o, s in zip(item.origin, box.start))
        piece = PieceSum(start, chunked.chunks, checksum(stored))
        note_chunk(writing, item.path, item.origin, piece)
    session.stats.compress_seconds += time.perf_counter() - started
    return CompressedChunk(chunked.sink, box.start, mask, stored)


def plan_learned(session: Session, writes: list[PreparedWrite]) -> list[PreparedWrite]:
    """Collective, in a write naming chunked datasets whose layout is learned: every rank's
    boxes of them (with its group) are gathered, and each rank's writes get their chunk work
    as if the boxes were blocks declared at creation (who compresses which chunk, what moves
    to whom). A rank writes one box of such a dataset per call (chunks are compressed whole),
    and each chunk of a group's source is written by one call: a call reaching a chunk an
    earlier one wrote raises UnsupportedError on every rank, from what every rank gathered,
    before anything is written."""
    writing = session.writing
    assert writing is not None
    group = writing.grouping.group
    mine = [
        (w.path, w.target.extent.start, w.box, group)
        for w in writes
        if w.target.learned and w.target.transfer is Transfer.CHUNKED
    ]
    gathered = allgather(session.comm, mine)
    _take_chunks(session, [entry for found in gathered for entry in found])
    planned = []
    for write in writes:
        target = write.target
        if not (target.learned and target.transfer is Transfer.CHUNKED):
            planned.append(write)
            continue
        origin = target.extent.start
        members = [
            (rank, box.relative_to(origin))
            for rank, found in enumerate(gathered)
            for path, start, box, their_group in found
            if their_group == group and path == write.path and start == origin
        ]
        stored = writing.learned[write.path]
        k = stored.index_of(target)
        extent = stored.stored[k]
        info = session.node(write.path)
        assert info.layout is not None
        work = chunk_work(members, extent.chunks, extent.shape, session.rank)
        chunked = ChunkTarget(
            work,
            extent.chunks,
            extent.shape,
            FilterSpec.from_dict(info.layout.filters),
            writing.grouping.leader,
            extent.dataset,
        )
        planned.append(write._replace(target=dataclasses.replace(target, chunked=chunked)))
    return planned


def _take_chunks(
    session: Session, boxes: Sequence[tuple[str, tuple[int, ...], Block, int]]
) -> None:
    """Every rank alike: the chunks of each group's source that this call's ``boxes`` (path,
    extent corner, box, writer's group) reach, refused if an earlier call wrote one of
    them, else taken (:attr:`.session.Writing.chunks_taken`)."""
    writing = session.writing
    assert writing is not None
    reached: dict[tuple[str, tuple[int, ...], int], set[tuple[int, ...]]] = {}
    for path, origin, box, group in boxes:
        if box.is_empty:
            continue
        chunks = _segment_chunks(session, path, origin)
        relative = box.relative_to(origin)
        spans = [
            range(lo // c, (lo + n - 1) // c + 1)
            for lo, n, c in zip(relative.start, relative.count, chunks)
        ]
        reached.setdefault((path, origin, group), set()).update(itertools.product(*spans))
    for key, found in sorted(reached.items()):
        taken = writing.chunks_taken.setdefault(key, set())
        again = taken & found
        if again:
            path, origin, group = key
            chunks = _segment_chunks(session, path, origin)
            corner = [o + i * c for o, i, c in zip(origin, min(again), chunks)]
            raise UnsupportedError(
                f"{path}: the chunk at {corner} of group {group}'s subfile was written by an "
                "earlier collective write: compressed chunks are written whole, once "
                "(h5subfile does not read a chunk back to merge a second write into it); "
                "write each chunk in one collective call, with chunks= that match your "
                "writes. Nothing of this call was written"
            )
    for key, found in reached.items():
        writing.chunks_taken[key].update(found)


def _segment_chunks(session: Session, path: str, origin: tuple[int, ...]) -> tuple[int, ...]:
    """The chunk shape of the segment of ``path`` whose corner is ``origin`` (every group's
    source of it has the same)."""
    writing = session.writing
    assert writing is not None
    return next(e.chunks for e in writing.learned[path].stored if e.start == origin)

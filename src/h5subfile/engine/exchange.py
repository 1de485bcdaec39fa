"""Two-phase I/O, executed: ranks send their bytes to aggregators, which write large pieces
(and, for reads, aggregators read large pieces and scatter them). One ``Alltoallv`` per round.

Memory, per round: an aggregator holds a window buffer of at most ``buffer_size`` bytes for
each window it serves, and a receive buffer for the other ranks' bytes of those windows (its own
bytes go straight into the window), so at most 2 x ``buffer_size`` per window; a sender packs
at most the bytes it sends in that round. The plan comes from :mod:`h5subfile.layout.twophase`,
identical on every rank. :func:`exchange_bytes` also moves the parts of straddling chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from ..io.posix import PieceWriter, RawFile
from ..layout.twophase import Run, Window, plan_two_phase
from .messages import FileRun


def _as_bytes(part: Any) -> np.ndarray:
    if isinstance(part, np.ndarray):
        return np.ascontiguousarray(part).reshape(-1).view(np.uint8)
    return np.frombuffer(part, dtype=np.uint8)


def exchange_bytes(
    comm: MPI.Comm, outgoing: Sequence[Sequence[Any]], incoming: Sequence[int]
) -> tuple[np.ndarray, list[int]]:
    """One ``Alltoallv``: send rank r the pieces ``outgoing[r]`` (arrays or byte buffers, in
    order), receive ``incoming[r]`` bytes from rank r. Returns the received bytes and where each
    source's bytes start in them."""
    send_sizes = [sum(_as_bytes(p).nbytes for p in parts) for parts in outgoing]
    send = np.empty(sum(send_sizes), dtype=np.uint8)
    at = 0
    for parts in outgoing:
        for part in parts:
            raw = _as_bytes(part)
            send[at : at + raw.nbytes] = raw
            at += raw.nbytes
    starts = _starts(incoming)
    receive = np.empty(sum(incoming), dtype=np.uint8)
    comm.Alltoallv(
        [send, (send_sizes, _starts(send_sizes)), MPI.BYTE],
        [receive, (list(incoming), starts), MPI.BYTE],
    )
    return receive, starts


def _starts(sizes: Sequence[int]) -> list[int]:
    """Where each of consecutive pieces of these sizes starts."""
    starts, total = [], 0
    for size in sizes:
        starts.append(total)
        total += size
    return starts


def plan_aggregated(
    comm: MPI.Comm,
    local: Sequence[FileRun],
    aggregators_of_file: Callable[[int, int], Sequence[int]],
    buffer_bytes: int,
) -> tuple[list[list[Window]], list[str]]:
    """Collective: every rank's runs, gathered; the same two-phase rounds computed on every
    rank, ``aggregators_of_file(index, group)`` choosing each file's aggregators. Returns the
    rounds and the files by index."""
    gathered: list[list[FileRun]] = comm.allgather(list(local))
    files = sorted({run.file for rank_runs in gathered for run in rank_runs})
    number = {file: i for i, file in enumerate(files)}
    aggregators = {
        number[run.file]: aggregators_of_file(number[run.file], run.group)
        for rank_runs in gathered
        for run in rank_runs
    }
    runs: list[list[Run]] = [
        [(number[run.file], run.offset, run.nbytes) for run in rank_runs] for rank_runs in gathered
    ]
    return plan_two_phase(runs, aggregators, buffer_bytes), files


def write_two_phase(
    comm: MPI.Comm,
    rounds: Sequence[Sequence[Window]],
    data: Sequence[memoryview],
    open_file: Callable[[int], PieceWriter],
) -> BaseException | None:
    """Write this rank's runs (``data[i]`` holds run i's bytes) through the aggregators.

    Each round's windows are new buffers, handed to the writer for good (``owned``: a
    write-behind queue keeps them without a copy). Returns the first local I/O error (the
    rounds go on, so that no rank is left waiting).
    """
    me, size = comm.rank, comm.size
    error: BaseException | None = None
    for windows in rounds:
        outgoing: list[list[memoryview]] = [[] for _ in range(size)]
        incoming = [0] * size
        mine = [w for w in windows if w.aggregator == me]
        buffers = [np.empty(w.size, dtype=np.uint8) for w in mine]
        for window in windows:
            for piece in window.pieces:
                if piece.rank != me:
                    if window.aggregator == me:
                        incoming[piece.rank] += piece.nbytes
                    continue
                part = data[piece.run][piece.run_offset : piece.run_offset + piece.nbytes]
                if window.aggregator == me:  # own bytes: straight into the window
                    buffer = buffers[mine.index(window)]
                    buffer[piece.window_offset : piece.window_offset + piece.nbytes] = (
                        np.frombuffer(part, dtype=np.uint8)
                    )
                else:
                    outgoing[window.aggregator].append(part)
        receive, cursor = exchange_bytes(comm, outgoing, incoming)
        del outgoing
        for source in range(size):
            at = cursor[source]
            for window, buffer in zip(mine, buffers):
                for piece in window.pieces:
                    if piece.rank == source and source != me:
                        buffer[piece.window_offset : piece.window_offset + piece.nbytes] = receive[
                            at : at + piece.nbytes
                        ]
                        at += piece.nbytes
        del receive
        for window, buffer in zip(mine, buffers):
            raw = buffer.data
            try:
                open_file(window.file).write_pieces(
                    [(offset, raw[at : at + n]) for offset, at, n in window.spans], owned=True
                )
            except Exception as exc:  # noqa: BLE001 - returned, agreed by the caller
                error = error or exc
    return error


def read_two_phase(
    comm: MPI.Comm,
    rounds: Sequence[Sequence[Window]],
    out: Sequence[memoryview],
    open_file: Callable[[int], RawFile],
) -> BaseException | None:
    """Fill this rank's runs (``out[i]`` receives run i's bytes) through the aggregators.

    Returns the first local I/O error (the rounds go on, so that no rank is left waiting).
    """
    me, size = comm.rank, comm.size
    error: BaseException | None = None
    for windows in rounds:
        outgoing: list[list[np.ndarray]] = [[] for _ in range(size)]
        incoming = [0] * size
        for window in windows:
            if window.aggregator == me:
                buffer = np.zeros(window.size, dtype=np.uint8)
                raw = buffer.data
                try:
                    open_file(window.file).read_pieces(
                        [(offset, raw[at : at + n]) for offset, at, n in window.spans]
                    )
                except Exception as exc:  # noqa: BLE001 - returned, agreed by the caller
                    error = error or exc
                for piece in window.pieces:
                    outgoing[piece.rank].append(
                        buffer[piece.window_offset : piece.window_offset + piece.nbytes]
                    )
            for piece in window.pieces:
                if piece.rank == me:
                    incoming[window.aggregator] += piece.nbytes
        receive, cursor = exchange_bytes(comm, outgoing, incoming)
        del outgoing
        for source in range(size):
            at = cursor[source]
            for window in windows:
                if window.aggregator != source:
                    continue
                for piece in window.pieces:
                    if piece.rank == me:
                        out[piece.run][piece.run_offset : piece.run_offset + piece.nbytes] = (
                            receive[at : at + piece.nbytes].data
                        )
                        at += piece.nbytes
    return error

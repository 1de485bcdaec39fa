"""Two-phase I/O, executed: ranks send their bytes to aggregators, which write large pieces
(and, for reads, aggregators read large pieces and scatter them). One ``Alltoallv`` per round.

Memory, per round: an aggregator holds a window buffer of at most ``buffer_size`` bytes for
each window it serves, and a receive buffer for the other ranks' bytes of those windows (its own
bytes go straight into the window), so at most 2 x ``buffer_size`` per window; a sender packs
at most the bytes it sends in that round. The plan comes from :mod:`h5subfile.layout.twophase`, identical on every rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from mpi4py import MPI

from .io.posix import RawFile
from .layout.twophase import Window


def _counts(sizes: list[int]) -> tuple[list[int], list[int]]:
    displacements, total = [], 0
    for size in sizes:
        displacements.append(total)
        total += size
    return sizes, displacements


def write_two_phase(
    comm: MPI.Comm,
    rounds: Sequence[Sequence[Window]],
    data: Sequence[memoryview],
    open_file: Callable[[int], RawFile],
) -> BaseException | None:
    """Write this rank's runs (``data[i]`` holds run i's bytes) through the aggregators.

    Returns the first local I/O error (the rounds go on, so that no rank is left waiting).
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
                    buffer[piece.window_offset : piece.window_offset + piece.nbytes] = \
                        np.frombuffer(part, dtype=np.uint8)
                else:
                    outgoing[window.aggregator].append(part)
        send_sizes = [sum(len(p) for p in parts) for parts in outgoing]
        send = np.empty(sum(send_sizes), dtype=np.uint8)
        at = 0
        for parts in outgoing:
            for part in parts:
                send[at : at + len(part)] = np.frombuffer(part, dtype=np.uint8)
                at += len(part)
        receive = np.empty(sum(incoming), dtype=np.uint8)
        comm.Alltoallv([send, _counts(send_sizes), MPI.BYTE],
                       [receive, _counts(incoming), MPI.BYTE])
        del send
        cursor = _counts(incoming)[1]
        for source in range(size):
            if not incoming[source]:
                continue
            at = cursor[source]
            for window, buffer in zip(mine, buffers):
                for piece in window.pieces:
                    if piece.rank == source:
                        buffer[piece.window_offset : piece.window_offset + piece.nbytes] = \
                            receive[at : at + piece.nbytes]
                        at += piece.nbytes
        del receive
        for window, buffer in zip(mine, buffers):
            raw = memoryview(buffer)
            try:
                open_file(window.file).write_pieces(
                    [(offset, raw[at : at + n]) for offset, at, n in window.spans])
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
        mine = [w for w in windows if w.aggregator == me]
        buffers = []
        for window in mine:
            buffer = np.zeros(window.size, dtype=np.uint8)
            raw = memoryview(buffer)
            try:
                open_file(window.file).read_pieces(
                    [(offset, raw[at : at + n]) for offset, at, n in window.spans])
            except Exception as exc:  # noqa: BLE001 - returned, agreed by the caller
                error = error or exc
            buffers.append(buffer)
        send_sizes = [0] * size
        incoming = [0] * size
        for window in windows:
            for piece in window.pieces:
                if window.aggregator == me:
                    send_sizes[piece.rank] += piece.nbytes
                if piece.rank == me:
                    incoming[window.aggregator] += piece.nbytes
        send = np.empty(sum(send_sizes), dtype=np.uint8)
        at = 0
        for dest in range(size):
            if not send_sizes[dest]:
                continue
            for window, buffer in zip(mine, buffers):
                for piece in window.pieces:
                    if piece.rank == dest:
                        send[at : at + piece.nbytes] = \
                            buffer[piece.window_offset : piece.window_offset + piece.nbytes]
                        at += piece.nbytes
        del buffers
        receive = np.empty(sum(incoming), dtype=np.uint8)
        comm.Alltoallv([send, _counts(send_sizes), MPI.BYTE],
                       [receive, _counts(incoming), MPI.BYTE])
        cursor = _counts(incoming)[1]
        for source in range(size):
            if not incoming[source]:
                continue
            at = cursor[source]
            for window in windows:
                if window.aggregator != source:
                    continue
                for piece in window.pieces:
                    if piece.rank == me:
                        target = out[piece.run]
                        target[piece.run_offset : piece.run_offset + piece.nbytes] = \
                            receive[at : at + piece.nbytes].data
                        at += piece.nbytes
    return error

"""Pickled messages in fixed slots: the byte transport under the object collectives of
:mod:`.collective` (polled rounds of :mod:`.rounds`).

Every rank's part of a round is one slot of :func:`slot_bytes`, headed by its flags and the
message's length; a message that fits its slot (the common case: calls' arguments, answers,
catalogues of a few datasets) takes one round, a larger one a second round of its exact size
(MORE). An answer may ask every rank to send its bytes again (RESEND) when what rank 0
gathered did not fit. The ``_bytes`` forms move objects pickled by the caller, who can then
turn a pickling error into an answer. A root's own part never travels, so however large it
is it costs no second round.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from . import rounds
from .rounds import broadcast, gather_rows, polled

SLOT_BUDGET = 1 << 22  # bytes of slots rank 0 holds for one round, whatever the ranks
SLOT_MAX, SLOT_MIN = 4096, 64
HEAD = 16  # a slot starts with two int64: its flags and the message's length
MORE = 1  # flag: the bytes did not fit (on one rank at least): a second round carries them
RESEND = 2  # flag of an answer: a gathered message did not fit; every rank sends it again


def slot_bytes(size: int) -> int:
    """The slot of one rank in a round among ``size`` ranks: 4 KiB up to 1024 ranks, then
    smaller, so that rank 0 holds at most 4 MiB of slots (never under 64 bytes)."""
    return max(SLOT_MIN, min(SLOT_MAX, SLOT_BUDGET // max(size, 1))) // 8 * 8


def one_slot_bytes(size: int) -> int:
    """The most bytes a rank's pickled message may hold to travel in one round among ``size``
    ranks (what :func:`.collective.root_collects` requires of its callers)."""
    return slot_bytes(size) - HEAD


def fill(slot: np.ndarray, data: np.ndarray | None, flags: int = 0) -> None:
    """Write ``data`` into ``slot``: flags, length, and the bytes when they fit (they are not
    copied when ``flags`` already says MORE)."""
    size = 0 if data is None else data.size
    fits = not flags & MORE and size <= slot.size - HEAD
    slot[:HEAD].view(np.int64)[:] = (flags | (0 if fits else MORE), size)
    if fits and size:
        assert data is not None
        slot[HEAD : HEAD + size] = data


def read_slot(slot: np.ndarray) -> tuple[int, int, np.ndarray | None]:
    """(flags, length, the bytes, or None when they come in a second round)."""
    flags, size = (int(v) for v in slot[:HEAD].view(np.int64))
    return flags, size, None if flags & MORE else slot[HEAD : HEAD + size]


def pickled(obj: Any) -> np.ndarray:
    """``obj`` as the bytes the object collectives move."""
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)


def unpickled(data: np.ndarray) -> Any:
    """The object whose bytes (:func:`pickled`) ``data`` holds."""
    return pickle.loads(data.data)


def displacements(sizes: np.ndarray) -> np.ndarray:
    displs = np.zeros_like(sizes)
    np.cumsum(sizes[:-1], out=displs[1:])
    return displs


def gatherv(comm: MPI.Comm, data: np.ndarray, sizes: np.ndarray | None, root: int) -> list[Any]:
    """One round: every rank's bytes on ``root``, whose ``sizes`` are known (else [])."""
    if comm.rank != root:
        polled(comm, lambda: comm.Igatherv(data, None, root=root), data)
        return []
    assert sizes is not None
    displs = displacements(sizes)
    buffer = np.empty(int(sizes.sum()), dtype=np.uint8)
    spec = [buffer, sizes, displs, MPI.BYTE]
    polled(comm, lambda: comm.Igatherv(data, spec, root=root), (data, spec))
    return [buffer[d : d + n] for d, n in zip(displs, sizes)]


def gather_bytes(comm: MPI.Comm, data: np.ndarray, root: int = 0) -> list[np.ndarray] | None:
    """Collective, polled, two rounds: every rank's bytes on ``root`` (None elsewhere)."""
    size = np.array([data.size], dtype=np.int64)
    sizes = np.empty(comm.size, dtype=np.int64)
    gather_rows(comm, size, sizes if comm.rank == root else None, root)
    parts = gatherv(comm, data, sizes, root)
    return parts if comm.rank == root else None


def gather_slots(comm: MPI.Comm, data: np.ndarray, root: int = 0) -> list[Any] | None:
    """Collective, polled, one round: on ``root``, each rank's (flags, length, bytes or None
    when they did not fit: :func:`regather`); None elsewhere. ``root``'s own bytes never
    travel, so however large they are they cost no second round."""
    width = slot_bytes(comm.size)
    mine = np.zeros(width, dtype=np.uint8)
    fill(mine, None if comm.rank == root else data)
    slots = np.empty((comm.size, width), dtype=np.uint8) if comm.rank == root else None
    gather_rows(comm, mine, slots, root)
    if slots is None:
        return None
    found = [read_slot(slot) for slot in slots]
    found[root] = (0, data.size, data)
    return found


def regather(comm: MPI.Comm, data: np.ndarray, slots: list[Any] | None) -> list[Any] | None:
    """The round after an answer said RESEND: every rank's bytes, whose lengths rank 0 read
    in the slots, in the form of :func:`gather_slots`."""
    sizes = None if slots is None else np.array([n for _, n, _ in slots], dtype=np.int64)
    parts = gatherv(comm, data, sizes, 0)
    return None if slots is None else [(0, part.size, part) for part in parts]


def scatter_bytes(
    comm: MPI.Comm, parts: Sequence[np.ndarray] | None, root: int = 0, flags: int = 0
) -> tuple[int, np.ndarray]:
    """Collective, polled: ``parts[r]`` (given on ``root``) to each rank r, with ``flags``:
    one round when every part sent fits its slot, else two. ``root`` keeps its own part, which
    never travels: however large it is (rank 0's view of new datasets holds every extent),
    it costs no second round."""
    width = slot_bytes(comm.size)
    slots = None
    if comm.rank == root:
        assert parts is not None and len(parts) == comm.size
        slots = answer_slots(parts, width, flags, root)
    mine = np.empty(width, dtype=np.uint8)
    rounds.scatter_rows(comm, slots, mine, root)
    return answer_read(comm, mine, parts, True, root)


def answer_slots(
    parts: Sequence[np.ndarray], width: int, flags: int, root: int | None
) -> np.ndarray:
    """The slots of answers ``parts`` (one per rank, ``root``'s own left out since it never
    travels; or, with ``root`` None, one for every rank), each with ``flags``, and MORE in every
    slot when one that travels does not fit."""
    sent = [p for r, p in enumerate(parts) if r != root]
    more = MORE if sent and max(p.size for p in sent) > width - HEAD else 0
    slots = np.zeros((len(parts), width), dtype=np.uint8)
    for rank, (slot, part) in enumerate(zip(slots, parts)):
        fill(slot, None if rank == root else part, flags | more)
    return slots


def answer_read(
    comm: MPI.Comm,
    slot: np.ndarray,
    parts: Sequence[np.ndarray] | None,
    per_rank: bool,
    root: int,
) -> tuple[int, np.ndarray]:
    """This rank's (flags, answer) from the slot it received of ``root``'s ``parts`` (given on
    ``root``: one per rank with ``per_rank``, else one for all): the answers that did not fit
    come in a second round at their exact sizes, scattered or broadcast; ``root`` keeps its
    own, which never travels."""
    flags, size, got = read_slot(slot)
    if got is None:
        if per_rank:
            whole: list[Any] | None = None
            if comm.rank == root:
                assert parts is not None
                sizes = np.array([0 if r == root else p.size for r, p in enumerate(parts)])
                sent = [p for r, p in enumerate(parts) if r != root]
                whole = [np.concatenate(sent), sizes, displacements(sizes), MPI.BYTE]
            got = np.empty(0 if comm.rank == root else size, dtype=np.uint8)
            polled(comm, lambda: comm.Iscatterv(whole, got, root=root), (whole, got))
        else:
            if comm.rank == root:
                assert parts is not None
                got = parts[0]
            else:
                got = np.empty(size, dtype=np.uint8)
            broadcast(comm, got, root)
    if comm.rank == root:
        assert parts is not None
        return flags, parts[root if per_rank else 0]
    return flags, got


def bcast_bytes(
    comm: MPI.Comm, data: np.ndarray | None, root: int = 0, flags: int = 0
) -> tuple[int, np.ndarray]:
    """Collective, polled: ``root``'s bytes and ``flags`` on every rank; one round when the
    bytes fit a slot, else two."""
    slot = np.zeros(slot_bytes(comm.size), dtype=np.uint8)
    if comm.rank == root:
        fill(slot, data, flags)
    broadcast(comm, slot, root)
    return answer_read(comm, slot, None if data is None else [data], False, root)

"""Collective checks: a failure on any rank becomes the same exception on every rank, and a
collective call that not every rank makes ends in an error instead of a hang.

Rules (see STYLE.md): validate locally, agree globally; work for one rank goes through
:func:`root_only` or :func:`root_decides`, which broadcast the result or the exception.

Every collective call of a file starts with one agreement round (:func:`agree` with a
:class:`Call`): a non-blocking allreduce of the error flag and of hashes of the call's name
and number and of its arguments, polled (:mod:`.rounds`). Ranks whose calls or arguments
differ all raise CollectiveMismatchError naming them; ranks that wait longer than
``H5SUBFILE_COLLECTIVE_TIMEOUT`` seconds raise CollectiveTimeoutError naming the ranks that
never arrived (docs/ARCHITECTURE.md, "Collective discipline"). The object collectives
(:func:`gather`, :func:`bcast`, :func:`allgather`) and rank 0's protocols (:func:`root_only`,
:func:`root_decides`) are polled rounds too; where the rounds are stars, a call's question
to rank 0 rides with its agreement round (:func:`agree_asking`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from mpi4py import MPI

from .. import errors
from . import rounds
from .failures import Failure, describe, exception_for, rebuild
from .rounds import (  # noqa: F401 - Call, waited and the timeout names are this module's API too
    DEFAULT_TIMEOUT,
    GRACE,
    TIMEOUT_VARIABLE,
    Call,
    allgather_array,
    allreduce,
    broadcast,
    by_value,
    call_hash,
    channel_of,
    collective_timeout,
    files_text,
    gather_rows,
    polled,
    ranks_text,
    waited,
)

T = TypeVar("T")


@dataclass(frozen=True)
class _Arrival:
    """What each rank says of itself when the agreement round finds a problem."""

    call: str  # Call.describe(), or "" for a round inside a call
    file: str
    args: str | None
    failure: Failure | None
    agreed: bool  # its error was already agreed on every rank


def out_of_step(arrivals: Sequence[_Arrival]) -> errors.CollectiveMismatchError:
    """The error of ranks that made different collective calls; identical on every rank."""
    parts = []
    for (call, failure), ranks in by_value([(a.call, a.failure) for a in arrivals]):
        text = f"[{ranks_text(ranks)}] {call or 'a step inside an earlier call'}"
        if failure is not None and failure[1] not in call:
            text += f", failing with {failure[0]}: {failure[1]}"
        parts.append(text)
    exc = errors.CollectiveMismatchError(
        f"collective calls out of step{files_text([a.file for a in arrivals])}: {'; '.join(parts)}. "
        "Every rank must make the same collective calls in the same order (a rank skipped or "
        "reordered a call, or left the file after an error of its own)"
    )
    exc.collective = exc.out_of_step = True
    return exc


def _crossed(ranks: Sequence[int], mine: _Arrival) -> errors.CollectiveMismatchError:
    """The error of a round whose exchange met another collective operation on some ranks."""
    exc = errors.CollectiveMismatchError(
        f"collective calls out of step{files_text([mine.file])}: while this rank was in "
        f"{mine.call or 'a step inside a call'}, {ranks_text(ranks)} made another collective call "
        "on the same communicator (not one of this file's). Every rank must make the same "
        "collective calls in the same order; the communicator is now unusable: end the job"
    )
    exc.collective, exc.out_of_step = False, True  # the other ranks may be anywhere
    return exc


#: How many different argument lists a mismatch error shows (each with its ranks).
SHOWN_ARGUMENTS = 4


def _argument_mismatch(arrivals: Sequence[_Arrival]) -> errors.CollectiveMismatchError:
    """The error of ranks that made the same call with different arguments (ranks that failed
    before they had arguments to compare are left out); identical on every rank."""
    found = by_value([a.args if a.failure is None else None for a in arrivals])
    found = [(args, ranks) for args, ranks in found if args is not None]
    shown = "; ".join(f"[{ranks_text(r)}] {args}" for args, r in found[:SHOWN_ARGUMENTS])
    if len(found) > SHOWN_ARGUMENTS:
        shown += f"; and {len(found) - SHOWN_ARGUMENTS} more different argument lists"
    exc = errors.CollectiveMismatchError(
        f"collective call {arrivals[0].call} made with different arguments on different "
        f"ranks{files_text([a.file for a in arrivals])}: {shown}"
    )
    exc.collective = True
    return exc


def agree(
    comm: MPI.Comm,
    error: BaseException | None,
    call: Call | None = None,
    value: int = 0,
    patient: bool = False,
) -> int:
    """Collective: raise the same exception on every rank if ``error`` is set on any rank.

    With ``call`` (the first round of a collective call), also raise CollectiveMismatchError
    on every rank when the ranks are in different calls (or the same call with different
    ``args``, compared among the ranks without an ``error``: a rank that failed raises its
    error instead). Waiting ranks poll; after ``H5SUBFILE_COLLECTIVE_TIMEOUT`` seconds they raise
    CollectiveTimeoutError. The common case (no error, same call) costs one small allreduce,
    which also carries ``value``: every rank returns the largest ``value`` of any rank
    (a non-negative int; 0 when nobody gives one). ``patient``: the ranks wait for one rank's
    long work, and sleep longer between tests (``rounds.PATIENT_SLEEP``).
    """
    return agree_asking(comm, error, call, None, value, patient)[0]


def agree_asking(
    comm: MPI.Comm,
    error: BaseException | None,
    call: Call | None,
    question: Question | None,
    value: int = 0,
    patient: bool = False,
) -> tuple[int, Callable[[], Any]]:
    """Collective: :func:`agree`, then ``question`` asked of rank 0 as :func:`root_decides`
    asks it. Returns agree's value and the function (collective, called by every rank next)
    that returns this rank's answer or raises the question's error: so the caller tells the
    agreement's errors from the answer's. Where the rounds are stars, the question rides
    with the agreement and rank 0 answers it in the same round once every rank agrees: one
    round instead of agree's and root_decides'. Every agreement round in a star has that
    one shape, with or without a question, so ranks in different calls still meet in it."""
    agreed = isinstance(error, errors.H5SubfileError) and error.collective
    flag = 0 if error is None else 2 if agreed else 1
    key = 0 if call is None else call_hash(f"{call.name}\0{call.seq}")
    args = 0 if call is None or call.args is None else call_hash(call.args)
    sent = np.array([flag, key, -key, args, -args, value], dtype=np.int64)
    answered: Callable[[], Any] | None = None
    if channel_of(comm).star:
        got, answered = _star_agreement(comm, sent, call, patient, question)
    else:
        got = allreduce(comm, sent, call=call, patient=patient)
    if _in_agreement(got):
        if answered is None and question is not None:
            asked = question

            def answered() -> Any:
                return root_decides(comm, asked.local, asked.error, asked.decide, asked.per_rank)

        return int(got[5]), answered or (lambda: None)  # no question: no answer
    mine = _Arrival(
        "" if call is None else call.describe(),
        "" if call is None else call.file,
        None if call is None else call.args,
        None if error is None else describe(error),
        agreed,
    )
    arrivals: list[_Arrival] = comm.allgather(mine)
    crossed = [r for r, a in enumerate(arrivals) if not isinstance(a, _Arrival)]
    if crossed:
        raise _crossed(crossed, mine) from error
    if got[1] != -got[2]:
        raise out_of_step(arrivals) from error
    # A rank that failed has no arguments worth comparing: its error is the one to raise,
    # unless the others disagree among themselves too.
    if got[3] != -got[4] and len({a.args for a in arrivals if a.failure is None}) > 1:
        raise _argument_mismatch(arrivals) from error
    failures = [(rank, a.failure) for rank, a in enumerate(arrivals) if a.failure is not None]
    if error is not None and all(a.agreed and a.failure == mine.failure for a in arrivals):
        raise error  # already the same on every rank: raised as itself
    raise rebuild(failures, comm.size) from error


def _in_agreement(got: np.ndarray) -> bool:
    """Whether an agreement round's reduced [flag, h, -h, a, -a, value] says: no rank failed,
    every rank in the same call with the same arguments."""
    return bool(got[0] == 0 and got[1] == -got[2] and got[3] == -got[4])


def _star_agreement(
    comm: MPI.Comm,
    sent: np.ndarray,
    call: Call | None,
    patient: bool,
    question: Question | None,
) -> tuple[np.ndarray, Callable[[], Any] | None]:
    """An agreement round in a star (:func:`rounds.ask_rows`): each rank sends rank 0 its
    vector ``sent`` and a question's slot (empty without one); rank 0 reduces the vectors
    with MAX and, when they agree and the call asks a question, answers it. Returns the
    reduced vector, and the function that finishes the question (None unless answered)."""
    head = sent.nbytes
    asking = None if question is None else _Asking(comm, question)
    width = slot_bytes(comm.size)
    mine = np.zeros(head + width, dtype=np.uint8)
    mine[:head] = sent.view(np.uint8)
    if asking is not None:
        mine[head:] = asking.slot()
    got = np.empty_like(mine)

    def answer(rows: np.ndarray) -> np.ndarray:
        reduced = rows[:, :head].copy().view(sent.dtype).max(axis=0)
        if asking is None or not _in_agreement(reduced):
            slots = np.zeros((1, width), dtype=np.uint8)  # nothing asked: one row for all
        else:
            slots = asking.rows(rows[:, head:])
        return np.hstack([np.broadcast_to(reduced.view(np.uint8), (len(slots), head)), slots])

    on_root = answer if comm.rank == 0 else None
    rounds.ask_rows(comm, mine, got, on_root, call=call, patient=patient)
    reduced = got[:head].copy().view(sent.dtype)
    if asking is None or not _in_agreement(reduced):
        return reduced, None
    answers = asking
    return reduced, lambda: answers.answered(got[head:])


# Object collectives, polled: with more ranks than cores, MPI's blocking collectives spin and
# starve the ranks that still work (a blocking barrier of 128 ranks on 2 cores took 1.6 s, a
# polled round 0.12 s). Each round costs every rank a wake-up, so bytes travel in fixed-size
# slots: a message that fits its slot (the common case: calls' arguments, answers, catalogues of
# a few datasets) takes one round; a larger one a second round of its exact size. The
# ``_bytes`` forms move objects pickled by the caller, who can then turn a pickling error into
# an answer.
SLOT_BUDGET = 1 << 22  # bytes of slots rank 0 holds for one round, whatever the ranks
SLOT_MAX, SLOT_MIN = 4096, 64
_HEAD = 16  # a slot starts with two int64: its flags and the message's length
MORE = 1  # flag: the bytes did not fit (on one rank at least): a second round carries them
RESEND = 2  # flag of an answer: a gathered message did not fit; every rank sends it again


def slot_bytes(size: int) -> int:
    """The slot of one rank in a round among ``size`` ranks: 4 KiB up to 1024 ranks, then
    smaller, so that rank 0 holds at most 4 MiB of slots (never under 64 bytes)."""
    return max(SLOT_MIN, min(SLOT_MAX, SLOT_BUDGET // max(size, 1))) // 8 * 8


def _fill(slot: np.ndarray, data: np.ndarray | None, flags: int = 0) -> None:
    """Write ``data`` into ``slot``: flags, length, and the bytes when they fit (they are not
    copied when ``flags`` already says MORE)."""
    size = 0 if data is None else data.size
    fits = not flags & MORE and size <= slot.size - _HEAD
    slot[:_HEAD].view(np.int64)[:] = (flags | (0 if fits else MORE), size)
    if fits and size:
        assert data is not None
        slot[_HEAD : _HEAD + size] = data


def _read_slot(slot: np.ndarray) -> tuple[int, int, np.ndarray | None]:
    """(flags, length, the bytes, or None when they come in a second round)."""
    flags, size = (int(v) for v in slot[:_HEAD].view(np.int64))
    return flags, size, None if flags & MORE else slot[_HEAD : _HEAD + size]


def _pickled(obj: Any) -> np.ndarray:
    """``obj`` as the bytes the object collectives move."""
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)


def _unpickled(data: np.ndarray) -> Any:
    """The object whose bytes (:func:`_pickled`) ``data`` holds."""
    return pickle.loads(data.data)


def _displacements(sizes: np.ndarray) -> np.ndarray:
    displs = np.zeros_like(sizes)
    np.cumsum(sizes[:-1], out=displs[1:])
    return displs


def _gatherv(comm: MPI.Comm, data: np.ndarray, sizes: np.ndarray | None, root: int) -> list[Any]:
    """One round: every rank's bytes on ``root``, whose ``sizes`` are known (else [])."""
    if comm.rank != root:
        polled(comm, lambda: comm.Igatherv(data, None, root=root), data)
        return []
    assert sizes is not None
    displs = _displacements(sizes)
    buffer = np.empty(int(sizes.sum()), dtype=np.uint8)
    spec = [buffer, sizes, displs, MPI.BYTE]
    polled(comm, lambda: comm.Igatherv(data, spec, root=root), (data, spec))
    return [buffer[d : d + n] for d, n in zip(displs, sizes)]


def _gather_bytes(comm: MPI.Comm, data: np.ndarray, root: int = 0) -> list[np.ndarray] | None:
    """Collective, polled, two rounds: every rank's bytes on ``root`` (None elsewhere)."""
    size = np.array([data.size], dtype=np.int64)
    sizes = np.empty(comm.size, dtype=np.int64)
    gather_rows(comm, size, sizes if comm.rank == root else None, root)
    parts = _gatherv(comm, data, sizes, root)
    return parts if comm.rank == root else None


def _gather_slots(comm: MPI.Comm, data: np.ndarray, root: int = 0) -> list[Any] | None:
    """Collective, polled, one round: on ``root``, each rank's (flags, length, bytes or None
    when they did not fit: :func:`_regather`); None elsewhere. ``root``'s own bytes never
    travel, so however large they are they cost no second round."""
    width = slot_bytes(comm.size)
    mine = np.zeros(width, dtype=np.uint8)
    _fill(mine, None if comm.rank == root else data)
    slots = np.empty((comm.size, width), dtype=np.uint8) if comm.rank == root else None
    gather_rows(comm, mine, slots, root)
    if slots is None:
        return None
    found = [_read_slot(slot) for slot in slots]
    found[root] = (0, data.size, data)
    return found


def _regather(comm: MPI.Comm, data: np.ndarray, slots: list[Any] | None) -> list[Any] | None:
    """The round after an answer said RESEND: every rank's bytes, whose lengths rank 0 read
    in the slots, in the form of :func:`_gather_slots`."""
    sizes = None if slots is None else np.array([n for _, n, _ in slots], dtype=np.int64)
    parts = _gatherv(comm, data, sizes, 0)
    return None if slots is None else [(0, part.size, part) for part in parts]


def _scatter_bytes(
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
        slots = _answer_slots(parts, width, flags, root)
    mine = np.empty(width, dtype=np.uint8)
    rounds.scatter_rows(comm, slots, mine, root)
    return _answer_read(comm, mine, parts, True, root)


def _answer_slots(
    parts: Sequence[np.ndarray], width: int, flags: int, root: int | None
) -> np.ndarray:
    """The slots of answers ``parts`` (one per rank, ``root``'s own left out since it never
    travels; or, with ``root`` None, one for every rank), each with ``flags``, and MORE in every
    slot when one that travels does not fit."""
    sent = [p for r, p in enumerate(parts) if r != root]
    more = MORE if sent and max(p.size for p in sent) > width - _HEAD else 0
    slots = np.zeros((len(parts), width), dtype=np.uint8)
    for rank, (slot, part) in enumerate(zip(slots, parts)):
        _fill(slot, None if rank == root else part, flags | more)
    return slots


def _answer_read(
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
    flags, size, got = _read_slot(slot)
    if got is None:
        if per_rank:
            whole: list[Any] | None = None
            if comm.rank == root:
                assert parts is not None
                sizes = np.array([0 if r == root else p.size for r, p in enumerate(parts)])
                sent = [p for r, p in enumerate(parts) if r != root]
                whole = [np.concatenate(sent), sizes, _displacements(sizes), MPI.BYTE]
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


def _bcast_bytes(
    comm: MPI.Comm, data: np.ndarray | None, root: int = 0, flags: int = 0
) -> tuple[int, np.ndarray]:
    """Collective, polled: ``root``'s bytes and ``flags`` on every rank; one round when the
    bytes fit a slot, else two."""
    slot = np.zeros(slot_bytes(comm.size), dtype=np.uint8)
    if comm.rank == root:
        _fill(slot, data, flags)
    broadcast(comm, slot, root)
    return _answer_read(comm, slot, None if data is None else [data], False, root)


def barrier(comm: MPI.Comm) -> None:
    """Collective, polled: return once every rank has arrived (CollectiveTimeoutError after the
    timeout). Where ranks must start timed work together: with more ranks than cores, MPI's
    blocking barrier spins, and ranks left it 280-400 ms apart at 128 ranks on 2 cores (a
    polled one: 40-220 ms), which the first timed round then counted as its own."""
    rounds.barrier(comm)


def gather(comm: MPI.Comm, obj: Any, root: int = 0) -> list[Any] | None:
    """Collective, polled: every rank's ``obj`` on ``root`` (None elsewhere)."""
    parts = _gather_bytes(comm, _pickled(obj), root)
    return None if parts is None else [_unpickled(p) for p in parts]


def bcast(comm: MPI.Comm, obj: Any, root: int = 0) -> Any:
    """Collective, polled: ``root``'s ``obj`` on every rank (``root`` keeps its own)."""
    _, data = _bcast_bytes(comm, _pickled(obj) if comm.rank == root else None, root)
    return obj if comm.rank == root else _unpickled(data)


def allgather(comm: MPI.Comm, obj: Any) -> list[Any]:
    """Collective, polled: every rank's ``obj`` on every rank; one round when every rank's
    bytes fit a slot (each rank sees every slot, so all know whether a second is needed)."""
    data = _pickled(obj)
    width = slot_bytes(comm.size)
    mine = np.zeros(width, dtype=np.uint8)
    _fill(mine, data)
    slots = np.empty((comm.size, width), dtype=np.uint8)
    rounds.allgather_rows(comm, mine, slots)
    read = [_read_slot(slot) for slot in slots]
    inlines = [inline for _, _, inline in read if inline is not None]
    if len(inlines) == comm.size:
        return [_unpickled(inline) for inline in inlines]
    sizes = np.array([size for _, size, _ in read], dtype=np.int64)
    displs = _displacements(sizes)
    buffer = np.empty(int(sizes.sum()), dtype=np.uint8)
    spec = [buffer, sizes, displs, MPI.BYTE]
    polled(comm, lambda: comm.Iallgatherv(data, spec), (data, spec))
    return [_unpickled(buffer[d : d + n]) for d, n in zip(displs, sizes)]


def root_only(comm: MPI.Comm, fn: Callable[[], T], root: int = 0) -> T:
    """Collective: run ``fn`` on ``root`` only; every rank returns its result or raises its error.
    The others wait polling (they sleep while ``root`` works)."""
    outcome = _Outcome.of(fn) if comm.rank == root else _Outcome()
    return outcome.delivered(comm, _bcast_bytes(comm, outcome.data, root)[1], root)


@dataclass
class _Outcome:
    """What ``fn`` gave on the root of :func:`root_only` or :func:`root_first`: its pickled
    (ok, result or error) as sent, and its result or the original exception (kept as the
    ``__cause__`` of the error raised on the root). Empty on the other ranks."""

    data: np.ndarray | None = None
    result: Any = None
    cause: BaseException | None = None

    @classmethod
    def of(cls, fn: Callable[[], Any]) -> _Outcome:
        try:  # a result that cannot be pickled is an error like any other
            result = fn()
            return cls(_pickled((True, result)), result)
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank by delivered()
            return cls(_pickled((False, describe(exc))), cause=exc)

    def delivered(self, comm: MPI.Comm, got: np.ndarray, root: int) -> Any:
        """The result on every rank (the root keeps its own object, unpickling nothing), or
        root's error raised."""
        if comm.rank == root and self.cause is None:
            return self.result
        ok, value = _unpickled(got)
        if not ok:
            raise rebuild([(root, value)], 1) from self.cause
        return value


def root_first(
    comm: MPI.Comm, fn: Callable[[], T], error: BaseException | None, call: Call, root: int = 0
) -> T:
    """Collective: a call whose work is ``root``'s alone and safe to throw away (reading a
    file): ``root`` runs ``fn`` before the call's agreement round, while the other ranks
    arrive; the round also tells every rank the size of its pickled result, which then comes
    in one broadcast of that size. Every rank returns the result or raises ``root``'s error,
    or the round's (an ``error`` on any rank, calls or arguments that differ: ``fn``'s result
    is then dropped). Two rounds whatever the result's size; :func:`agree` then
    :func:`root_only` take two or three. The agreement round is *patient*: the others wait
    out ``root``'s work sleeping longer between tests, leaving it the CPU."""
    outcome = _Outcome.of(fn) if comm.rank == root and error is None else _Outcome()
    data = outcome.data
    size = agree(comm, error, call, 0 if data is None else data.size, patient=True)
    got = data if data is not None else np.empty(size, dtype=np.uint8)
    broadcast(comm, got, root)
    return outcome.delivered(comm, got, root)


def root_decides(
    comm: MPI.Comm,
    local: Any,
    local_error: BaseException | None,
    decide: Callable[[list[Any]], Any],
    per_rank: bool = True,
) -> Any:
    """Collective: gather every rank's ``local`` on rank 0, which decides for all.

    With ``per_rank`` ``decide`` returns one answer per rank (scattered); otherwise one answer for
    everybody (broadcast). Local errors from any rank (a ``local`` that cannot be sent is one),
    and any exception raised by ``decide`` (or an answer that cannot be sent), become the same
    exception on every rank. O(P) messages in total, polled: waiting ranks sleep. One round
    when the rounds are stars and every message fits its slot, two otherwise
    (:func:`rounds.ask_rows`); a rank's message larger than its slot costs two more.
    """
    asking = _Asking(comm, Question(local, decide, per_rank, local_error))
    got = np.empty(slot_bytes(comm.size), dtype=np.uint8)
    on_root = asking.rows if comm.rank == 0 else None
    rounds.ask_rows(comm, asking.slot(), got, on_root, same_for_all=not per_rank)
    return asking.answered(got)


@dataclass(frozen=True)
class Question:
    """What a collective call asks rank 0 (:func:`root_decides`' arguments): every rank's
    ``local``; rank 0's ``decide`` answers them all, one answer per rank with ``per_rank``,
    else one for all. :func:`agree` can carry it in the agreement round (``question``)."""

    local: Any
    decide: Callable[[list[Any]], Any]
    per_rank: bool = True
    error: BaseException | None = None  # this rank's: decide is not called, every rank raises


class _Asking:
    """A :class:`Question` on its way: the bytes this rank sends rank 0 in its slot, rank 0's
    answers to the slots it gets (:meth:`rows`), and each rank's answer from the slot it gets
    back (:meth:`answered`, with the rounds that bring what did not fit a slot)."""

    def __init__(self, comm: MPI.Comm, question: Question) -> None:
        self.comm, self.question = comm, question
        failure = None if question.error is None else describe(question.error)
        try:
            self.sent = _pickled((question.local, failure))
        except Exception as exc:  # noqa: BLE001 - agreed by the answer, like a local error
            self.sent = _pickled((None, describe(exc)))
        self.width = slot_bytes(comm.size)
        self.asked: list[Any] = []  # rank 0: each rank's slot as read
        self.parts: list[np.ndarray] = []  # rank 0: the answers' bytes
        self.cause: BaseException | None = None  # rank 0: what decide raised, as __cause__

    def slot(self) -> np.ndarray:
        """This rank's slot (rank 0's own bytes never travel)."""
        mine = np.zeros(self.width, dtype=np.uint8)
        _fill(mine, None if self.comm.rank == 0 else self.sent)
        return mine

    def _decided(self, slots: list[Any]) -> list[np.ndarray]:
        question = self.question
        gathered = [_unpickled(inline) for _, _, inline in slots]
        answers, self.cause = _decided(gathered, question.decide, question.per_rank, self.comm.size)
        return answers

    def rows(self, slots: np.ndarray) -> np.ndarray:
        """Rank 0: the answers' slots (one per rank, or one for all) to every rank's slot: the
        answers, or RESEND when some rank's bytes did not fit its slot."""
        found = [_read_slot(slot) for slot in slots]
        found[0] = (0, self.sent.size, self.sent)
        self.asked = found
        per_rank = self.question.per_rank
        flags = RESEND if any(inline is None for _, _, inline in found) else 0
        if flags:
            self.parts = [np.empty(0, dtype=np.uint8)] * (self.comm.size if per_rank else 1)
        else:
            self.parts = self._decided(found)
        return _answer_slots(self.parts, self.width, flags, 0 if per_rank else None)

    def answered(self, got: np.ndarray) -> Any:
        """Collective: this rank's answer from the slot ``got`` it was sent, or the error every
        rank raises (after one more round for answers larger than their slots; after two more
        and a new answer when rank 0 asked for the bytes again, RESEND)."""
        comm, per_rank = self.comm, self.question.per_rank
        parts = self.parts if comm.rank == 0 else None
        flags, data = _answer_read(comm, got, parts, per_rank, 0)
        if flags & RESEND:  # some rank's bytes did not fit its slot: every rank sends them again
            slots = _regather(comm, self.sent, self.asked if comm.rank == 0 else None)
            answers = None if slots is None else self._decided(slots)
            if per_rank:
                _, data = _scatter_bytes(comm, answers, 0)
            else:
                _, data = _bcast_bytes(comm, None if answers is None else answers[0], 0)
        ok, value = _unpickled(data)
        if not ok:
            error = exception_for(value)
            error.collective = True
            raise error from self.cause
        return value


def one_slot_bytes(size: int) -> int:
    """The most bytes a rank's pickled message may hold to travel in one round among ``size``
    ranks (what :func:`root_collects` requires of its callers)."""
    return slot_bytes(size) - _HEAD


def root_collects(
    comm: MPI.Comm,
    local: Any,
    local_error: BaseException | None,
    act: Callable[[list[Any]], None],
) -> BaseException | None:
    """Collective, one round, with no answer: every rank's ``local`` (or its error) to rank 0,
    which runs ``act`` on them when no rank failed. Returns the error this rank must bring to
    a later round of the same call, where the caller agrees it (this round raises nothing):
    its own ``local_error``; on rank 0 also what ``act`` raised. A rank whose message could
    not be sent (pickling, or more than :func:`one_slot_bytes`: the caller keeps ``local``
    that small; an error's message is shortened to fit) brings that error instead.
    """
    room = one_slot_bytes(comm.size)
    try:
        sent = _pickled((local, None if local_error is None else describe(local_error)))
        if sent.size > room and comm.rank != 0:
            if local_error is None:
                raise errors.H5SubfileError(
                    f"rank {comm.rank}: {sent.size} bytes to send to rank 0, more than the "
                    f"{room} one round carries"
                )
            sent = _shortened(local, describe(local_error), room)
    except Exception as exc:  # noqa: BLE001 - brought to the caller's next round
        local_error = exc
        sent = _shortened(None, describe(exc), room)
    slots = _gather_slots(comm, sent, root=0)
    if slots is None or local_error is not None:
        return local_error
    values = []
    for _, _, inline in slots:
        if inline is None:
            return None  # a rank whose message did not fit brings its error
        value, failure = _unpickled(inline)
        if failure is not None:
            return None  # the ranks that failed bring their errors
        values.append(value)
    try:
        act(values)
    except Exception as exc:  # noqa: BLE001 - brought to the caller's next round
        return exc
    return None


def _shortened(local: Any, failure: Failure, room: int) -> np.ndarray:
    """``(local, failure)`` pickled in at most ``room`` bytes: the failure's message cut
    (its class name kept) until it fits."""
    name, message = failure
    while True:
        sent = _pickled((local, (name, message)))
        if sent.size <= room or not message:
            return sent
        message = message[: len(message) // 2]


def _decided(
    gathered: list[tuple[Any, Failure | None]],
    decide: Callable[[list[Any]], Any],
    per_rank: bool,
    size: int,
) -> tuple[list[np.ndarray], BaseException | None]:
    """Rank 0 of :func:`root_decides`: the pickled answers (one per rank, or one for all),
    and the exception they carry, if any."""
    try:
        failures = [(r, f) for r, (_, f) in enumerate(gathered) if f is not None]
        if failures:
            raise rebuild(failures, size)
        decided = decide([value for value, _ in gathered])
        if not per_rank:
            return [_pickled((True, decided))], None
        if len(decided) != size:
            raise AssertionError("root_decides: one answer per rank expected")
        return [_pickled((True, a)) for a in decided], None
    except Exception as exc:  # noqa: BLE001 - re-raised on every rank by the caller
        failure = _pickled((False, describe(exc)))
        return [failure] * (size if per_rank else 1), exc


def check_same(call: str, signatures: list[Any]) -> None:
    """Raise CollectiveMismatchError unless every rank passed the same signature to ``call``."""
    reference = signatures[0]
    differing = [r for r, s in enumerate(signatures) if s != reference]
    if differing:
        shown = "; ".join(f"rank {r}: {signatures[r]!r}" for r in differing[:4])
        more = f" (and {len(differing) - 4} more rank(s))" if len(differing) > 4 else ""
        raise errors.CollectiveMismatchError(
            f"collective call {call} made with different arguments on different ranks: "
            f"rank 0: {reference!r}; {shown}{more}"
        )

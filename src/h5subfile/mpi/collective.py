"""Collective checks: a failure on any rank becomes the same exception on every rank, and a
collective call that not every rank makes ends in an error instead of a hang.

Rules (see STYLE.md): validate locally, agree globally; work for one rank goes through
:func:`root_only` or :func:`root_decides`, which broadcast the result or the exception.

Every collective call of a file starts with one agreement round (:func:`agree` with a
:class:`Call`): a non-blocking allreduce of the error flag and of hashes of the call's name
and number and of its arguments, polled (:mod:`.rounds`). Ranks whose calls or arguments
differ all raise CollectiveMismatchError naming them; ranks that wait longer than
``H5SUBFILE_COLLECTIVE_TIMEOUT`` seconds raise CollectiveTimeoutError naming the ranks that
never arrived (docs/DESIGN-NOTES.md, "The agreement round" and "Timeouts"). The object collectives
(:func:`gather`, :func:`bcast`, :func:`allgather`) and rank 0's protocols (:func:`root_only`,
:func:`root_decides`) are polled rounds too; where the rounds are stars, a call's question
to rank 0 rides with its agreement round (:func:`agree_asking`).

Rank 0's protocols, each one outcome on every rank: :func:`root_only` (rank 0's work, its
result or exception broadcast), :func:`root_first` (rank 0's work done before the agreement
round, which carries its size, then one broadcast of exactly that size), :func:`root_decides`
(every rank's input to rank 0, which answers each rank or all), :func:`root_collects` (every
rank's message to rank 0 in one round with no answer: each rank returns its error for a later
round of the call to agree) and :func:`check_same` (one signature on every rank).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from mpi4py import MPI

from .. import errors
from . import rounds
from .calls import Call, by_value, call_hash, files_text, ranks_text
from .failures import Failure, describe, exception_for, rebuild
from .rounds import (  # noqa: F401 - waited and the timeout names are this module's API too
    DEFAULT_TIMEOUT,
    GRACE,
    TIMEOUT_VARIABLE,
    allgather_array,
    allreduce,
    broadcast,
    channel_of,
    collective_timeout,
    gather_rows,
    polled,
    waited,
)
from .slots import (
    RESEND,
    answer_read,
    answer_slots,
    bcast_bytes,
    displacements,
    fill,
    gather_bytes,
    gather_slots,
    one_slot_bytes,
    pickled,
    read_slot,
    regather,
    scatter_bytes,
    slot_bytes,
    unpickled,
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
    earlier: tuple[str, ...] = ()  # the metadata calls it made since the last collective call


def out_of_step(arrivals: Sequence[_Arrival]) -> errors.CollectiveMismatchError:
    """The error of ranks that made different collective calls; identical on every rank."""
    files = tuple(sorted({a.file for a in arrivals if a.file}))
    several = len(files) > 1
    parts = []
    lead = _metadata_leads([a.earlier for a in arrivals])
    seen = [(lead[r], a.call, a.file, a.failure) for r, a in enumerate(arrivals)]
    for (before, call, file, failure), ranks in by_value(seen):
        text = f"[{ranks_text(ranks)}] {before}{call or 'a step inside an earlier call'}"
        if several and file:
            text += f" on {file}"
        if failure is not None and failure[1] not in call:
            text += f", failing with {failure[0]}: {failure[1]}"
        parts.append(text)
    cause = "a rank skipped or reordered a call, or left the file after an error of its own"
    if any(lead):
        cause += (
            "; metadata calls (create_group, setting attributes) make no round of their own: "
            "they are compared at the next collective call"
        )
    if several:
        cause = (
            "files open together on one communicator share its collective calls: every rank "
            "must call them on the same file at the same time; each of these files is abandoned"
        )
    exc = errors.CollectiveMismatchError(
        f"collective calls out of step{files_text(list(files))}: {'; '.join(parts)}. "
        f"Every rank must make the same collective calls in the same order ({cause})"
    )
    exc.collective = exc.out_of_step = True
    exc.files = files
    return exc


def _metadata_leads(earlier: Sequence[tuple[str, ...]]) -> list[str]:
    """What each rank's part of an out-of-step message starts with: "" when every rank made
    the same metadata calls since the last collective call, else the first one that differs
    ("create_group /g, then "; "no metadata call, then " where a rank made fewer)."""
    if len(set(earlier)) == 1:
        return [""] * len(earlier)
    index = 0
    while all(index < len(c) for c in earlier) and len({c[index] for c in earlier}) == 1:
        index += 1
    alike = f"{index} metadata call(s) alike, then " if index else ""
    return [
        f"{alike}{calls[index]}, then " if index < len(calls) else f"{alike}no metadata call, then "
        for calls in earlier
    ]


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
) -> tuple[int, Callable[[], Any], bool]:
    """Collective: :func:`agree`, then ``question`` asked of rank 0 as :func:`root_decides`
    asks it. Returns agree's value, the function (collective, called by every rank next)
    that returns this rank's answer or raises the question's error (so the caller tells the
    agreement's errors from the answer's), and whether the ranks' ``call.values`` differ
    (the values of the metadata calls before it; their structures, ``call.earlier``, must
    match like the call's name). Where the rounds are stars, the question rides
    with the agreement and rank 0 answers it in the same round once every rank agrees: one
    round instead of agree's and root_decides'. Every agreement round in a star has that
    one shape, with or without a question, so ranks in different calls still meet in it."""
    agreed = isinstance(error, errors.H5SubfileError) and error.collective
    flag = 0 if error is None else 2 if agreed else 1
    key = 0
    if call is not None:
        key = call_hash(f"{call.name}\0{call.seq}\0{call.file}\0{call.earlier}")
    args = 0 if call is None or call.args is None else call_hash(call.args)
    values = 0 if call is None else call.values
    sent = np.array([flag, key, -key, args, -args, value, values, -values], dtype=np.int64)
    answered: Callable[[], Any] | None = None
    if channel_of(comm).star:
        try:
            got, answered = _star_agreement(comm, sent, call, patient, question)
        except errors.CollectiveTimeoutError as exc:
            exc.asked = question is not None  # this rank's part went with the round
            raise
    else:
        got = allreduce(comm, sent, call=call, patient=patient)
    if _in_agreement(got):
        differ = bool(got[6] != -got[7])
        if question is None:
            return int(got[5]), lambda: None, differ  # no question: no answer
        if answered is None:
            asked = question

            def answered() -> Any:
                if not asked.gathers:
                    return _root_answers(comm, asked)
                return root_decides(comm, asked.local, asked.error, asked.decide, asked.per_rank)

        return int(got[5]), _after_agreement(answered), differ
    mine = _Arrival(
        "" if call is None else call.describe(),
        "" if call is None else call.file,
        None if call is None else call.args,
        None if error is None else describe(error),
        agreed,
        () if call is None else call.earlier_calls,
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


def _after_agreement(answered: Callable[[], Any]) -> Callable[[], Any]:
    """``answered``, a timeout in its rounds marked ``asked`` and ``agreed``: every rank had
    entered the call and this rank's part of the question may have reached rank 0."""

    def finished() -> Any:
        try:
            return answered()
        except errors.CollectiveTimeoutError as exc:
            exc.asked = exc.agreed = True
            raise

    return finished


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
# starve the ranks that still work (docs/BENCHMARKS.md, *Cost of a collective call*). Each
# round costs every rank a wake-up, so bytes travel in fixed-size slots (:mod:`.slots`): one
# round when they fit.
def barrier(comm: MPI.Comm) -> None:
    """Collective, polled: return once every rank has arrived (CollectiveTimeoutError after the
    timeout). Where ranks must start timed work together: with more ranks than cores, MPI's
    blocking barrier spins, and ranks leave it far apart, a spread the first timed round would
    count as its own (docs/BENCHMARKS-HISTORY.md, *Metadata at scale*, run *after polled kernel
    barriers*)."""
    rounds.barrier(comm)


def gather(comm: MPI.Comm, obj: Any, root: int = 0) -> list[Any] | None:
    """Collective, polled: every rank's ``obj`` on ``root`` (None elsewhere)."""
    parts = gather_bytes(comm, pickled(obj), root)
    return None if parts is None else [unpickled(p) for p in parts]


def bcast(comm: MPI.Comm, obj: Any, root: int = 0) -> Any:
    """Collective, polled: ``root``'s ``obj`` on every rank (``root`` keeps its own)."""
    _, data = bcast_bytes(comm, pickled(obj) if comm.rank == root else None, root)
    return obj if comm.rank == root else unpickled(data)


def allgather(comm: MPI.Comm, obj: Any) -> list[Any]:
    """Collective, polled: every rank's ``obj`` on every rank; one round when every rank's
    bytes fit a slot (each rank sees every slot, so all know whether a second is needed)."""
    data = pickled(obj)
    width = slot_bytes(comm.size)
    mine = np.zeros(width, dtype=np.uint8)
    fill(mine, data)
    slots = np.empty((comm.size, width), dtype=np.uint8)
    rounds.allgather_rows(comm, mine, slots)
    read = [read_slot(slot) for slot in slots]
    inlines = [inline for _, _, inline in read if inline is not None]
    if len(inlines) == comm.size:
        return [unpickled(inline) for inline in inlines]
    sizes = np.array([size for _, size, _ in read], dtype=np.int64)
    displs = displacements(sizes)
    buffer = np.empty(int(sizes.sum()), dtype=np.uint8)
    spec = [buffer, sizes, displs, MPI.BYTE]
    polled(comm, lambda: comm.Iallgatherv(data, spec), (data, spec))
    return [unpickled(buffer[d : d + n]) for d, n in zip(displs, sizes)]


def root_only(comm: MPI.Comm, fn: Callable[[], T], root: int = 0) -> T:
    """Collective: run ``fn`` on ``root`` only; every rank returns its result or raises its error.
    The others wait polling (they sleep while ``root`` works)."""
    outcome = _Outcome.of(fn) if comm.rank == root else _Outcome()
    return outcome.delivered(comm, bcast_bytes(comm, outcome.data, root)[1], root)


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
            return cls(pickled((True, result)), result)
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank by delivered()
            return cls(pickled((False, describe(exc))), cause=exc)

    def delivered(self, comm: MPI.Comm, got: np.ndarray, root: int) -> Any:
        """The result on every rank (the root keeps its own object, unpickling nothing), or
        root's error raised."""
        if comm.rank == root and self.cause is None:
            return self.result
        ok, value = unpickled(got)
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
    gathers: bool = True  # False: rank 0 needs nothing from the others (:meth:`of_root`)

    @classmethod
    def of_root(cls, work: Callable[[], Any]) -> Question:
        """Rank 0's ``work``, its result (or error) the answer of every rank: :func:`root_only`
        riding with the agreement. Where the rounds are MPI's, one broadcast after it."""
        return cls(None, lambda _: work(), per_rank=False, gathers=False)


class _Asking:
    """A :class:`Question` on its way: the bytes this rank sends rank 0 in its slot, rank 0's
    answers to the slots it gets (:meth:`rows`), and each rank's answer from the slot it gets
    back (:meth:`answered`, with the rounds that bring what did not fit a slot)."""

    def __init__(self, comm: MPI.Comm, question: Question) -> None:
        self.comm, self.question = comm, question
        failure = None if question.error is None else describe(question.error)
        try:
            self.sent = pickled((question.local, failure))
        except Exception as exc:  # noqa: BLE001 - agreed by the answer, like a local error
            self.sent = pickled((None, describe(exc)))
        self.width = slot_bytes(comm.size)
        self.asked: list[Any] = []  # rank 0: each rank's slot as read
        self.parts: list[np.ndarray] = []  # rank 0: the answers' bytes
        self.cause: BaseException | None = None  # rank 0: what decide raised, as __cause__

    def slot(self) -> np.ndarray:
        """This rank's slot (rank 0's own bytes never travel)."""
        mine = np.zeros(self.width, dtype=np.uint8)
        fill(mine, None if self.comm.rank == 0 else self.sent)
        return mine

    def _decided(self, slots: list[Any]) -> list[np.ndarray]:
        question = self.question
        gathered = [unpickled(inline) for _, _, inline in slots]
        answers, self.cause = _decided(gathered, question.decide, question.per_rank, self.comm.size)
        return answers

    def rows(self, slots: np.ndarray) -> np.ndarray:
        """Rank 0: the answers' slots (one per rank, or one for all) to every rank's slot: the
        answers, or RESEND when some rank's bytes did not fit its slot."""
        found = [read_slot(slot) for slot in slots]
        found[0] = (0, self.sent.size, self.sent)
        self.asked = found
        per_rank = self.question.per_rank
        flags = RESEND if any(inline is None for _, _, inline in found) else 0
        if flags:
            self.parts = [np.empty(0, dtype=np.uint8)] * (self.comm.size if per_rank else 1)
        else:
            self.parts = self._decided(found)
        return answer_slots(self.parts, self.width, flags, 0 if per_rank else None)

    def answered(self, got: np.ndarray) -> Any:
        """Collective: this rank's answer from the slot ``got`` it was sent, or the error every
        rank raises (after one more round for answers larger than their slots; after two more
        and a new answer when rank 0 asked for the bytes again, RESEND)."""
        comm, per_rank = self.comm, self.question.per_rank
        parts = self.parts if comm.rank == 0 else None
        flags, data = answer_read(comm, got, parts, per_rank, 0)
        if flags & RESEND:  # some rank's bytes did not fit its slot: every rank sends them again
            slots = regather(comm, self.sent, self.asked if comm.rank == 0 else None)
            answers = None if slots is None else self._decided(slots)
            if per_rank:
                _, data = scatter_bytes(comm, answers, 0)
            else:
                _, data = bcast_bytes(comm, None if answers is None else answers[0], 0)
        return _answer(data, self.cause)


def _answer(data: np.ndarray, cause: BaseException | None) -> Any:
    """The answer whose bytes (``(ok, value or failure)``, pickled) ``data`` holds, or its
    failure raised (from ``cause``, rank 0's exception)."""
    ok, value = unpickled(data)
    if not ok:
        error = exception_for(value)
        error.collective = True
        raise error from cause
    return value


def _root_answers(comm: MPI.Comm, question: Question) -> Any:
    """A question that gathers nothing (:meth:`Question.of_root`), where the rounds are MPI's:
    rank 0 decides, and one broadcast brings every rank the answer or the error."""
    answer, cause = None, None
    if comm.rank == 0:
        answers, cause = _decided([(None, None)] * comm.size, question.decide, False, comm.size)
        answer = answers[0]
    _, data = bcast_bytes(comm, answer, 0)
    return _answer(data, cause)


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
        sent = pickled((local, None if local_error is None else describe(local_error)))
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
    slots = gather_slots(comm, sent, root=0)
    if slots is None or local_error is not None:
        return local_error
    values = []
    for _, _, inline in slots:
        if inline is None:
            return None  # a rank whose message did not fit brings its error
        value, failure = unpickled(inline)
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
        sent = pickled((local, (name, message)))
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
            return [pickled((True, decided))], None
        if len(decided) != size:
            raise AssertionError("root_decides: one answer per rank expected")
        return [pickled((True, a)) for a in decided], None
    except Exception as exc:  # noqa: BLE001 - re-raised on every rank by the caller
        failure = pickled((False, describe(exc)))
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

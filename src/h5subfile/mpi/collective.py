"""Collective checks: a failure on any rank becomes the same exception on every rank, and a
collective call that not every rank makes ends in an error instead of a hang.

Rules (see STYLE.md): validate locally, agree globally; work for one rank goes through
:func:`root_only` or :func:`root_decides`, which broadcast the result or the exception.

Every collective call of a file starts with one agreement round (:func:`agree` with a
:class:`Call`): a non-blocking allreduce of the error flag and of a hash of the call's name
and number, polled with short sleeps. Ranks whose calls differ all raise
CollectiveMismatchError naming them; ranks that wait longer than
``H5SUBFILE_COLLECTIVE_TIMEOUT`` seconds raise CollectiveTimeoutError naming the ranks that
never arrived (docs/ARCHITECTURE.md, "Collective discipline").
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from mpi4py import MPI

from .. import errors

T = TypeVar("T")

#: (class name, message) of an exception, small enough to send.
Failure = tuple[str, str]

TIMEOUT_VARIABLE = "H5SUBFILE_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT = 600.0  # seconds; 0 (or less): wait for ever
#: Polling: spin on MPI_Test this long, then sleep between tests, doubling from FIRST_SLEEP to
#: LAST_SLEEP (seconds; docs/BENCHMARKS.md measures the cost).
SPIN = 50e-6
YIELD_FOR = 2e-3  # then yield the CPU between tests (sched_yield) until this, then sleep
FIRST_SLEEP = 20e-6
LAST_SLEEP = 1e-3
CHECK_EVERY = 0.01  # seconds between looks for other ranks' timeout notices while waiting
GRACE = 1.0  # seconds a rank that gives up waits to hear where the others are
_NOTICE = 1  # the tag of timeout notices on a communicator's status duplicate


def describe(exc: BaseException) -> Failure:
    return type(exc).__name__, str(exc)


def _class_for(name: str, message: str = "") -> type[errors.H5SubfileError]:
    """The class of the hierarchy a failure named ``name`` is raised as (an OSError by the
    errno its message starts with; see :func:`errors.error_class`)."""
    return errors.error_class(name, errors.errno_in(message))


def _own(name: str) -> bool:
    """Whether ``name`` is a class of the hierarchy (raised as itself, message unchanged)."""
    return isinstance(getattr(errors, name, None), type) and issubclass(
        getattr(errors, name), errors.H5SubfileError
    )


def exception_for(failure: Failure) -> errors.H5SubfileError:
    """The exception one failure is raised as, with its errno kept."""
    name, message = failure
    return errors.keep_errno(_class_for(name, message)(message), errors.errno_in(message))


def rebuild(failures: Sequence[tuple[int, Failure]], size: int) -> errors.H5SubfileError:
    """One exception describing the failures of some ranks; identical on every rank."""
    by_message: dict[Failure, list[int]] = {}
    for rank, failure in failures:
        by_message.setdefault(failure, []).append(rank)
    parts = []
    for (name, message), ranks in list(by_message.items())[:3]:
        if size == 1 or len(ranks) == size:
            where = ""
        elif len(ranks) <= 8:
            where = f"[rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}] "
        else:
            where = f"[{len(ranks)} ranks: {ranks[0]}, {ranks[1]}, ... {ranks[-1]}] "
        parts.append(where + ("" if _own(name) else f"{name}: ") + message)
    if len(by_message) > 3:
        parts.append(f"... and {len(by_message) - 3} other error(s)")
    first_name, first_message = next(iter(by_message))
    exc = _class_for(first_name, first_message)("; ".join(parts))
    errors.keep_errno(exc, errors.errno_in(first_message))
    exc.collective = True
    return exc


def collective_timeout() -> float | None:
    """``H5SUBFILE_COLLECTIVE_TIMEOUT`` in seconds (default 600), or None (0: no timeout)."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        seconds = DEFAULT_TIMEOUT  # not worth failing one rank over: ranks share it anyway
    return seconds if seconds > 0 else None


@dataclass(frozen=True)
class Call:
    """A collective call, as the ranks agree on it at its start.

    ``name`` and ``seq`` (its number among the calls on its file) must be the same on every
    rank, otherwise the ranks are out of step. ``args``, when given, must be the same too (the
    datasets of a write...), otherwise it is an argument mismatch. ``detail`` and ``file`` are
    only shown in messages.
    """

    name: str
    seq: int
    detail: str = ""
    args: str | None = None
    file: str = ""

    def describe(self) -> str:
        return f"{self.name}{' ' + self.detail if self.detail else ''} (call #{self.seq})"


def call_hash(text: str) -> int:
    """A positive 62-bit hash of ``text``, the same in every process (unlike ``hash``)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 2) or 1


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) <= 8:
        return "ranks " + ", ".join(map(str, ranks))
    return f"{len(ranks)} ranks: {ranks[0]}, {ranks[1]}, ... {ranks[-1]}"


def _by_value(values: Sequence[T]) -> list[tuple[T, list[int]]]:
    """Each distinct value with the ranks that hold it, in order of first appearance."""
    grouped: dict[T, list[int]] = {}
    for rank, value in enumerate(values):
        grouped.setdefault(value, []).append(rank)
    return list(grouped.items())


def _files(files: Sequence[str]) -> str:
    named = sorted({f for f in files if f})
    return f" on {', '.join(named)}" if named else ""


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
    for (call, failure), ranks in _by_value([(a.call, a.failure) for a in arrivals]):
        text = f"[{_ranks(ranks)}] {call or 'a step inside an earlier call'}"
        if failure is not None and failure[1] not in call:
            text += f", failing with {failure[0]}: {failure[1]}"
        parts.append(text)
    exc = errors.CollectiveMismatchError(
        f"collective calls out of step{_files([a.file for a in arrivals])}: {'; '.join(parts)}. "
        "Every rank must make the same collective calls in the same order (a rank skipped or "
        "reordered a call, or left the file after an error of its own)"
    )
    exc.collective = exc.out_of_step = True
    return exc


def _crossed(ranks: Sequence[int], mine: _Arrival) -> errors.CollectiveMismatchError:
    """The error of a round whose exchange met another collective operation on some ranks."""
    exc = errors.CollectiveMismatchError(
        f"collective calls out of step{_files([mine.file])}: while this rank was in "
        f"{mine.call or 'a step inside a call'}, {_ranks(ranks)} made another collective call "
        "on the same communicator (not one of this file's). Every rank must make the same "
        "collective calls in the same order; the communicator is now unusable: end the job"
    )
    exc.collective, exc.out_of_step = False, True  # the other ranks may be anywhere
    return exc


def _argument_mismatch(arrivals: Sequence[_Arrival]) -> errors.CollectiveMismatchError:
    shown = "; ".join(f"[{_ranks(r)}] {args}" for args, r in _by_value([a.args for a in arrivals]))
    exc = errors.CollectiveMismatchError(
        f"collective call {arrivals[0].call} made with different arguments on different "
        f"ranks{_files([a.file for a in arrivals])}: {shown}"
    )
    exc.collective = True
    return exc


def agree(comm: MPI.Comm, error: BaseException | None, call: Call | None = None) -> None:
    """Collective: raise the same exception on every rank if ``error`` is set on any rank.

    With ``call`` (the first round of a collective call), also raise CollectiveMismatchError
    on every rank when the ranks are in different calls (or the same call with different
    ``args``). Waiting ranks poll; after ``H5SUBFILE_COLLECTIVE_TIMEOUT`` seconds they raise
    CollectiveTimeoutError. The common case (no error, same call) costs one small allreduce.
    """
    agreed = isinstance(error, errors.H5SubfileError) and error.collective
    flag = 0 if error is None else 2 if agreed else 1
    key = 0 if call is None else call_hash(f"{call.name}\0{call.seq}")
    args = 0 if call is None or call.args is None else call_hash(call.args)
    sent = np.array([flag, key, -key, args, -args], dtype=np.int64)
    got = allreduce_max(comm, sent, call)
    in_step, same_args = got[1] == -got[2], got[3] == -got[4]
    if got[0] == 0 and in_step and same_args:
        return
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
    if not in_step:
        raise out_of_step(arrivals) from error
    if not same_args:
        raise _argument_mismatch(arrivals) from error
    failures = [(rank, a.failure) for rank, a in enumerate(arrivals) if a.failure is not None]
    if error is not None and all(a.agreed and a.failure == mine.failure for a in arrivals):
        raise error  # already the same on every rank: raised as itself
    raise rebuild(failures, comm.size) from error


# The agreement round: a non-blocking allreduce, polled, with a timeout -----------------------
@dataclass(frozen=True)
class _Notice:
    """What a rank that gives up waiting tells the others: where it waited."""

    round: int
    rank: int
    call: str
    file: str
    waited: float


@dataclass
class _Channel:
    """Per communicator (cached on it as an MPI attribute): the number of agreement rounds
    so far (the same on every rank) and a duplicate of it for timeout notices."""

    rounds: int = 0
    status: MPI.Comm | None = None
    dup: tuple[MPI.Comm, MPI.Request] | None = None  # the duplicate until its Idup completes
    notices: dict[int, dict[int, _Notice]] = field(default_factory=dict)  # by round, by rank
    sends: list[MPI.Request] = field(default_factory=list)
    given_up: list[Any] = field(default_factory=list)  # requests (and buffers) left pending

    def progress(self) -> None:
        """Finish the duplicate once every rank has made it; receive notices (local)."""
        if self.dup is not None and self.dup[1].Test():
            self.status, self.dup = self.dup[0], None
        if self.status is None:
            return
        probe = MPI.Status()
        # A message that came while this rank was not in MPI shows at the second probe.
        while self.status.Iprobe(MPI.ANY_SOURCE, _NOTICE, probe) or self.status.Iprobe(
            MPI.ANY_SOURCE, _NOTICE, probe
        ):
            notice: _Notice = self.status.recv(source=probe.Get_source(), tag=_NOTICE)
            if notice.round >= self.rounds:  # older ones are stale: that round is over
                self.notices.setdefault(notice.round, {})[notice.rank] = notice
        self.sends = [s for s in self.sends if not s.Test()]


_KEYVAL: int | None = None


def _channel(comm: MPI.Comm) -> _Channel:
    """This communicator's channel; made (with a non-blocking duplicate) on its first round."""
    global _KEYVAL
    if _KEYVAL is None:
        _KEYVAL = MPI.Comm.Create_keyval()
    channel = comm.Get_attr(_KEYVAL)
    if channel is None:
        channel = _Channel(dup=comm.Idup())
        comm.Set_attr(_KEYVAL, channel)
    assert isinstance(channel, _Channel)
    return channel


def allreduce_max(comm: MPI.Comm, sent: np.ndarray, call: Call | None) -> np.ndarray:
    """Collective: the element-wise maximum of ``sent`` over the ranks, by a non-blocking
    allreduce polled with short sleeps; CollectiveTimeoutError after the timeout."""
    channel = _channel(comm)
    channel.rounds += 1
    got = np.empty_like(sent)
    request = comm.Iallreduce(sent, got, op=MPI.MAX)
    if not request.Test():
        _wait(comm, channel, request, (sent, got), call)
    if channel.dup is not None:
        # Every rank posted the duplicate before this round, which every rank has now
        # reached: it completes. Left pending, MPI would report it at exit.
        channel.dup[1].Wait()
        channel.status, channel.dup = channel.dup[0], None
    channel.progress()  # one probe: did the others give up waiting for this rank?
    late = channel.notices.pop(channel.rounds, None)
    if late:  # they have left this call: going on would wait for them in its next steps
        raise _arrived_late(comm, late, call)
    return got


def _wait(
    comm: MPI.Comm, channel: _Channel, request: MPI.Request, buffers: Any, call: Call | None
) -> None:
    """Poll ``request`` (spin briefly, yield the CPU between tests for YIELD_FOR, then sleep,
    doubling the pause up to LAST_SLEEP) until it
    completes, the timeout passes or another rank says it gave up waiting."""
    timeout = collective_timeout()
    started = time.monotonic()
    checked = started
    pause = 0.0
    while True:
        now = time.monotonic()
        if now - started >= YIELD_FOR:
            time.sleep(pause)
            pause = min(max(2 * pause, FIRST_SLEEP), LAST_SLEEP)
            now = time.monotonic()
        elif now - started >= SPIN:
            os.sched_yield()  # runnable ranks (oversubscribed) go first; otherwise no delay
        if request.Test():
            return
        if now - checked >= CHECK_EVERY:
            checked = now
            channel.progress()
            if channel.notices.get(channel.rounds):
                break
        if timeout is not None and now - started >= timeout:
            break
    channel.given_up.append((request, buffers))  # never completes here; keep its buffers
    raise _give_up(comm, channel, call, time.monotonic() - started)


def _give_up(
    comm: MPI.Comm, channel: _Channel, call: Call | None, waited: float
) -> errors.CollectiveTimeoutError:
    """Tell the others where this rank waited, hear where they wait, name the ranks that
    never arrived (the same message on every waiting rank)."""
    timeout = collective_timeout()
    limit = f"{timeout:g} s" if timeout is not None else "no time limit"
    where = "" if call is None else call.describe()
    mine = _Notice(channel.rounds, comm.rank, where, "" if call is None else call.file, waited)
    channel.progress()
    if channel.status is None:  # the first round on this communicator: no way to ask
        exc = errors.CollectiveTimeoutError(
            f"collective call {where or 'step'}{_files([mine.file])} timed out after "
            f"{waited:.0f} s ({TIMEOUT_VARIABLE}: {limit}); it is the first collective call "
            "on this communicator, so which ranks never arrived is unknown"
        )
        exc.collective = False
        return exc
    for rank in range(comm.size):
        if rank != comm.rank:
            channel.sends.append(channel.status.isend(mine, dest=rank, tag=_NOTICE))
    heard = channel.notices.setdefault(channel.rounds, {})
    deadline = time.monotonic() + GRACE
    while len(heard) < comm.size - 1 and time.monotonic() < deadline:
        time.sleep(1e-3)
        channel.progress()
    heard = channel.notices.pop(channel.rounds, {})
    heard[comm.rank] = mine
    missing = [r for r in range(comm.size) if r not in heard]
    waiting = _by_value([heard[r].call if r in heard else None for r in range(comm.size)])
    said = "; ".join(
        f"{_ranks(ranks)} wait{'s' if len(ranks) == 1 else ''} in {call or 'a step inside a call'}"
        for call, ranks in waiting
        if call is not None
    )
    gone = f"{_ranks(missing)} never arrived" if missing else "every rank is waiting"
    return errors.CollectiveTimeoutError(
        f"collective call timed out ({TIMEOUT_VARIABLE}: {limit}){_files([mine.file])}: "
        f"{gone}; {said}. The communicator's collective calls are now out of step: end the job"
    )


def _arrived_late(
    comm: MPI.Comm, notices: dict[int, _Notice], call: Call | None
) -> errors.CollectiveTimeoutError:
    """The error of a rank that arrived after the others had given up waiting for it."""
    where = "a step inside a call" if call is None else call.describe()
    by_call: dict[str, list[int]] = {}
    for rank in sorted(notices):
        by_call.setdefault(notices[rank].call or "a step inside a call", []).append(rank)
    waited = "; ".join(f"{_ranks(ranks)} in {c}" for c, ranks in by_call.items())
    seconds = max(n.waited for n in notices.values())
    return errors.CollectiveTimeoutError(
        f"rank {comm.rank} arrived at {where}{_files([call.file if call else ''])} after "
        f"{_ranks(sorted(notices))} had given up waiting for it for {seconds:.0f} s "
        f"({TIMEOUT_VARIABLE}; {waited}). The communicator's collective calls are now out of "
        "step: end the job"
    )


def wait_for_all(comm: MPI.Comm) -> None:
    """Collective: return when every rank is here; waiting ranks poll and sleep (an agreement
    round) instead of spinning inside a blocking collective. Placed before the gathers and
    broadcasts of rank 0's protocols, it leaves the CPU to the ranks still working: with more
    ranks than cores, spinning ranks slowed rank 0's scan of a master 5-fold at 8 ranks on
    2 cores."""
    agree(comm, None)


def root_only(comm: MPI.Comm, fn: Callable[[], T], root: int = 0) -> T:
    """Collective: run ``fn`` on ``root`` only; every rank returns its result or raises its error."""
    payload: tuple[bool, Any] = (True, None)
    cause: BaseException | None = None  # the original, kept as __cause__ on the root
    if comm.rank == root:
        try:
            payload = (True, fn())
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank below
            payload, cause = (False, describe(exc)), exc
    wait_for_all(comm)  # the others sleep while ``root`` works
    ok, value = comm.bcast(payload, root=root)
    if not ok:
        raise rebuild([(root, value)], 1) from cause
    return value


def root_plans(
    comm: MPI.Comm,
    local: Any,
    local_error: BaseException | None,
    plan: Callable[[list[Any]], tuple[list[Any], T]],
    settle: bool = True,
) -> tuple[Any, T | None]:
    """Collective: gather every rank's ``local`` on rank 0, whose ``plan`` returns one answer
    per rank (scattered) and what rank 0 keeps for the next step of its protocol.

    Returns ``(this rank's answer, kept)``; ``kept`` is None except on rank 0. Local errors
    from any rank, and any exception raised by ``plan``, become the same exception on every
    rank. O(P) messages in total. ``settle``: as in :func:`root_decides`.
    """
    kept: list[T] = []

    def decide(gathered: list[Any]) -> list[Any]:
        answers, keep = plan(gathered)
        kept.append(keep)
        return answers

    answer = root_decides(comm, local, local_error, decide, settle=settle)
    return answer, (kept[0] if kept else None)


def root_decides(
    comm: MPI.Comm,
    local: Any,
    local_error: BaseException | None,
    decide: Callable[[list[Any]], Any],
    per_rank: bool = True,
    settle: bool = True,
) -> Any:
    """Collective: gather every rank's ``local`` on rank 0, which decides for all.

    With ``per_rank`` ``decide`` returns one answer per rank (scattered); otherwise one answer for
    everybody (broadcast). Local errors from any rank, and any exception raised by ``decide``,
    become the same exception on every rank. O(P) messages in total. ``settle=False`` skips
    the round before the gather where the caller has just made one (nothing ran since).
    """
    sent = (local, None if local_error is None else describe(local_error))
    if settle:
        wait_for_all(comm)  # ranks still working (leaders creating datasets) get the CPU
    gathered = comm.gather(sent, root=0)
    answer: Any = None
    cause: BaseException | None = None  # the original, kept as __cause__ on rank 0
    if comm.rank == 0:
        assert gathered is not None
        failures = [(r, f) for r, (_, f) in enumerate(gathered) if f is not None]
        try:
            if failures:
                raise rebuild(failures, comm.size)
            decided = decide([value for value, _ in gathered])
            if per_rank:
                if len(decided) != comm.size:
                    raise AssertionError("root_decides: one answer per rank expected")
                answer = [(True, a) for a in decided]
            else:
                answer = (True, decided)
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank below
            failure, cause = describe(exc), exc
            answer = [(False, failure)] * comm.size if per_rank else (False, failure)
    wait_for_all(comm)  # the others sleep while rank 0 decides
    ok, value = comm.scatter(answer, root=0) if per_rank else comm.bcast(answer, root=0)
    if not ok:
        error = exception_for(value)
        error.collective = True
        raise error from cause
    return value


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


def checked_collective(comm: MPI.Comm, call: str, signature: Any, fn: Callable[[], T]) -> T:
    """Collective: check that every rank passed the same ``signature`` to ``call``, then run
    ``fn`` on rank 0 and return its result (or raise its error) on every rank."""

    def decide(signatures: list[Any]) -> T:
        check_same(call, signatures)
        return fn()

    return root_decides(comm, signature, None, decide, per_rank=False, settle=False)

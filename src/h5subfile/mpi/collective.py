"""Collective checks: a failure on any rank becomes the same exception on every rank.

Rules (see STYLE.md): validate locally, agree globally; work for one rank goes through
:func:`root_only` or :func:`root_decides`, which broadcast the result or the exception.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mpi4py import MPI

from .. import errors

T = TypeVar("T")

#: (class name, message) of an exception, small enough to send.
Failure = tuple[str, str]


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


def agree(comm: MPI.Comm, error: BaseException | None) -> None:
    """Collective: raise the same exception on every rank if ``error`` is set on any rank.

    The common case (no error anywhere) costs one small allreduce.
    """
    if isinstance(error, errors.H5SubfileError) and error.collective:
        # Already agreed on every rank: re-raise as is, every rank holds the same one.
        flag = comm.allreduce(2, op=MPI.MAX)
    else:
        flag = comm.allreduce(1 if error is not None else 0, op=MPI.MAX)
    if flag == 0:
        return
    failures = comm.allgather(None if error is None else describe(error))
    ranked = [(rank, f) for rank, f in enumerate(failures) if f is not None]
    raise rebuild(ranked, comm.size) from error


def root_only(comm: MPI.Comm, fn: Callable[[], T], root: int = 0) -> T:
    """Collective: run ``fn`` on ``root`` only; every rank returns its result or raises its error."""
    payload: tuple[bool, Any] = (True, None)
    cause: BaseException | None = None  # the original, kept as __cause__ on the root
    if comm.rank == root:
        try:
            payload = (True, fn())
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank below
            payload, cause = (False, describe(exc)), exc
    ok, value = comm.bcast(payload, root=root)
    if not ok:
        raise rebuild([(root, value)], 1) from cause
    return value


def root_plans(
    comm: MPI.Comm,
    local: Any,
    local_error: BaseException | None,
    plan: Callable[[list[Any]], tuple[list[Any], T]],
) -> tuple[Any, T | None]:
    """Collective: gather every rank's ``local`` on rank 0, whose ``plan`` returns one answer
    per rank (scattered) and what rank 0 keeps for the next step of its protocol.

    Returns ``(this rank's answer, kept)``; ``kept`` is None except on rank 0. Local errors
    from any rank, and any exception raised by ``plan``, become the same exception on every
    rank. O(P) messages in total.
    """
    kept: list[T] = []

    def decide(gathered: list[Any]) -> list[Any]:
        answers, keep = plan(gathered)
        kept.append(keep)
        return answers

    answer = root_decides(comm, local, local_error, decide)
    return answer, (kept[0] if kept else None)


def root_decides(
    comm: MPI.Comm,
    local: Any,
    local_error: BaseException | None,
    decide: Callable[[list[Any]], Any],
    per_rank: bool = True,
) -> Any:
    """Collective: gather every rank's ``local`` on rank 0, which decides for all.

    With ``per_rank`` ``decide`` returns one answer per rank (scattered); otherwise one answer for
    everybody (broadcast). Local errors from any rank, and any exception raised by ``decide``,
    become the same exception on every rank. O(P) messages in total.
    """
    sent = (local, None if local_error is None else describe(local_error))
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

    return root_decides(comm, signature, None, decide, per_rank=False)

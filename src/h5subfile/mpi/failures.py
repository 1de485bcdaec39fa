"""Failures as they travel between ranks: an exception becomes a (class name, message) pair
small enough to send (:func:`describe`), and the failures of some ranks become one exception,
identical on every rank (:func:`rebuild`), of the class hierarchy in :mod:`h5subfile.errors`."""

from __future__ import annotations

from collections.abc import Sequence

from .. import errors

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

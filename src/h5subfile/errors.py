"""Exception hierarchy.

Every exception h5subfile raises derives from :class:`H5SubfileError` and from the built-in
exception a user would naturally catch (``ValueError``, ``FileNotFoundError``, ``OSError``, ...),
so ``except ValueError`` keeps working.

An exception that was agreed collectively (raised identically on every rank) carries
``collective = True``; the CLI uses it to print the message once instead of aborting the job.

Failures met in other code (the operating system, h5py, numpy) are mapped into the hierarchy
by :func:`error_class` (by the class name and errno, as ranks send them to each other) and
:func:`as_error` (an exception at hand): permission denied becomes
:class:`PermissionDeniedError` (a ``PermissionError``), a missing file
:class:`MissingFileError`, any other ``OSError`` :class:`RankIOError` with its ``errno`` and
``strerror`` kept, ``KeyError`` :class:`ObjectNotFoundError`, ``IndexError``
:class:`SelectionError`, ``ValueError`` and ``TypeError`` :class:`RankValueError` and
:class:`RankTypeError`, anything else :class:`RankFailedError`.

:func:`mapped` wraps a local (not collective) operation so that any exception leaving it is
one of the hierarchy.
"""

from __future__ import annotations

import builtins
import errno as errnos
import functools
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar


class H5SubfileError(Exception):
    """Base class of every h5subfile error."""

    collective: bool = False

    def __str__(self) -> str:  # the message, also when an OSError keeps its errno
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class CollectiveMismatchError(H5SubfileError, ValueError):
    """Ranks called a collective operation with different arguments, or made different
    collective calls (one skipped or reordered a call, or left the file after an error)."""

    out_of_step: bool = False  # different calls (not arguments): the ranks abandon the file
    #: the files the ranks' calls belong to (more than one: calls on several files open on one
    #: communicator, made in a different order; every rank abandons each of them)
    files: tuple[str, ...] = ()


class DifferentValuesWarning(UserWarning):
    """Ranks set an attribute to different values (a time stamp, a host name): the file keeps
    rank 0's."""


class CollectiveTimeoutError(H5SubfileError, TimeoutError):
    """Some ranks did not arrive at a collective call within ``H5SUBFILE_COLLECTIVE_TIMEOUT``
    seconds; the message names them and where the others waited, and, in a write session,
    what this rank knows of the file (``published``)."""

    #: This rank's part of a question to rank 0 (``mpi.collective.agree_asking``) had gone
    #: when it gave up: rank 0 may have acted on it (at close: committed the master).
    asked: bool = False
    #: ... and every rank had entered the call (its agreement round was over).
    agreed: bool = False
    #: In a write session: True when the master was committed before the timeout (rank 0
    #: knows), False when nothing of the session was published, None when this rank cannot
    #: know (its part of the close had gone to rank 0, which had not answered).
    published: bool | None = None


class BlockError(H5SubfileError, ValueError):
    """A declared block lies outside the dataset's shape or overlaps another rank's block."""


class OverlapError(BlockError):
    """Two ranks wrote the same element of a dataset (HDF5 leaves the result undefined; h5subfile
    refuses it): the message names the dataset, the ranks and their regions."""


class UnsupportedError(H5SubfileError, NotImplementedError):
    """Something h5py's mpio driver does that h5subfile does not: the message says what, and
    what to do instead (never a silent difference)."""


class DataShapeError(H5SubfileError, ValueError):
    """Data passed to a write does not match the rank's block (shape) or the dataset (dtype)."""


class UnsupportedDtypeError(H5SubfileError, TypeError):
    """A numpy dtype h5subfile cannot store."""


class PlanError(H5SubfileError, ValueError):
    """An invalid plan value (grouping, sizes, ...)."""


class SelectionError(H5SubfileError, IndexError):
    """A read selection that does not fit the dataset."""


class FileModeError(H5SubfileError, ValueError):
    """An operation the file's mode does not allow, or an unknown mode."""


class ObjectExistsError(H5SubfileError, ValueError):
    """A group or dataset with that name already exists."""


class FileExistsH5SubfileError(H5SubfileError, FileExistsError):
    """Mode "w-"/"x" on a file that exists."""


class FileBusyError(H5SubfileError, BlockingIOError):
    """Another write session (another job, or this one) holds the file's claim: one writer at a
    time; or this process holds the file open with h5py under HDF5's file lock."""


class ObjectNotFoundError(H5SubfileError, KeyError):
    """No group, dataset or attribute with that name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class MissingFileError(H5SubfileError, FileNotFoundError):
    """A master file or subfile that does not exist."""


class NotRegularFileError(H5SubfileError, OSError):
    """A FIFO, socket, device or folder where h5subfile expects a regular file (a master,
    subfile, claim, profile, tuning profile or Darshan log): refused before anything opens it
    in a way that could block."""


class IncompleteFileError(H5SubfileError, OSError):
    """A file, session or dataset whose writer did not finish."""


class WriterStoppedError(IncompleteFileError):
    """A file followed while written (``h5subfile.follow``) whose writer stopped without
    closing it: every step it committed was read, the rest never came."""


class FollowTimeoutError(H5SubfileError, TimeoutError):
    """A file followed while written whose next step did not come within the timeout."""


class TruncatedFileError(H5SubfileError, OSError):
    """A subfile shorter than the data it must hold."""


class CorruptFileError(H5SubfileError, OSError):
    """A file h5subfile cannot interpret (not HDF5, damaged layout record, ...)."""


class SubfileMismatchError(CorruptFileError):
    """A subfile that is not the one the master recorded: another run's, swapped with another,
    overwritten, or of the wrong size."""


class ChecksumError(CorruptFileError):
    """Stored bytes whose checksum differs from the one recorded when they were written.

    ``span``: (byte offset, length) of the piece in its file, when known on the raising rank.
    """

    span: tuple[int | None, int | None] = (None, None)


class DamagedFileError(CorruptFileError):
    """A file that fails verification (``h5subfile verify``: bad checksums, subfiles that are
    not the recorded ones, damaged HDF5 structure), refused by ``repack``.

    ``report``: verify's report of the file, the same on every rank (``{}`` when rebuilt from
    a message).
    """

    def __init__(self, message: str, report: dict[str, Any] | None = None):
        super().__init__(message)
        self.report: dict[str, Any] = {} if report is None else report


class UnsafePathError(H5SubfileError, ValueError):
    """A recorded source path that would escape the master file's folder, or (``loop``) one
    that cannot be followed: a loop of symbolic links (ELOOP)."""

    loop = False


class SameFileError(H5SubfileError, ValueError):
    """An output file that is its input (``repack IN IN``)."""


class UnsupportedLinkError(H5SubfileError, ValueError):
    """Soft, external or extra hard links that could not be written. No longer raised:
    ``repack`` copies links since h5subfile writes them; kept so that code catching it runs."""


class RankFailedError(H5SubfileError, RuntimeError):
    """An unexpected exception on some ranks, re-raised on every rank by a collective check."""


class RankIOError(H5SubfileError, OSError):
    """An operating-system error on some ranks (disk full, permissions...), re-raised everywhere."""


class PermissionDeniedError(H5SubfileError, PermissionError):
    """The operating system refused access to a file or folder (EACCES, EPERM, EROFS)."""


class RankValueError(H5SubfileError, ValueError):
    """An unexpected ValueError on some ranks, re-raised on every rank."""


class RankTypeError(H5SubfileError, TypeError):
    """An unexpected TypeError on some ranks, re-raised on every rank."""


#: Built-in exceptions (or their bases) -> the class they become, most specific first.
_BUILTIN_MAP: tuple[tuple[type[BaseException], type[H5SubfileError]], ...] = (
    (PermissionError, PermissionDeniedError),
    (FileNotFoundError, MissingFileError),
    (FileExistsError, FileExistsH5SubfileError),
    (OSError, RankIOError),
    (KeyError, ObjectNotFoundError),
    (IndexError, SelectionError),
    (ValueError, RankValueError),
    (TypeError, RankTypeError),
)
_PERMISSION = {errnos.EACCES, errnos.EPERM, errnos.EROFS}
_ERRNO = re.compile(r"\[Errno (\d+)\]")


def timed_out_publication(
    path: str, name: str, published: bool | None, reported: str, agreed: bool
) -> str:
    """What a rank knows of the file after its call ``name`` timed out: the master was
    committed (``published``; ``reported``: what the close found wrong, if anything),
    nothing was published (False), or it cannot know (None: ``agreed``, every rank had
    entered the call, so rank 0 was committing; otherwise rank 0 may still have waited)."""
    if published and reported:
        return f"The master was committed before the timeout, and its {name} reported: {reported}"
    if published:
        return (
            f"The master was committed before the timeout: {path} is complete and verifies "
            f"(h5subfile verify {path}); the file needs nothing more"
        )
    if published is False:
        return (
            f"Nothing of this write session was published: {path} is as it was before the "
            "session (or its last commit)"
        )
    when = (
        f"while rank 0 was committing it (every rank had entered the {name})"
        if agreed
        else f"before rank 0 answered the {name} (it commits the master once every rank's "
        "part is in: it was committing it, or still waiting for a rank)"
    )
    return (
        f"Whether the master was committed is unknown on this rank, which gave up {when}; "
        f"rank 0's error says whether it was, and h5subfile verify {path} checks the file"
    )


def error_class(name: str, errno: int | None = None) -> type[H5SubfileError]:
    """The class an exception named ``name`` (with ``errno``, if an OSError) is raised as.

    Names of this module's classes stay themselves; built-in exceptions map as the module's
    docstring says (an ``OSError`` by its errno: EACCES is a PermissionDeniedError); other
    names become RankFailedError.
    """
    own = globals().get(name)
    if isinstance(own, type) and issubclass(own, H5SubfileError):
        return own
    builtin = getattr(builtins, name, None)
    if not (isinstance(builtin, type) and issubclass(builtin, BaseException)):
        return RankFailedError
    if issubclass(builtin, OSError) and errno is not None:
        if errno in _PERMISSION:
            return PermissionDeniedError
        if errno == errnos.ENOENT:
            return MissingFileError
    for base, cls in _BUILTIN_MAP:
        if issubclass(builtin, base):
            return cls
    return RankFailedError


def errno_in(message: str) -> int | None:
    """The errno an OSError's message starts with (``[Errno 13] ...``), if any."""
    found = _ERRNO.search(message)
    return int(found.group(1)) if found else None


def errno_text(errno: int, strerror: str | None = None) -> str:
    """``[Errno 28] No space left on device (ENOSPC)``: the errno by number (which ranks
    read back, :func:`errno_in`), in words and by name (what a user looks up)."""
    name = errnos.errorcode.get(errno)
    words = strerror or os.strerror(errno)
    return f"[Errno {errno}] {words}" + (f" ({name})" if name else "")


def _oserror_message(exc: OSError) -> str:
    """``str(exc)`` with the errno's name after its words: ``[Errno 28] No space left on
    device (ENOSPC): '/run/x.h5'``."""
    if not isinstance(exc.errno, int) or not exc.strerror:
        return str(exc)
    text = errno_text(exc.errno, exc.strerror)
    if exc.filename is not None:
        text += f": {exc.filename!r}"
    if exc.filename2 is not None:
        text += f" -> {exc.filename2!r}"
    return text


def keep_errno(error: H5SubfileError, errno: int | None) -> H5SubfileError:
    """Give an OSError-derived ``error`` its ``errno`` and ``strerror`` (``str(error)`` stays
    the message)."""
    if errno is not None and isinstance(error, OSError):
        error.errno = errno
        error.strerror = os.strerror(errno)
    return error


def as_error(exc: BaseException) -> H5SubfileError:
    """``exc`` itself if it is an H5SubfileError, else the error of the hierarchy it maps to
    (its message says what it was: ``PermissionError: [Errno 13] ...``); raise it ``from
    exc``."""
    if isinstance(exc, H5SubfileError):
        return exc
    errno = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    mro_names = [c.__name__ for c in type(exc).__mro__ if getattr(builtins, c.__name__, None) is c]
    cls = error_class(mro_names[0] if mro_names else type(exc).__name__, errno)
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    if isinstance(exc, OSError):
        message = _oserror_message(exc)
    error = keep_errno(cls(f"{type(exc).__name__}: {message}"), errno)
    if isinstance(error, OSError) and isinstance(exc, OSError):
        error.filename = exc.filename
    return error


F = TypeVar("F", bound=Callable[..., Any])


def mapped(fn: F) -> F:
    """Decorator of a local (not collective) operation: any exception leaving it is an
    H5SubfileError (:func:`as_error`, raised from the original)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except H5SubfileError:
            raise
        except Exception as exc:
            raise as_error(exc) from exc

    return wrapper  # type: ignore[return-value]

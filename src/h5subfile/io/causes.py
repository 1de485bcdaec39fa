"""Why a write failed, said in the user's terms: the operating-system error behind it (a full
disk, a quota, a read-only mount, a failing disk) and the user's file it met.

HDF5 reports a failed write in its own words (``Can't close file``, ``Unable to flush file``),
with the errno it met only in a detail h5py passes on (``file write failed: ..., errno = 28``)
or not at all, and h5py raises it as an ``OSError`` often without errno, or a
``RuntimeError``. :func:`hdf5_error` is the one place that turns such a failure into the
``OSError`` of the hierarchy (``RankIOError``; ``PermissionDeniedError`` for EACCES, EPERM and
EROFS) with that errno: the exception's own, else the one in HDF5's detail, else the one a
probe of the file's folder meets now (:func:`probe_folder`). Our own calls on files go through
:func:`os_error`, which words it the same way. The message names the user's file (a master's
``.partial`` copy is the master) and the errno by number, words and name::

    cannot close /scratch/run.h5: [Errno 28] No space left on device (ENOSPC) (HDF5: Can't close file)

Every method of ours whose HDF5 calls write runs under :func:`hdf5_writing` (or the decorator
:func:`hdf5_writes`), and closes through :func:`close_hdf5`, which also makes HDF5 let go of a
file whose close failed (:func:`let_go`).

:func:`reserve_space` allocates room after a file's end before HDF5 writes there (an in-place
append), so that a full disk is met before anything changes.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import h5py

from ..errors import H5SubfileError, as_error, errno_text, error_class, keep_errno
from ..layout.names import user_path

#: HDF5's detail of a failed system call: ``(file write failed: time = ..., filename = '...',
#: file descriptor = 3, errno = 28, error message = '...', ...)``.
_HDF5_ERRNO = re.compile(r"\berrno = (\d+)")
_HDF5_DETAIL = re.compile(r"\s*\([^()]*\b(?:time|filename) = [^()]*\)")
#: How much room a probe asks of a folder (bytes): a write that failed for want of space
#: asked for more than was free, and HDF5 writes metadata in blocks of up to 64 KiB.
PROBE_BYTES = 2**20

F = TypeVar("F", bound=Callable[..., Any])


def os_error(exc: OSError, path: str, doing: str, detail: str = "") -> H5SubfileError:
    """The error of the hierarchy for an operating-system error ``exc`` met while doing
    ``doing`` to ``path`` ("close", "write the record of"): ``cannot <doing> <user's file>:
    [Errno 28] No space left on device (ENOSPC)<detail>``, errno and file kept."""
    code = exc.errno if isinstance(exc.errno, int) and exc.errno else errno.EIO
    return failed(path, doing, code, detail)


def failed(path: str, doing: str, code: int, detail: str = "") -> H5SubfileError:
    """The error for errno ``code`` met while doing ``doing`` to ``path`` (see
    :func:`os_error`)."""
    name = user_path(path)
    error = error_class("OSError", code)(f"cannot {doing} {name}: {errno_text(code)}{detail}")
    keep_errno(error, code)
    assert isinstance(error, OSError)
    error.filename = name
    return error


def hdf5_error(exc: BaseException, path: str, doing: str) -> H5SubfileError:
    """The error an HDF5 failure ``exc``, met while doing ``doing`` to ``path``, is raised as
    (see the module's docstring): with its operating-system cause when one is found, else the
    class :func:`~h5subfile.errors.as_error` gives it, naming the user's file."""
    if isinstance(exc, H5SubfileError):
        return exc
    if isinstance(exc, OSError) and exc.filename is not None:  # one of our own calls
        return os_error(exc, path, doing)
    words = _HDF5_DETAIL.sub("", " ".join(str(exc).split())) or type(exc).__name__
    code = hdf5_errno(exc)
    if code is not None:
        return failed(path, doing, code, f" (HDF5: {words})")
    code = probe_folder(os.path.dirname(os.path.abspath(path)))
    if code is not None:
        return failed(path, doing, code, f", found once HDF5 had failed (HDF5: {words})")
    error = type(as_error(exc))(f"cannot {doing} {user_path(path)}: HDF5: {words}")
    return keep_errno(error, getattr(exc, "errno", None))


def hdf5_errno(exc: BaseException) -> int | None:
    """The errno behind an HDF5 failure when it says it: h5py's ``OSError`` carries it, or
    HDF5's detail of the failed system call names it (``errno = 28``)."""
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    if isinstance(code, int) and code:
        return code
    found = _HDF5_ERRNO.search(str(exc))
    if found is None or not int(found.group(1)):
        return None
    return int(found.group(1))


def probe_folder(folder: str, room: int = PROBE_BYTES) -> int | None:
    """The errno a write of ``room`` bytes into ``folder`` meets now, or None when it
    succeeds: a read-only mount (EROFS); no free block left (ENOSPC); else a test file of one
    block, written, synced, grown to ``room`` bytes (allocated, not written) and removed
    (EACCES, EDQUOT, EIO, ENOSPC, ...)."""
    try:
        fs = os.statvfs(folder)
    except OSError as exc:
        return exc.errno or errno.EIO
    if fs.f_flag & os.ST_RDONLY:
        return errno.EROFS
    if (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) == 0:
        return errno.ENOSPC
    test = os.path.join(folder, f".h5subfile-probe-{uuid.uuid4().hex}")
    try:
        fd = os.open(test, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        return exc.errno or errno.EIO
    try:
        os.write(fd, bytes(fs.f_bsize or 4096))
        os.fsync(fd)
        _allocate(fd, 0, room)
    except OSError as exc:
        return exc.errno or errno.EIO
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(test)
    return None


def _allocate(fd: int, offset: int, length: int) -> bool:
    """Allocate ``length`` bytes of the file from ``offset`` (``posix_fallocate``): whether
    it could be asked (a file system without it says EOPNOTSUPP or EINVAL, and nothing is
    allocated); no room raises ENOSPC or EDQUOT."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return False
        raise
    return True


def reserve_space(path: str, nbytes: int, doing: str) -> int:
    """Allocate ``nbytes`` after the end of the file ``path`` (it grows by as many zeros), so
    that the writes that follow there find room however full the disk gets meanwhile; returns
    its size before. HDF5 opening it afterwards writes its metadata into that room and
    truncates the file to what it uses at its next flush or close. Raises the error of the
    hierarchy naming ``path`` (for ``doing``) when there is no room (ENOSPC, EDQUOT) or no
    writing (EROFS, EACCES, EIO), the file then as it was. Where the file system cannot
    allocate ahead, nothing is reserved."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        raise os_error(exc, path, doing) from exc
    try:
        size = os.fstat(fd).st_size
        _allocate(fd, size, nbytes)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)  # what was allocated before the room ran out
        raise os_error(exc, path, doing, f": it needs {nbytes} bytes free to start") from exc
    finally:
        os.close(fd)
    return size


@contextlib.contextmanager
def hdf5_writing(path: str, doing: str) -> Iterator[None]:
    """Run HDF5 calls that write ``path`` (``doing``: what they do to it, for the message):
    their failure is raised as :func:`hdf5_error`; our own errors pass unchanged."""
    try:
        yield
    except H5SubfileError:
        raise
    except (OSError, RuntimeError) as exc:
        raise hdf5_error(exc, path, doing) from exc


def hdf5_writes(doing: str) -> Callable[[F], F]:
    """Decorator of a method of an object whose ``path`` is the file its HDF5 calls write:
    runs it under :func:`hdf5_writing`."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:  # hdf5_writing's handling, inline: a master's attributes come in thousands
                return fn(self, *args, **kwargs)
            except H5SubfileError:
                raise
            except (OSError, RuntimeError) as exc:
                raise hdf5_error(exc, self.path, doing) from exc

        return wrapper  # type: ignore[return-value]

    return decorate


def close_hdf5(h5: h5py.File, path: str) -> None:
    """Close an HDF5 file our code wrote (``path``: the user's name for it); a failure is
    raised as :func:`hdf5_error`, once HDF5 has let go of the file (:func:`let_go`)."""
    try:
        h5.close()
    except (OSError, RuntimeError) as exc:
        let_go(h5)
        raise hdf5_error(exc, path, "close") from exc


def let_go(h5: h5py.File) -> None:
    """Make HDF5 forget a file whose close failed (best effort, nothing raised). When HDF5's
    last flush fails, h5py's close leaves the file open in the library, its metadata cache
    half flushed: a later open of the same file in this process would be handed that cache
    (``slist already enabled?``) instead of the file. Closing the ids again releases it."""
    for _ in range(3):
        try:
            if not h5.id.valid:
                return
            h5.close()
        except Exception:  # noqa: BLE001, S112 - the file is given up: try again
            continue

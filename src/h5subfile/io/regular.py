"""Files that must be regular files (masters, subfiles, claims, profiles, Darshan logs): a
FIFO, socket, device or folder in their place is refused with NotRegularFileError naming it,
before anything opens it in a way that could block (a FIFO's open waits for its other end,
its read for data that never comes).

:func:`open_regular` opens non-blocking and checks with ``fstat`` before anything reads;
:func:`require_regular` checks with ``stat`` before HDF5 opens a path.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import NotRegularFileError

#: What :func:`file_kind` calls each kind of file that is not a regular one.
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words ("a regular file", "a FIFO"...)."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def require_regular(path: str, what: str) -> None:
    """Raise NotRegularFileError unless ``path`` is missing or a regular file (after symlinks):
    for files another library opens (HDF5), checked with ``stat``, which never blocks, before
    that library's open could block on a FIFO or a device. ``what``: the file's role."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreachable: the open that follows says so
    if not stat.S_ISREG(mode):
        raise not_regular(path, what, mode)


def not_regular(path: str, what: str, mode: int) -> NotRegularFileError:
    """The error for ``path`` (the ``what`` of the message) found to be of ``st_mode`` ``mode``."""
    return NotRegularFileError(
        errno.EINVAL, f"{what} {path} is {file_kind(mode)}, not a regular file"
    )


def open_regular(path: str, flags: int, what: str, mode: int = 0o666) -> int:
    """``os.open`` that never blocks on a FIFO or device: opened non-blocking, then refused
    with NotRegularFileError unless ``fstat`` says it is a regular file (then made blocking
    again). ``what``: the file's role, for the message."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY, mode)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without reader, a folder
            require_regular(path, what)
        raise
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise not_regular(path, what, status.st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, what: str, limit: int = -1) -> bytes:
    """The bytes of the regular file ``path`` (the first ``limit`` when given): a FIFO or a
    device is refused (:func:`open_regular`), never read until it ends."""
    fd = open_regular(path, os.O_RDONLY, what)
    with os.fdopen(fd, "rb") as source:
        return source.read(limit)


def write_regular(path: str, text: str, what: str) -> None:
    """Write ``text`` as the whole of the file ``path`` (created, or truncated if it is a
    regular file; a FIFO or device is refused, :func:`open_regular`)."""
    fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, what, 0o644)
    with os.fdopen(fd, "w") as out:
        out.write(text)

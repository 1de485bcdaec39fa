"""Exclusive claims: one write session at a time per file.

Rank 0 of a write session claims the master before it touches the master, its ``.partial``
copy or any subfile, and holds the claim until the session closes or is abandoned. The claim is
a small JSON file beside the master (``run.h5.lock``: the owner's host, pid, start time, session
id and mode), made atomically and complete: the record is written to a file of a unique name,
locked (``fcntl``: an open file description lock on Linux, else a
POSIX lock) and hard-linked to the claim's name, which fails when that name exists (the
recipe open(2) gives for NFS; where hard links are refused, ``O_CREAT | O_EXCL``). The owner
keeps the file open and locked while it holds the claim, so the kernel drops the lock when the
process ends, however it ends.

A writer that finds a claim decides whether its owner still runs (:func:`_judge`):

- the lock is held: alive;
- the lock is free, and the owner locked it on this host or on a file system whose locks reach
  every host (:func:`lock_scope`): the owner stopped, the claim is *stale* and is replaced;
- no usable lock: on the owner's host, whether its pid still runs (and started when it did);
- otherwise (another host, and locks that stay on each host) it cannot tell: the claim stays
  until it is removed (delete the claim file, or set ``H5SUBFILE_BREAK_CLAIM=1``).

The claims this process holds are in ``_HELD``: a nested open (the same job opening the file
twice) is busy without looking at the file, and this module never opens a claim file its
process holds (where only POSIX locks exist, closing any descriptor of a file drops all of the
process's locks on it).

The claim's record is synced before it is linked only where other hosts may read it
(:func:`record_synced`); :func:`claim_state` tells readers (``follow``) whether a writer is at
work, taking no claim.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import struct
import time
from dataclasses import dataclass

from ..errors import FileBusyError, H5SubfileError, MissingFileError, NotRegularFileError
from ..layout.names import claim_path
from ..profiler.counters import Profile
from .causes import os_error
from .filesystem import find_mount, local_type, read_mountinfo
from .posix import FileCalls

#: Set (``1``) in rank 0's environment to replace a claim whose owner cannot be shown to run
#: (taken on another host where locks do not reach across hosts). A live owner is never displaced.
BREAK_ENV = "H5SUBFILE_BREAK_CLAIM"
ATTEMPTS = 5  # claim attempts when other writers keep replacing the claim file
_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)  # Linux
BUSY_RETRIES = 3  # lock attempts on a claim file, 20 ms apart (a reader may test it at that moment)
#: How messages name the claim file (the file next to the master that says who writes it).
CLAIM_FILE = "claim file"


@dataclass(frozen=True)
class Owner:
    """What a claim file records: who holds the claim."""

    host: str
    pid: int
    started: str  # UTC, ISO 8601
    session: str  # the write session's uuid (the file's record)
    mode: str
    locks: str  # how far the owner's lock reaches: "shared" (every host), "local", "none"
    pid_start: int | None = None  # the process's start (ticks since boot): pid reuse shows

    def describe(self) -> str:
        return (
            f"host {self.host}, pid {self.pid}, session {self.session[:8]}, "
            f"mode {self.mode!r}, since {self.started}"
        )

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    @classmethod
    def parse(cls, data: bytes) -> Owner | None:
        """The owner recorded in ``data``, or None when it is not a complete record."""
        try:
            fields = json.loads(data)
            start = fields.get("pid_start")
            return cls(
                host=str(fields["host"]),
                pid=int(fields["pid"]),
                started=str(fields["started"]),
                session=str(fields["session"]),
                mode=str(fields["mode"]),
                locks=str(fields.get("locks", "none")),
                pid_start=None if start is None else int(start),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class Claim:
    """A claim this process holds, until :meth:`release`."""

    def __init__(
        self,
        path: str,
        key: str,
        fd: int,
        owner: Owner,
        recovered: str | None,
        calls: FileCalls | None = None,
    ):
        self.path = path  # the claim file
        self.calls = calls or FileCalls()  # its descriptor's close is recorded there
        self.key = key
        self.fd: int | None = fd  # open and locked while the claim is held
        self.owner = owner
        #: What replacing a stale claim found (whose it was, why it was stale), for a warning.
        self.recovered = recovered

    @property
    def session(self) -> str:
        return self.owner.session

    def renew(self, session: str) -> None:
        """Hand the claim, without letting go of it, to the next write session of the same
        job (``File.commit``): its record names ``session`` from now on."""
        assert self.fd is not None, "a released claim cannot be renewed"
        self.owner = dataclasses.replace(self.owner, session=session)
        # Not synced: the lock, held throughout, is what other writers go by; the record
        # only names the holder in their messages.
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, self.owner.to_bytes(), 0)

    def release(self) -> None:
        """Remove the claim file (when it is still this claim's) and drop the lock; idempotent."""
        fd, self.fd = self.fd, None
        if fd is None:
            return
        _HELD.pop(self.key, None)
        try:
            if _same_file(self.path, self.calls.fstat(fd)):
                os.unlink(self.path)  # first, so the file never lies there unlocked
        except OSError:
            pass
        finally:
            self.calls.close(fd)


_HELD: dict[str, Claim] = {}  # the claims this process holds, by claim file (folder resolved)


def take(master_path: str, session: str, mode: str, profile: Profile | None = None) -> Claim:
    """Claim ``master_path`` for write session ``session`` (rank 0).

    Raises FileBusyError naming the owner when another session holds the claim (another job,
    or this process: a nested open). A stale claim (its owner is known to have stopped) is
    replaced; the returned claim's ``recovered`` then says whose it was. The claim file's
    opens, reads, writes, fsyncs and closes are counted in ``profile`` when given.
    """
    calls = FileCalls(profile)
    path = claim_path(master_path)
    key = _key(path)
    held = _HELD.get(key)
    if held is not None:
        raise FileBusyError(
            f"{master_path} is already open for writing in this process "
            f"({held.owner.describe()}): close that session before opening the file for "
            "writing again (reading it, mode 'r', is allowed)"
        )
    mounts = read_mountinfo()
    scope = lock_scope(os.path.dirname(path), mounts)
    synced = record_synced(os.path.dirname(path), mounts)
    pid = os.getpid()
    owner = Owner(socket.gethostname(), pid, _now(), session, mode, scope, _process_start(pid))
    recovered = None
    for _ in range(ATTEMPTS):
        try:
            fd, written = _create(path, owner, synced, calls)
            found = None if fd is not None else _inspect(path, scope, breaking=True, calls=calls)
        except FileNotFoundError:
            raise MissingFileError(
                f"cannot write {master_path}: its folder {os.path.dirname(path)} does not exist"
            ) from None
        except H5SubfileError:
            raise
        except OSError as exc:  # a read-only mount, a full disk, a quota, no permission...
            raise os_error(exc, path, f"write {master_path}: its claim file") from exc
        if fd is not None:
            claim = Claim(path, key, fd, written, recovered, calls)
            _HELD[key] = claim
            return claim
        if found is None:
            _refuse_dangling(master_path, path)
            continue  # it went away meanwhile
        state, other, why = found
        described = "whose record cannot be read" if other is None else f"{other.describe()}"
        if state == "stale":
            recovered = (
                f"replaced a stale claim on {master_path} ({described}): {why}; its writer "
                "stopped without closing the file"
            )
            continue
        raise FileBusyError(_busy_message(master_path, path, state, described, why))
    raise FileBusyError(
        f"{master_path}: other writers kept claiming it ({ATTEMPTS} attempts); "
        "one write session at a time may open a file"
    )


def _refuse_dangling(master_path: str, path: str) -> None:
    """Raise NotRegularFileError when the claim's name is a symbolic link to nothing: the
    claim cannot be made there (its name is taken) nor read, so no writer could ever claim
    the file until the link is removed."""
    try:
        target = os.readlink(path)
    except OSError:
        return  # not a link (or gone): the claim file went away meanwhile
    if not os.path.exists(path):
        raise NotRegularFileError(
            errno.ENOENT,
            f"{CLAIM_FILE} {path} is a dangling symbolic link (to {target}, which does not "
            f"exist): no write session can claim {master_path} while it is there. h5subfile "
            f"never makes such a link; remove it (rm {path}) and open the file again",
        )


def _busy_message(master_path: str, path: str, state: str, described: str, why: str) -> str:
    if state == "alive":
        return (
            f"{master_path} is being written by another session ({described}; {why}): one "
            "write session at a time may open a file. Wait until it closes, or read the last "
            "committed state with mode 'r'"
        )
    return (
        f"{master_path} is claimed by a write session that may still run ({described}; {why}). "
        f"If that job has ended, delete {path} or set {BREAK_ENV}=1 for the next writer"
    )


def claim_state(master_path: str) -> tuple[str, Owner | None]:
    """Whether a write session holds ``master_path``: ``("none" | "alive" | "stale" |
    "unknown", owner)``. For readers: takes no claim (a lock test of a moment, refused while
    the owner holds its own) and removes nothing."""
    path = claim_path(master_path)
    held = _HELD.get(_key(path))
    if held is not None:
        return "alive", held.owner
    found = _inspect(path, lock_scope(os.path.dirname(path)), breaking=False)
    if found is None:
        return "none", None
    return found[0], found[1]


def _create(path: str, owner: Owner, synced: bool, calls: FileCalls) -> tuple[int | None, Owner]:
    """Make the claim file, complete and locked: (its descriptor, the owner recorded), or
    (None, owner) when a claim file exists. ``synced``: the record is synced before the
    claim's name is linked to it (:func:`record_synced`)."""
    folder, name = os.path.split(path)
    unique = os.path.join(folder, f".{name}.{owner.session}")
    fd = calls.open(unique, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    try:
        owner = _write_owner(fd, owner, synced, calls)
        linked = _link(unique, path, fd)
    except BaseException:
        calls.close(fd)
        raise
    finally:
        try:
            os.unlink(unique)
        except OSError:
            pass
    if linked is None:  # no hard links on this file system
        calls.close(fd)
        return _create_exclusive(path, owner, synced, calls)
    if not linked:
        calls.close(fd)
        return None, owner
    return fd, owner


def _write_owner(fd: int, owner: Owner, synced: bool, calls: FileCalls) -> Owner:
    """Lock a new claim file and write its record, synced when other hosts may read it."""
    if _lock(fd) != "ok":
        owner = dataclasses.replace(owner, locks="none")
    calls.write(fd, owner.to_bytes())
    if synced:
        calls.fsync(fd)
    return owner


def _link(unique: str, path: str, fd: int) -> bool | None:
    """Hard-link ``unique`` to ``path``: whether it was made; None when links are refused."""
    try:
        os.link(unique, path)
    except FileExistsError:
        return os.fstat(fd).st_nlink > 1  # NFS may retry a link it made and report it exists
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
            return None
        raise
    return True


def _create_exclusive(
    path: str, owner: Owner, synced: bool, calls: FileCalls
) -> tuple[int | None, Owner]:
    """:func:`_create` where hard links are refused: ``O_CREAT | O_EXCL``, then the record
    (a writer finding the file before its record is written says it is busy)."""
    try:
        fd = calls.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    except FileExistsError:
        return None, owner
    try:
        return fd, _write_owner(fd, owner, synced, calls)
    except BaseException:
        calls.close(fd)
        os.unlink(path)
        raise


def _inspect(
    path: str, scope: str, breaking: bool, calls: FileCalls | None = None
) -> tuple[str, Owner | None, str] | None:
    """An existing claim file: (state, its owner, why). None when there is none (or it was
    replaced while looked at). With ``breaking``, a stale claim is removed (a writer's
    :func:`take`; ``H5SUBFILE_BREAK_CLAIM`` then also makes an undecidable claim stale)."""
    calls = calls or FileCalls()
    shared = not breaking  # readers test with a shared lock, on a descriptor opened to read
    try:
        fd = calls.open(path, os.O_RDONLY if shared else os.O_RDWR, what=CLAIM_FILE)
    except PermissionError:
        if shared:
            return None
        fd, shared = calls.open(path, os.O_RDONLY, what=CLAIM_FILE), True  # another user's
    except FileNotFoundError:
        return None
    try:
        before = calls.fstat(fd)
        owner = Owner.parse(_read_all(fd, calls))
        lock = _lock(fd, shared)
        for _ in range(BUSY_RETRIES - 1):
            if lock != "busy":
                break
            time.sleep(0.02)
            lock = _lock(fd, shared)
        if not _same_file(path, before):
            return None
        state, why = _judge(owner, lock, scope)
        if breaking and state == "unknown" and _break_requested():
            state, why = "stale", f"{BREAK_ENV} is set"
        if breaking and state == "stale":
            try:
                os.unlink(path)  # checked above: the file judged, whose lock this process holds
            except FileNotFoundError:
                pass
        return state, owner, why
    finally:
        calls.close(fd)


def _judge(owner: Owner | None, lock: str, scope: str) -> tuple[str, str]:
    """Whether a claim's owner still runs: ("alive" | "stale" | "unknown", why), given the
    outcome of a lock test on its file (``lock``) and how far locks reach here (``scope``)."""
    if lock == "busy":
        return "alive", "it holds its lock"
    if owner is None:
        return "unknown", "the claim file holds no complete record"
    here = owner.host == socket.gethostname()
    if lock == "ok" and owner.locks != "none":
        if here or (owner.locks == "shared" and scope == "shared"):
            return "stale", f"its lock on the claim file is free: process {owner.pid} ended"
    if here:
        if _running(owner.pid, owner.pid_start):
            return "alive", f"process {owner.pid} still runs"
        return "stale", f"process {owner.pid} no longer runs"
    return "unknown", (
        f"it was taken on host {owner.host} and file locks here do not reach across hosts, "
        "so whether it still runs cannot be told from this host"
    )


def _lock(fd: int, shared: bool = False) -> str:
    """Try to lock a whole file, without waiting: "ok", "busy" (another process, or another
    descriptor of this one, holds a lock on it) or "none" (the file system refuses locks: NFS
    without its lock daemons, Lustre mounted with ``noflock``).

    Linux's open file description locks are used where the kernel has them (3.15 and newer):
    unlike classic POSIX locks, they belong to the descriptor, so closing another descriptor of
    the file in this process (a user's ``open(...).read()``) does not drop them.
    """
    kind = fcntl.F_RDLCK if shared else fcntl.F_WRLCK
    try:
        if _OFD_SETLK is None:
            raise OSError(errno.EINVAL, "no open file description locks")
        # struct flock: type, whence, start, length 0 (the whole file), pid 0 (required)
        fcntl.fcntl(fd, _OFD_SETLK, struct.pack("@hhqqixxxx", kind, os.SEEK_SET, 0, 0, 0))
        return "ok"
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return "busy"
        if exc.errno != errno.EINVAL:
            return "none"
    try:  # classic POSIX locks
        fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as exc:
        return "busy" if exc.errno in (errno.EAGAIN, errno.EACCES) else "none"
    return "ok"


def lock_scope(folder: str, mounts: list[str] | None = None) -> str:
    """How far file locks reach in ``folder``: "shared" (every host that sees the file: local
    disks, NFS with its lock daemons, Lustre mounted with ``flock``) or "local" (only this host:
    Lustre with ``localflock``, NFS with ``nolock`` or ``local_lock``, BeeGFS, whose global
    locks are off by default). ``mounts``: the lines of /proc/self/mountinfo (read when None)."""
    fstype, options = _mount_of(folder, mounts)
    if fstype.startswith("nfs") and (
        "nolock" in options or options & {"local_lock=all", "local_lock=posix"}
    ):
        return "local"
    if (fstype == "lustre" and "localflock" in options) or fstype == "beegfs":
        return "local"
    return "shared"


def record_synced(folder: str, mounts: list[str] | None = None) -> bool:
    """Whether a claim record made in ``folder`` is synced before the claim is linked: where
    other hosts may read it (every file system but a local one, and where the type is
    unknown), since an NFS client reads what another client wrote into a file still open only
    once it is synced; on a local disk every process reads it from the page cache, and a sync
    would only wait for the disk. ``mounts``: as for :func:`lock_scope`."""
    return not local_type(_mount_of(folder, mounts)[0])


def _mount_of(folder: str, lines: list[str] | None = None) -> tuple[str, frozenset[str]]:
    """Type and options of the mount holding ``folder``, from ``lines`` of Linux's
    /proc/self/mountinfo (read when None; ``("", frozenset())`` where there is none)."""
    found = find_mount(os.path.realpath(folder), read_mountinfo() if lines is None else lines)
    return ("", frozenset()) if found is None else (found.kind, found.options)


def _running(pid: int, start: int | None) -> bool:
    """Whether process ``pid`` of this host runs and (when known) started at ``start``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it runs
    now = _process_start(pid)
    return start is None or now is None or now == start


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
        return int(text.rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _break_requested() -> bool:
    return os.environ.get(BREAK_ENV, "").strip().lower() in ("1", "yes", "true", "on")


def _key(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(folder), name)


def _same_file(path: str, known: os.stat_result) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (known.st_dev, known.st_ino)


def _read_all(fd: int, calls: FileCalls) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = calls.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

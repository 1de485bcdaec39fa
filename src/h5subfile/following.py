"""Reading a file while it is written, step by step: :func:`follow`.

A writer publishes the file at each commit (``File.commit()``, or ``commit_every_step=True``);
each commit records the top-level groups it completed, the *steps* (docs/FORMAT.md, *Steps*).
A follower's rank 0 watches the master and the writer's claim (io/claim.py) and tells every
rank of the follower what to do, one small broadcast per look:

- the master changed since it was last opened: every rank opens it again (collective, as any
  ``File(path, "r")``) and the steps not yet yielded are yielded, in order;
- no writer holds the file and the master is the one last opened, opened again after the
  writer was seen gone (whatever a network file system's caches say): the writer closed it
  for good, the iteration ends;
- the writer stopped without closing it (its claim is stale): every step it committed has
  been yielded, :class:`~h5subfile.errors.WriterStoppedError` says so;
- nothing new for ``timeout`` seconds: :class:`~h5subfile.errors.FollowTimeoutError`.

The claim is looked at before the master, so a writer that commits and releases its claim
between the two looks is never mistaken for one that closed before its last commit; a master
with no claim yet is waited for (a writer claims the file before it makes anything). The steps
yielded must stay the first steps of every master opened later, which must also have the same
first write session: a file rewritten (mode "w") while followed raises instead of mixing two
runs. Readers
take no lock the writer waits for: the master is replaced by a rename (the follower keeps
reading the copy it opened) or, changed in place, opened without HDF5's file lock.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mpi4py import MPI

from .errors import (
    CorruptFileError,
    FollowTimeoutError,
    H5SubfileError,
    IncompleteFileError,
    MissingFileError,
    PlanError,
    WriterStoppedError,
)
from .files import File, Group
from .io.claim import claim_state
from .mpi.collective import agree, root_only
from .units import parse_duration

#: Seconds between two looks at the master while nothing changes.
POLL_INTERVAL = 0.05
#: What an open of a master being written may raise while its writer is at work (the first
#: commit has not landed, or the master is changed in place at that moment): look again.
_TRANSIENT = (IncompleteFileError, CorruptFileError, MissingFileError)


@dataclass(frozen=True)
class _Decision:
    """Rank 0's verdict of one look, broadcast to every rank."""

    action: str  # "open", "wait", "end", "stopped", "timeout"
    signature: tuple[int, ...] | None = None
    writer: str = "none"  # the claim's state when rank 0 looked
    message: str = ""


def _signature(path: str) -> tuple[int, ...] | None:
    """What changes when the master is replaced or changed in place; None while missing.
    Taken from an open file (``fstat``), which network file systems revalidate, where a
    ``stat`` by name may answer from a cache of attributes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        status = os.fstat(fd)
    finally:
        os.close(fd)
    return (status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


class _Watch:
    """Rank 0's view of the file: what it last opened, and since when nothing came."""

    def __init__(self, path: str, timeout: float | None):
        self.path = path
        self.timeout = timeout
        self.opened: tuple[int, ...] | None = None
        self.since = time.monotonic()
        #: the master was opened after no writer was seen: the next unchanged look ends
        self.final = False

    def look(self) -> _Decision:
        state, owner = claim_state(self.path)  # first: see the module's docstring
        signature = _signature(self.path)
        gone = state in ("none", "stale")  # no writer at work (closed, or stopped)
        if signature is not None and (signature != self.opened or (gone and not self.final)):
            # With no writer, open once more even if nothing seems to have changed, so that
            # the last commit is read whatever a file system's timestamps and caches say.
            self.final = gone
            return _Decision("open", signature, state)
        if state == "none" and signature is not None:
            return _Decision("end", writer=state)
        if state == "stale":
            who = f" ({owner.describe()})" if owner is not None else ""
            return _Decision(
                "stopped",
                writer=state,
                message=f"the writer of {self.path}{who} stopped without closing it; every step "
                "it committed was read, later steps never came",
            )
        self.final = False
        if self.timeout is not None and time.monotonic() - self.since > self.timeout:
            waiting = "its first step" if self.opened is None else "a new step"
            return _Decision(
                "timeout",
                writer=state,
                message=f"no new step of {self.path} in {self.timeout:g} s (waiting for "
                f"{waiting}; writer: {state})",
            )
        return _Decision("wait", writer=state)


def follow(
    path: str | os.PathLike[str],
    comm: MPI.Comm | None = None,
    timeout: float | None = 60.0,
    poll_interval: float = POLL_INTERVAL,
    **read_options: Any,
) -> Iterator[Group]:
    """Collective (the call, and each step asked for): an iterator yielding each completed
    step (a top-level group) of the file at ``path`` as soon as the commit that completes it
    lands, in order, each exactly once, never a partial one; it ends when the writer closes
    the file for good.

    Works with any number of ranks in ``comm`` (default ``MPI.COMM_WORLD``), and on a file
    already closed (its steps, then the end). ``timeout``: seconds to wait for the next step
    (None: wait for ever) before :class:`~h5subfile.errors.FollowTimeoutError`; a writer that
    stops without closing the file ends the iteration with
    :class:`~h5subfile.errors.WriterStoppedError`, once every step it committed was yielded.
    ``read_options`` go to ``File(path, "r", ...)`` (``verify``, ``aggregators``, ...).

    A yielded group belongs to the file as opened when it came: use it (read its datasets,
    collectively or not) before asking for the next step, which may reopen the file.

    ``timeout`` and ``poll_interval`` are seconds, >= 0 (``timeout``: also None or infinity,
    no limit); anything else (a negative number, NaN) raises PlanError (a ValueError) naming
    it, on every rank, at the call (before anything is looked at).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    error = None
    try:
        endless = timeout is None or timeout == math.inf
        timeout = None if endless else _seconds("timeout", timeout, " (None: wait for ever)")
        poll_interval = _seconds("poll_interval", poll_interval)
    except PlanError as exc:
        error = exc
    agree(comm, error)
    return _follow(os.path.abspath(os.fspath(path)), comm, timeout, poll_interval, read_options)


def _seconds(name: str, value: Any, hint: str = "") -> float:
    """``value``, a number of seconds >= 0, else PlanError naming ``name`` and the value."""
    try:
        return parse_duration(value)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{name}={value!r}: {exc}{hint}") from None


def _follow(
    path: str,
    comm: MPI.Comm,
    timeout: float | None,
    poll_interval: float,
    read_options: dict[str, Any],
) -> Iterator[Group]:
    """:func:`follow`'s steps, its arguments checked."""
    watch = _Watch(path, timeout) if comm.rank == 0 else None
    current: File | None = None
    yielded: list[str] = []
    origin: list[str] = []  # the first write session's uuid: the file the steps came from
    try:
        while True:
            decision = root_only(comm, watch.look if watch is not None else _nothing)
            if decision.action == "wait":
                time.sleep(poll_interval)
                continue
            if decision.action in ("end", "stopped", "timeout"):
                if decision.action == "end":
                    return
                error = WriterStoppedError if decision.action == "stopped" else FollowTimeoutError
                raise error(decision.message)
            if current is not None:
                current.close()
                current = None
            current = _open(path, comm, decision, read_options)
            if watch is not None:
                watch.opened = decision.signature
            if current is None:
                time.sleep(poll_interval)
                continue
            for step in _new_steps(current, yielded, origin):
                group = current[step]
                assert isinstance(group, Group)  # steps are groups (Catalog.steps)
                yield group
                yielded.append(step)
                if watch is not None:
                    watch.since = time.monotonic()
    finally:
        if current is not None:
            current.close()


def _nothing() -> _Decision:
    raise AssertionError("only rank 0 looks")  # root_only calls it on rank 0 alone


def _open(path: str, comm: MPI.Comm, decision: _Decision, options: dict[str, Any]) -> File | None:
    """Collective: the master as it stands, or None when it cannot be opened yet because its
    writer is at work (then look again); raised when no writer is."""
    try:
        with warnings.catch_warnings():
            # What the master's scan finds (the session at work, changed in place) is the
            # writer's business here; a damaged step raises when it is read.
            warnings.simplefilter("ignore", RuntimeWarning)
            return File(path, "r", comm=comm, **options)
    except _TRANSIENT:
        if decision.writer in ("alive", "unknown"):
            return None
        raise


def _new_steps(file: File, yielded: list[str], origin: list[str]) -> list[str]:
    """The steps of ``file`` after those already yielded; raises when the file is no longer
    the one they came from (rewritten, mode "w", meanwhile: its first session differs)."""
    catalog = file._session.catalog
    first = catalog.record.sessions[0].uuid if catalog.record.sessions else ""
    if not origin:
        origin.append(first)
    steps = catalog.steps()
    if first != origin[0] or steps[: len(yielded)] != yielded:
        raise H5SubfileError(
            f"{file.filename} was replaced while followed: its steps are no longer "
            f"{', '.join(yielded[:3])}{'...' if len(yielded) > 3 else ''}"
        )
    return steps[len(yielded) :]

"""Profiled sessions (docs/PROFILING.md): a session opened with ``profile=DIR`` (or with
``H5SUBFILE_PROFILE=DIR`` set) counts every system call of ``RawFile`` in a
:class:`~h5subfile.profiler.counters.Profile` on each rank; its close gathers the ranks' profiles on
rank 0, which writes ``DIR/<file name>.<mode>.json`` and ``.txt``. Unprofiled sessions never
enter this module after the open.

The profile starts after the open's agreement round (the folder is one of the arguments every
rank must pass alike) and rides on the session's ``IOStats``. The close of a profiled file is
collective even when the file was opened for reading.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from mpi4py import MPI

from ..errors import PlanError
from ..io.h5 import collect_hdf5_logs
from ..io.regular import write_regular
from ..mpi.collective import bcast, gather, root_only, waited
from ..profiler.counters import PROFILE_ENV, TRACE_ENV, Profile
from ..profiler.reduction import format_text, parse_mounts, reduce_profiles, to_json

F = TypeVar("F", bound=Callable[..., Any])


def phase(name: str) -> Callable[[F], F]:
    """Decorator of an engine function whose first argument is the session: in a profiled
    session each call is one interval of phase ``name``; otherwise one attribute test."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def timed(session: Any, *args: Any, **kwargs: Any) -> Any:
            profile = session.stats.profile
            if profile is None:
                return fn(session, *args, **kwargs)
            with profile.phases.timed(name):
                return fn(session, *args, **kwargs)

        return cast(F, timed)

    return decorate


def add_measured_phases(
    profile: Profile, stats: Any, comm: MPI.Comm, waited_before: tuple[float, int]
) -> None:
    """The phases measured elsewhere: in the engine's ``IOStats`` exchanges between ranks,
    compression, fsyncs (counted per fsync); in the polled collective rounds on ``comm``,
    the time spent waiting for other ranks since ``waited_before`` (the session's start)."""
    waited, waits = waited_since(comm, waited_before)
    for name, seconds, count in (
        ("exchange", stats.exchange_seconds, 1),
        ("compress", stats.compress_seconds, 1),
        ("fsync", stats.sync_seconds, stats.syncs),
        ("rehash", stats.rehash_seconds, stats.rehashes),
        ("wait", waited, waits),
    ):
        if seconds > 0:
            profile.phases.add(name, seconds, count)


def waited_since(comm: MPI.Comm, before: tuple[float, int]) -> tuple[float, int]:
    """Seconds and rounds this rank waited for others on ``comm`` since ``before``."""
    seconds, rounds = waited(comm)
    return seconds - before[0], rounds - before[1]


def profile_folder(argument: str | os.PathLike[str] | None) -> str | None:
    """The folder a session's profile goes to: the argument, else ``H5SUBFILE_PROFILE``, else
    None (not profiled). Absolute, so that every rank names the same folder."""
    chosen = os.fspath(argument) if argument is not None else os.environ.get(PROFILE_ENV, "")
    return os.path.abspath(chosen) if chosen else None


def new_profile(rank: int) -> Profile:
    """This rank's profile, with the trace ``H5SUBFILE_PROFILE_TRACE`` asks for (none if
    unset); PlanError naming the variable if it is not ``N`` or ``N:first``/``N:last``."""
    text = os.environ.get(TRACE_ENV, "").strip()
    limit, _, keep = text.partition(":")
    try:
        return Profile(rank=rank, trace_limit=int(limit or 0), keep=keep or "first")
    except ValueError as exc:
        raise PlanError(f"{TRACE_ENV}={text!r}: {exc} (expected N, N:first or N:last)") from None


def start_profile(comm: MPI.Comm, profile: Profile | None) -> float:
    """Collective when profiling (after the open's agreement, so every rank profiles or none
    does): rank 0's wall-clock time, which the profile's timestamps are counted from; the
    ranks' clocks restart at this moment, so they are aligned to within one broadcast."""
    if profile is None:
        return 0.0
    started = float(bcast(comm, time.time() if comm.rank == 0 else None))
    profile.origin = profile.clock()
    return started


def finish_profile(
    comm: MPI.Comm,
    profile: Profile,
    folder: str,
    path: str,
    mode: str,
    started: float,
    module: str = "POSIX",
) -> str:
    """Collective: gather every rank's profile on rank 0, which reduces them and writes the
    JSON and the text, ``DIR/<name of path>.read|write.json`` (``mode`` "r": read); every rank
    returns the JSON's path or raises rank 0's error. ``module``: what the records count
    (docs/PROFILING.md; POSIX system calls unless said otherwise)."""
    collect_hdf5_logs(profile)  # every HDF5 file of the session is closed by now
    run_time = profile.clock() - profile.origin
    gathered = gather(comm, profile.as_dict())
    stem = os.path.join(folder, f"{os.path.basename(path)}.{'read' if mode == 'r' else 'write'}")

    def write() -> str:
        assert gathered is not None
        doc = reduce_profiles(
            gathered,
            nprocs=int(comm.size),
            start=started,
            run_time=run_time,
            mounts=_mounts(),
            module=module,
        )
        os.makedirs(folder, exist_ok=True)
        write_regular(stem + ".json", to_json(doc), "profile")
        write_regular(stem + ".txt", format_text(doc), "profile")
        return stem + ".json"

    return root_only(comm, write)


def _mounts() -> list[tuple[str, str]]:
    """This machine's mounts (mount point, file system type), or none where there is no
    /proc/self/mounts."""
    try:
        with open("/proc/self/mounts") as table:
            return parse_mounts(table.read())
    except OSError:
        return []

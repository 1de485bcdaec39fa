"""Running a benchmark: IOR's phases, timing and bandwidth definition.

Each phase (write, read) of each iteration: barrier; every rank records when it starts opening,
finishes opening, finishes its transfers and finishes closing (after fsync with -e). The table
reports, over ranks, open = last open end - first open start, wr/rd = last transfer end - first
transfer start, close = last close end - first close start, total = last close end - first open
start, and bandwidth = aggregate bytes / total. Data checks (-W, -R) are separate, untimed passes.
With a profile folder, each timed phase is profiled (the checks are not): a backend that counts
its own calls starts its profile before the phase's barrier and writes it after the phase.

:func:`run_interleaved` runs several APIs in turns, repetition by repetition (``-a
posix,mpiio,subfile``, ``-a all``), so that a slow spell of a shared machine falls on every API
alike.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from ..mpi.collective import agree, root_only
from ..mpi.nodes import locate_nodes
from ..progress import Progress, percent
from . import pattern
from .backends import BACKENDS, Backend, Unavailable, remove_files
from .options import BenchOptions


@dataclass
class PhaseResult:
    """One row of IOR's results table."""

    access: str
    iteration: int
    bytes: int
    ops: int
    open_s: float
    xfer_s: float
    close_s: float
    total_s: float
    latency_s: float
    bad_transfers: int | None = None

    @property
    def bw_mib(self) -> float:
        return self.bytes / 2**20 / self.total_s if self.total_s > 0 else math.inf

    @property
    def iops(self) -> float:
        return self.ops / self.xfer_s if self.xfer_s > 0 else math.inf

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(bw_mib_s=self.bw_mib, iops=self.iops)
        return data


def read_shift(comm: MPI.Comm) -> int:
    """Collective: how far -C moves each reader: one node over, as IOR does; when the job runs
    on one node, one rank over (so that every rank still reads data another rank wrote)."""
    nodes = locate_nodes(comm)
    return len(nodes.members) if nodes.count > 1 else 1


def _phase(
    backend: Backend,
    writing: bool,
    source: int,
    words: np.ndarray,
    progress: Progress,
    held: np.ndarray | None = None,
) -> tuple[float, ...]:
    """One timed phase. ``held``: a block's transfers, one row each, written from their own
    rows (a plan that writes from the caller's arrays, ``async_zero_copy``, must not see a
    buffer change before the backend's flush); otherwise every transfer reuses ``words``."""
    options = backend.options
    comm = backend.comm
    backend.start_profile()
    comm.Barrier()
    error = None
    opened = MPI.Wtime()
    try:
        backend.open(writing, source)
    except Exception as exc:  # noqa: BLE001 - agreed below, so no rank hangs on a bad open
        error = exc
    open_end = MPI.Wtime()
    agree(comm, error)
    start = MPI.Wtime()
    per_block = options.transfers_per_block
    try:
        for segment in range(options.segments):
            for index in range(per_block):
                buffer = words if held is None else held[index]
                if writing:
                    pattern.stamp(buffer, segment, index)
                backend.transfer(writing, segment, index * options.transfer, buffer)
                progress.step(segment * per_block + index + 1)
    except Exception as exc:  # noqa: BLE001 - agreed below: one message, every rank ends
        error = exc
    end = MPI.Wtime()
    try:  # every rank syncs and closes (collective in some backends), even after an error
        if writing and options.fsync:
            backend.sync()
        backend.close()
    except Exception as exc:  # noqa: BLE001 - agreed below
        error = error or exc
    closed = MPI.Wtime()
    agree(comm, error)
    backend.finish_profile(writing)
    return opened, open_end, start, end, closed


def _check(backend: Backend, writing: bool, source: int) -> int:
    """Untimed pass: read back ``source``'s data and count transfers that are wrong."""
    options = backend.options
    body = pattern.transfer_words(options.transfer, source, 0)
    got = np.empty_like(body)
    bad, error = 0, None
    try:
        backend.open(False, source)
    except Exception as exc:  # noqa: BLE001 - agreed below: one message, every rank ends
        error = exc
    agree(backend.comm, error)
    try:
        for segment in range(options.segments):
            for index in range(options.transfers_per_block):
                backend.transfer(False, segment, index * options.transfer, got)
                bad += not pattern.check(got, body, segment, index)
    except Exception as exc:  # noqa: BLE001 - agreed below
        error = exc
    try:
        backend.close()
    except Exception as exc:  # noqa: BLE001 - agreed below
        error = error or exc
    agree(backend.comm, error)
    return bad


def _result(
    comm: MPI.Comm,
    access: str,
    iteration: int,
    options: BenchOptions,
    times: tuple[float, ...],
    bad: int | None,
    ops_per_rank: int,
) -> PhaseResult:
    gathered = comm.allgather(times)
    opened, open_end, start, end, closed = (np.array(column) for column in zip(*gathered))
    total_bad = None if bad is None else comm.allreduce(bad)
    return PhaseResult(
        access=access,
        iteration=iteration,
        bytes=comm.size * options.segments * options.block,
        ops=comm.size * ops_per_rank,
        open_s=float(open_end.max() - opened.min()),
        xfer_s=float(end.max() - start.min()),
        close_s=float(closed.max() - end.min()),
        total_s=float(closed.max() - opened.min()),
        latency_s=float(((end - start) / ops_per_rank).max()),
        bad_transfers=total_bad,
    )


class Runner:
    """One API's iterations, run one at a time so that several APIs can take turns."""

    def __init__(
        self, options: BenchOptions, comm: MPI.Intracomm, profile: str | None = None
    ) -> None:
        self.cls = BACKENDS[options.api]
        self.profile = profile
        reason = self.cls.unavailable()
        if reason:
            raise Unavailable(reason)
        self.options, self.comm = options, comm
        shift = read_shift(comm) if options.reorder else 0
        self.source = (comm.rank + shift) % comm.size
        self.words = pattern.transfer_words(options.transfer, comm.rank, 0)
        #: a block of transfers, filled before any timing, when the backend writes from the
        #: caller's arrays after the call returns (``async_zero_copy``)
        self.held = (
            np.tile(self.words, (options.transfers_per_block, 1))
            if self.cls.holds_buffers(options)
            else None
        )
        self.results: list[PhaseResult] = []
        self.cls(options, comm).prepare()

    def phases(self) -> int:
        """Timed phases per iteration (write and/or read)."""
        return int(self.options.write) + int(self.options.read)

    def iteration(self, iteration: int, progress: Progress, counter: list[int]) -> None:
        """Collective: iteration ``iteration`` (write and/or read phase, checks, clean-up)."""
        options, comm, cls = self.options, self.comm, self.cls
        backend = cls(options, comm, self.profile)
        for writing in (True, False):
            if not (options.write if writing else options.read):
                continue
            if writing:
                root_only(comm, functools.partial(remove_files, backend))
            counter[0] += 1
            access = "write" if writing else "read"
            label = (
                f"bench: [{counter[0]}/{counter[1]}] {options.api} iteration "
                f"{iteration + 1}/{options.iterations} {access}"
            )
            progress.phase(label, options.segments * options.transfers_per_block, _on_rank_0)
            source = comm.rank if writing else self.source
            buffer = self.words if writing else np.empty(options.transfer // 8, dtype=np.uint64)
            times = _phase(
                backend, writing, source, buffer, progress, self.held if writing else None
            )
            check = options.check_write if writing else options.check_read
            bad = _check(cls(options, comm), writing, source) if check else None
            ops = options.segments * backend.operations_per_block(writing)
            self.results.append(_result(comm, access, iteration, options, times, bad, ops))
            progress.finish(f"{label} {self.results[-1].bw_mib:.1f} MiB/s")
        if not options.keep:
            comm.Barrier()
            root_only(comm, functools.partial(remove_files, backend))


def _on_rank_0(done: int, total: int) -> str:
    """Where a phase is: the transfers rank 0 has done (the others go at their own pace)."""
    return f"{percent(done, total)} ({done}/{total} on rank 0)"


def run_interleaved(
    runs: Sequence[BenchOptions],
    comm: MPI.Intracomm,
    progress: Progress | None = None,
    profile: str | None = None,
) -> list[list[PhaseResult]]:
    """Collective: every API's iterations in turns (A B C A B C ...), so that a slow spell of
    the machine falls on every API alike; every rank returns the same results, one list per
    API. The APIs must have the same number of iterations. ``profile``: the folder every timed
    phase is profiled into (each iteration's profile replaces the one before)."""
    progress = progress or Progress(False)
    runners = [Runner(options, comm, profile) for options in runs]
    iterations = {options.iterations for options in runs}
    if len(iterations) != 1:
        raise ValueError(f"APIs run in turns need the same iteration count, not {iterations}")
    counter = [0, sum(r.phases() for r in runners) * iterations.pop()]
    for iteration in range(runs[0].iterations):
        for runner in runners:
            runner.iteration(iteration, progress, counter)
    progress.close()
    return [runner.results for runner in runners]


def run(
    options: BenchOptions, comm: MPI.Intracomm, progress: Progress | None = None
) -> list[PhaseResult]:
    """Collective: run every iteration of one API; every rank returns the same results."""
    return run_interleaved([options], comm, progress)[0]


def summarize(results: list[PhaseResult]) -> dict[str, dict[str, float]]:
    """IOR's 'Summary of all tests' numbers per access: bandwidth and OPs statistics."""
    summary = {}
    for access in ("write", "read"):
        rows = [r for r in results if r.access == access]
        if not rows:
            continue
        bws = [r.bw_mib for r in rows]
        ops = [r.iops for r in rows]
        summary[access] = {
            "max_mib": max(bws),
            "min_mib": min(bws),
            "mean_mib": statistics.fmean(bws),
            "stddev_mib": statistics.pstdev(bws),
            "max_ops": max(ops),
            "min_ops": min(ops),
            "mean_ops": statistics.fmean(ops),
            "stddev_ops": statistics.pstdev(ops),
            "mean_s": statistics.fmean(r.total_s for r in rows),
            "median_mib": statistics.median(bws),
        }
    return summary

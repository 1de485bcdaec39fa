"""h5bench-style metrics: total size, raw I/O time and rate, metadata time, observed time and rate.

Definitions (docs in README.md, *Kernel metrics*), for the job as a whole:

- **observed completion time**: from before the file is opened to after it is closed, on the
  slowest rank (max over ranks), excluding the time spent making or checking data (h5bench's
  ``t4 - t1``, taken after a barrier, is the slowest rank's too);
- **raw time**: the time inside the data writes (reads), on the slowest rank (max over ranks);
- **metadata time**: observed - raw, everything else in the observed time (opening, creating
  groups and datasets, coordination, closing), so that raw + metadata = observed exactly;
- **rates**: total bytes / raw time and total bytes / observed time, in MiB/s (h5bench labels
  the same numbers MB/s); undefined (``None``, printed ``n/a``) when the time is zero, e.g.
  when nothing was written;
- **emulated computation** (``vpic --compute-time``, h5bench's
  ``EMULATED_COMPUTE_TIME_PER_TIMESTEP``): its total, left out of the observed time as
  h5bench's observed rate leaves it out, and the **observed time per step with the
  computation**: from before the open to after the close with the computation, on the slowest
  rank, divided by the steps (what writing behind shortens);
- **background write time**: writing behind (``async_writes``), the time the background writes
  took on the slowest rank; the raw time is then the caller's share of the writes (copying
  their bytes, waiting for room and for the last writes at close), compression and exchanges.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from ..mpi.collective import allreduce
from ..units import format_bytes


def rate(nbytes: int, seconds: float) -> float | None:
    """MiB/s, or None when ``seconds`` is not positive (no time measured: no rate)."""
    return nbytes / 2**20 / seconds if seconds > 0 else None


def _rate_text(value: float | None) -> str:
    return "n/a (no time measured)" if value is None else f"{value:.3f} MiB/s"


@dataclass
class Metrics:
    """One kernel run's numbers; ``raw_seconds + metadata_seconds == observed_seconds``."""

    kind: str  # "write" or "read"
    ranks: int
    total_bytes: int
    raw_seconds: float
    metadata_seconds: float
    observed_seconds: float
    steps: int = 0  # time steps (0: not counted in steps)
    compute_seconds: float = 0.0  # emulated computation, not in the observed time
    observed_with_compute_seconds: float = 0.0  # the observed time with the computation
    background_write_seconds: float | None = None  # writing behind: the background writes
    #: a partial read (bdcats): the particles each rank read from the start of its share of
    #: every dataset (None: not a partial read)
    count: int | None = None

    @property
    def raw_rate(self) -> float | None:
        return rate(self.total_bytes, self.raw_seconds)

    @property
    def observed_rate(self) -> float | None:
        return rate(self.total_bytes, self.observed_seconds)

    @property
    def observed_step_seconds(self) -> float | None:
        """The observed time per step with the computation (None without steps)."""
        return self.observed_with_compute_seconds / self.steps if self.steps else None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["raw_rate_mib_s"] = self.raw_rate
        data["observed_rate_mib_s"] = self.observed_rate
        data["observed_step_seconds"] = self.observed_step_seconds
        if self.count is None:
            del data["count"]  # only partial reads have one
        return data

    def report(self) -> str:
        k = self.kind
        lines = [
            "=================== Performance Results ==================",
            f"Total number of ranks: {self.ranks}",
            f"Total {k} size: {format_bytes(self.total_bytes)}",
        ]
        if self.count is not None:
            lines.append(f"Particles read per rank per dataset (partial): {self.count}")
        if self.compute_seconds > 0:
            lines.append(f"Total emulated compute time: {self.compute_seconds:.3f} s")
        lines += [
            f"Raw {k} time: {self.raw_seconds:.3f} s",
            f"Metadata time: {self.metadata_seconds:.3f} s",
            f"Observed completion time: {self.observed_seconds:.3f} s",
            f"Raw {k} rate: {_rate_text(self.raw_rate)}",
            f"Observed {k} rate: {_rate_text(self.observed_rate)}",
        ]
        if self.observed_step_seconds is not None:
            lines.append(
                f"Observed time per step (with compute): {self.observed_step_seconds:.3f} s"
            )
        if self.background_write_seconds is not None:
            lines.append(
                f"Background {k} time (async_writes): {self.background_write_seconds:.3f} s"
            )
        lines.append("==========================================================")
        return "\n".join(lines)


def combine_metrics(
    kind: str,
    ranks: int,
    total_bytes: int,
    raw_max: float,
    observed_max: float,
    steps: int = 0,
    compute_max: float = 0.0,
    with_compute_max: float | None = None,
    background_max: float | None = None,
) -> Metrics:
    """The job's metrics from the slowest rank's raw, observed, compute, observed-with-compute
    and background seconds (pure)."""
    raw = max(raw_max, 0.0)
    observed = max(observed_max, raw)  # every rank's raw time lies inside its observed time
    with_compute = observed + compute_max if with_compute_max is None else with_compute_max
    return Metrics(
        kind,
        ranks,
        total_bytes,
        raw,
        observed - raw,
        observed,
        steps,
        compute_max,
        max(with_compute, observed),
        background_max,
    )


def reduce_metrics(
    comm: MPI.Comm,
    kind: str,
    local_bytes: int,
    raw_seconds: float,
    observed_seconds: float,
    steps: int = 0,
    compute_seconds: float = 0.0,
    background_seconds: float | None = None,
) -> Metrics:
    """Collective: combine every rank's numbers into the job's metrics (same on every rank).
    ``background_seconds``: the background writes' time (None: not writing behind, the same
    on every rank).

    Polled rounds (:func:`~h5subfile.mpi.collective.allreduce`): with more ranks than cores
    MPI's blocking collectives spin, so ranks that have finished would spin here while the last
    ranks are still closing, taking the cores those need to end their timed work
    (docs/BENCHMARKS-HISTORY.md, *Metadata at scale*, run *polled kernel metrics*)."""
    total = int(allreduce(comm, np.array([local_bytes], dtype=np.int64), MPI.SUM)[0])
    local = [
        raw_seconds,
        observed_seconds,
        compute_seconds,
        observed_seconds + compute_seconds,
        background_seconds or 0.0,
    ]
    slowest = allreduce(comm, np.array(local, dtype=np.float64))
    raw, observed, compute, with_compute, background = (float(v) for v in slowest)
    return combine_metrics(
        kind,
        comm.size,
        total,
        raw,
        observed,
        steps,
        compute,
        with_compute,
        None if background_seconds is None else background,
    )

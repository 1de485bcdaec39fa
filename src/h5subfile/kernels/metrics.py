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
  when nothing was written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mpi4py import MPI

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

    @property
    def raw_rate(self) -> float | None:
        return rate(self.total_bytes, self.raw_seconds)

    @property
    def observed_rate(self) -> float | None:
        return rate(self.total_bytes, self.observed_seconds)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["raw_rate_mib_s"] = self.raw_rate
        data["observed_rate_mib_s"] = self.observed_rate
        return data

    def report(self) -> str:
        k = self.kind
        return "\n".join(
            [
                "=================== Performance Results ==================",
                f"Total number of ranks: {self.ranks}",
                f"Total {k} size: {format_bytes(self.total_bytes)}",
                f"Raw {k} time: {self.raw_seconds:.3f} s",
                f"Metadata time: {self.metadata_seconds:.3f} s",
                f"Observed completion time: {self.observed_seconds:.3f} s",
                f"Raw {k} rate: {_rate_text(self.raw_rate)}",
                f"Observed {k} rate: {_rate_text(self.observed_rate)}",
                "==========================================================",
            ]
        )


def combine_metrics(
    kind: str, ranks: int, total_bytes: int, raw_max: float, observed_max: float
) -> Metrics:
    """The job's metrics from the slowest rank's raw and observed seconds (pure)."""
    raw = max(raw_max, 0.0)
    observed = max(observed_max, raw)  # every rank's raw time lies inside its observed time
    return Metrics(kind, ranks, total_bytes, raw, observed - raw, observed)


def reduce_metrics(
    comm: MPI.Comm, kind: str, local_bytes: int, raw_seconds: float, observed_seconds: float
) -> Metrics:
    """Collective: combine every rank's numbers into the job's metrics (same on every rank)."""
    total = comm.allreduce(local_bytes, op=MPI.SUM)
    raw = comm.allreduce(raw_seconds, op=MPI.MAX)
    observed = comm.allreduce(observed_seconds, op=MPI.MAX)
    return combine_metrics(kind, comm.size, total, raw, observed)

"""h5bench-style metrics: total size, raw I/O time and rate, metadata time, observed time and rate.

Raw time is the time ranks spend inside data reads/writes (max over ranks); observed completion
time runs from before the file is opened to after it is closed (max over ranks, excluding the
time spent generating or checking data); metadata time is observed minus raw. Rates are
MiB/s (h5bench labels the same numbers MB/s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mpi4py import MPI

from ..units import format_bytes


@dataclass
class Metrics:
    kind: str  # "write" or "read"
    ranks: int
    total_bytes: int
    raw_seconds: float
    metadata_seconds: float
    observed_seconds: float

    @property
    def raw_rate(self) -> float:
        return self.total_bytes / 2**20 / self.raw_seconds if self.raw_seconds > 0 else float("inf")

    @property
    def observed_rate(self) -> float:
        seconds = self.observed_seconds
        return self.total_bytes / 2**20 / seconds if seconds > 0 else float("inf")

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
                f"Raw {k} rate: {self.raw_rate:.3f} MiB/s",
                f"Observed {k} rate: {self.observed_rate:.3f} MiB/s",
                "==========================================================",
            ]
        )


def reduce_metrics(
    comm: MPI.Comm, kind: str, local_bytes: int, raw_seconds: float, observed_seconds: float
) -> Metrics:
    """Collective: combine every rank's numbers into the job's metrics (same on every rank)."""
    total = comm.allreduce(local_bytes, op=MPI.SUM)
    raw = comm.allreduce(raw_seconds, op=MPI.MAX)
    observed = comm.allreduce(observed_seconds, op=MPI.MAX)
    metadata = comm.allreduce(max(observed_seconds - raw_seconds, 0.0), op=MPI.MAX)
    return Metrics(kind, comm.size, total, raw, metadata, observed)

"""Cost of one agreement round (docs/BENCHMARKS.md, "Cost of a collective call").

Run under ``mpiexec -n P python benchmarks/collective_cost.py``: times ``--calls`` empty
agreement rounds per variant, in ``--repeats`` alternating batches, and prints one JSON line
(rank 0) with the median microseconds per call (the slowest rank's) and the CPU seconds the
ranks burnt per call:

- ``allreduce``: ``comm.allreduce(0, op=MPI.MAX)``, the blocking round ``agree`` made before
  (and still the whole of ``agree`` in a checkout without call agreement);
- ``agree``: ``agree(comm, None)`` of the checkout the interpreter imports;
- ``call``: ``agree(comm, None, Call(...))``, the round starting every collective call (only
  where ``Call`` exists).

With ``--skew US`` rank 0 works (busy) that many microseconds before each round, so the
other ranks wait: the CPU column then shows whether waiting ranks spin or sleep.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from mpi4py import MPI

from h5subfile.mpi import collective


def variants(comm: MPI.Comm) -> dict[str, Callable[[int], None]]:
    found: dict[str, Callable[[int], None]] = {
        "allreduce": lambda i: comm.allreduce(0, op=MPI.MAX),
        "agree": lambda i: collective.agree(comm, None),
    }
    call = getattr(collective, "Call", None)
    if call is not None:
        found["call"] = lambda i: collective.agree(comm, None, call("bench", i))
    return found


def batch(
    comm: MPI.Comm, fn: Callable[[int], None], calls: int, skew: float
) -> tuple[float, float]:
    """(wall seconds of the slowest rank, CPU seconds of all ranks) for ``calls`` rounds."""
    comm.Barrier()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        if skew and comm.rank == 0:
            until = time.perf_counter() + skew
            while time.perf_counter() < until:
                pass
        fn(i)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return comm.allreduce(wall, op=MPI.MAX), comm.allreduce(cpu, op=MPI.SUM)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skew", type=float, default=0.0, help="microseconds (rank 0 busy)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    found = variants(comm)
    for fn in found.values():  # warm up (the first round also duplicates the communicator)
        batch(comm, fn, 50, 0.0)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in found}
    for _ in range(args.repeats):
        for name, fn in found.items():
            times[name].append(batch(comm, fn, args.calls, args.skew * 1e-6))
    if comm.rank == 0:
        result = {
            "ranks": comm.size,
            "calls": args.calls,
            "repeats": args.repeats,
            "skew_us": args.skew,
            **{
                name: {
                    "us_per_call": statistics.median(w for w, _ in t) / args.calls * 1e6,
                    "cpu_us_per_call": statistics.median(c for _, c in t) / args.calls * 1e6,
                }
                for name, t in times.items()
            },
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

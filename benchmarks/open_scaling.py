"""Cost of opening a file for reading at 1 rank and at many (docs/BENCHMARKS.md, "Opening for
reading at scale").

Writes one VPIC-IO file (``--writers`` ranks, file per process, ``--steps`` steps of 1,024
particles per rank) with ``h5subfile vpic``, then opens it with ``h5subfile.File(path, "r")``
at each rank count of ``--ranks``, the rank counts interleaved, ``--repeats`` rounds, each job
timing ``--opens`` opens (open and touch one dataset's layout; the slowest rank's time). Prints
a table and, with ``--json FILE``, writes the medians with min and max. One job per
measurement, so every rank count pays the same start-up; the first open of a job is left out
(imports and MPI warm-up).

Run: ``.venv/bin/python benchmarks/open_scaling.py --ranks 1 8 64 --writers 64``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from h5subfile.mpi.launch import mpiexec

#: Run in each job: open the file ``opens`` + 1 times, print the slowest rank's seconds of each.
JOB = """
import sys, time
from mpi4py import MPI
import h5subfile as hs
comm = MPI.COMM_WORLD
times = []
for i in range(int(sys.argv[2]) + 1):
    comm.Barrier()
    t = time.perf_counter()
    with hs.File(sys.argv[1], "r") as f:
        f["Timestep_0/x"].layout
        took = time.perf_counter() - t
    times.append(comm.allreduce(took, op=MPI.MAX))
if comm.rank == 0:
    print(" ".join(repr(t) for t in times[1:]))
"""


def run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
    return done.stdout


def write_file(folder: Path, writers: int, steps: int) -> Path:
    path = folder / "open.h5"
    run(
        [
            mpiexec(),
            "-n",
            str(writers),
            sys.executable,
            "-m",
            "h5subfile",
            "vpic",
            str(path),
            "--particles",
            "1024",
            "--steps",
            str(steps),
            "--subfiles",
            "rank",
            "--quiet",
        ]
    )
    return path


def measure(path: Path, ranks: list[int], repeats: int, opens: int) -> dict[int, list[float]]:
    found: dict[int, list[float]] = {n: [] for n in ranks}
    for round_ in range(repeats):
        for n in ranks if round_ % 2 == 0 else ranks[::-1]:
            out = run([mpiexec(), "-n", str(n), sys.executable, "-c", JOB, str(path), str(opens)])
            found[n].extend(float(t) for t in out.split())
            print(f"[{round_ + 1}/{repeats}] {n:4d} rank(s): {out.strip()}", file=sys.stderr)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as folder:
        path = write_file(Path(folder), args.writers, args.steps)
        started = time.time()
        found = measure(path, args.ranks, args.repeats, args.opens)
    base = statistics.median(found[args.ranks[0]])
    rows = []
    print(f"{'ranks':>6} {'median s':>9} {'min':>7} {'max':>7} {'x ' + str(args.ranks[0]):>7}")
    for n in args.ranks:
        median = statistics.median(found[n])
        rows.append(
            {
                "ranks": n,
                "median": median,
                "min": min(found[n]),
                "max": max(found[n]),
                "ratio": median / base,
                "samples": len(found[n]),
            }
        )
        print(
            f"{n:6d} {median:9.4f} {min(found[n]):7.4f} {max(found[n]):7.4f} {median / base:7.2f}"
        )
    if args.json is not None:
        record = {
            "writers": args.writers,
            "steps": args.steps,
            "datasets": 8 * args.steps,
            "extents_per_dataset": args.writers,
            "repeats": args.repeats,
            "opens_per_job": args.opens,
            "cpus": os.cpu_count(),
            "machine": platform.platform(),
            "load_before": os.getloadavg(),
            "started": started,
            "rows": rows,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()

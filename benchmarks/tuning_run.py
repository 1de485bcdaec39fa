"""A real tuning run on this machine (docs/TUNING.md, "A tuning run on this machine").

1. ``h5subfile tune DIR`` with coordinate descent and with ``--exhaustive`` (every point of the
   space), ``--runs`` times each, the two alternated (A B, B A, ...); each run's trials, time,
   recommendation and ranked table are kept.
2. Head to head: the default, every plan coordinate descent picked and the fastest plan (by
   median) of every exhaustive run, written in one job, interleaved, ``--check-reps`` times:
   how far the cheap search's pick is from the exhaustive best, measured in one run.
3. The grouping axis alone (one file, ranks per subfile 2, 4, ..., file per process) at each
   rank count of ``--ranks-sweep``, interleaved, for the picture of write rate against the
   subfiling factor.

Run: ``.venv/bin/python benchmarks/tuning_run.py --json docs/tuning-run.json`` (writes
docs/figures/tuning/grouping.png and prints the tables of docs/TUNING.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from docplot import bars, run_facts

from h5subfile.mpi.launch import mpiexec

#: Run in one job: the points (argv[2], JSON) written interleaved argv[3] times; rank 0 prints
#: each point's times (seconds, first open to last close of the write phase).
JOB = """
import json, sys
from mpi4py import MPI
from h5subfile.progress import Progress
from h5subfile.tune.tuning import BenchMeasure, Pattern
block = 4 * int(sys.argv[4])
measure = BenchMeasure(MPI.COMM_WORLD, sys.argv[1], Pattern(8, block, block), Progress(False))
times = measure(json.loads(sys.argv[2]), int(sys.argv[3]))
if MPI.COMM_WORLD.rank == 0:
    print(json.dumps(times))
"""


def run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def tune(folder: str, ranks: int, particles: int, reps: int, exhaustive: bool) -> dict[str, Any]:
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "h5subfile", "tune", folder]
    command += ["--particles", str(particles), "--repetitions", str(reps), "--json", "--no-save"]
    found: dict[str, Any] = json.loads(run(command + (["--exhaustive"] if exhaustive else [])))
    return found


def head_to_head(
    folder: str, ranks: int, particles: int, points: list[dict[str, Any]], reps: int
) -> list[list[float]]:
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-c", JOB, folder]
    times: list[list[float]] = json.loads(
        run(command + [json.dumps(points), str(reps), str(particles)])
    )
    return times


def fastest(result: dict[str, Any]) -> dict[str, Any]:
    plan: dict[str, Any] = min(result["rows"], key=lambda row: row["median"])["plan"]
    return plan


def groupings(ranks: int) -> list[dict[str, Any]]:
    """The grouping axis: one file, 2, 4, ... ranks per subfile, file per process."""
    points: list[dict[str, Any]] = [{"subfiles": 1}]
    k = 2
    while k < ranks:
        points.append({"ranks_per_subfile": k})
        k *= 2
    return points + [{"subfiles": "rank"}]


def factor(point: dict[str, Any], ranks: int) -> int:
    """Ranks per subfile (the subfiling factor) of a grouping point."""
    if point.get("subfiles") == "rank":
        return 1
    if point.get("subfiles") == 1:
        return ranks
    return int(point["ranks_per_subfile"])


def summary(times: list[float]) -> dict[str, float]:
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--particles", type=int, default=1 << 20)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--check-reps", type=int, default=9)
    parser.add_argument("--ranks-sweep", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    load, started = os.getloadavg(), time.time()
    folder = tempfile.mkdtemp(prefix="h5subfile-tune-", dir=os.environ.get("TMPDIR", "/tmp"))
    runs: list[dict[str, Any]] = []
    for number in range(args.runs):
        for exhaustive in (False, True) if number % 2 == 0 else (True, False):
            found = tune(folder, args.ranks, args.particles, args.repetitions, exhaustive)
            runs.append({"exhaustive": exhaustive, **found})
            kind = "exhaustive" if exhaustive else "descent"
            print(f"run {number + 1} {kind}: {found['trials']} trials", file=sys.stderr)
    candidates = [{}] + [r["recommendation"] or {} for r in runs if not r["exhaustive"]]
    candidates += [fastest(r) for r in runs if r["exhaustive"]]
    unique = list({json.dumps(p, sort_keys=True): p for p in candidates}.values())
    times = head_to_head(folder, args.ranks, args.particles, unique, args.check_reps)
    checked = [{"plan": p, "times": t, **summary(t)} for p, t in zip(unique, times)]
    sweep = []
    for ranks in args.ranks_sweep:
        points = groupings(ranks)
        found = head_to_head(folder, ranks, args.particles, points, args.repetitions)
        for point, t in zip(points, found):
            sweep.append(
                {"ranks": ranks, "factor": factor(point, ranks), "plan": point, "times": t}
            )
    record = {
        "ranks": args.ranks,
        "particles": args.particles,
        "repetitions": args.repetitions,
        "runs": runs,
        "head_to_head": checked,
        "check_reps": args.check_reps,
        "sweep": sweep,
        **run_facts(load, started),
    }
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    draw(record, Path("docs/figures/tuning/grouping.png"))
    print(tables(record))


def draw(record: dict[str, Any], path: Path) -> None:
    """Write rate (MiB/s, data / write time) against the subfiling factor, per rank count."""
    mib = 8 * 4 * record["particles"] / 2**20
    counts = sorted({row["ranks"] for row in record["sweep"]})
    factors = sorted({row["factor"] for row in record["sweep"]})
    labels = [f"{k} rank(s) per subfile" for k in factors]
    series = {}
    for ranks in counts:
        rows = {row["factor"]: row for row in record["sweep"] if row["ranks"] == ranks}
        series[f"{ranks} ranks"] = [
            [mib * ranks / t for t in rows[k]["times"]] if k in rows else [] for k in factors
        ]
    bars(path, "Write rate against the subfiling factor", labels, series, "MiB/s", log=False)


def plan_text(plan: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in plan.items()) or "default"


def tables(record: dict[str, Any]) -> str:
    lines = [
        "| run | search | trials | seconds | recommendation | reason |",
        "|---|---|---|---|---|---|",
    ]
    for number, r in enumerate(record["runs"], 1):
        kind = "exhaustive" if r["exhaustive"] else "coordinate descent"
        rec = plan_text(r["recommendation"]) if r["recommendation"] else "keep the default"
        lines.append(
            f"| {number} | {kind} | {r['trials']} | {r['seconds']:.0f} | {rec} | {r['reason']} |"
        )
    lines += ["", "| plan | median s | min s | max s | / default |", "|---|---|---|---|---|"]
    base = record["head_to_head"][0]["median"]
    for row in record["head_to_head"]:
        lines.append(
            f"| {plan_text(row['plan'])} | {row['median']:.3f} | {row['min']:.3f} | "
            f"{row['max']:.3f} | {row['median'] / base:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

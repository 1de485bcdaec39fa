"""`h5subfile repack` (subfiled -> one conventional file) against `h5repack -l CONTI` on the
same input; results for docs/BENCHMARKS.md ("Repack").

The input is a VPIC-IO file written by ``h5subfile vpic`` with 2 ranks and 2 subfiles (a master
of virtual datasets over two subfiles). Each repetition runs, in an order shuffled anew every
repetition (after an untimed ``sync``, the output removed after each run):

- ``h5repack``: ``h5repack -l CONTI IN OUT`` (serial; HDF5's own tool)
- ``h5repack again``: the same command, the null comparison (how much identical runs differ)
- ``repack 1 rank`` / ``repack 2 ranks``: ``mpiexec -n P h5subfile repack IN OUT --subfiles 1``
- ``start-up, 2 ranks``: ``mpiexec -n 2`` of a Python that starts as the ``h5subfile`` command
  does (numpy with one BLAS thread), imports what ``repack`` imports (h5py, mpi4py, h5subfile)
  and meets the other rank in one barrier, nothing copied: the part of the repack commands'
  time that does not depend on the file

Before each run, untimed, ``--warm`` GiB of memory are touched and freed (benchmarks/warm.py:
on a virtual machine that hands freed memory back to its host, so that no command's page cache
pays for faulting it in again).

Each time is the whole command, from process start to exit (both tools pay their start-up).
Before the runs, both outputs are compared value for value with plain h5py (untimed), so the
tools are known to produce the same data. Writes ``docs/repack-results-<size>.json`` (size:
``512mib``, ``1gib``, ``2gib``, ...) and prints the Markdown table.

Usage (from the repository, after `make test` created .venv; needs h5repack, Debian's
hdf5-tools):

    .venv/bin/python benchmarks/repack_experiment.py [--reps 7] [--particles 4Mi] [--steps 2]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from warm import reports_free_pages, warm_memory

import h5subfile
from h5subfile.units import parse_count

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHECK = ROOT / "tests" / "interop" / "repack_check.py"
SEED = 20261123
REFERENCE, NULL = "h5repack", "h5repack again"
STARTUP = "start-up, 2 ranks"
STARTUP_CODE = (
    "import h5subfile.cli; h5subfile.cli.load_numpy_with_one_blas_thread(); "
    "import h5subfile.repack; from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"
)


def commands(source: Path, target: Path) -> dict[str, list[str]]:
    h5repack = shutil.which("h5repack")
    if h5repack is None:
        sys.exit("h5repack not found (apt-get install hdf5-tools)")
    ours = [str(BIN / "h5subfile"), "repack", str(source), str(target), "--subfiles", "1"]
    return {
        REFERENCE: [h5repack, "-l", "CONTI", str(source), str(target)],
        NULL: [h5repack, "-l", "CONTI", str(source), str(target)],
        "repack 1 rank": [str(BIN / "mpiexec"), "-n", "1", *ours, "--quiet"],
        "repack 2 ranks": [str(BIN / "mpiexec"), "-n", "2", *ours, "--quiet"],
        STARTUP: [str(BIN / "mpiexec"), "-n", "2", sys.executable, "-c", STARTUP_CODE],
    }


def size_name(nbytes: int) -> str:
    """The input's size as the docs name it: ``512 MiB``, ``2 GiB``."""
    return f"{nbytes >> 30} GiB" if nbytes % 2**30 == 0 else f"{nbytes >> 20} MiB"


def size_slug(nbytes: int) -> str:
    """The input's size in file names: ``512mib``, ``2gib``."""
    return size_name(nbytes).replace(" ", "").lower()


def results_path(nbytes: int) -> Path:
    """Where a run on an input of ``nbytes`` is kept: docs/repack-results-512mib.json, ..."""
    return ROOT / "docs" / f"repack-results-{size_slug(nbytes)}.json"


def remove(target: Path) -> None:
    target.unlink(missing_ok=True)
    shutil.rmtree(target.with_suffix(".subfiles"), ignore_errors=True)


def timed(command: list[str], target: Path, warm: float = 0.0) -> float:
    """Seconds of one run, start to exit (after an untimed sync and ``warm`` GiB of memory
    touched, benchmarks/warm.py; the output removed after)."""
    subprocess.run(["sync"], check=True)
    warm_memory(warm)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=1200)
    seconds = time.perf_counter() - started
    remove(target)
    return seconds


def check_outputs(runs: dict[str, list[str]], source: Path, target: Path, folder: Path) -> None:
    """Untimed: the output of h5repack and ours hold the same values as the input."""
    for label in (REFERENCE, "repack 2 ranks"):
        subprocess.run(runs[label], check=True, capture_output=True, timeout=1200)
        kept = folder / f"check-{label.replace(' ', '_')}.h5"
        target.rename(kept)
    plain = folder / "check-repack_2_ranks.h5"
    for checked in (folder / f"check-{REFERENCE}.h5", plain):
        flags = ["--conventional"] if checked == plain else []
        result = subprocess.run(
            [sys.executable, str(CHECK), str(source), str(checked), *flags],
            capture_output=True,
            text=True,
        )
        if result.returncode:
            sys.exit(f"{checked} differs from {source}:\n{result.stderr}")
        print(f"checked {checked.name}: {result.stdout.strip()}", file=sys.stderr)
        checked.unlink()


def summarise(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Median, min, max per configuration; ratios against h5repack per repetition."""
    reference = times[REFERENCE]
    rows = {}
    for label, seconds in times.items():
        ratios = [r / s for r, s in zip(reference, seconds)]  # > 1: faster than h5repack
        rows[label] = {
            "median": statistics.median(seconds),
            "min": min(seconds),
            "max": max(seconds),
            "speedup_median": statistics.median(reference) / statistics.median(seconds),
            "speedup_min": min(ratios),
            "speedup_max": max(ratios),
        }
    return rows


def table(rows: dict[str, dict[str, float]], nbytes: int) -> str:
    lines = [
        "| command | s, median (min-max) | MiB/s (median) | h5repack / this: median of medians "
        "(per-repetition range) |",
        "|---|---|---|---|",
    ]
    for label, row in rows.items():
        lines.append(
            f"| {label} | {row['median']:.2f} ({row['min']:.2f}-{row['max']:.2f}) | "
            f"{nbytes / 2**20 / row['median']:.0f} | {row['speedup_median']:.2f} "
            f"({row['speedup_min']:.2f}-{row['speedup_max']:.2f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--particles", default="4Mi", help="per rank, 2 writer ranks")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="folder (default: a temporary one)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON to write (default: docs/repack-results-<size>.json, e.g. -512mib, -2gib)",
    )
    parser.add_argument(
        "--warm",
        type=float,
        default=None,
        help="GiB of memory touched before each run (benchmarks/warm.py; default: twice the "
        "input plus 1 GiB where the kernel hands freed memory back to its host, else 0)",
    )
    args = parser.parse_args()
    from h5subfile.bench.report import machine, versions

    # Bytecode compiled once, as an installed package has it, so that no timed command compiles
    # h5subfile (an editable install under PYTHONDONTWRITEBYTECODE would, in every rank).
    compileall.compile_dir(Path(h5subfile.__file__).parent, quiet=1)
    folder = Path(tempfile.mkdtemp(prefix="repack-bench-", dir=args.dir))
    source, target = folder / "vpic.h5", folder / "out.h5"
    subprocess.run(
        [str(BIN / "mpiexec"), "-n", "2", str(BIN / "h5subfile"), "vpic", str(source)]
        + ["--particles", args.particles, "--steps", str(args.steps), "--subfiles", "2", "--quiet"],
        check=True,
        capture_output=True,
    )
    nbytes = parse_count(args.particles) * 32 * 2 * args.steps  # VPIC-IO: 32 bytes a particle
    warm = args.warm
    if warm is None:
        warm = round(2 * nbytes / 2**30 + 1, 1) if reports_free_pages() else 0.0
    runs = commands(source, target)
    check_outputs(runs, source, target, folder)
    order_rng = random.Random(SEED)
    times: dict[str, list[float]] = {label: [] for label in runs}
    loads = []
    for rep in range(args.reps):
        order = list(runs)
        order_rng.shuffle(order)
        for label in order:
            loads.append(os.getloadavg()[0])
            times[label].append(timed(runs[label], target, warm))
        print(f"repetition {rep + 1}/{args.reps}: {order}", file=sys.stderr)
    shutil.rmtree(folder)
    rows = summarise(times)
    result = {
        "machine": machine(),
        "versions": versions("repack"),
        "input": {"particles_per_rank": args.particles, "steps": args.steps, "bytes": nbytes},
        "commands": {label: " ".join(cmd) for label, cmd in runs.items()},
        "times": times,
        "summary": rows,
        "load_average": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "reps": args.reps,
        "seed": SEED,
        "warm_gib": warm,
    }
    out = results_path(nbytes) if args.out is None else args.out
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(table(rows, nbytes))
    print(f"\ninput {size_name(nbytes)}; load average {result['load_average']}")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

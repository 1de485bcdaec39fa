"""Variants of the VPIC write compared inside one MPI job (used by ``checksum_cost.py`` and
``profile_cost.py``).

One job writes the VPIC-IO file again and again, in one process per rank, each write into a
fresh folder (deleted after it, then ``sync``, untimed), after one untimed warm-up write. The
variants take turns in rounds whose order rotates (A B C, B C A, C A B, ...), so that a slow
spell of the machine falls on every variant alike; comparing within a round, pair by pair,
removes what separate jobs add to the noise (start-up, imports, MPI set-up, another job's page
cache). A variant is a name with, for its runs only, extra ``File`` options (``plan``), extra
environment variables (``env``) and, for ``"constant_hash": true``, the checksum function
and the hasher the direct writes feed replaced by ones returning a constant;
``"api": "phdf5"`` (with ``"collective"``) writes the same kernel through parallel HDF5
instead (an h5py built with MPI: ``make phdf5``). With ``warm`` GiB, rank 0 touches that
much memory before each run, untimed (``warm.py``); with ``alternate``, every other round
runs its rotated order backwards (A B C, C B A, B C A, A C B, ...), so that no variant always
follows the same one. Every run reports h5bench's observed completion time
(with the emulated compute included, when a variant's plan has ``compute_time``; without, the
two are the same) and raw time (max over ranks) and the largest CPU time of a rank (all its
threads).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from docplot import run_facts
from warm import TOUCH

from h5subfile.mpi.launch import mpiexec

FIELDS = ("observed", "raw", "cpu")

#: Run by every rank: argv = folder, particles, steps, rounds, base plan, variants (JSON), GiB
#: to warm, the warming code, whether every other round runs backwards (1 or 0).
JOB = """
import json, os, shutil, subprocess, sys, time
from mpi4py import MPI
import h5subfile.engine.integrity as integrity
import h5subfile.layout.integrity as hashing
from h5subfile.kernels.vpic import run_vpic, run_vpic_phdf5

comm = MPI.COMM_WORLD
folder, particles, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
base, variants = json.loads(sys.argv[5]), json.loads(sys.argv[6])
warm, touch, alternate = float(sys.argv[7]), sys.argv[8], sys.argv[9] == "1"
real, constant = integrity.checksum, (lambda data: "0" * 16)


class ConstantHasher:
    def update(self, data):
        pass

    def hexdigest(self):
        return "0" * 16


real_hasher = hashing.new_hasher


def one(name, variant):
    path = os.path.join(folder, name, "vpic.h5")
    if comm.rank == 0:
        os.makedirs(os.path.dirname(path))
        if warm > 0:
            subprocess.run([sys.executable, "-c", touch, str(warm)], check=True)
    plan = dict(base, **{k: v.replace("{run}", os.path.dirname(path)) if isinstance(v, str)
                         else v for k, v in variant.get("plan", {}).items()})
    env = variant.get("env", {})
    os.environ.update(env)
    integrity.checksum = constant if variant.get("constant_hash") else real
    hashing.new_hasher = ConstantHasher if variant.get("constant_hash") else real_hasher
    comm.Barrier()
    cpu = time.process_time()
    try:
        if variant.get("api") == "phdf5":
            m = run_vpic_phdf5(path, particles, steps, comm, compute_time=plan.get("compute_time", 0),
                               collective=variant.get("collective", False))
        else:
            m = run_vpic(path, particles, steps, comm, **plan)
    finally:
        for key in env:
            del os.environ[key]
    cpu = comm.allreduce(time.process_time() - cpu, op=MPI.MAX)
    if comm.rank == 0:
        shutil.rmtree(os.path.dirname(path))
        os.sync()
    comm.Barrier()
    return m.observed_with_compute_seconds, m.raw_seconds, cpu


one("warm-up", variants[0])
found = []
for round_ in range(rounds):
    count = len(variants)
    order = [(round_ + step) % count for step in range(count)]
    if alternate and round_ % 2:
        order.reverse()
    for index in order:
        found.append([round_, index, *one(f"run{round_}-{index}", variants[index])])
if comm.rank == 0:
    print(json.dumps(found))
"""


def run_job(
    ranks: int,
    folder: Path,
    particles: int,
    steps: int,
    rounds: int,
    base: dict[str, Any],
    variants: list[dict[str, Any]],
    warm: float = 0.0,
    alternate: bool = False,
) -> list[list[float]]:
    """One MPI job of ``rounds`` rounds over ``variants``: rows ``[round, variant index,
    observed, raw, cpu]``. In a variant's ``plan``, ``{run}`` stands for its run's folder;
    ``warm``: GiB of memory touched before each run (untimed); ``alternate``: every other
    round in the opposite order."""
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-c", JOB, str(folder)]
    command += [str(particles), str(steps), str(rounds), json.dumps(base), json.dumps(variants)]
    command += [str(warm), TOUCH, "1" if alternate else "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


@contextmanager
def scratch(name: str) -> Iterator[Path]:
    """A fresh folder for one job's runs (``$TMPDIR/NAME-PID``), removed afterwards."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}-{os.getpid()}"
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def begin() -> tuple[tuple[float, ...], float]:
    """The load average and the time when a measurement starts (for :func:`save`)."""
    return os.getloadavg(), time.time()


def save(
    path: Path | None, args: argparse.Namespace, begun: tuple[Any, float], **fields: Any
) -> None:
    """Write a run's record to ``path`` (nothing when None): the jobs' shape (``args``' ranks,
    particles, steps, rounds), where and when it ran (``docplot.run_facts``), then ``fields``."""
    if path is None:
        return
    record = {
        "ranks": args.ranks,
        "particles": args.particles,
        "steps": args.steps,
        "rounds": args.rounds,
        **run_facts(*begun),
        **fields,
    }
    path.write_text(json.dumps(record, indent=1) + "\n")


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(
    samples: list[list[float]],
    names: list[str],
    rounds: int,
    ratios: list[tuple[str, int, int]],
) -> dict[str, Any]:
    """Per variant, every field's median (min-max), with ``metadata`` (observed - raw, as
    h5bench counts it); per ``(label, numerator, denominator)``, the ratio of two variants'
    fields round by round, as median (min-max), and in ``above_one`` the number of rounds
    whose observed ratio is above 1."""
    by = {(int(s[0]), int(s[1])): [*s[2:], s[2] - s[3]] for s in samples}
    fields = (*FIELDS, "metadata")
    out: dict[str, Any] = {"variants": {}, "ratios": {}, "above_one": {}}
    for index, name in enumerate(names):
        rows = [by[(r, index)] for r in range(rounds)]
        out["variants"][name] = {f: spread([row[i] for row in rows]) for i, f in enumerate(fields)}
    for label, top, bottom in ratios:
        out["ratios"][label] = {
            f: spread([by[(r, top)][i] / by[(r, bottom)][i] for r in range(rounds)])
            for i, f in enumerate(fields)
            if f != "metadata"  # a difference: its ratio can divide by zero
        }
        out["above_one"][label] = sum(by[(r, top)][0] > by[(r, bottom)][0] for r in range(rounds))
    return out


def inverse(ratio: dict[str, float]) -> dict[str, float]:
    """A ratio's spread turned upside down (B / A -> A / B)."""
    return {"median": 1 / ratio["median"], "min": 1 / ratio["max"], "max": 1 / ratio["min"]}


def cell(spread: dict[str, float], digits: int = 3) -> str:
    return f"{spread['median']:.{digits}f} ({spread['min']:.{digits}f}-{spread['max']:.{digits}f})"

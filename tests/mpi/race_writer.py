"""A writer job for the exclusive-writer tests: round i opens ``FOLDER/round<i>/run.h5`` in MODE
at an agreed moment (JOBS jobs race: each makes ``FOLDER/ready-<tag>``, and once JOBS such files
exist round i starts ``START_DELAY + i * GAP`` seconds after the newest), writes datasets
``job<tag>/x0``, ``x1``, ``x2`` holding ``expected(tag, step)`` (this rank's block at the prefix
sum) and closes it; in even rounds it keeps the file open DWELL seconds longer, so that the jobs'
sessions overlap even when their starts drift apart by more than a write takes (odd rounds race
at the moment of opening only). With a HOLD file, it makes ``HOLD.waiting`` once it has written, and waits
before closing until HOLD is removed.

Rank 0 prints one JSON line per round: ``{"round", "ok", "uuid", "held": [after open,
before close], "error", "message"}``. Every lost round's error goes to stderr as
``FileBusyError: message``; the job then exits with status 1.

argv: folder, mode, tag, jobs, rounds, gap, [hold file]
"""

import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import h5subfile as hs

N = 20_000  # elements per rank and dataset
STEPS = 3
START_DELAY = 0.3
DWELL = 0.15


def expected(tag: int, step: int, size: int) -> np.ndarray:
    """The whole of dataset x<step> written by job ``tag`` with ``size`` ranks."""
    return tag * 10**9 + step * 10**6 + np.arange(size * N, dtype="i8")


def write_round(path: str, mode: str, tag: int, hold: str | None, dwell: float) -> dict:
    comm = MPI.COMM_WORLD
    mine = slice(comm.rank * N, (comm.rank + 1) * N)
    try:
        with hs.File(path, mode, subfiles=2) as f:
            opened = time.time()
            group = f.create_group(f"job{tag}")
            for step in range(STEPS):
                group.write_dataset(f"x{step}", expected(tag, step, comm.size)[mine])
            uuid = f.sessions[-1]["uuid"]
            if hold and comm.rank == 0:
                open(hold + ".waiting", "w").close()
            while hold and comm.bcast(os.path.exists(hold)):
                time.sleep(0.05)
            time.sleep(dwell)
            closing = time.time()
    except hs.H5SubfileError as exc:
        return {"ok": False, "error": type(exc).__name__, "message": str(exc)}
    return {"ok": True, "uuid": uuid, "held": [opened, closing]}


def agreed_start(folder: str, tag: int, jobs: int) -> float:
    """Rank 0: announce this job, wait (at most 120 s) for the others; the same moment in
    every job: after the newest announcement."""
    open(os.path.join(folder, f"ready-{tag}"), "w").close()
    deadline = time.time() + 120
    while True:
        ready = [n for n in os.listdir(folder) if n.startswith("ready-")]
        if len(ready) >= jobs or time.time() > deadline:
            break
        time.sleep(0.005)
    return max(os.stat(os.path.join(folder, n)).st_mtime for n in ready) + START_DELAY


def main() -> None:
    comm = MPI.COMM_WORLD
    folder, mode, tag = sys.argv[1], sys.argv[2], int(sys.argv[3])
    jobs, rounds, gap = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    hold = sys.argv[7] if len(sys.argv) > 7 else None
    start = comm.bcast(agreed_start(folder, tag, jobs) if comm.rank == 0 else None)
    lost = []
    for i in range(rounds):
        time.sleep(max(0.0, start + i * gap - time.time()))
        path = os.path.join(folder, f"round{i}", "run.h5")
        outcome = write_round(path, mode, tag, hold, DWELL if i % 2 == 0 else 0.0)
        if comm.rank == 0:
            print(json.dumps(dict(outcome, round=i)), flush=True)
        if not outcome["ok"]:
            lost.append(f"{outcome['error']}: {outcome['message']}")
    if lost:
        if comm.rank == 0:
            print("\n".join(lost), file=sys.stderr, flush=True)
        sys.exit(1)


main()

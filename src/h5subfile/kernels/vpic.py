"""VPIC-IO: the paper's write kernel, with exactly h5bench's file layout.

Each time step is a group ``Timestep_<s>`` holding 1-D datasets ``x y z px py pz`` (float32),
``id_1`` (int32) and ``id_2`` (float32), in that order; rank r's particles start at the exclusive
prefix sum of the ranks' counts. Values are a deterministic function of (step, global particle
index), so that any reader, with any rank count, can verify them.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from ..files import File
from .metrics import Metrics, reduce_metrics

FIELDS: tuple[tuple[str, str], ...] = (
    ("x", "f4"),
    ("y", "f4"),
    ("z", "f4"),
    ("px", "f4"),
    ("py", "f4"),
    ("pz", "f4"),
    ("id_1", "i4"),
    ("id_2", "f4"),
)
BYTES_PER_PARTICLE = sum(np.dtype(t).itemsize for _, t in FIELDS)  # 32
KERNEL_ATTR = "kernel"
KERNEL_NAME = "h5subfile-vpic"


def step_name(step: int) -> str:
    return f"Timestep_{step}"


def particle_values(name: str, step: int, gids: np.ndarray) -> np.ndarray:
    """The value of field ``name`` at ``step`` for global particle indices ``gids`` (exact)."""
    index = [n for n, _ in FIELDS].index(name)
    gids = np.asarray(gids, dtype=np.uint64)
    if name == "id_1":
        return (gids & np.uint64(0x7FFFFFFF)).astype(np.int32)
    mixed = gids * np.uint64(2654435761) + np.uint64(step * 40503 + index * 977)
    bits = (mixed & np.uint64(0xFFFFFF)).astype(np.float32)
    if name == "id_2":
        return bits
    return bits / np.float32(2**24) + np.float32(index + step)


def run_vpic(
    path: str,
    particles: int,
    steps: int,
    comm: MPI.Intracomm | None = None,
    progress: bool = False,
    **plan: Any,
) -> Metrics:
    """Collective: write ``steps`` VPIC-IO steps of ``particles`` particles per rank to ``path``.

    ``plan`` goes to :class:`~h5subfile.File` (``subfiles``, ``ranks_per_subfile``, ``fsync``).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    first = comm.exscan(particles) or 0
    gids = np.arange(first, first + particles, dtype=np.uint64)
    excluded = 0.0
    comm.Barrier()
    started = time.perf_counter()
    with File(path, "w", comm=comm, **plan) as f:
        f.attrs[KERNEL_ATTR] = KERNEL_NAME
        f.attrs["particles_per_rank"] = comm.allgather(particles)
        for step in range(steps):
            t = time.perf_counter()
            data = {name: particle_values(name, step, gids) for name, _ in FIELDS}
            excluded += time.perf_counter() - t
            f.create_group(step_name(step)).write_datasets(data)
            if progress and comm.rank == 0:
                print(f"vpic: step {step + 1}/{steps} written", file=sys.stderr, flush=True)
        raw = f.stats.data_write_seconds
    observed = time.perf_counter() - started - excluded
    return reduce_metrics(comm, "write", particles * BYTES_PER_PARTICLE * steps, raw, observed)

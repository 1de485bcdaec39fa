"""Random sequences of writes to a dataset without blocks, the same on every rank (seeded):
slices with and without steps, increasing index lists, boolean masks and single elements, a
rank writing its own elements again, the dataset grown part way (``maxshape``), with and
without checksums and writing behind, in one subfile or two. Each rank writes only elements it
owns (a range of its own), as h5py programs do. Every file is read back by h5subfile and by
plain h5py in a separate process, compared with what numpy computes, and opened and read by
plain h5py within a second."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI
from ranks import plain_h5py

import h5subfile as hs

SEEDS = range(16)
#: How long plain h5py may take to open and read one of these files (the issue's bound).
OPEN_SECONDS = 1.0

READ = """
import sys, time, h5py, numpy as np
began = time.perf_counter()
with h5py.File(sys.argv[1], "r") as f:
    values = f["x"][...]
print(time.perf_counter() - began, values.tobytes().hex())
"""


def _selection(rng: np.random.Generator, lo: int, hi: int, n: int) -> Any:
    """A random selection of some of the elements ``[lo, hi)`` of a dataset of ``n``."""
    kind = rng.integers(5)
    if kind == 0:  # a slice
        a = int(rng.integers(lo, hi))
        return slice(a, int(rng.integers(a + 1, hi + 1)))
    if kind == 1:  # a slice with a step
        a = int(rng.integers(lo, hi))
        return slice(a, hi, int(rng.integers(2, 6)))
    if kind == 2:  # an increasing index list
        count = int(rng.integers(1, min(hi - lo, 12) + 1))
        return np.sort(rng.choice(np.arange(lo, hi), count, replace=False))
    if kind == 3:  # a boolean mask of the whole dataset
        mask = np.zeros(n, bool)
        mask[lo:hi] = rng.random(hi - lo) < 0.3
        if not mask.any():
            mask[lo] = True
        return mask
    return int(rng.integers(lo, hi))  # one element


def _scenario(seed: int, size: int) -> dict[str, Any]:
    """The dataset's sizes, each rank's range, the writes (step, rank, selection, values) and
    the plan, all from ``seed``: the same on every rank."""
    rng = np.random.default_rng(seed)
    final = int(rng.integers(4 * size, 400))
    grown_at = int(rng.integers(1, 4)) if rng.random() < 0.5 else 0  # 0: never grown
    first = int(rng.integers(2 * size, final + 1)) if grown_at else final
    cuts = np.sort(rng.choice(np.arange(1, final), size - 1, replace=False)) if size > 1 else []
    bounds = [0, *map(int, cuts), final]
    writes = []
    for step in range(int(rng.integers(2, 6))):
        n = final if grown_at and step >= grown_at else first
        for rank in range(size):
            lo, hi = bounds[rank], min(bounds[rank + 1], n)
            if lo >= hi or rng.random() < 0.2:
                continue  # this rank writes nothing at this step
            selection = _selection(rng, lo, hi, n)
            count = np.zeros(n)[selection].size
            values = np.round(rng.normal(size=count) * 1000) + seed
            writes.append((step, rank, selection, values if count > 1 else values[0]))
    plan = dict(
        checksums=bool(rng.random() < 0.7),
        async_writes=bool(rng.random() < 0.4),
        subfiles=int(rng.integers(1, min(size, 2) + 1)),
    )
    steps = max(max((w[0] for w in writes), default=0), grown_at) + 1  # the resize too
    return dict(first=first, final=final, grown_at=grown_at, writes=writes, plan=plan, steps=steps)


def _expected(scenario: dict[str, Any]) -> np.ndarray:
    """What numpy computes of the writes, in order."""
    model = np.zeros(scenario["final"])
    for _, _, selection, values in scenario["writes"]:
        if isinstance(selection, np.ndarray) and selection.dtype == bool:
            selection = np.flatnonzero(selection)
        model[selection] = values
    return model


@pytest.mark.parametrize("seed", SEEDS)
def test_random_writes_read_back_as_numpy_computes(comm, shared_tmp: Path, seed: int) -> None:
    scenario = _scenario(seed, comm.size)
    path = shared_tmp / f"random-{seed}.h5"
    grown_at = scenario["grown_at"]
    maxshape = (None,) if grown_at else None
    with hs.File(path, "w", **scenario["plan"]) as f:
        d = f.create_dataset("x", (scenario["first"],), "f8", maxshape=maxshape)
        for step in range(scenario["steps"]):
            if grown_at and step == grown_at:
                d.resize((scenario["final"],))  # collective
            for at, rank, selection, values in scenario["writes"]:
                if at == step and rank == comm.rank:
                    d[selection] = values
    want = _expected(scenario)
    with hs.File(path, "r", verify=scenario["plan"]["checksums"]) as f:
        np.testing.assert_array_equal(f["x"][...], want, err_msg=str(scenario["plan"]))
    began = time.perf_counter()
    seconds, values = plain_h5py(comm, READ, str(path)).split()
    assert values == want.tobytes().hex(), scenario["plan"]
    assert float(seconds) < OPEN_SECONDS, f"plain h5py took {seconds} s ({scenario['plan']})"
    assert time.perf_counter() - began < 30


@pytest.mark.parametrize("subfiles", [1, 2])
def test_round_robin_elements_open_at_once(comm, shared_tmp: Path, subfiles: int) -> None:
    """``d[rank::size] = x``, 16,384 elements per rank: one strided piece per rank. Each is one
    mapping of the master's virtual dataset, a regular hyperslab HDF5 now stores as start,
    stride, count and block (io/h5.py, ``compact_selections``); it listed every element, and
    opening the dataset took 28 s at 2 ranks, in plain h5py and in h5subfile alike (more than
    120 s at 65,536 elements per rank). Read back bit for bit by both, within a second."""
    n, rank, size = 16_384, comm.rank, comm.size
    path = shared_tmp / f"round-robin-{subfiles}.h5"
    with hs.File(path, "w", subfiles=subfiles) as f:
        f.create_dataset("x", (n * size,), "f8")[rank::size] = np.arange(n) + 1e6 * rank
    want = (np.arange(n)[:, None] + 1e6 * np.arange(size)).ravel()
    began = time.perf_counter()
    with hs.File(path, "r", verify=True) as f:
        np.testing.assert_array_equal(f["x"][...], want)
    took = comm.allreduce(time.perf_counter() - began, op=MPI.MAX)
    seconds, values = plain_h5py(comm, READ, str(path)).split()
    assert values == want.tobytes().hex()
    assert float(seconds) < OPEN_SECONDS, f"plain h5py took {seconds} s"
    assert took < 10 * OPEN_SECONDS, f"h5subfile took {took} s to open, verify and read"

"""Missing, truncated or escaping pieces of a file give clear errors naming them, identically on
every rank (2 and 3 ranks in the suite). Crashed writers are tested from outside the job, in
tests/test_crash_and_damage.py."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import h5py
import numpy as np
import pytest
from ranks import on_root, raises_on_every_rank, same_on_every_rank

import h5subfile as hs

PARTICLES = 500
FIELDS = (("x", "f4"), ("y", "f4"), ("z", "f4"), ("px", "f4"), ("py", "f4"), ("pz", "f4"))
FIELDS += (("id_1", "i4"), ("id_2", "f4"))  # VPIC-IO's layout, as `h5subfile vpic` writes it


@pytest.fixture
def run(comm, shared_tmp: Path) -> Path:
    """Two VPIC-IO steps of 500 particles per rank in 2 subfiles."""
    path = shared_tmp / "run.h5"
    first = comm.rank * PARTICLES
    with hs.File(path, "w", subfiles=2) as f:
        for step in range(2):
            values = np.arange(first, first + PARTICLES) + 0.25 * step
            data = {name: values.astype(dtype) for name, dtype in FIELDS}
            f.create_group(f"Timestep_{step}").write_datasets(data)
    return path


def subfile_of(comm, master: Path, session: int, group: int) -> Path:
    """Collective: the subfile of ``group`` written by write session ``session`` of ``master``
    (looked up on rank 0, before any rank changes it)."""
    folder = master.with_suffix(".subfiles")

    def find() -> str:
        (found,) = folder.glob(f"s{session}-*-{group:05d}.h5")
        return str(found)

    return Path(on_root(comm, find))


@contextmanager
def opened(comm, path: Path) -> Iterator[hs.File]:
    """Open a damaged file (rank 0 warns about what it found); its problems, agreed by all."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = hs.File(path, "r")
    with f:
        same_on_every_rank(comm, f.problems, "problems")
        yield f


def test_missing_subfile_is_named(comm, run: Path) -> None:
    subfile = subfile_of(comm, run, 0, 1)
    on_root(comm, subfile.unlink)
    with opened(comm, run) as f:
        with raises_on_every_rank(comm, hs.MissingFileError, f"run.subfiles/{subfile.name}"):
            f["/Timestep_0/x"][...]
        assert any(subfile.name in p for p in f.problems), f.problems


def test_truncated_subfile_is_named(comm, run: Path) -> None:
    def truncate() -> None:
        with open(subfile, "r+b") as handle:
            handle.truncate(subfile.stat().st_size // 2)

    subfile = subfile_of(comm, run, 0, 0)
    on_root(comm, truncate)
    with opened(comm, run) as f:
        with raises_on_every_rank(comm, hs.TruncatedFileError, subfile.name, "truncated"):
            f["/Timestep_1/px"][...]


@pytest.mark.parametrize("evil", ["../outside.h5", "/etc/passwd", "run.subfiles/../../x.h5"])
def test_escaping_source_path_is_refused(comm, run: Path, evil: str) -> None:
    def tamper() -> None:
        with h5py.File(run, "r+") as f:
            record = json.loads(f["Timestep_0/x"].attrs["h5subfile.layout"])
            record["extents"][0]["file"] = evil
            f["Timestep_0/x"].attrs["h5subfile.layout"] = json.dumps(record)

    on_root(comm, tamper)
    with opened(comm, run) as f:
        with raises_on_every_rank(comm, hs.UnsafePathError, evil):
            f["/Timestep_0/x"][...]

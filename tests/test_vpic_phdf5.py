"""``h5subfile vpic --api phdf5``: the VPIC-IO kernel through parallel HDF5 (h5py's mpio driver),
the baseline h5subfile's metadata time is measured against. Without an MPI-enabled h5py it says
why, as ``bench -a phdf5`` does; in the ``make phdf5`` environment it writes h5bench's layout,
which plain h5py and h5subfile's own reader (``bdcats --verify``) read back exactly."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli
from h5subfile.bench.backends import PHDF5Backend
from h5subfile.kernels.vpic import BYTES_PER_PARTICLE, FIELDS, particle_values

PHDF5_BIN = ROOT.parent / ".venv-phdf5" / "bin"


def test_vpic_phdf5_says_why_it_is_unavailable(tmp_path: Path) -> None:
    if h5py.get_config().mpi:
        pytest.skip("this h5py has MPI: phdf5 is available here")
    result = run_cli(2, "vpic", tmp_path / "a.h5", "--api", "phdf5", "--particles", 64)
    assert result.returncode == 1
    reason = PHDF5Backend.unavailable()
    assert reason and result.stderr.count(reason) == 1, result.stderr
    assert not (tmp_path / "a.h5").exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--collective"], "--collective applies to --api phdf5 only"),
        (["--api", "phdf5", "--subfiles", "2"], "--subfiles: plan flags apply to --api h5subfile"),
    ],
)
def test_vpic_flags_that_do_not_apply_are_refused_once(
    tmp_path: Path, flags: list, message: str
) -> None:
    result = run_cli(2, "vpic", tmp_path / "a.h5", "--particles", 64, *flags)
    assert result.returncode == 2  # options that do not go together: a usage error
    assert result.stderr.count(message) == 1, result.stderr


def phdf5_vpic(ranks: int, path: Path, particles: int, *flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [str(PHDF5_BIN / "mpiexec"), "-n", str(ranks), str(PHDF5_BIN / "python")]
    command += ["-m", "h5subfile", "vpic", str(path), "--api", "phdf5", "--steps", "2"]
    command += ["--particles", str(particles), "--json", *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    not (PHDF5_BIN.parent / ".installed").exists(),
    reason="parallel HDF5 environment not built (run `make phdf5`)",
)
@pytest.mark.parametrize("ranks, particles, flags", [(3, 1000, []), (3, 1000, ["--collective"])])
def test_vpic_phdf5_writes_h5bench_layout(
    tmp_path: Path, ranks: int, particles: int, flags: list
) -> None:
    path = tmp_path / "phdf5.h5"
    metrics = phdf5_vpic(ranks, path, particles, *flags)
    total = ranks * particles
    assert metrics["api"] == "phdf5" and metrics["collective"] == bool(flags)
    assert metrics["total_bytes"] == total * BYTES_PER_PARTICLE * 2
    assert 0 < metrics["raw_seconds"] <= metrics["observed_seconds"]
    assert metrics["metadata_seconds"] == pytest.approx(
        metrics["observed_seconds"] - metrics["raw_seconds"], abs=0.05
    )
    with h5py.File(path, "r") as f:  # plain (serial) h5py: one conventional file
        assert sorted(f.keys()) == ["Timestep_0", "Timestep_1"]
        assert list(f.attrs["particles_per_rank"]) == [particles] * ranks
        for step in (0, 1):
            group = f[f"Timestep_{step}"]
            assert sorted(group.keys()) == sorted(name for name, _ in FIELDS)
            for name, dtype in FIELDS:
                d = group[name]
                assert d.dtype == np.dtype(dtype) and d.shape == (total,) and not d.is_virtual
                expected = particle_values(name, step, np.arange(total))
                assert np.array_equal(d[...].view(np.uint8), expected.view(np.uint8)), name
    read = run_cli(2, "bdcats", path, "--verify", "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout.strip().splitlines()[-1])["total_bytes"] == metrics["total_bytes"]


@pytest.mark.skipif(
    not (PHDF5_BIN.parent / ".installed").exists(),
    reason="parallel HDF5 environment not built (run `make phdf5`)",
)
def test_vpic_phdf5_ranks_without_particles_take_part_in_collective_writes(tmp_path: Path) -> None:
    metrics = phdf5_vpic(2, tmp_path / "empty.h5", 0, "--collective")
    assert metrics["total_bytes"] == 0
    with h5py.File(tmp_path / "empty.h5", "r") as f:
        assert f["Timestep_1/x"].shape == (0,)

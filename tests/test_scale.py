"""Sizes and rank counts the paper's prototype could not handle: a > 2 GiB region written and read
by one rank, and 32 ranks (oversubscribed) with subfiling factor 8 (tests/mpi/test_scale.py, one
job each); then plain h5py reads what they wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_mpi_pytest

MODULE = "test_scale.py::"


def run_job(tmp_path: Path, ranks: int, test: str) -> Path:
    run = run_mpi_pytest(ranks, [MODULE + test], tmp_path / "job", tmp_path, timeout=400)
    if not run.ok:
        pytest.fail(run.report(), pytrace=False)
    return tmp_path


@pytest.mark.slow
def test_one_rank_writes_and_reads_more_than_2_gib(tmp_path: Path) -> None:
    data = run_job(tmp_path, 1, "test_one_rank_writes_and_reads_more_than_2_gib")
    code = (
        "import h5py, sys\n"
        "d = h5py.File(sys.argv[1])['block']\n"
        "print(d.shape[0] * d.dtype.itemsize, int(d[-1]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(data / "big.h5")],
        capture_output=True,
        text=True,
        check=True,
    )
    nbytes, last = map(int, result.stdout.split())
    n = int(2.1 * 2**30) // 8
    assert nbytes == n * 8 > 2**31
    assert last == ((n - 1) * 0x9E3779B97F4A7C15) % 2**64


@pytest.mark.slow
def test_32_ranks_with_subfiling_factor_8(tmp_path: Path) -> None:
    data = run_job(tmp_path, 32, "test_many_ranks_with_subfiling_factor_8")
    subfiles = sorted(p.name for p in (data / "many.subfiles").iterdir())
    assert [name[:3] + name[12:] for name in subfiles] == [f"s0-{g:05d}.h5" for g in range(4)]
    code = (
        "import h5py, sys, numpy as np\n"
        "x = h5py.File(sys.argv[1])['x']\n"
        "assert x.is_virtual and np.array_equal(x[...], np.arange(x.shape[0]))\n"
        "print(x.shape[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(data / "many.h5")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == sum(1000 + r for r in range(32))

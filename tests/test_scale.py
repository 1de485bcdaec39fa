"""Sizes and rank counts the paper's prototype could not handle: a > 2 GiB region written and read
by one rank, and 32 ranks (oversubscribed) with subfiling factor 8 (tests/mpi/test_scale.py, one
job each); 256 ranks, file per process and 16 ranks per subfile, read back by 7 ranks
(tests/mpi/many_ranks.py, a plain script: starting pytest on 256 ranks costs more than the test);
then plain h5py reads what they wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_mpi, run_mpi_pytest, run_python

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


PLAIN_CHECK = """
import sys, h5py, numpy as np
writers = int(sys.argv[2])
total = sum(2 + r % 5 for r in range(writers))
words = np.arange(total, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
grid = (np.arange(2 * writers * 3, dtype=np.int64) * 7 + 1).astype('i4').reshape(-1, 3)
for name in ('fpp.h5', 'k16.h5'):
    with h5py.File(sys.argv[1] + '/' + name, 'r') as f:
        u, x = f['Timestep_0/u'], f['Timestep_0/f']
        assert u.is_virtual and x.is_virtual, name
        assert u.dtype == np.uint64 and x.dtype == np.float64, name
        assert np.array_equal(u[...], words), name
        assert np.array_equal(x[...].view(np.uint64), words), name
        if name == 'k16.h5':
            assert f['grid'].is_virtual and np.array_equal(f['grid'][...], grid)
        print(name, len(u.virtual_sources()))
"""


@pytest.mark.slow
@pytest.mark.scale
def test_256_ranks_file_per_process_and_16_per_subfile(tmp_path: Path) -> None:
    # The collective timeout stays under the job's, so a stuck round names its ranks first.
    env = {"H5SUBFILE_COLLECTIVE_TIMEOUT": "500"}
    written = run_mpi(256, "many_ranks.py", "write", tmp_path, timeout=800, env=env)
    assert written.stdout.split()[:2] == ["ok", "256"]
    for name, subfiles in (("fpp", 256), ("k16", 16)):
        found = sorted((tmp_path / f"{name}.subfiles").glob("*.h5"))
        assert len(found) == subfiles, (name, [p.name for p in found][:5])
    read = run_mpi(7, "many_ranks.py", "read", tmp_path, 256, timeout=300, env=env)
    assert read.stdout.split()[:2] == ["ok", "7"]
    plain = run_python(PLAIN_CHECK, str(tmp_path), "256")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["fpp.h5", "256", "k16.h5", "16"]

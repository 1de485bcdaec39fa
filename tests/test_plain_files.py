"""Files written by anything else (here plain h5py, laid out like h5bench's VPIC-IO) are read
the same way: any rank count, BD-CATS-IO kernel, info."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, run_mpi, run_python

WRITE_PLAIN = """
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'w') as f:
    f.attrs['creator'] = 'plain h5py'
    for step in range(2):
        g = f.create_group(f'Timestep_{step}')
        for name in ('x', 'y', 'z', 'px', 'py', 'pz', 'id_1', 'id_2'):
            dtype = 'i4' if name == 'id_1' else 'f4'
            g.create_dataset(name, data=np.arange(1001, dtype=dtype))
    f.create_dataset('chunked', data=np.arange(200).reshape(20, 10), chunks=(4, 5),
                     compression='gzip', shuffle=True)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    h5py.h5d.create(f.id, b'compact', h5py.h5t.STD_I16LE, h5py.h5s.create_simple((5,)), dcpl=dcpl)
    f['compact'][...] = np.arange(5, dtype='i2')
    f['scalar'] = 42.5
    f['strings'] = np.array(['a', 'bc'], dtype=h5py.string_dtype())
"""


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plain") / "h5bench_like.h5"
    result = run_python(WRITE_PLAIN, str(path))
    assert result.returncode == 0, result.stderr
    return path


@pytest.mark.parametrize("readers", [1, 3])
def test_plain_file_read_with_any_rank_count(plain: Path, readers: int) -> None:
    assert run_mpi(readers, "read_plain.py", plain).stdout.strip() == "ok"


def test_bdcats_reads_plain_vpic_layout(plain: Path) -> None:
    for pattern in ("full", "partial", "strided", "random"):
        result = run_cli(2, "bdcats", plain, "--pattern", pattern, "--json", "--count", 100)
        assert result.returncode == 0, result.stderr
        assert '"total_bytes"' in result.stdout


def test_bdcats_verify_refuses_foreign_files(plain: Path) -> None:
    result = run_cli(2, "bdcats", plain, "--verify")
    assert result.returncode == 1
    assert result.stderr.count("--verify needs a file written by 'h5subfile vpic'") == 1


def test_info_describes_plain_files(plain: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "h5subfile", "info", str(plain)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "plain HDF5 file" in result.stdout
    assert "/Timestep_1/id_1" in result.stdout and "(1001,)" in result.stdout


@pytest.mark.skipif(shutil.which("h5ls") is None, reason="h5ls not installed (hdf5-tools)")
def test_h5ls_lists_our_files(tmp_path: Path) -> None:
    written = run_cli(
        3, "vpic", tmp_path / "v.h5", "--particles", 100, "--subfiles", "rank", "--quiet"
    )
    assert written.returncode == 0, written.stderr
    out = subprocess.run(
        ["h5ls", "-r", str(tmp_path / "v.h5")], capture_output=True, text=True, check=True
    ).stdout
    assert ["/Timestep_0/id_2", "Dataset", "{300}"] in [line.split() for line in out.splitlines()]


def test_cli_errors_are_printed_once_and_end_the_job(tmp_path: Path) -> None:
    missing = run_cli(3, "bdcats", tmp_path / "none.h5")
    assert missing.returncode == 1
    assert missing.stderr.count("does not exist") == 1
    bad_plan = run_cli(2, "vpic", tmp_path / "v.h5", "--subfiles", 5, "--particles", 10)
    assert bad_plan.returncode == 1
    assert bad_plan.stderr.count("subfiles=5 but the communicator has only 2 rank(s)") == 1
    assert not (tmp_path / "v.h5").exists()

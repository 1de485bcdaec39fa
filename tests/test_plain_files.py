"""Files written by anything else (here plain h5py, laid out like h5bench's VPIC-IO) are read
the same way: by the BD-CATS-IO kernel and info here, with any rank count in
tests/mpi/test_plain_files.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPIEXEC, SCRIPTS, run_cli, run_python

WRITE_PLAIN = "import sys; sys.path.insert(0, sys.argv[2]); from common import write_plain; write_plain(sys.argv[1])"


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plain") / "h5bench_like.h5"
    result = run_python(WRITE_PLAIN, str(path), str(SCRIPTS))
    assert result.returncode == 0, result.stderr
    return path


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


REFERENCES = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    x = f.create_dataset("x", data=np.arange(6, dtype="i8"))
    f.attrs["points_to"] = x.ref
    f.attrs["refs"] = np.array([x.ref, f.ref], dtype=h5py.ref_dtype)
    x.attrs["plain"] = 7
"""

READ_REFERENCES = """
import json, sys
from mpi4py import MPI
import h5subfile as hs
with hs.File(sys.argv[1], "r") as f:
    seen = {"root": {k: str(v) for k, v in f.attrs.items()}, "x": f["x"][...].tolist(),
            "plain": int(f["x"].attrs["plain"]),
            "opened": [f[r].name for r in [f.attrs["points_to"], *f.attrs["refs"]]]}
print(json.dumps(seen) if MPI.COMM_WORLD.rank == 0 else "", end="")
"""


def test_reference_attributes_of_plain_files_open_their_objects(tmp_path: Path) -> None:
    """HDF5 references cannot leave the process that read them: opening a plain file holding
    some, on 2 ranks, reads its data and gives each reference as the path of its target,
    which ``f[ref]`` opens on every rank."""
    path = tmp_path / "refs.h5"
    made = run_python(REFERENCES, str(path))
    assert made.returncode == 0, made.stderr
    script = tmp_path / "read_refs.py"
    script.write_text(READ_REFERENCES)
    result = subprocess.run(
        [str(MPIEXEC), "-n", "2", sys.executable, str(script), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["x"] == list(range(6)) and seen["plain"] == 7
    assert seen["root"] == {
        "points_to": "<HDF5 object reference to /x>",
        "refs": "[<HDF5 object reference to /x> <HDF5 object reference to />]",
    }
    assert seen["opened"] == ["/x", "/x", "/"]

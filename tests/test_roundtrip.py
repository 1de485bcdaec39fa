"""Round trips: the files that 1-4 writers with every grouping and appends from other rank counts
(both commit strategies) left, read back bit for bit by 1-5 readers in tests/mpi/test_roundtrip.py
(stages of tests/test_mpi.py), are what they should be, and plain h5py, h5dump and h5repack read
them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, SCRIPTS, Stages

sys.path.insert(0, str(SCRIPTS))
from common import expected  # noqa: E402


@pytest.fixture(scope="module")
def matrix(mpi_stages: Stages) -> Path:
    """Written with 1-4 ranks and appended to with 3 and 2 ranks by tests/mpi/test_roundtrip.py."""
    return mpi_stages.data_after("append-read-3") / "matrix"


def test_matrix_has_every_layout(matrix: Path) -> None:
    import json

    import h5py

    def sessions(name: str) -> list[dict]:
        with h5py.File(matrix / name, "r") as f:
            return json.loads(f.attrs["h5subfile"])["sessions"]

    # the writers' session: subfiles per grouping (one group => data in the master itself)
    assert len(sessions("w4_two.h5")[0]["subfiles"]) == 2
    assert len(sessions("w4_rank.h5")[0]["subfiles"]) == 4
    assert len(sessions("w4_k3.h5")[0]["subfiles"]) == 2
    assert len(sessions("w4_node.h5")[0]["subfiles"]) == 2  # 2 fake nodes of 2 ranks
    assert sessions("w2_node.h5")[0]["subfiles"] == []  # one node: a conventional file
    assert sessions("w4_single.h5")[0]["subfiles"] == []
    # the appending sessions, from another rank count, with both commit strategies
    assert [s["ranks"] for s in sessions("w4_rank.h5")] == [4, 3]
    assert sessions("w4_rank.h5")[1]["commit"] == "replace"
    assert sessions("w3_two.h5")[1]["commit"] == "in-place"
    assert all(s["closed"] for s in sessions("w3_two.h5"))
    assert not list(matrix.glob("*.partial"))


def test_plain_h5py_reads_everything(matrix: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "interop" / "plain_check.py"), str(matrix), str(SCRIPTS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "plain h5py checked" in result.stdout


h5dump = shutil.which("h5dump")
h5repack = shutil.which("h5repack")


@pytest.mark.skipif(h5dump is None, reason="h5dump not installed (apt-get install hdf5-tools)")
@pytest.mark.parametrize("name", ["w4_two.h5", "w3_rank.h5", "w2_node.h5"])
def test_h5dump_shows_values(matrix: Path, name: str) -> None:
    out = subprocess.run(
        [h5dump, "-d", "/prefix/i4", "-w", "0", "-y", str(matrix / name)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    body = out.split("DATA {", 1)[1].split("}", 1)[0]
    values = [int(v) for v in body.replace(",", " ").split()]
    import h5py

    with h5py.File(matrix / name, "r") as f:
        shape = f["prefix/i4"].shape
    assert values == expected("/prefix/i4", shape, np.dtype("i4")).tolist()


@pytest.mark.skipif(h5repack is None, reason="h5repack not installed (apt-get install hdf5-tools)")
def test_h5repack_conti_gives_conventional_file(matrix: Path, tmp_path: Path) -> None:
    out = tmp_path / "repacked.h5"
    subprocess.run([h5repack, "-l", "CONTI", str(matrix / "w4_two.h5"), str(out)], check=True)
    code = (
        "import h5py, sys, numpy as np\n"
        "a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])\n"
        "names = []\n"
        "a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)\n"
        "assert names and not any(a[n].is_virtual for n in names)\n"
        "assert all(np.array_equal(a[n][...], b[n][...]) for n in names)\n"
        "print(len(names))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(out), str(matrix / "w4_two.h5")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 40

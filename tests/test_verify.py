"""``h5subfile verify``: exit status 0 on a clean file and 1 on a damaged one, naming the
subfile and byte offset of each bad piece, under 1 and 3 ranks; files written before checksums
(format 2, tests/data) open and are reported as having none. Plain h5py in a separate process
still reads files with identities and checksums."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import h5py
import pytest

from conftest import ROOT, run_cli, run_mpi, run_python
from damage import (
    copy_file,
    damage_header,
    flip_byte,
    move_offset,
    remove_subfile,
    swap_subfiles,
)
from h5subfile.layout.record import LAYOUT_ATTR

PARTICLES = 400


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("verify") / "run.h5"
    result = run_cli(
        2, "vpic", path, "--particles", PARTICLES, "--steps", 2, "--subfiles", 2, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    return path


@pytest.mark.parametrize("ranks", [1, 3])
def test_clean_file_exits_0(written: Path, ranks: int) -> None:
    result = run_cli(ranks, "verify", written, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["clean"] and report["ranks"] == ranks and report["bad"] == []
    assert report["pieces"] == 2 * 8 * 2 and report["subfiles"] == 2  # 2 steps, 8 fields, 2 ranks
    assert report["checked_bytes"] == 2 * 8 * 2 * PARTICLES * 4


def test_plain_h5py_reads_files_with_checksums(written: Path) -> None:
    code = (
        "import sys, h5py, numpy as np\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    x = f['Timestep_1/x'][...]\n"
        f"    assert x.shape == ({2 * PARTICLES},) and np.isfinite(x).all(), x\n"
        "    print(sorted(f))\n"
    )
    result = run_python(code, str(written))
    assert result.returncode == 0, result.stderr
    assert "Timestep_0" in result.stdout


@pytest.mark.parametrize("ranks", [1, 3])
def test_flipped_byte_exits_1_naming_subfile_and_offset(
    tmp_path: Path, written: Path, ranks: int
) -> None:
    copy = tmp_path / "run.h5"
    result = run_python(
        "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2]);"
        "shutil.copytree(sys.argv[1][:-3] + '.subfiles', sys.argv[2][:-3] + '.subfiles')",
        str(written),
        str(copy),
    )
    assert result.returncode == 0, result.stderr
    subfile, offset = flip_byte(copy, "Timestep_1/py")
    result = run_cli(ranks, "verify", copy, "--quiet")
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("BAD")]
    assert "/Timestep_1/py" in line and subfile.name in line, line
    assert f"byte offset {offset}, length {PARTICLES * 4}" in line, line
    assert result.stdout.rstrip().endswith("DAMAGED")


@pytest.mark.parametrize(
    "damage, said",
    [
        (swap_subfiles, "is not the one its master"),
        (remove_subfile, "does not exist"),
        (move_offset, ""),
        (damage_header, "checksum"),
    ],
)
def test_damaged_subfiles_and_records_exit_1_naming_them(
    tmp_path: Path, written: Path, damage, said: str
) -> None:
    """Besides flipped bytes: swapped or missing subfiles and a record that disagrees with the
    VDS are each reported by name, exit status 1, and nothing is printed twice."""
    copy = copy_file(written, tmp_path)
    named = damage(copy)
    result = run_cli(2, "verify", copy, "--quiet")
    assert result.returncode == 1, result.stdout + result.stderr
    assert any(named in line and said in line for line in result.stdout.splitlines()), result.stdout
    assert result.stdout.rstrip().endswith("DAMAGED")
    assert len(set(result.stdout.splitlines())) == len(result.stdout.splitlines()), result.stdout


def test_repack_of_a_damaged_file_is_one_message(tmp_path: Path, written: Path) -> None:
    """A missing subfile: repack prints verify's report and one error line; with --no-verify,
    the one line naming the subfile that cannot be read. No warnings, nothing written."""
    copy = copy_file(written, tmp_path)
    named = remove_subfile(copy)
    for flags, said in (((), "fails verification"), (("--no-verify",), named)):
        result = run_cli(2, "repack", copy, tmp_path / "out.h5", *flags)
        assert result.returncode == 1, result.stdout + result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and said in lines[0], result.stderr
        assert "Traceback" not in result.stderr and "Warning" not in result.stderr
        assert not (tmp_path / "out.h5").exists()
        if not flags:
            assert f"BAD subfile run.subfiles/{named}" in result.stdout  # verify's report


def test_usage_error_exits_2() -> None:
    result = run_cli(1, "verify")
    assert result.returncode == 2


def _unpacked(folder: Path, name: str) -> Path:
    """The kept file ``tests/data/<name>.tar.gz`` unpacked into ``folder``: ``<name>.h5``."""
    with tarfile.open(ROOT / "data" / f"{name}.tar.gz") as archive:
        archive.extractall(folder, filter="data")
    return folder / f"{name}.h5"


@pytest.fixture
def format2(tmp_path: Path) -> Path:
    """A file written by h5subfile at commit f522254 (format 2; tests/data/format2_write.py)."""
    return _unpacked(tmp_path, "format2")


def test_format2_file_opens_and_has_no_checksums(format2: Path) -> None:
    code = (
        "import sys, numpy as np, h5subfile as hs\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    assert f['x'][...].tolist() == list(range(16))\n"
        "    assert f['z'][...].tolist() == list(range(32))\n"
        "    print(f.problems, f.sessions[0]['uuid'] == '')\n"
    )
    result = run_python(code, str(format2))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "True"]
    result = run_cli(2, "verify", format2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no checksums: 2 dataset(s)" in result.stdout and "/x" in result.stdout


@pytest.fixture
def format3(tmp_path: Path) -> Path:
    """A file written by h5subfile at commit bec83d0 (format 3; tests/data/format3_write.py)."""
    return _unpacked(tmp_path, "format3")


def test_format3_file_reads_verifies_and_takes_a_dataset_without_blocks(format3: Path) -> None:
    code = (
        "import sys, numpy as np, h5subfile as hs\n"
        "from mpi4py import MPI\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    assert f['x'][...].tolist() == list(range(16))\n"
        "    assert f['z'][...].tolist() == list(range(32))\n"
        "    grid = np.arange(12).reshape(4, 3)\n"
        "    assert f['grid'][...].tolist() == np.hstack([grid, grid + 100]).tolist()\n"
        "    assert not f.problems and f.sessions[0]['uuid']\n"
        "with hs.File(sys.argv[1], 'a', subfiles='rank') as f:\n"
        "    d = f.create_dataset('later', (2, 3), 'i4')\n"
        "    d[1, ::2] = [7, 9]\n"
        "with hs.File(sys.argv[1], 'r') as f:\n"
        "    print(f['later'][...].tolist(), f['x'][...].tolist() == list(range(16)))\n"
    )
    result = run_python(code, str(format3))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "[[0, 0, 0], [7, 0, 9]] True"
    result = run_cli(2, "verify", format3)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clean" in result.stdout and "no checksums" not in result.stdout


DAMAGED_KINDS = """
import sys, numpy as np, h5py, h5subfile as hs
path = sys.argv[1]
chunked = np.zeros(1000)
chunked[250], chunked[350] = 1.0, 3.0  # chunks 2 and 3 compress to streams of one length
with hs.File(path, "w") as f:
    f.create_dataset("s", data=np.float64(3.25))
    f.create_dataset("c", data=chunked, chunks=(100,), compression="gzip")
with h5py.File(path, "r") as f:
    scalar = f["s"].id.get_offset()
    a, b = (f["c"].id.get_chunk_info(i) for i in (2, 3))
assert a.size == b.size, (a.size, b.size)
with open(path, "r+b") as raw:
    raw.seek(scalar + 2)
    byte = raw.read(1)[0]
    raw.seek(scalar + 2)
    raw.write(bytes([byte ^ 1]))
    raw.seek(a.byte_offset)
    first = raw.read(a.size)
    raw.seek(b.byte_offset)
    second = raw.read(b.size)
    raw.seek(a.byte_offset)
    raw.write(second)
    raw.seek(b.byte_offset)
    raw.write(first)
"""

READ_KINDS = """
import sys, h5subfile as hs
def said(read):
    try:
        return repr(read())
    except hs.ChecksumError as exc:
        return "ChecksumError " + str(exc).split(":")[0]
with hs.File(sys.argv[1], "r", verify=True) as f:
    print(said(lambda: f["s"][()]), said(lambda: f["s"][...]), said(lambda: f["c"][250]))
with hs.File(sys.argv[1], "r") as f:
    print(said(lambda: f["s"].read(verify=True)), said(lambda: f["c"].read(slice(200, 300), verify=True)))
    print(said(lambda: float(f["s"][()])), said(lambda: float(f["c"][250])))
"""


def test_reads_with_verify_check_scalar_and_chunked_datasets(tmp_path: Path) -> None:
    """A flipped byte of a scalar (read through h5py otherwise) and two swapped chunks are
    refused by every read with ``verify``; without it they are returned as stored."""
    path = tmp_path / "kinds.h5"
    damaged = run_python(DAMAGED_KINDS, str(path))
    assert damaged.returncode == 0, damaged.stderr
    read = run_python(READ_KINDS, str(path))
    assert read.returncode == 0, read.stderr
    checked, read_checked, unchecked = read.stdout.splitlines()
    assert checked.split() == ["ChecksumError", "dataset", "/s"] * 2 + [
        "ChecksumError",
        "dataset",
        "/c",
    ]
    assert read_checked.split() == [
        "ChecksumError",
        "dataset",
        "/s",
        "ChecksumError",
        "dataset",
        "/c",
    ]
    scalar, chunk = map(float, unchecked.split())
    assert scalar != 3.25 and chunk == 3.0  # what the damage stored, read without verify


@pytest.fixture
def format4(tmp_path: Path) -> Path:
    """A file written by h5subfile at commit cb7227e (format 4; tests/data/format4_write.py)."""
    return _unpacked(tmp_path, "format4")


def test_format4_file_reads_verifies_and_grows_into_format_5(format4: Path) -> None:
    """A file of format 4 (a learned, resizable dataset) reads and verifies as written; a later
    session grows its dataset, after which the record says format 5 and every step reads."""
    code = (
        "import sys, json, h5py, numpy as np, h5subfile as hs\n"
        "want = [[0.0, 1.0, 10.0, 11.0], [2.0, 3.0, 12.0, 13.0]]\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    assert f['series'][...].tolist() == want and not f.problems\n"
        "    assert f['axis'][...].tolist() == [0, 1, 2, 3]\n"
        "with hs.File(sys.argv[1], 'a') as f:\n"
        "    f['series'].resize(3, axis=0)\n"
        "    f['series'][2] = [7, 8, 9, 10]\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    print(f['series'][...].tolist() == want + [[7.0, 8.0, 9.0, 10.0]])\n"
        "with h5py.File(sys.argv[1]) as f:\n"
        "    print(json.loads(f.attrs['h5subfile'])['format'], f['series'][2].tolist())\n"
    )
    result = run_python(code, str(format4))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["True", "5 [7.0, 8.0, 9.0, 10.0]"]
    result = run_cli(2, "verify", format4)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clean" in result.stdout


@pytest.fixture
def format5(tmp_path: Path) -> Path:
    """A file written by h5subfile at commit e9c0b8d (format 5; tests/data/format5_write.py)."""
    return _unpacked(tmp_path, "format5")


def test_format5_file_reads_verifies_and_takes_merged_mappings(format5: Path) -> None:
    """A file of format 5 maps each piece of a learned layout on its own (4 ranks, 2 subfiles:
    two pieces per subfile, four mappings per dataset): it reads and verifies as written. A
    later session adds a dataset whose pieces merge (one mapping per subfile): the record then
    says format 6, the old datasets keep their mappings, and everything reads and verifies."""
    code = (
        "import sys, json, h5py, numpy as np, h5subfile as hs\n"
        "rows = np.concatenate([np.arange(6.0).reshape(2, 3) + 10 * r for r in range(4)])\n"
        "rows = rows.reshape(4, 2, 3).transpose(1, 0, 2).reshape(8, 3)\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    assert f['slabs'][...].tolist() == list(range(16)) and not f.problems\n"
        "    assert (f['rows'][...] == rows).all()\n"
        "with hs.File(sys.argv[1], 'a', subfiles=1) as f:\n"
        "    f['later'] = np.arange(5)\n"
        "with h5py.File(sys.argv[1]) as f:\n"
        "    print(json.loads(f.attrs['h5subfile'])['format'],\n"
        "          [len(f[n].virtual_sources()) for n in ('slabs', 'rows')])\n"
    )
    result = run_python(code, str(format5))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "5 [4, 4]"  # one group: nothing merged, format kept
    result = run_cli(4, "verify", format5)
    assert result.returncode == 0 and "clean" in result.stdout, result.stdout + result.stderr
    append = (
        "import sys, numpy as np, h5subfile as hs\n"
        "from mpi4py import MPI\n"
        "r = MPI.COMM_WORLD.rank\n"
        "with hs.File(sys.argv[1], 'a', subfiles=2) as f:\n"
        "    d = f.create_dataset('added', (16,), 'i8')\n"
        "    d[4 * r : 4 * r + 4] = np.arange(4 * r, 4 * r + 4) * 3\n"
    )
    script = format5.parent / "append.py"
    script.write_text(append)
    run_mpi(4, str(script), str(format5))  # the script's own path: not one of tests/mpi
    check = (
        "import sys, json, h5py\n"
        "with h5py.File(sys.argv[1]) as f:\n"
        "    print(json.loads(f.attrs['h5subfile'])['format'],\n"
        "          [len(f[n].virtual_sources()) for n in ('slabs', 'rows', 'added')],\n"
        "          f['added'][...].tolist() == [3 * k for k in range(16)])\n"
    )
    result = run_python(check, str(format5))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "6 [4, 4, 2] True"
    result = run_cli(3, "verify", format5)
    assert result.returncode == 0 and "clean" in result.stdout, result.stdout + result.stderr


ADD_GZIP = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:  # as applications add to a file after writing it
    d = f.create_dataset("added", data=np.arange(10000.0), chunks=(1000,), compression="gzip")
    print(d.id.get_chunk_info(3).byte_offset)
"""


@pytest.mark.parametrize("ranks", [1, 3])
def test_a_dataset_added_by_another_program_is_read_through_hdf5(
    tmp_path: Path, written: Path, ranks: int
) -> None:
    """A compressed dataset plain h5py added to the master has no checksums of h5subfile's:
    verify reads it whole through HDF5 and says so; one byte of a chunk flipped, HDF5 cannot
    read it and verify exits 1 naming the dataset (it said "clean" before)."""
    path = copy_file(written, tmp_path)
    added = run_python(ADD_GZIP, str(path))
    assert added.returncode == 0, added.stderr
    result = run_cli(ranks, "verify", path, "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["clean"], result.stdout + result.stderr
    assert report["read_through_hdf5"] == ["/added"]
    offset = int(added.stdout) + 20
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ 0xFF]))
    result = run_cli(ranks, "verify", path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "read through HDF5: 1 dataset(s) not written by h5subfile (/added)" in result.stdout
    assert "BAD /added: CorruptFileError" in result.stdout and "DAMAGED" in result.stdout


ONE_GROUP = """
import sys, numpy as np, h5subfile as hs
from mpi4py import MPI
with hs.File(sys.argv[1], "w", comm=MPI.COMM_SELF, subfiles=1) as f:
    f.create_dataset("blocks", (100,), "f8", start=(0,), count=(100,))[:] = np.arange(100.0)
    f.create_dataset("learned", (100,), "f8")[10:60] = np.arange(50.0) - 7
"""
READ_BACK = """
import sys, numpy as np, h5subfile as hs
from mpi4py import MPI
with hs.File(sys.argv[1], "r", comm=MPI.COMM_SELF, verify=True) as f:
    assert np.array_equal(f["blocks"][...], np.arange(100.0))
    want = np.zeros(100)
    want[10:60] = np.arange(50.0) - 7
    assert np.array_equal(f["learned"][...], want)
"""


@pytest.mark.skipif(shutil.which("h5repack") is None, reason="needs HDF5's h5repack (hdf5-tools)")
def test_a_master_rewritten_by_h5repack_reads_and_verifies(tmp_path: Path) -> None:
    """h5repack rewrites a file, moving the data of datasets stored in the master: their
    records' offsets no longer match, and every dataset was refused as damaged though every
    value was intact. HDF5's offset is taken, and the checksums still hold the bytes to what
    was written, on every read: a clean file reads and verifies clean, and a flipped byte is
    caught by verify and by a plain read."""
    original, repacked = tmp_path / "one.h5", tmp_path / "repacked.h5"
    made = run_python(ONE_GROUP, str(original))
    assert made.returncode == 0, made.stderr
    subprocess.run(["h5repack", str(original), str(repacked)], check=True)
    read = run_python(READ_BACK, str(repacked))
    assert read.returncode == 0, read.stderr
    result = run_cli(1, "verify", repacked)
    assert result.returncode == 0 and "clean" in result.stdout, result.stdout + result.stderr
    info = run_cli(1, "info", repacked)
    assert "moved: the master was rewritten by another tool" in info.stdout, info.stdout
    offset = run_python(
        "import sys, h5py\nprint(h5py.File(sys.argv[1])['blocks'].id.get_offset())",
        str(repacked),
    )
    with open(repacked, "r+b") as handle:
        handle.seek(int(offset.stdout) + 8)
        byte = handle.read(1)[0]
        handle.seek(int(offset.stdout) + 8)
        handle.write(bytes([byte ^ 0x10]))
    result = run_cli(1, "verify", repacked)
    assert result.returncode == 1 and "BAD /blocks" in result.stdout, result.stdout
    read = run_python(  # moved data is read with its checksums checked, asked or not
        "import sys, h5subfile as hs\nfrom mpi4py import MPI\n"
        "with hs.File(sys.argv[1], 'r', comm=MPI.COMM_SELF) as f:\n"
        "    f['blocks'][...]\n",
        str(repacked),
    )
    assert read.returncode != 0 and "ChecksumError" in read.stderr, read.stderr


RENAMED_READ_BACK = """
import sys, numpy as np, h5subfile as hs
from mpi4py import MPI
with hs.File(sys.argv[1], "r", comm=MPI.COMM_SELF, verify=True) as f:
    assert sorted(f) == ["g", "renamed"] and sorted(f["g"]) == ["blocks"]
    assert np.array_equal(f["g/blocks"][...], np.arange(100.0))
    want = np.zeros(100)
    want[10:60] = np.arange(50.0) - 7
    assert np.array_equal(f["renamed"][...], want)
"""


def test_datasets_renamed_by_plain_h5py_read_and_verify(tmp_path: Path) -> None:
    """Datasets stored in the master moved by another program (plain h5py's ``move``, as
    ``h5subfile``'s own ``move`` leaves them): their records name where they were written,
    and they read and verify under their new names; a record copied onto another dataset is
    still refused, its offset not being HDF5's."""
    path = tmp_path / "one.h5"
    made = run_python(ONE_GROUP, str(path))
    assert made.returncode == 0, made.stderr
    with h5py.File(path, "r+") as f:
        f.move("blocks", "g/blocks")
        f.move("learned", "renamed")
    read = run_python(RENAMED_READ_BACK, str(path))
    assert read.returncode == 0, read.stderr
    result = run_cli(1, "verify", path)
    assert result.returncode == 0 and "clean" in result.stdout, result.stdout + result.stderr
    with h5py.File(path, "r+") as f:
        record = f["renamed"].attrs[LAYOUT_ATTR]
        f["g/blocks"].attrs[LAYOUT_ATTR] = record  # digest intact: the text is whole
    result = run_cli(1, "verify", path)
    assert result.returncode == 1 and "/g/blocks" in result.stdout, result.stdout

"""``h5subfile run``: unmodified parallel h5py programs (tests/programs/h5py_mpio.py) whose
``h5py.File(..., driver="mpio")`` files h5subfile serves. Their files are checked bit for bit
by plain h5py in a separate process, and read by h5dump and xarray; the stand-ins leave every
other h5py file to h5py."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import MPIEXEC, run_python

ROOT = Path(__file__).resolve().parent
PROGRAM = ROOT / "programs" / "h5py_mpio.py"
DERIVED = ROOT / "programs" / "h5py_derived.py"
H5SUBFILE = Path(sys.executable).parent / "h5subfile"


def run(ranks: int, *words: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [str(MPIEXEC), "-n", str(ranks), str(H5SUBFILE), "run", *words]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})}
    )


def check(folder: Path, ranks: int) -> None:
    out = subprocess.run(
        [sys.executable, str(PROGRAM), "--check", str(folder), str(ranks)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "checked 10 files" in out.stdout


@pytest.mark.parametrize(
    ("ranks", "plan"),
    [(2, ["--subfiles", "rank"]), (4, ["--subfiles", "2"])],
    ids=["2-rank", "4-two"],
)
def test_unmodified_programs_write_subfiled_files_h5py_reads(
    tmp_path: Path, ranks: int, plan: list[str]
) -> None:
    done = run(ranks, *plan, str(PROGRAM), str(tmp_path))
    assert done.returncode == 0, done.stderr
    check(tmp_path, ranks)
    assert (tmp_path / "round_robin.subfiles").is_dir()  # subfiled, not one shared file
    with h5py.File(tmp_path / "round_robin.h5") as f:
        assert f["rows"].is_virtual
        # A strided piece per rank, 17 rows, rewritten at close as one strip of rows per
        # subfile: a box each (docs/FORMAT.md, *Consolidated segments*).
        assert f["rows"].id.get_create_plist().get_virtual_count() == 2
        for source in f["rows"].virtual_sources():
            assert all(n == 1 for n in source.vspace.get_regular_hyperslab()[2])
    verified = subprocess.run(
        [str(H5SUBFILE), "verify", str(tmp_path / "time_series.h5")], capture_output=True, text=True
    )
    assert verified.returncode == 0 and "clean" in verified.stdout, verified.stdout


READ_BACK = """
import sys, importlib.util, numpy as np
from mpi4py import MPI
import h5subfile as hs
spec = importlib.util.spec_from_file_location("p", sys.argv[2])
programs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(programs)
for name, datasets in programs.expected(int(sys.argv[3])).items():
    with hs.File(f"{sys.argv[1]}/{name}.h5", "r") as f:
        for key, want in datasets.items():
            got = np.asarray(f[key][()])
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, key)
if MPI.COMM_WORLD.rank == 0:
    print("read back")
"""


def test_h5subfile_reads_them_back_with_another_rank_count(tmp_path: Path) -> None:
    done = run(2, "--subfiles", "rank", str(PROGRAM), str(tmp_path))
    assert done.returncode == 0, done.stderr
    command = [str(MPIEXEC), "-n", "3", sys.executable, "-c", READ_BACK, str(tmp_path)]
    read = subprocess.run(
        [*command, str(PROGRAM), "2"], capture_output=True, text=True, timeout=180
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == "read back"


def test_h5dump_and_xarray_read_them(tmp_path: Path) -> None:
    done = run(3, "--subfiles", "2", str(PROGRAM), str(tmp_path))
    assert done.returncode == 0, done.stderr
    if shutil.which("h5dump"):
        dumped = subprocess.run(
            ["h5dump", "-d", "/field", str(tmp_path / "tiles.h5")], capture_output=True, text=True
        )
        assert dumped.returncode == 0, dumped.stderr
        data = dumped.stdout.split("DATA {", 1)[1].split("}", 1)[0]
        numbers = [int(n) for n in re.findall(r"-?\d+", re.sub(r"\(\d+,\d+\):", " ", data))]
        want = (np.arange(17 * 13, dtype=np.int64) * 7919 + 2) % 100_003
        assert numbers == want.tolist()
    xarray = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    with xarray.open_dataset(
        tmp_path / "collective_io.h5", engine="h5netcdf", phony_dims="sort"
    ) as data:
        want = np.arange(33 * 6, dtype=np.int64) * 7919 + 1
        assert np.array_equal(data["collective"].values.ravel(), (want % 100_003).astype("f8"))


def test_a_module_and_its_exit_status(tmp_path: Path) -> None:
    (tmp_path / "exits.py").write_text(
        "import sys, h5py\n"
        "from mpi4py import MPI\n"
        "assert h5py.get_config().mpi\n"
        "assert sys.argv[2:] == ['--flag', 'v', '-n', '2'], sys.argv  # the module's, all\n"
        "with h5py.File(sys.argv[1], 'w', driver='mpio', comm=MPI.COMM_WORLD) as f:\n"
        "    f.create_dataset('x', (2,), 'i4')[MPI.COMM_WORLD.rank] = 7\n"
        "sys.exit(3)\n"
    )
    path = str(tmp_path / "m.h5")
    env = {"PYTHONPATH": str(tmp_path)}
    done = run(2, "-m", "exits", path, "--flag", "v", "-n", "2", env=env)
    assert done.returncode == 3, done.stderr
    with h5py.File(tmp_path / "m.h5") as f:
        assert f["x"][()].tolist() == [7, 7]


def test_an_uncaught_exception_ends_the_job(tmp_path: Path) -> None:
    (tmp_path / "fails.py").write_text(
        "from mpi4py import MPI\n"
        "if MPI.COMM_WORLD.rank == 1:\n"
        "    raise ValueError('rank 1 gives up')\n"
        "MPI.COMM_WORLD.Barrier()\n"  # rank 0 would wait here for ever
    )
    done = run(2, str(tmp_path / "fails.py"))
    assert done.returncode != 0
    assert "ValueError: rank 1 gives up" in done.stderr


def test_an_error_status_on_one_rank_ends_the_job(tmp_path: Path) -> None:
    """``sys.exit(3)`` on rank 1 while rank 0 waits in a barrier after closing its file: the
    job ends with status 3, as under ``python -m mpi4py`` (it hung)."""
    (tmp_path / "quits.py").write_text(
        "import sys, h5py\n"
        "from mpi4py import MPI\n"
        "with h5py.File(sys.argv[1], 'w', driver='mpio', comm=MPI.COMM_WORLD) as f:\n"
        "    f.create_dataset('x', (2,), 'i4')[MPI.COMM_WORLD.rank] = 7\n"
        "if MPI.COMM_WORLD.rank == 1:\n"
        "    sys.exit(3)\n"
        "MPI.COMM_WORLD.Barrier()\n"  # rank 0 would wait here for ever
    )
    done = run(2, str(tmp_path / "quits.py"), str(tmp_path / "q.h5"))
    assert done.returncode == 3, done.stderr


@pytest.mark.parametrize("status", [0, 3])
def test_sys_exit_inside_the_with_block_keeps_the_file(tmp_path: Path, status: int) -> None:
    """``sys.exit`` on every rank inside ``with h5py.File(..., driver="mpio")`` after writing:
    h5py's ``__exit__`` closes the file and keeps the data, and so does h5subfile's (the file
    did not exist afterwards)."""
    (tmp_path / "leaves.py").write_text(
        "import sys, h5py\n"
        "from mpi4py import MPI\n"
        "with h5py.File(sys.argv[1], 'w', driver='mpio', comm=MPI.COMM_WORLD) as f:\n"
        "    f.create_dataset('x', (2,), 'i4')[MPI.COMM_WORLD.rank] = 7\n"
        "    sys.exit(int(sys.argv[2]))\n"
    )
    done = run(2, str(tmp_path / "leaves.py"), str(tmp_path / "l.h5"), str(status))
    assert done.returncode == status, done.stderr
    with h5py.File(tmp_path / "l.h5") as f:
        assert f["x"][()].tolist() == [7, 7]


def test_the_stand_ins_leave_other_files_to_h5py(tmp_path: Path) -> None:
    from h5py import h5

    from h5subfile import dropin

    real, real_config = h5py.File, h5.get_config
    track_order = real_config().track_order
    dropin.install(subfiles=1)
    try:
        config = h5py.get_config()
        assert config.mpi and h5.get_config().mpi and h5.get_config() is config
        assert config.track_order == real_config().track_order
        assert h5py._hl.files.mpi == real_config().mpi  # h5py's modules: what h5py was built as
        config.track_order = True  # set through, to h5py's config
        assert real_config().track_order
        with h5py.File(tmp_path / "plain.h5", "w") as f:
            assert type(f) is real and isinstance(f, h5py.File)
            f["x"] = np.arange(3)
            f["a"] = np.arange(2)
            assert isinstance(f["x"], h5py.Dataset) and isinstance(f, h5py.Group)
            assert list(f) == ["x", "a"]  # track_order reached h5py
    finally:
        real_config().track_order = track_order
        dropin.uninstall()
    assert h5py.File is real and h5py.get_config is real_config and h5.get_config is real_config


@pytest.mark.skipif(
    h5py.version.hdf5_version_tuple < (1, 12, 1), reason="HDF5 locks files from 1.12.1"
)
def test_a_file_held_open_by_h5py_in_the_same_process_is_named_busy(tmp_path: Path) -> None:
    code = (
        "import sys, h5py, numpy as np, h5subfile as hs\n"
        "from mpi4py import MPI\n"
        "with hs.File(sys.argv[1], 'w', comm=MPI.COMM_SELF) as f:\n"
        "    f['x'] = np.arange(3)\n"
        "held = h5py.File(sys.argv[1], 'r')\n"
        "try:\n"
        "    hs.File(sys.argv[1], 'r', comm=MPI.COMM_SELF)\n"
        "except hs.FileBusyError as exc:\n"
        "    print(exc)\n"
        "held.close()\n"
        "with hs.File(sys.argv[1], 'r', comm=MPI.COMM_SELF) as f:\n"
        "    print(f['x'][...].tolist())\n"
    )
    done = run_python(code, str(tmp_path / "held.h5"))
    assert done.returncode == 0, done.stderr
    assert "open in this process already" in done.stdout and "close it first" in done.stdout
    assert done.stdout.splitlines()[-1] == "[0, 1, 2]"


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """tests/programs/h5py_derived.py run once under ``h5subfile run`` on 2 ranks, a subfile
    per rank: its folder and the job (one job for the tests below; each checks its program)."""
    folder = tmp_path_factory.mktemp("derived")
    return folder, run(2, "--subfiles", "rank", str(DERIVED), str(folder))


def read_back(folder: Path, *names: str) -> None:
    """The named files of h5py_derived.py, every dataset bit for bit, with plain h5py."""
    spec = importlib.util.spec_from_file_location("h5py_derived", DERIVED)
    assert spec is not None and spec.loader is not None
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    expected = program.expected(2)
    for name in names:
        with h5py.File(folder / f"{name}.h5", "r") as f:
            assert type(f) is h5py._hl.files.File
            for key, want in expected[name].items():
                got = f[key][()]
                assert got.shape == want.shape and got.dtype == want.dtype, (name, key)
                assert got.tobytes() == want.tobytes(), (name, key, got, want)


def test_every_way_of_asking_whether_h5py_is_parallel_says_yes(
    derived: tuple[Path, subprocess.CompletedProcess],
) -> None:
    # What a program cannot be told, and why: h5py's compiled low-level API of a serial build
    # (h5py.h5p.PropFAID.set_fapl_mpio, PropDXID.set_dxpl_mpio, h5f.FileID.get_mpi_atomicity):
    # its types are immutable, and h5subfile's files have no low-level ids to call them on;
    # h5py.h5fd.MPIO is there already (in a serial build, HDF5's invalid id). h5py's private
    # module flags (h5py._hl.files.mpi, h5py._hl.dataset.MPI) stay False: h5py's own code read
    # them at import and reads them to serve its own files, which a serial build must still do.
    # h5py.version.info says nothing of MPI.
    folder, done = derived
    line = next((s for s in done.stdout.splitlines() if s.startswith("asks: ")), None)
    assert line is not None, done.stderr
    said = dict(word.split("=", 1) for word in line.split()[1:])
    assert said.pop("plain") == "h5py._hl.files.File"  # no driver: h5py's own file
    assert said and set(said.values()) == {"True"}, said
    assert (folder / "asks.subfiles").is_dir()  # the parallel writer ran, not the serial fallback
    read_back(folder, "asks", "plain_0", "plain_1")


def test_a_derived_file_class_keeps_its_methods(
    derived: tuple[Path, subprocess.CompletedProcess],
) -> None:
    folder, done = derived
    assert "methods ok" in done.stdout.splitlines(), done.stderr
    assert (folder / "snapshot.subfiles").is_dir()  # driver="mpio": h5subfile's
    assert not (folder / "snapshot_0.subfiles").exists()  # no driver: h5py's
    read_back(folder, "snapshot", "snapshot_0", "snapshot_1")
    with h5py.File(folder / "snapshot.h5", "r") as f:
        assert f.attrs["kind"] == "snapshot"


def test_a_derived_file_class_opening_in_its_own_init(
    derived: tuple[Path, subprocess.CompletedProcess],
) -> None:
    folder, done = derived
    assert "own init ok" in done.stdout.splitlines(), done.stderr
    assert (folder / "checkpoint.subfiles").is_dir()
    read_back(folder, "checkpoint", "checkpoint_4")  # create_dataset's override reached
    with h5py.File(folder / "checkpoint.h5", "r") as f:
        assert f.attrs["step"] == 3 and list(f) == ["step_3"]


def test_derived_group_and_dataset_classes(
    derived: tuple[Path, subprocess.CompletedProcess],
) -> None:
    # Not covered: h5py making a program's classes for what it opens (f["x"] is never a
    # program's Dataset, as in h5py); MyDataset(f["x"].id) on h5subfile's objects, which have no
    # low-level id (MyDataset(f["x"]) wraps them instead).
    folder, done = derived
    assert "nodes ok" in done.stdout.splitlines(), done.stderr
    assert done.returncode == 0, done.stderr
    with h5py.File(folder / "nodes.h5", "r") as f:
        assert f["g/x"][()].tobytes() == np.arange(4.0).tobytes()

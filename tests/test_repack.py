"""``h5subfile repack`` under mpiexec: round trips subfiled -> conventional -> subfiled and an
h5bench-style plain file -> subfiled (compressed) -> conventional, every value compared bit for
bit and every attribute by plain h5py in a separate process (tests/interop/repack_check.py),
h5dump reading the outputs; refusals (same file, existing target, variable-length strings,
missing input) leave nothing behind. Multi-rank failure and slab tests: tests/mpi/test_repack.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, run_python
from damage import copy_file, damage_header, flip_byte, swap_subfiles

PARTICLES = 1500
CHECK = ROOT / "interop" / "repack_check.py"

H5BENCH_LIKE = """
import sys, h5py, numpy as np
rng = np.random.default_rng(7)
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["nparticles"] = np.int64(3001)
    f.attrs["label"] = np.bytes_("h5bench vpic")
    for step in range(2):
        g = f.create_group(f"Timestep_{step}")
        g.attrs["time"] = np.float64(step * 0.5)
        for name in ("x", "y", "z", "px", "py", "pz", "id_1", "id_2"):
            dtype = "i4" if name == "id_1" else "f4"
            g.create_dataset(name, data=rng.integers(-2**31, 2**31, 3001).astype("i4").view(dtype))
    f["meta/scalar"] = np.float64(42.5)
    f["meta/empty"] = np.zeros((0, 3), "i2")
    f["meta/grid"] = np.arange(12 * 7, dtype="<u8").reshape(12, 7)
    f["meta/grid"].attrs["units"] = "m"
    f.create_dataset("meta/chunked", data=np.arange(200.0).reshape(20, 10), chunks=(4, 5),
                     compression="gzip")
"""


def check_same(first: Path, second: Path, *flags: str) -> str:
    """Plain h5py (separate process) finds the same objects, bytes and attributes."""
    result = subprocess.run(
        [sys.executable, str(CHECK), str(first), str(second), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(scope="module")
def vpic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repack-in") / "run.h5"
    result = run_cli(
        2, "vpic", path, "--particles", PARTICLES, "--steps", 2, "--subfiles", 2, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def h5bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repack-plain") / "h5bench.h5"
    result = run_python(H5BENCH_LIKE, str(path))
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def repacked(vpic: Path, h5bench: Path) -> dict[str, Path]:
    """The round trips: vpic -> conventional -> subfiled (3 subfiles, 3 ranks), h5bench ->
    gzip-compressed subfiles -> conventional, the last with 4 KiB slabs."""
    folder = vpic.parent / "out"
    folder.mkdir()
    made = {name: folder / f"{name}.h5" for name in ("conv", "sub", "gzip", "plain")}
    result = run_cli(2, "repack", vpic, made["conv"], "--subfiles", 1, "--progress")
    assert result.returncode == 0, result.stderr
    assert "one conventional HDF5 file" in result.stdout and "16 dataset(s)" in result.stdout
    assert result.stderr.count("repack: 100% ") == 1  # progress lines, rank 0 only
    result = run_cli(3, "repack", made["conv"], made["sub"], "--subfiles", 3, "--json", "--quiet")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    summary = json.loads(result.stdout)
    assert summary["subfiles"] == 3 and summary["datasets"] == 16 and summary["ranks"] == 3
    assert summary["bytes"] == 2 * 2 * PARTICLES * 32 and summary["attributes"] == 2
    # 4 KiB slabs: the 12 KiB datasets are written as large ones (whole shares when chunked,
    # else in rounds of at most 4 KiB per rank)
    for source, target, plan in (
        (h5bench, made["gzip"], ["--subfiles", "2", "--compression", "gzip:4"]),
        (made["gzip"], made["plain"], ["--subfiles", "1"]),
    ):
        result = run_cli(2, "repack", source, target, *plan, "--slab-size", "4k", "--quiet")
        assert result.returncode == 0, result.stderr
    return made


def test_subfiled_to_conventional_and_back(vpic: Path, repacked: dict[str, Path]) -> None:
    assert "same: 19 objects, 16 datasets" in check_same(vpic, repacked["conv"], "--conventional")
    check_same(vpic, repacked["sub"])
    assert len(list(repacked["sub"].parent.glob("sub.subfiles/*.h5"))) == 3
    assert entries(repacked["sub"].parent) == [
        "conv.h5", "gzip.h5", "gzip.subfiles", "plain.h5", "sub.h5", "sub.subfiles"
    ]  # fmt: skip


def test_h5bench_file_to_compressed_subfiles_and_to_conventional(
    h5bench: Path, repacked: dict[str, Path]
) -> None:
    check_same(h5bench, repacked["gzip"])
    code = (
        "import sys, h5py\n"
        "with h5py.File(sys.argv[1]) as f:\n"
        "    x = f['Timestep_1/x']\n"
        "    print(x.is_virtual, f['meta/scalar'].shape, f['meta/grid'].is_virtual)\n"
    )
    assert run_python(code, str(repacked["gzip"])).stdout.split() == ["True", "()", "True"]
    result = check_same(h5bench, repacked["plain"], "--conventional")
    assert "same: 24 objects, 20 datasets" in result


h5dump = shutil.which("h5dump")


@pytest.mark.skipif(h5dump is None, reason="h5dump not installed (apt-get install hdf5-tools)")
@pytest.mark.parametrize("name", ["plain", "gzip"])
def test_h5dump_reads_repacked_files(h5bench: Path, repacked: dict[str, Path], name: str) -> None:
    want = run_python(
        "import sys, h5py; print(h5py.File(sys.argv[1])['Timestep_1/id_1'][...].tolist())",
        str(h5bench),
    )
    dump = subprocess.run(
        [h5dump, "-d", "/Timestep_1/id_1", "-w", "0", "-y", str(repacked[name])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    body = dump.split("DATA {", 1)[1].split("}", 1)[0]
    assert [int(v) for v in body.replace(",", " ").split()] == json.loads(want.stdout)


def test_refusals_leave_nothing_behind(vpic: Path, tmp_path: Path) -> None:
    result = run_cli(2, "repack", vpic, vpic, "--subfiles", 1)
    assert result.returncode == 1 and result.stderr.count("onto itself") == 1, result.stderr
    missing = run_cli(2, "repack", tmp_path / "none.h5", tmp_path / "out.h5")
    assert missing.returncode == 1 and missing.stderr.count("does not exist") == 1
    strings = tmp_path / "strings.h5"
    made = run_python(
        "import sys, h5py, numpy as np\n"
        "with h5py.File(sys.argv[1], 'w') as f:\n"
        "    f['ok'] = np.arange(4)\n"
        "    f['names'] = np.array(['a', 'bc'], dtype=h5py.string_dtype())\n",
        str(strings),
    )
    assert made.returncode == 0, made.stderr
    refused = run_cli(2, "repack", strings, tmp_path / "out.h5")
    assert refused.returncode == 1 and refused.stderr.count("dataset /names (variable-length)") == 1
    assert entries(tmp_path) == ["strings.h5"]


def test_existing_target_needs_force(vpic: Path, repacked: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.h5"  # a subfiled target: a copy of the 3-subfile round trip's
    shutil.copy(repacked["sub"], out)
    shutil.copytree(repacked["sub"].parent / "sub.subfiles", tmp_path / "out.subfiles")
    old = sorted((tmp_path / "out.subfiles").iterdir())
    before = out.read_bytes()
    result = run_cli(2, "repack", vpic, out, "--subfiles", 1)
    assert result.returncode == 1 and result.stderr.count("exists; repack with --force") == 1
    assert out.read_bytes() == before and sorted((tmp_path / "out.subfiles").iterdir()) == old
    result = run_cli(2, "repack", vpic, out, "--subfiles", 1, "--force", "--quiet")
    assert result.returncode == 0, result.stderr
    assert entries(tmp_path) == ["out.h5"]  # the old subfiles went with the old file
    check_same(vpic, out, "--conventional")


PHDF5 = ROOT.parent / ".venv-phdf5" / "bin"
PARALLEL_READ = """
import sys, h5py, numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
with h5py.File(sys.argv[1], "r", driver="mpio", comm=comm) as f:
    x = f["Timestep_1/x"]
    n = x.shape[0]
    lo, hi = comm.rank * n // comm.size, (comm.rank + 1) * n // comm.size
    with x.collective:
        mine = x[lo:hi]
    everything = np.concatenate(comm.allgather(mine))
with h5py.File(sys.argv[1], "r") as f:
    assert everything.tobytes() == f["Timestep_1/x"][...].tobytes()
print("parallel read", comm.rank, hi - lo)
"""


@pytest.mark.skipif(
    not (PHDF5.parent / ".installed").exists(),
    reason="parallel HDF5 environment not built (run `make phdf5`)",
)
def test_parallel_hdf5_reads_the_conventional_file(vpic: Path, repacked: dict[str, Path]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def parallel_read(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PHDF5 / "mpiexec"), "-n", "2", str(PHDF5 / "python"), "-c", PARALLEL_READ]
            + [str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    result = parallel_read(repacked["conv"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("parallel read") == 2
    refused = parallel_read(vpic)  # why repack exists: the subfiled original, virtual datasets
    assert refused.returncode != 0
    assert "parallel reads not supported on virtual datasets" in refused.stderr


# Verification: repack copies only what verify passes ------------------------------------------
def _flip(copy: Path) -> str:
    subfile, _ = flip_byte(copy, "Timestep_1/py")
    return subfile.name


def report_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """verify's report as printed, its time left out (the one part two runs differ in)."""
    return [re.sub(r", [0-9.]+ s$", ", (time)", line) for line in result.stdout.splitlines()]


def record_of(path: Path) -> dict:
    """What the last write session of ``path`` recorded about the repack that wrote it, read
    by plain h5py in a separate process."""
    code = (
        "import sys, json, h5py\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    print(json.dumps(json.loads(f.attrs['h5subfile'])['sessions'][-1]['extra']))\n"
    )
    result = run_python(code, str(path))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout).get("repack", {})


@pytest.mark.parametrize(
    "damage", [_flip, swap_subfiles, damage_header], ids=["flipped", "swapped", "header"]
)
def test_damaged_input_is_refused_with_verifys_report(vpic: Path, tmp_path: Path, damage) -> None:
    """A flipped data byte, swapped subfiles and a damaged object header in a subfile: repack
    prints the report verify prints (each bad piece with its subfile and byte offset), exits
    1 and writes nothing."""
    copy = copy_file(vpic, tmp_path)
    named = damage(copy)
    verified = run_cli(2, "verify", copy, "--quiet")
    assert verified.returncode == 1 and any(named in line for line in verified.stdout.splitlines())
    result = run_cli(2, "repack", copy, tmp_path / "out.h5", "--subfiles", 1, "--quiet")
    assert result.returncode == 1, result.stdout + result.stderr
    assert report_lines(result) == report_lines(verified)
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"h5subfile repack: error: cannot repack {copy}: it fails verification")
    assert "--no-verify" in line and "Traceback" not in result.stderr
    assert entries(tmp_path) == ["run.h5", "run.subfiles"]  # no OUT, no staging folder


def test_no_verify_copies_a_flipped_byte_and_records_it(vpic: Path, tmp_path: Path) -> None:
    """--no-verify copies what a read returns, says so, and OUT's record keeps it: OUT itself
    verifies clean, its checksums taken from the damaged bytes."""
    (tmp_path / "in").mkdir()
    copy = copy_file(vpic, tmp_path / "in")
    _flip(copy)
    out = tmp_path / "out.h5"
    result = run_cli(2, "repack", copy, out, "--subfiles", 1, "--no-verify", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "copied without verifying" in result.stdout, result.stdout
    assert record_of(out) == {"source": str(copy), "verified": False}
    info = run_cli(1, "info", out)
    assert f"repacked from {copy}, copied without verifying" in info.stdout, info.stdout
    assert run_cli(2, "verify", out, "--quiet").returncode == 0


def test_clean_input_is_verified_and_copied_bit_for_bit(vpic: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.h5"
    result = run_cli(2, "repack", vpic, out, "--subfiles", 2, "--quiet")
    assert result.returncode == 0, result.stderr
    assert "; verified first: 32 checksummed piece(s), " in result.stdout, result.stdout
    assert " checked, 2 subfile identities, " in result.stdout
    assert record_of(out) == {"source": str(vpic), "verified": True, "no_checksums": 0}
    verified = run_cli(2, "verify", out, "--quiet")
    assert verified.returncode == 0 and verified.stdout.rstrip().endswith("clean")
    check_same(vpic, out)  # plain h5py, a separate process: every byte and attribute


def test_input_without_checksums_is_copied_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "off.h5"
    written = run_cli(2, "vpic", path, "--particles", 100, "--subfiles", 2, "--checksums", "off")
    assert written.returncode == 0, written.stderr
    out = tmp_path / "out.h5"
    result = run_cli(2, "repack", path, out, "--subfiles", 1, "--quiet")
    assert result.returncode == 0, result.stderr
    said = [
        line for line in run_cli(1, "verify", path).stdout.splitlines() if "no checksums" in line
    ]
    assert said and said[0].startswith("no checksums: 8 dataset(s)")
    assert said[0] in result.stdout.splitlines(), result.stdout
    assert record_of(out) == {"source": str(path), "verified": True, "no_checksums": 8}
    check_same(path, out, "--conventional")


ONE_GROUP_GZIP = """
import sys, numpy as np, h5subfile as hs
from mpi4py import MPI
with hs.File(sys.argv[1], "w", comm=MPI.COMM_SELF, subfiles="node") as f:
    f.write_dataset("z", np.arange(10000.0), compression="gzip")
"""
READ_Z = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert np.array_equal(f["z"][...], np.arange(10000.0))
    print(sorted(f))
"""


@pytest.mark.parametrize("touched", ["as written", "copied", "added to by h5py"])
def test_a_one_group_file_with_a_compressed_dataset(tmp_path: Path, touched: str) -> None:
    """One group (one machine's default) holding a compressed dataset: repack opened the
    master a second time in the same process with other locking flags, and HDF5 refused
    ("file locking flag values don't match"), as written, copied with cp -r, or after plain
    h5py added a dataset."""
    path = tmp_path / "one.h5"
    made = run_python(ONE_GROUP_GZIP, str(path))
    assert made.returncode == 0, made.stderr
    if touched == "copied":
        (tmp_path / "copy").mkdir()
        shutil.copy(path, tmp_path / "copy" / "one.h5")
        if path.with_suffix(".subfiles").exists():
            shutil.copytree(path.with_suffix(".subfiles"), tmp_path / "copy" / "one.subfiles")
        path = tmp_path / "copy" / "one.h5"
    if touched == "added to by h5py":
        code = "import sys, h5py\nh5py.File(sys.argv[1], 'r+')['more'] = [1, 2, 3]\n"
        assert run_python(code, str(path)).returncode == 0
    out = tmp_path / "out.h5"
    result = run_cli(1, "repack", path, out)
    assert result.returncode == 0, result.stdout + result.stderr
    read = run_python(READ_Z, str(out))
    assert read.returncode == 0, read.stderr

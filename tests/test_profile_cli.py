"""Profiling from the command line (docs/PROFILING.md, *Use*): ``--profile DIR`` on ``vpic``,
``bdcats``, ``bench`` and ``demo`` writes profiles whose counters agree with what the verb moved;
``bench`` profiles its posix and mpiio backends in the same format; ``h5subfile profile --``
runs any command with its h5subfile files profiled and ends with the command's status; and
profiling changes no byte of the data. Every job is tiny (2 ranks, KiBs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import MPIEXEC, run_cli, run_python

KIB = 1024
PARTICLES, STEPS = 1024, 2
#: Bytes of one rank's VPIC-IO data: 32 bytes per particle per step.
RANK_DATA = PARTICLES * 32 * STEPS
#: More than the HDF5 metadata and identity a tiny subfile gets besides its data, less than
#: one rank's data: a record that lost or doubled the data fails the bounds below.
SLACK = 16 * KIB


def profile(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    assert doc["format"] == "h5subfile-profile"
    return doc


def by_path(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each file's records (every rank's, and -1 for the shared one), by path."""
    paths = {f["id"]: f["path"] for f in doc["files"]}
    found: dict[str, list[dict[str, Any]]] = {}
    for record in doc["records"]:
        found.setdefault(paths[record["id"]], []).append(record)
    return found


def subfiles(master: Path) -> list[str]:
    folder = master.with_suffix(".subfiles")
    return sorted(str(folder / name) for name in os.listdir(folder))


def vpic(master: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(
        2, "vpic", master, "--particles", PARTICLES, "--steps", STEPS, "--subfiles", 2, *flags
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("flags", [(), ("--async-writes",)], ids=["direct", "behind"])
def test_with_fsync_each_file_is_fsynced_once(tmp_path: Path, flags: tuple[str, ...]) -> None:
    """``fsync=True``: each subfile once (after HDF5 closes it, never also by the pool that wrote
    its data), their folder once (their names, before the master names them), the master once
    and its folder once (the rename), whether the data went directly or behind."""
    master, folder = tmp_path / "run.h5", tmp_path / "prof"
    vpic(master, "--fsync", "--profile", folder, *flags)
    records = by_path(profile(folder / "run.h5.write.json"))
    fsyncs = {
        path: sum(r["counters"]["POSIX_FSYNCS"] for r in found if r["rank"] >= 0)
        for path, found in records.items()
    }
    assert {path: fsyncs[path] for path in subfiles(master)} == dict.fromkeys(subfiles(master), 1)
    assert fsyncs.get(f"{master}.partial", 0) + fsyncs.get(str(master), 0) == 1
    assert fsyncs.get(str(master.with_suffix(".subfiles"))) == 1
    assert fsyncs.get(str(master.parent)) == 1


def test_vpic_and_bdcats_profile_what_they_moved(tmp_path: Path) -> None:
    master, folder = tmp_path / "run.h5", tmp_path / "prof"
    result = vpic(master, "--profile", folder, "--profile-trace", "100")
    assert f"Profile: 1 written to {folder}: run.h5.write.json" in result.stdout
    written = profile(folder / "run.h5.write.json")
    assert written["nprocs"] == 2 and (folder / "run.h5.write.txt").exists()
    records = by_path(written)
    assert set(subfiles(master)) <= set(records)  # both subfiles...
    assert {str(master), f"{master}.partial"} & set(records)  # ...and the master
    for path in subfiles(master):  # one rank each: its data plus HDF5's few KiB
        (record,) = records[path]
        assert RANK_DATA <= record["counters"]["POSIX_BYTES_WRITTEN"] <= RANK_DATA + SLACK
    for row in written["ranks"]:
        assert 0 < len(row["trace"]["records"]) <= 100
    result = run_cli(2, "bdcats", master, "--verify", "--profile", folder, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_bytes"] == 2 * RANK_DATA  # stdout stays JSON
    assert f"Profile: 1 written to {folder}: run.h5.read.json" in result.stderr
    read = profile(folder / "run.h5.read.json")
    assert read["totals"]["bytes_written"] == 0
    for path in subfiles(master):  # each rank reads its share: one subfile, plus its identity
        ranks = [r for r in by_path(read)[path] if r["rank"] >= 0]  # not the shared record
        assert sum(r["counters"]["POSIX_BYTES_READ"] for r in ranks) in range(
            RANK_DATA, RANK_DATA + 4 * KIB
        )


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same VPIC-IO run written without and with --profile."""
    folder = tmp_path_factory.mktemp("twins")
    plain, profiled = folder / "plain.h5", folder / "profiled.h5"
    vpic(plain)
    vpic(profiled, "--profile", folder / "prof", "--quiet")
    assert (folder / "prof" / "profiled.h5.write.json").exists()
    return plain, profiled


def test_profiling_changes_no_byte_of_the_data(twins: tuple[Path, Path]) -> None:
    code = (
        "import hashlib, sys, h5py\n"
        "def digest(path):\n"
        "    found = {}\n"
        "    with h5py.File(path, 'r') as f:\n"
        "        def visit(name, obj):\n"
        "            if isinstance(obj, h5py.Dataset):\n"
        "                found[name] = hashlib.sha256(obj[()].tobytes()).hexdigest()\n"
        "        f.visititems(visit)\n"
        "    return found\n"
        "a, b = digest(sys.argv[1]), digest(sys.argv[2])\n"
        "print(len(a), a == b)\n"
    )
    result = run_python(code, *twins)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(8 * STEPS), "True"]  # every dataset, bit for bit


def test_profiling_keeps_the_subfiles_sizes(twins: tuple[Path, Path]) -> None:
    """HDF5 allocates the same through the log driver (small-data aggregation is off, so no
    unused block end is kept): the same sizes (the bytes differ where the two runs' session
    ids do; tests/unit/test_profile_io.py compares one file written both ways byte for byte)."""
    plain, profiled = twins
    assert [os.path.getsize(p) for p in subfiles(plain)] == [
        os.path.getsize(p) for p in subfiles(profiled)
    ]


def bench(tmp_path: Path, *flags: str) -> dict[str, dict[str, Any]]:
    """``bench -a posix,mpiio`` profiled: its profiles by file name."""
    folder = tmp_path / "prof"
    result = run_cli(
        2,
        "bench",
        "-a",
        "posix,mpiio",
        "-b",
        "8k",
        "-t",
        "4k",
        "-s",
        "2",
        "-o",
        tmp_path / "ior",
        "--profile",
        folder,
        *flags,
    )
    assert result.returncode == 0, result.stderr
    assert f"Profile: 4 written to {folder}" in result.stdout
    return {p.name: profile(p) for p in folder.glob("*.json")}


def test_bench_profiles_posix_and_mpiio_side_by_side(tmp_path: Path) -> None:
    for flags in ((), ("-c",)):  # mpiio independent, then collective
        docs = bench(tmp_path, *flags)
        assert sorted(docs) == [
            f"ior.{api}.{phase}.json" for api in ("mpiio", "posix") for phase in ("read", "write")
        ]
        for name, doc in docs.items():
            api, phase = name.split(".")[1:3]
            counters = doc["records"][0]["counters"]
            assert doc["records"][0]["rank"] == -1  # both ranks opened the one file
            assert {r["module"] for r in doc["records"]} == {
                "POSIX" if api == "posix" else "MPIIO-AS-POSIX"
            }
            assert [f["path"] for f in doc["files"]] == [str(tmp_path / f"ior.{api}")]
            moved, ops = (
                ("BYTES_WRITTEN", "WRITES") if phase == "write" else ("BYTES_READ", "READS")
            )
            assert counters[f"POSIX_{moved}"] == 8 * KIB * 2 * 2  # block x segments x ranks
            assert counters[f"POSIX_{ops}"] == 2 * 2 * 2  # transfers per block x segments x ranks
            assert counters["POSIX_OPENS"] == 2
            text = (tmp_path / "prof" / name.replace(".json", ".txt")).read_text()
            assert f"\n{doc['records'][0]['module']}\t-1\t" in text


def app(tmp_path: Path, status: int) -> Path:
    script = tmp_path / "app.py"
    script.write_text(
        "import sys\n"
        "import numpy as np\n"
        "import h5subfile\n"
        "with h5subfile.File(sys.argv[1], 'w') as f:\n"
        "    f.write_dataset('x', np.arange(1000, dtype='f8'))\n"
        f"sys.exit({status})\n"
    )
    return script


def wrapped(*args: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "h5subfile", "profile", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_profile_wraps_a_command_and_keeps_its_status(tmp_path: Path) -> None:
    out = tmp_path / "prof"
    command = [MPIEXEC, "-n", 2, sys.executable, app(tmp_path, 3), tmp_path / "a.h5"]
    result = wrapped("--out", out, "--trace", "--", *command, cwd=tmp_path)
    assert result.returncode == 3, result.stderr  # the application's own status
    doc = profile(out / "a.h5.write.json")
    assert doc["nprocs"] == 2 and doc["totals"]["bytes_written"] >= 8000
    assert all(row["trace"]["limit"] == 10000 for row in doc["ranks"])
    assert (
        f"1 profile(s) in {out}:" in result.stderr and "a.h5.write.json: 2 rank(s)" in result.stderr
    )
    # no File at all: status 0, and a note; no folder given: ./h5subfile-profile
    result = wrapped("--", sys.executable, "-c", "print('hello')", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "hello\n"
    assert "no profile was written to" in result.stderr
    # an application that fails: its status; a command that cannot start: one line, status 1
    failing = tmp_path / "fails.py"
    failing.write_text("raise SystemExit(5)\n")
    assert wrapped("--", sys.executable, failing, cwd=tmp_path).returncode == 5
    result = wrapped("--", tmp_path / "no-such-program", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"h5subfile profile: error: cannot start {tmp_path / 'no-such-program'}: no such command"
    ]


def test_profile_flags_that_cannot_be_right(tmp_path: Path) -> None:
    for args, said in (
        (["vpic", tmp_path / "x.h5", "--profile-trace", "10"], "--profile-trace needs --profile"),
        (["vpic", tmp_path / "x.h5", "--profile", tmp_path, "--api", "phdf5"], "phdf5 is not"),
        (["bdcats", tmp_path / "x.h5", "--profile-trace", "x"], "expected N, N:first or N:last"),
    ):
        result = run_cli(1, *args)
        assert result.returncode == 2 and result.stderr.count(said) == 1, result.stderr
    assert not list(tmp_path.iterdir())


def test_demo_profiles_every_write_and_read(tmp_path: Path) -> None:
    folder = tmp_path / "prof"
    result = subprocess.run(
        [sys.executable, "-m", "h5subfile", "demo", "--particles", "100", "--steps", "1"]
        + ["--writers", "2", "--readers", "1", "--profile", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in folder.glob("*.json"))
    assert names == sorted(
        f"{way}.h5.{phase}.json"
        for way in ("per_rank", "shared", "subfiled")
        for phase in ("read", "write")
    )
    assert f"Profile: 6 written to {folder}" in result.stdout
    for name in names:
        doc = profile(folder / name)
        assert doc["nprocs"] == (2 if "write" in name else 1)
        moved = doc["totals"]["bytes_written" if "write" in name else "bytes_read"]
        assert moved >= 2 * 100 * 32  # every particle of the step, on top of HDF5's own

"""The command line ends a failing job the same way on the read side as on the write side: one
message, printed once by rank 0, exit status 1 on every rank, no warnings, no per-rank
tracebacks, no MPI_Abort. `info` reports unreadable subfiles as such and never looks at files
outside the master's folder."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import pytest

from conftest import run_cli

PARTICLES = 300


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """Two VPIC-IO steps of 300 particles per rank, 2 ranks in 2 subfiles."""
    path = tmp_path / "run.h5"
    result = run_cli(
        2, "vpic", path, "--particles", PARTICLES, "--steps", 2, "--subfiles", 2, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    return path


def assert_one_clean_message(result, fragment: str) -> str:
    """Exit status 1, ``fragment`` said once, nothing else on stderr."""
    err = result.stderr
    assert result.returncode == 1, (result.returncode, err)
    assert err.count(fragment) == 1, err
    for noise in ("Traceback", "Warning", "[rank", "Abort", "MPI_Abort"):
        assert noise not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("plan", [[], ["--aggregators", "1"]], ids=["independent", "aggregated"])
def test_bdcats_on_a_missing_subfile_says_so_once(run: Path, plan: list[str]) -> None:
    subfile = next((run.parent / "run.subfiles").glob("s0-*-00001.h5"))  # names carry the id
    subfile.unlink()
    result = run_cli(3, "bdcats", run, "--quiet", *plan, timeout=120)
    line = assert_one_clean_message(result, "h5subfile bdcats: error:")
    assert line.startswith(f"h5subfile bdcats: error: subfile run.subfiles/{subfile.name}")
    assert "is missing" in line


def test_info_under_mpiexec_reports_an_unreadable_subfile(run: Path) -> None:
    subfile = next((run.parent / "run.subfiles").glob("s0-*-00001.h5"))  # names carry the id
    subfile.unlink()
    subfile.mkdir()  # there, but not a file anyone can read data from
    result = run_cli(2, "info", run, "--json", timeout=120)
    assert result.returncode == 1, result.stderr
    assert not result.stderr.strip(), result.stderr
    info = json.loads(result.stdout)  # printed once, by rank 0
    (state,) = [f["state"] for f in info["files"] if f["file"].endswith(subfile.name)]
    assert state.startswith("UNREADABLE"), state
    assert any("cannot be read" in p and "not a regular file" in p for p in info["problems"])


def test_info_never_looks_outside_the_masters_folder(run: Path) -> None:
    with h5py.File(run, "r+") as f:
        record = json.loads(f["Timestep_0/x"].attrs["h5subfile.layout"])
        record["extents"][0]["file"] = "../elsewhere/secret.h5"
        f["Timestep_0/x"].attrs["h5subfile.layout"] = json.dumps(record)
    result = run_cli(1, "info", run, "--json", timeout=120)
    info = json.loads(result.stdout)
    (entry,) = [f for f in info["files"] if "secret" in f["file"]]
    assert entry["bytes"] is None and entry["state"].startswith("OUTSIDE")
    assert result.returncode == 1  # the escaping path is a problem of the file


def test_info_on_a_missing_file_is_one_message(tmp_path: Path) -> None:
    result = run_cli(2, "info", tmp_path / "nothing.h5", timeout=120)
    line = assert_one_clean_message(result, "h5subfile info: error:")
    assert "nothing.h5 does not exist" in line

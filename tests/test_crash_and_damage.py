"""A job killed mid-append never damages what earlier closes completed; unfinished pieces give
clear errors naming them, identically on every rank (probed by separate jobs before and after the
crash); the claim the dead job leaves is recovered by the next writer, which names its owner. Missing, truncated and escaping pieces: tests/mpi/test_damage.py; info names a missing
subfile here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, run_mpi

PARTICLES = 500


def write_base(path: Path) -> None:
    result = run_cli(
        2, "vpic", path, "--particles", PARTICLES, "--steps", 2, "--subfiles", 2, "--quiet"
    )
    assert result.returncode == 0, result.stderr


def probe(path: Path, *names: str, ranks: int = 2) -> dict:
    per_rank = json.loads(run_mpi(ranks, "probe.py", path, *names).stdout.strip().splitlines()[-1])
    assert all(r == per_rank[0] for r in per_rank), per_rank  # identical on every rank
    return per_rank[0]


def verify_steps(path: Path) -> None:
    result = run_cli(3, "bdcats", path, "--verify", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "every value read matches" in result.stdout


@pytest.mark.parametrize("commit", ["replace", "in-place"])
def test_killed_append_keeps_earlier_steps(
    tmp_path: Path, commit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.h5"
    write_base(path)
    before = probe(path, "/Timestep_0/x", "/Timestep_1/id_1")
    env = {"H5SUBFILE_MASTER_COPY_LIMIT": "0"} if commit == "in-place" else {}
    killed = run_mpi(3, "crash.py", "a", path, 2, env=env, check=False)
    assert killed.returncode != 0
    owner = json.loads(Path(f"{path}.lock").read_text())  # the dead job's claim stays behind
    assert owner["mode"] == "a" and owner["session"], owner
    after = probe(path, "/Timestep_0/x", "/Timestep_1/id_1", "/Timestep_2/x")
    # earlier steps: intact, same values
    assert after["/Timestep_0/x"] == before["/Timestep_0/x"]
    assert after["/Timestep_1/id_1"] == before["/Timestep_1/id_1"]
    # the unfinished step is reported, and never read as data
    if commit == "replace":
        assert after["/Timestep_2/x"][0] == "ObjectNotFoundError"
        assert any("unfinished write session left" in p for p in after["problems"])
    else:
        kind, message = after["/Timestep_2/x"]
        assert kind == "IncompleteFileError"
        assert "write session 1, which did not finish" in message
        assert any("session 1" in p and "did not finish" in p for p in after["problems"])
    # a restarted job recovers the claim (naming its dead owner), appends again (reusing the
    # step name) and everything verifies
    restarted = run_mpi(2, "append_step.py", path, 2, env=env)
    assert_recovered(restarted.stderr, owner)
    assert not Path(f"{path}.lock").exists()
    final = probe(path, "/Timestep_0/x", "/Timestep_2/x")
    assert final["/Timestep_2/x"] == ["ok", 1000.0]  # rank 0 wrote 0.0, rank 1 wrote 1.0
    assert final["/Timestep_0/x"] == before["/Timestep_0/x"]
    assert not any("left" in p for p in final["problems"])


def test_killed_first_write_is_reported_as_never_completed(tmp_path: Path) -> None:
    path = tmp_path / "new.h5"
    killed = run_mpi(2, "crash.py", "w", path, 0, check=False)
    assert killed.returncode != 0
    owner = json.loads(Path(f"{path}.lock").read_text())
    kind, message = probe(path)["open"]
    assert kind == "IncompleteFileError"
    assert "was never completed" in message
    # the next writer recovers the dead job's claim and writes the file
    assert_recovered(run_mpi(2, "append_step.py", path, 0).stderr, owner)
    assert probe(path, "/Timestep_0/x")["/Timestep_0/x"] == ["ok", 1000.0]


def assert_recovered(stderr: str, owner: dict) -> None:
    """The writer after a killed one warned once that it replaced the dead job's claim."""
    dead = f"host {owner['host']}, pid {owner['pid']}, session {owner['session'][:8]}"
    assert stderr.count("replaced a stale claim") == 1, stderr
    assert dead in stderr and f"process {owner['pid']} ended" in stderr, stderr


def test_info_names_a_missing_subfile(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_base(path)
    next((tmp_path / "run.subfiles").glob("s0-*-00001.h5")).unlink()
    info = subprocess.run(
        [sys.executable, "-m", "h5subfile", "info", str(path)], capture_output=True, text=True
    )
    assert info.returncode == 1 and "MISSING" in info.stdout

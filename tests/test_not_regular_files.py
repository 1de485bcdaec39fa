"""A FIFO, a device or a folder where h5subfile expects a regular file (the master, a subfile,
the claim, a profile, a Darshan log) is refused with NotRegularFileError naming it, never
opened in a way that blocks: each job here runs under a timeout that fails the test if it hangs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import run_cli, run_python
from damage import copy_file

TIMEOUT = 60  # s: a job that blocks on a FIFO is killed and fails its test
PARTICLES = 300


def run(ranks: int, *args: object) -> tuple[int, str]:
    """``h5subfile ARGS`` on ``ranks`` ranks (killed whole if it hangs): its exit status and
    its output (stdout then stderr)."""
    done = run_cli(ranks, *args, timeout=TIMEOUT)
    return done.returncode, done.stdout + done.stderr


def run_code(code: str, *args: object) -> tuple[int, str]:
    """``code`` in a separate Python process importing h5subfile, killed if it hangs."""
    done = run_python(code, *map(str, args), timeout=TIMEOUT)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean file of 2 ranks in 2 subfiles (copied, never changed, by each test)."""
    path = tmp_path_factory.mktemp("regular") / "run.h5"
    status, said = run(2, "vpic", path, "--particles", PARTICLES, "--steps", 1, "--subfiles", 2)
    assert status == 0, said
    return path


def _subfiles(path: Path) -> list[Path]:
    return sorted(path.with_suffix(".subfiles").iterdir())


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_subfile_that_is_not_a_regular_file_is_reported_by_verify_and_info(
    written: Path, tmp_path: Path, kind: str
) -> None:
    path = copy_file(written, tmp_path)
    subfile = _subfiles(path)[0]
    subfile.unlink()
    os.mkfifo(subfile) if kind == "fifo" else subfile.mkdir()
    named = "a FIFO (named pipe)" if kind == "fifo" else "a folder"
    status, said = run(1, "verify", path)
    assert status == 1, said
    assert f"{subfile} is {named}, not a regular file" in said and "DAMAGED" in said, said
    status, said = run(1, "info", path)
    assert status == 1 and "UNREADABLE (not a regular file)" in said, said
    status, said = run_code(
        "import sys, h5subfile as hs\n"
        "with hs.File(sys.argv[1], 'r') as f:\n"
        "    f['Timestep_0/x'][...]\n",
        path,
    )
    assert status != 0 and subfile.name in said and "not a regular file" in said, said


def test_a_subfile_linked_to_itself_is_a_loop_not_outside(written: Path, tmp_path: Path) -> None:
    """A subfile replaced by a symbolic link to itself: info said it lay OUTSIDE the master's
    folder; it is a loop (ELOOP), as verify says."""
    path = copy_file(written, tmp_path)
    subfile = _subfiles(path)[0]
    subfile.unlink()
    subfile.symlink_to(subfile.name)
    status, said = run(1, "info", path)
    assert status == 1 and "UNREADABLE (a loop of symbolic links: ELOOP)" in said, said
    assert "OUTSIDE" not in said, said
    status, said = run(1, "verify", path)
    assert status != 0 and "ELOOP" in said, said


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_master_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.h5"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    named = {"fifo": "a FIFO (named pipe)", "device": "a character device", "folder": "a folder"}
    message = f"{path} is {named[kind]}, not a"  # the commands say what they expected
    for command in ("info", "verify"):
        status, said = run(1, command, path)
        assert status != 0 and message in said, said
    status, said = run_code("import sys, h5subfile as hs\nhs.File(sys.argv[1], 'r')\n", path)
    assert status != 0 and "NotRegularFileError" in said and message in said, said


def test_a_claim_that_is_a_fifo_is_refused_by_writers_and_ignored_by_readers(
    written: Path, tmp_path: Path
) -> None:
    fresh = tmp_path / "new.h5"
    os.mkfifo(tmp_path / "new.h5.lock")
    status, said = run(2, "vpic", fresh, "--particles", PARTICLES, "--steps", 1)
    message = f"claim file {tmp_path / 'new.h5.lock'} is a FIFO (named pipe), not a regular file"
    assert status != 0 and message in said, said
    assert not fresh.exists()
    path = copy_file(written, tmp_path)
    os.mkfifo(tmp_path / "run.h5.lock")
    status, said = run(1, "info", path)  # a reader takes no claim: it reads the file
    assert status == 0 and "problems" not in said, said
    status, said = run_code(
        "import sys, h5subfile as hs\nhs.File(sys.argv[1], 'a').close()\n", path
    )
    assert status != 0 and "claim file" in said and "FIFO" in said, said


def test_profiles_and_darshan_logs_that_are_fifos_are_refused(tmp_path: Path) -> None:
    for name, what in (("p.json", "profile"), ("p.darshan", "Darshan log")):
        os.mkfifo(tmp_path / name)
        status, said = run(1, "report", tmp_path / name)
        assert status != 0 and f"{what} {tmp_path / name} is a FIFO" in said, said


def test_a_fifo_where_the_profile_is_written_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "profile"
    folder.mkdir()
    os.mkfifo(folder / "run.h5.write.json")
    status, said = run(
        2, "vpic", tmp_path / "run.h5", "--particles", PARTICLES, "--steps", 1,
        "--profile", folder,
    )  # fmt: skip
    message = f"profile {folder / 'run.h5.write.json'} is a FIFO (named pipe), not a regular file"
    assert status != 0 and message in said, said


def test_tune_like_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "job.json")
    status, said = run(1, "tune", tmp_path / "t", "--like", tmp_path / "job.json", "--no-save")
    assert status == 1 and f"profile {tmp_path / 'job.json'} is a FIFO" in said, said

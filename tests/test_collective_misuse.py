"""Jobs that misuse a file on one rank end by themselves, without ``python -m mpi4py``: a user
exception on one rank inside ``with File(...)`` and a rank that leaves without closing end every
rank with an error (tests/mpi/misuse.py). The multi-rank cases inside pytest are in
tests/mpi/test_collective_misuse.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPIEXEC, SCRIPTS


def run_plain(ranks: int, case: str, folder: Path, timeout: float) -> subprocess.CompletedProcess:
    """``mpiexec -n ranks python misuse.py case folder``, killed (and failed) if it hangs."""
    command = [str(MPIEXEC), "-n", str(ranks), sys.executable, str(SCRIPTS / "misuse.py")]
    env = dict(os.environ, H5SUBFILE_COLLECTIVE_TIMEOUT="4")
    try:
        return subprocess.run(
            [*command, case, str(folder)], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{case} on {ranks} ranks hung (> {timeout} s)\n{exc.stderr!r}")


@pytest.mark.parametrize("ranks", [2, 3])
def test_a_user_exception_on_one_rank_ends_the_job(tmp_path: Path, ranks: int) -> None:
    done = run_plain(ranks, "exception", tmp_path, timeout=60)
    assert done.returncode != 0
    assert "ValueError: boom on rank 1" in done.stderr
    assert done.stderr.count("CollectiveMismatchError: collective calls out of step") == ranks - 1
    assert "[rank 1] File.__exit__ on rank 1 after ValueError: boom on rank 1" in done.stderr
    assert not (tmp_path / "exception.h5").exists()  # nothing of the session is published


def test_a_rank_that_leaves_without_closing_is_named(tmp_path: Path) -> None:
    done = run_plain(3, "leave", tmp_path, timeout=60)
    assert done.returncode != 0
    assert "rank 1 leaves without closing the file" in done.stdout
    timeouts = [line for line in done.stderr.splitlines() if "CollectiveTimeoutError" in line]
    assert len(timeouts) == 2, done.stderr
    assert all("rank 1 never arrived; ranks 0, 2 wait in write /x" in t for t in timeouts)

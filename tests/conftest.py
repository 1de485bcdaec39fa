"""Shared test helpers: running scripts under mpiexec with a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SCRIPTS = ROOT / "mpi"
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def run_mpi(
    ranks: int,
    script: str,
    *args: str,
    timeout: float = 240,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``tests/mpi/<script>`` on ``ranks`` ranks under ``python -m mpi4py`` (a failing rank
    aborts the job), killing the whole job after ``timeout`` seconds so nothing can hang."""
    command = [
        str(MPIEXEC),
        "-n",
        str(ranks),
        sys.executable,
        "-m",
        "mpi4py",
        str(SCRIPTS / script),
        *map(str, args),
    ]
    full_env = dict(os.environ, PYTHONPATH=str(SCRIPTS), **(env or {}))
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{script} {args} on {ranks} ranks hung (> {timeout} s)\n{stderr[-4000:]}")
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if check and result.returncode != 0:
        pytest.fail(
            f"{script} {' '.join(map(str, args))} on {ranks} ranks failed with status "
            f"{result.returncode}\n--- stdout\n{stdout[-4000:]}\n--- stderr\n{stderr[-6000:]}"
        )
    return result


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a separate plain Python process (no h5subfile import unless it asks)."""
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(ranks: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``h5subfile ARGS`` under ``mpiexec -n ranks`` (not checked: tests look at the status)."""
    return subprocess.run(
        [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "h5subfile", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )

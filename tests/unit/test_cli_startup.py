"""The command line's start-up: numpy is loaded with one OpenBLAS thread, and the user's
environment is left as it was (each case in a fresh Python, where numpy is not yet loaded)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

VARIABLE = "OPENBLAS_NUM_THREADS"

THREADS = """
import os
{load}
import numpy  # already loaded by ``load``, or loaded here as any program would
status = open("/proc/self/status").read()
threads = int(status.split("Threads:")[1].split()[0])
print(threads, os.environ.get("{variable}", "unset"))
"""


def run(load: str, **env: str) -> tuple[int, str]:
    """(threads of a fresh Python after ``load``, the variable it then sees)."""
    chosen = (VARIABLE, "OMP_NUM_THREADS")  # OpenBLAS reads the second when the first is unset
    environment = {k: v for k, v in os.environ.items() if k not in chosen} | env
    code = THREADS.format(load=load, variable=VARIABLE)
    result = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    threads, seen = result.stdout.split()
    return int(threads), seen


ONE_THREAD = "from h5subfile.cli import load_numpy_with_one_blas_thread as load; load()"


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_numpy_is_loaded_with_one_blas_thread_and_the_variable_put_back() -> None:
    plain_threads, _ = run("import numpy")
    threads, seen = run(ONE_THREAD)
    assert threads == 1, f"{threads} threads after loading numpy (plain import: {plain_threads})"
    assert seen == "unset", "the variable must not reach commands the verbs start"
    if (os.cpu_count() or 1) > 1:  # where a plain import starts more, this test can fail
        assert plain_threads > 1


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_a_number_the_user_chose_is_kept() -> None:
    threads, seen = run(ONE_THREAD, **{VARIABLE: "2"})
    assert seen == "2"
    assert threads == 2

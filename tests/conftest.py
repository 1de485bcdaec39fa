"""Shared test helpers: running multi-rank pytest modules and scripts under mpiexec with a timeout.

The multi-rank tests are pytest modules in tests/mpi, run under ``mpiexec -n N python -m mpi4py
-m pytest`` by :func:`run_mpi_pytest`; the jobs of one suite run (``STAGES``) share a data folder,
so that files written with one rank count are read with others. They are never collected here.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SCRIPTS = ROOT / "mpi"
MPIEXEC = Path(sys.executable).parent / "mpiexec"

collect_ignore = ["mpi"]  # multi-rank modules: run under mpiexec (test_mpi.py), not in this process


@dataclass(frozen=True)
class Stage:
    """One mpiexec job of the suite: pytest node ids (relative to tests/mpi) run on ``ranks``."""

    name: str
    ranks: int
    tests: tuple[str, ...]


WRITE = "test_roundtrip.py::test_write"
APPEND = "test_roundtrip.py::test_append_from_another_rank_count"
#: Every reader rank count, once every file is written.
READ = (
    "test_roundtrip.py::test_read_back_bit_for_bit",
    "test_storage.py::test_every_filter_and_chunk_shape_reads_back",
    "test_plain_files.py",
    "test_mappings.py::test_read_back",
)
#: In order. The round-trip files are written with 1-4 ranks, appended to with 2 ranks (the
#: files of 1 and 3 writers) and 3 ranks (2 and 4 writers), then read with 1-5 ranks; the storage
#: files are written with 4 ranks and read with 1-5. Self-contained modules share these jobs.
STAGES = (
    Stage(
        "write-1",
        1,
        (
            WRITE,
            "test_integrity.py",
            "test_repack.py",
            "test_h5py_programs.py",
            "test_scales_and_netcdf.py",
        ),
    ),
    Stage(
        "write-3",
        3,
        (
            WRITE,
            "test_bad_input.py",
            "test_independent_writes.py",
            "test_mpiio_hints.py",
            "test_integrity.py",
            "test_collective_misuse.py",
            "test_polled_collectives.py",
            "test_profile.py",
            "test_shared_layouts.py",
            "test_async_writes.py",
            "test_own_views.py",
            "test_star_rounds.py",
            "test_nodes.py",
            "test_h5py_programs.py",
            "test_metadata_model.py",
            "test_scales_and_netcdf.py",
            "test_random_writes.py",
            "test_consolidation.py",
        ),
    ),
    Stage(
        "write-4",
        4,
        (
            WRITE,
            "test_storage.py::test_write",
            "test_storage.py::test_write_aggregated",
            "test_independent_writes.py",
            "test_h5py_programs.py",
            "test_mappings.py::test_write",
        ),
    ),
    Stage(
        "write-append-2",
        2,
        (
            WRITE,
            f"{APPEND}[in-place]",
            "test_independent_writes.py",
            "test_damage.py",
            "test_checksums.py",
            "test_mpiio_hints.py",
            "test_integrity.py",
            "test_claims.py",
            "test_collective_misuse.py",
            "test_polled_collectives.py",
            "test_repack.py",
            "test_profile.py",
            "test_autoplan.py",
            "test_async_writes.py",
            "test_own_views.py",
            "test_star_rounds.py",
            "test_h5py_programs.py",
            "test_random_writes.py",
            "test_consolidation.py",
        ),
    ),
    Stage(
        "append-read-3",
        3,
        (
            f"{APPEND}[replace]",
            *READ,
            "test_storage.py::test_two_phase_reads",
            "test_storage.py::test_every_aggregator_count_writes_the_same_bytes",
            "test_damage.py",
            "test_checksums.py",
        ),
    ),
    Stage("read-1", 1, READ),
    Stage("read-2", 2, READ),
    Stage("read-4", 4, READ),
    Stage("read-5", 5, READ),
)


@dataclass
class MpiRun:
    """What one mpiexec job of pytest did: its status (None: killed after the timeout), each
    rank's stdout and stderr, and mpiexec's own output."""

    command: list[str]
    status: int | None
    timeout: float
    logs: Path
    launcher: str

    @property
    def rerun(self) -> str:
        """The same job by hand, from the repository root, output on the terminal."""
        ranks = self.command[self.command.index("-n") + 1]
        pytest_args = self.command[self.command.index("pytest") + 1 :]
        kept = [a for a in pytest_args if not a.startswith(("--basetemp", "--mpi-test-timeout"))]
        return shlex.join(
            [str(MPIEXEC), "-n", ranks, sys.executable, "-m", "mpi4py", "-m", "pytest", *kept]
        )

    @property
    def ok(self) -> bool:
        return self.status == 0

    def output(self, rank: int, stream: str = "out") -> str:
        path = self.logs / f"{stream}.{rank}"
        return path.read_text(errors="replace") if path.exists() else ""

    def report(self) -> str:
        """Rank 0's pytest report of the failing tests (every failing rank's report is in it);
        when the job ended otherwise (a crash, or hung until the test timeout or the job's),
        the end of every rank's output."""
        ranks = len(list(self.logs.glob("out.*")))
        head = (
            f"killed after {self.timeout:.0f} s" if self.status is None else f"status {self.status}"
        )
        lines = [f"{ranks} rank(s), {head}; rerun: {self.rerun}"]
        out = self.output(0)
        for marker in ("= ERRORS =", "= FAILURES =", "= short test summary info ="):
            if marker in out:
                return "\n".join([*lines, out[out.rfind("\n", 0, out.index(marker)) + 1 :]])
        for rank in range(ranks):
            for stream in ("out", "err"):
                text = self.output(rank, stream).strip()
                if text:
                    lines += [f"--- rank {rank} std{stream} (end)", text[-3000:]]
        if self.launcher.strip():
            lines += ["--- mpiexec", self.launcher.strip()[-3000:]]
        return "\n".join(lines)


def run_mpi_pytest(
    ranks: int,
    tests: tuple[str, ...] | list[str],
    folder: Path,
    data: Path,
    timeout: float = 300,
    test_timeout: float = 120,
) -> MpiRun:
    """Run pytest node ids of tests/mpi on ``ranks`` ranks (``python -m mpi4py -m pytest``), with
    ``data`` as the folder shared between jobs, each rank's output in ``folder``/logs, and the
    whole job killed after ``timeout`` seconds; a single test taking ``test_timeout`` seconds
    makes every rank dump its stack and exit."""
    logs = folder / "logs"
    logs.mkdir(parents=True)
    command = [
        str(MPIEXEC),
        "-n",
        str(ranks),
        "-outfile-pattern",
        f"{logs}/out.%r",
        "-errfile-pattern",
        f"{logs}/err.%r",
        sys.executable,
        "-m",
        "mpi4py",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--basetemp={folder / 'tmp'}",
        f"--mpi-data={data}",
        f"--mpi-test-timeout={test_timeout:g}",
        *(f"tests/mpi/{test}" for test in tests),
    ]
    # Only pytest's own plugins (hypothesis' costs ~1 s per rank); output as it is written, so
    # that a job that is killed or aborted still shows where it was.
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        command,
        cwd=ROOT.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        launcher, _ = process.communicate(timeout=timeout)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        launcher, _ = process.communicate()
        status = None
    return MpiRun(command, status, timeout, logs, launcher)


class Stages:
    """The suite's mpiexec jobs, each run once per session, in order: a job runs after every
    job before it in ``STAGES`` (whose files it may read)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.runs: dict[str, MpiRun] = {}

    def run(self, name: str) -> MpiRun:
        for stage in STAGES:
            if stage.name not in self.runs:
                folder = self.folder / stage.name
                self.runs[stage.name] = run_mpi_pytest(stage.ranks, stage.tests, folder, self.data)
            if stage.name == name:
                return self.runs[name]
        raise KeyError(name)

    def data_after(self, name: str) -> Path:
        """The data folder once stage ``name`` ran (whether its tests passed is test_mpi.py's
        to say)."""
        self.run(name)
        return self.data


@pytest.fixture(scope="session")
def mpi_stages(tmp_path_factory: pytest.TempPathFactory) -> Stages:
    return Stages(tmp_path_factory.mktemp("mpi"))


def run_mpi(
    ranks: int,
    script: str,
    *args: str,
    timeout: float = 240,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run the script ``tests/mpi/<script>`` (a job whose effects a test examines from outside:
    a crash, peak memory) on ``ranks`` ranks under ``python -m mpi4py`` (a failing rank aborts
    the job), killing the whole job after ``timeout`` seconds so nothing can hang."""
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
    # The scripts' folder first, then the caller's path (a checkout's src/ named there is the
    # code the scripts run, as it is for every other subprocess of the tests).
    path = os.pathsep.join(p for p in (str(SCRIPTS), os.environ.get("PYTHONPATH", "")) if p)
    full_env = dict(os.environ, PYTHONPATH=path, **(env or {}))
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        start_new_session=True,
    )
    stdout, stderr = finish_job(process, timeout, f"{script} {args} on {ranks} ranks")
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


def run_cli(
    ranks: int, *args: object, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``h5subfile ARGS`` under ``mpiexec -n ranks`` (not checked: tests look at the status),
    in its own session: a job that hangs is killed whole, ranks included, and fails the test."""
    command = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "h5subfile", *map(str, args)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=None if env is None else dict(os.environ, **env),
    )
    stdout, stderr = finish_job(process, timeout, f"h5subfile {' '.join(map(str, args))}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def finish_job(process: subprocess.Popen[str], timeout: float, what: str) -> tuple[str, str]:
    """Wait for a job started in its own session: its (stdout, stderr); after ``timeout``
    seconds the whole job is killed and the test fails, naming ``what``."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{what} hung (> {timeout} s)\n{(out or '')[-3000:]}\n{(err or '')[-3000:]}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a file system of its own: a 16 MiB tmpfs, unmounted after the test (for a
    full disk, :func:`fill`; a read-only one, :func:`remount`). The test is skipped where this
    process may not mount one (not root, or no mount privilege in this container)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {made.stderr.strip()}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of ``folder`` with a file of zeros until it is full, then give
    back ``leave`` bytes of it; returns that file (remove it to free the disk again)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        block = bytes(2**16)
        while True:
            try:
                os.write(fd, block)
            except OSError:
                if len(block) == 1:
                    break
                block = block[: len(block) // 2]
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler


def remount(folder: Path, options: str) -> None:
    """Mount the file system at ``folder`` again with ``options`` ("ro": read-only)."""
    done = subprocess.run(
        ["mount", "-o", f"remount,{options}", str(folder)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr

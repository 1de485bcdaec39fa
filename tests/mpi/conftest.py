"""Multi-rank tests: every rank runs pytest, under ``mpiexec -n N python -m mpi4py -m pytest``.

After each phase (setup, call, teardown) of each test the ranks agree on its outcome: a failure on
any rank fails the test on every rank, naming the failing ranks, and the agreement is also a
barrier, so no rank runs ahead into the next test's collectives. Rank 0 prints every failing
rank's report; the other ranks print only which tests failed.

A rank that fails a test while the others wait in a collective it left would hang the job: after
10 s it prints its failure to stderr, and once a test has run for ``--mpi-test-timeout`` seconds
every rank dumps its stack (faulthandler) and exits.
"""

from __future__ import annotations

import faulthandler
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pytest
from mpi4py import MPI
from ranks import on_root

WORLD = MPI.COMM_WORLD
#: The harness's own communicator: its barriers and gathers can never be matched with a
#: collective that a test (or the library) left pending on WORLD, so a rank that leaves a test
#: early shows up as a hang in that test (ended by the test timeout, naming where each rank
#: waits) rather than as garbage received by another rank's collective.
HARNESS = WORLD.Dup()
PATIENCE = 10  # seconds a failed rank waits for the others before saying why it may hang


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--mpi-test-timeout",
        type=float,
        default=120.0,
        help="seconds a test may take before every rank dumps its stack and the job ends "
        "(a collective some rank never reached); 0: no limit (default 120)",
    )
    parser.addoption(
        "--mpi-data",
        default=None,
        help="folder shared by the jobs of one suite run: files written with one rank count and "
        "read with others (default: a new folder; inputs from other jobs are then skipped when "
        "missing, with this option they must exist)",
    )


_stderr: TextIO = sys.stderr  # the real stderr: pytest captures fd 2 during tests


def pytest_configure(config: pytest.Config) -> None:
    global _stderr
    _stderr = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)


def pytest_report_header(config: pytest.Config) -> str:
    return f"MPI: {WORLD.size} rank(s), {MPI.Get_library_version().splitlines()[0].strip()}"


def pytest_unconfigure(config: pytest.Config) -> None:
    # Exiting with failures makes ``python -m mpi4py`` abort the job: wait until every rank has
    # printed its summary, so that no rank's output is cut short.
    sys.stdout.flush()
    sys.stderr.flush()
    HARNESS.Barrier()
    if _stderr is not sys.stderr:
        _stderr.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    timeout = item.config.getoption("--mpi-test-timeout")
    if timeout:
        faulthandler.dump_traceback_later(timeout, file=_stderr, exit=True)
    try:
        return (yield)
    finally:
        if timeout:
            faulthandler.cancel_dump_traceback_later()


def _wait_for_every_rank(nodeid: str, when: str, failure: str) -> None:
    """Collective barrier. A rank whose test failed prints its failure if the others do not come
    within PATIENCE seconds: they may wait in a collective it left (the test timeout then ends
    the job, and this says why)."""
    request = HARNESS.Ibarrier()
    if not failure:
        request.Wait()
        return
    deadline = time.monotonic() + PATIENCE
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            _stderr.write(
                f"rank {WORLD.rank}: {nodeid} ({when}) failed, and the other ranks have not "
                f"finished it {PATIENCE} s later:\n{failure}\n"
            )
            deadline = None
        time.sleep(0.002)


@dataclass
class _Crash:
    message: str

    def __str__(self) -> str:
        return self.message


class _RanksRepr:
    """The failure of a test as agreed by the ranks: each failing rank's own report."""

    def __init__(self, text: str, message: str) -> None:
        self.text = text
        self.reprcrash = _Crash(message)  # the short test summary line uses it

    def toterminal(self, out) -> None:
        for line in self.text.splitlines():
            out.line(line)

    def __str__(self) -> str:
        return self.text


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def _own_report(report: pytest.TestReport) -> tuple[str, str]:
    """(full text, one-line message) of this rank's failure, with its captured output."""
    if not report.failed:
        return "", ""
    text = report.longreprtext
    for title, content in report.sections:
        text += f"\n{'-' * 8} {title} {'-' * 8}\n{content.rstrip()}"
    try:
        message = report.longrepr.reprcrash.message  # type: ignore[union-attr]
    except AttributeError:
        message = text.splitlines()[-1] if text else ""
    return text, message


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    report = yield
    text, message = _own_report(report)
    _wait_for_every_rank(item.nodeid, report.when, text)
    outcomes = HARNESS.allgather((item.nodeid, report.when, report.outcome, text, message))
    places = {(nodeid, when) for nodeid, when, *_ in outcomes}
    if len(places) > 1:  # different tests on different ranks: their collectives cannot match
        where = "; ".join(f"rank {r}: {n} ({w})" for r, (n, w, *_) in enumerate(outcomes))
        _stderr.write(f"ranks out of step, aborting the job: {where}\n")
        _stderr.flush()
        WORLD.Abort(3)
    kinds = [outcome for _, _, outcome, _, _ in outcomes]
    if all(kind == kinds[0] for kind in kinds) and kinds[0] != "failed":
        return report
    failed = [r for r, kind in enumerate(kinds) if kind == "failed"]
    others = [r for r, kind in enumerate(kinds) if kind != "failed"]
    if failed:
        summary = f"failed on {_ranks(failed)} of {WORLD.size}"
        if others:
            summary += f" ({kinds[others[0]]} on {_ranks(others)})"
    else:
        summary = "ranks disagree: " + "; ".join(
            f"{kind} on {_ranks([r for r in range(WORLD.size) if kinds[r] == kind])}"
            for kind in sorted(set(kinds))
        )
    texts: dict[str, tuple[str, list[int]]] = {}  # the same failure but for object addresses
    for r in failed:
        text = outcomes[r][3]
        texts.setdefault(re.sub(r"0x[0-9a-f]+", "0x", text), (text, []))[1].append(r)
    body = [summary]
    for failure, ranks in texts.values():
        body += ["", f"{'=' * 8} {_ranks(ranks)} {'=' * 8}", failure]
    messages: dict[str, list[int]] = {}
    for r in failed:
        messages.setdefault(outcomes[r][4], []).append(r)
    message = "; ".join(f"[{_ranks(ranks)}] {m}" for m, ranks in messages.items()) or summary
    report.outcome = "failed"
    if WORLD.rank == 0:
        report.longrepr = _RanksRepr("\n".join(body), message)
    else:  # said once, by rank 0
        report.longrepr = _RanksRepr(f"{summary}: rank 0 shows every rank's report", message)
        report.sections = []
    return report


@pytest.fixture(scope="session")
def comm() -> MPI.Intracomm:
    """The job's communicator (every rank runs the same tests in the same order)."""
    return WORLD


@pytest.fixture
def shared_tmp(
    comm: MPI.Intracomm, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """A new empty folder, made on rank 0: the same path on every rank."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    return Path(on_root(comm, lambda: str(tmp_path_factory.mktemp(name))))


@pytest.fixture
def tmp_path() -> Path:
    """Refused: each rank would get its own folder. Use ``shared_tmp``."""
    pytest.fail("tmp_path differs between ranks; use shared_tmp")


@pytest.fixture(scope="session")
def data_dir(
    comm: MPI.Intracomm, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """``--mpi-data`` (shared by the jobs of one suite run), else a new folder made on rank 0."""
    given = request.config.getoption("--mpi-data")
    if given:
        return Path(on_root(comm, lambda: str(_made(Path(given).resolve()))))
    return Path(on_root(comm, lambda: str(tmp_path_factory.mktemp("data"))))


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def subfolder(comm: MPI.Intracomm, data_dir: Path) -> Callable[[str], Path]:
    """Collective: ``subfolder(name)`` is ``data_dir / name``, made on rank 0."""
    return lambda name: Path(on_root(comm, lambda: str(_made(data_dir / name))))


@pytest.fixture(scope="session")
def need(request: pytest.FixtureRequest) -> Callable[[Path, str], Path]:
    """``need(path, what)``: a file another job writes. Missing: the test fails when the suite
    ran the jobs (``--mpi-data``), and is skipped in a job run on its own."""
    suite = request.config.getoption("--mpi-data") is not None

    def need(path: Path, what: str) -> Path:
        if not path.exists():
            (pytest.fail if suite else pytest.skip)(f"{path} is missing: {what}")
        return path

    return need

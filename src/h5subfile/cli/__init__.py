"""h5subfile: parallel HDF5 output and input for MPI applications, through subfiling.

Write (vpic), read (bdcats), benchmark (bench), describe (info), check (verify) and convert
(repack) subfiled and plain HDF5 files, report on profiles and Darshan logs (report: text,
or a page of pictures and findings), profile any command's h5subfile I/O (profile) and find
the fastest plan for a job (tune, used by --plan auto), run an unmodified parallel h5py
program with its mpio files written by h5subfile (run); run the MPI verbs under mpiexec. `demo`
runs the whole tour on this machine.

Every verb reports an error the same way: one line, printed once (by rank 0), every rank ending
with the same exit status: 0 success; 1 the command failed (or info/verify found the file
damaged); 2 the command line is wrong; 130 interrupted; 141 the output's reader went away.
H5SUBFILE_DEBUG=1 (or --debug) adds the traceback.

Before any verb runs, numpy is loaded with one OpenBLAS thread
(:func:`load_numpy_with_one_blas_thread`): no verb does linear algebra, and the ranks of a job
on one node each started a thread per core.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from .._version import __version__
from . import bdcats, bench, demo, info, profile, repack, report, run, tune, verify, vpic
from .common import (
    DEBUG_VARIABLE,
    EXIT_BROKEN_PIPE,
    Parser,
    abort_job,
    broken_pipe,
    debugging,
    describe_failure,
    exit_status,
    launched_rank,
    launched_size,
    silence_stdout,
)

VERBS = (vpic, bdcats, bench, info, verify, repack, report, profile, tune, run, demo)
#: Seconds a rank whose error is its own (not agreed with the others) waits for the others to
#: finish before it ends the job with MPI_Abort (they may be waiting for it inside a collective
#: call). An agreed error is raised by every rank, so they all arrive.
GRACE = 30.0
#: What OpenBLAS (numpy's linear algebra) reads, once, when numpy loads it: how many threads to
#: start. No verb does linear algebra; without it every rank starts one thread per core.
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"

#: One failure, as ranks send it: (exit status, message or None for a silent one).
Failure = tuple[int, "str | None"]


def build_parser() -> Parser:
    summary, details, epilog = __doc__.split("\n\n")[:3]
    parser = Parser(
        prog="h5subfile",
        description=f"Parallel HDF5 {summary.split(' HDF5 ', 1)[1]} {details}",
        epilog=epilog,
    )
    parser.add_argument("--version", action="version", version=f"h5subfile {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"print the traceback of an error (also {DEBUG_VARIABLE}=1)",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=Parser, metavar="VERB")
    for module in VERBS:
        module.add_parser(verbs)
    parser.set_defaults(verb_parsers=verbs.choices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``h5subfile`` command: parse, run the verb, and end every rank with one status."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # named by the verb's parser, which says where to look for the right ones
        args.verb_parsers[args.verb].error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.debug:
        os.environ[DEBUG_VARIABLE] = "1"
    load_numpy_with_one_blas_thread()
    comm = _job_comm()
    failure: Failure | None = None
    status, agreed = 0, False
    try:
        status = int(args.run(args) or 0)
    except BaseException as exc:  # noqa: BLE001 - every way out is reported the same way
        if isinstance(exc, SystemExit):
            raise
        failure, agreed = _failure(exc), bool(getattr(exc, "collective", False))
    return _finish(comm, args.verb, status, failure, agreed)


def load_numpy_with_one_blas_thread() -> None:
    """Import numpy with OpenBLAS told to start one thread (unless the user chose a number):
    the ranks of a job on one node would otherwise each start a thread per core while they
    start, and slow each other's import (by half again at 2 ranks on 2 cores). The variable
    is put back as it was, so that commands the verbs start (``profile``) see the user's
    environment."""
    if "numpy" in sys.modules or BLAS_THREADS_VARIABLE in os.environ:
        return
    os.environ[BLAS_THREADS_VARIABLE] = "1"
    try:
        import numpy  # noqa: F401 - loaded here for its BLAS set-up only
    finally:
        del os.environ[BLAS_THREADS_VARIABLE]


def _job_comm() -> Any:
    """Under an MPI launcher with several processes: a communicator of the job's own, made
    before the verb runs, on which the ranks agree on the outcome at the end (never mixed up
    with a collective call the verb left unfinished). None otherwise."""
    if launched_size() <= 1:
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD.Dup()


def _failure(exc: BaseException) -> Failure:
    """What this rank reports of ``exc`` (its traceback printed here when debugging)."""
    if broken_pipe(exc):
        silence_stdout()
        return EXIT_BROKEN_PIPE, None
    if debugging():
        print(f"[rank {launched_rank()}]", file=sys.stderr)
        traceback.print_exception(exc, file=sys.stderr)
    return exit_status(exc), describe_failure(exc)


def _finish(
    comm: Any, verb: str, status: int, failure: Failure | None, agreed: bool = False
) -> int:
    """Agree on the outcome: rank 0 prints the failures once, every rank returns the same
    status. A rank with an error of its own (not ``agreed``) whose peers do not arrive within
    GRACE seconds (they wait for it in a collective call) prints it and ends the job."""
    failures: list[tuple[int, Failure]] = []
    size = 1
    if comm is None:
        if failure and not agreed and _world_size() > 1:  # a launcher not recognised
            _abort(verb, launched_rank(), failure)
        failures = [(0, failure)] if failure else []
        status = failure[0] if failure else status
    else:
        request = comm.Ibarrier()
        if failure is None or agreed:
            request.Wait()
        else:
            deadline = time.monotonic() + GRACE
            while not request.Test():
                if time.monotonic() > deadline:
                    _abort(verb, comm.rank, failure)
                time.sleep(0.005)
        everyone = comm.allgather((status, failure))
        size = len(everyone)
        failures = [(rank, f) for rank, (_, f) in enumerate(everyone) if f is not None]
        status = failures[0][1][0] if failures else max(s for s, _ in everyone)
        comm.Free()
    if failures and launched_rank() == 0:
        for line in _lines(verb, failures, size):
            print(line, file=sys.stderr, flush=True)
    return status


def _lines(verb: str, failures: list[tuple[int, Failure]], size: int) -> list[str]:
    """One line per distinct message, naming the ranks when not every rank failed alike."""
    by_message: dict[str, list[int]] = {}
    for rank, (_, message) in failures:
        if message is not None:
            by_message.setdefault(message, []).append(rank)
    lines = []
    for message, ranks in by_message.items():
        where = ""
        if size > 1 and len(ranks) < size and not message.startswith("[rank"):
            shown = ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")
            where = f"[rank{'s' if len(ranks) > 1 else ''} {shown}] "
        lines.append(f"h5subfile {verb}: error: {where}{message}")
    return lines


def _world_size() -> int:
    """The job's size once MPI is initialised (1 before)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return 1
    return int(mpi.COMM_WORLD.size)


def _abort(verb: str, rank: int, failure: Failure) -> None:
    """End the whole job from one rank whose peers are stuck (never returns)."""
    said = "" if failure[1] is None else f"h5subfile {verb}: error: [rank {rank}] {failure[1]}\n"
    abort_job(failure[0], said)

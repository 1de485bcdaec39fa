"""``h5subfile run [plan flags] (PROGRAM.py | -m MODULE) [ARGS...]``: run an unmodified parallel
h5py program with h5subfile serving its ``h5py.File(..., driver="mpio", comm=comm)`` files
(:mod:`h5subfile.dropin`): they come out subfiled, readable by any HDF5 tool. Under mpiexec,
as the program itself would be run.

The program runs as ``__main__`` with ``sys.argv`` set as if started itself. Its exit status
is the command's; an exception it does not catch, or ``sys.exit`` with an error status on any
rank, ends the whole job at once, as ``python -m mpi4py`` ends it (a rank left alone would
leave the others waiting in a collective call).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from typing import Any

from .common import abort_job, add_plan_flags, plan_arguments


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "run",
        help="run a parallel h5py program, its mpio files written by h5subfile",
        description="Run an unmodified parallel h5py program: its "
        "h5py.File(..., driver='mpio', comm=comm) files are opened by h5subfile with the plan "
        "given here (or from H5SUBFILE_* variables), so they come out subfiled and readable by "
        "h5py, h5dump and any HDF5 tool; files opened without driver='mpio' are h5py's. "
        "Run it under mpiexec as the program would be: mpiexec -n 8 h5subfile run app.py ARGS.",
    )
    parser.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE",
        help="run a module as python -m would (everything after it is the module's arguments)",
    )
    parser.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        help="the program (a .py file, unless -m) and its arguments",
    )
    add_plan_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .. import dropin

    words = list(args.program)
    if args.module is not None:  # -m MODULE ARGS...: everything after -m is python -m's
        if not args.module:
            raise SystemExit("h5subfile run: -m needs a module to run")
        module, *words = args.module
    elif not words:
        raise SystemExit("h5subfile run: give a program (PROGRAM.py or -m MODULE) to run")
    plan = {k: v for k, v in plan_arguments(args).items() if v is not None}
    dropin.install(**plan)
    if args.module is not None:
        sys.argv = [module, *words]
        return _main(lambda: runpy.run_module(module, run_name="__main__", alter_sys=True))
    program = words[0]
    if not os.path.exists(program):
        raise SystemExit(f"h5subfile run: {program}: no such program")
    sys.argv = words
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    return _main(lambda: runpy.run_path(program, run_name="__main__"))


def _main(start: Any) -> int:
    """Run the program: its exit status, or the job ended at once on an exception it did not
    catch (printed with its traceback, then every rank stops: MPI_Abort)."""
    try:
        start()
    except SystemExit as exc:
        code = exc.code
        status = int(code or 0) if code is None or isinstance(code, int) else 1
        text = "" if code is None or isinstance(code, int) else f"{code}\n"
        if status:
            from mpi4py import MPI

            if MPI.COMM_WORLD.size > 1:
                # as python -m mpi4py: a rank leaving with an error status ends the job, so
                # that no other rank waits for it in a collective call
                abort_job(status, text)
        print(text, end="", file=sys.stderr)
        return status
    except BaseException:  # noqa: BLE001 - the program's own error: shown, then the job ends
        from mpi4py import MPI

        if MPI.COMM_WORLD.size > 1:
            abort_job(1, traceback.format_exc())
        traceback.print_exc()
        return 1
    return 0

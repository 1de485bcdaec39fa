"""``h5subfile profile [--trace [N]] [--out DIR] -- COMMAND ...``: run any command (``python
app.py``, ``mpiexec -n 4 python app.py``) with every h5subfile ``File`` it opens profiled
(``H5SUBFILE_PROFILE=DIR`` in its environment), end with its exit status, and say what it
profiled (docs/PROFILING.md, *Use*)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from typing import Any

from ..errors import H5SubfileError
from ..units import format_bytes
from .common import Profiling, UsageError, launched_size, profiling, trace_bound

#: Where the profiles go without --out.
DEFAULT_FOLDER = "h5subfile-profile"
#: The trace's bound per rank with a bare --trace.
DEFAULT_TRACE = "10000"


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "profile",
        help="run a command with every h5subfile File it opens profiled",
        description="Run COMMAND (after --) with H5SUBFILE_PROFILE=DIR in its environment, so that "
        "every h5subfile File it opens, on every rank, is profiled (Darshan-style counters per "
        "file and rank, written at each File's close); then end with COMMAND's exit status and "
        "summarise the profiles it wrote (on stderr). Run it as a plain command: COMMAND may be "
        "an mpiexec line.",
    )
    parser.add_argument(
        "--out",
        dest="profile",
        metavar="DIR",
        default=DEFAULT_FOLDER,
        help="the folder the profiles go to",
    )
    parser.add_argument(
        "--trace",
        dest="profile_trace",
        metavar="N[:last]",
        type=trace_bound,
        nargs="?",
        const=trace_bound(DEFAULT_TRACE),
        default=None,
        help="also keep a trace of the first N operations per rank (N:last: the last N; "
        f"--trace alone: {DEFAULT_TRACE})",
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to run"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the command profiled; its exit status (128 + N when a signal N ended it)."""
    from ..profiler.counters import PROFILE_ENV

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the command to run after --: h5subfile profile -- python app.py")
    if launched_size() > 1:
        raise UsageError(
            "run h5subfile profile as a plain command; put mpiexec in COMMAND "
            "(h5subfile profile -- mpiexec -n 4 python app.py)"
        )
    if not args.profile:
        raise UsageError("--out needs a folder (the profiles go there)")
    profiled = profiling(args)
    assert profiled.folder is not None
    env = dict(os.environ, **{PROFILE_ENV: profiled.folder})
    status = _run(command, env)
    _summarise(profiled, command)
    return status


def _run(command: list[str], env: dict[str, str]) -> int:
    """Start ``command`` and wait for it; H5SubfileError if it cannot be started."""
    try:
        process = subprocess.Popen(command, env=env)
    except FileNotFoundError:
        raise H5SubfileError(f"cannot start {command[0]}: no such command") from None
    except OSError as exc:
        raise H5SubfileError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    try:
        status = process.wait()
    except KeyboardInterrupt:  # the command had the signal too: let it end, then stop
        process.send_signal(signal.SIGINT)
        process.wait()
        raise
    return 128 - status if status < 0 else status


def _summarise(profiled: Profiling, command: list[str]) -> None:
    """On stderr: one line per profile written (its text beside it), or why there is none."""
    from ..profiler.reduction import from_json

    written = profiled.written()
    out = sys.stderr
    if not written:
        print(
            f"h5subfile profile: no profile was written to {profiled.folder}: "
            f"'{' '.join(command)}' closed no h5subfile File (profiles are written when a File "
            "closes; an application that does not use h5subfile has none)",
            file=out,
            flush=True,
        )
        return
    from ..io.regular import read_regular

    print(f"h5subfile profile: {len(written)} profile(s) in {profiled.folder}:", file=out)
    for path in written:
        try:
            doc = from_json(read_regular(path, "profile").decode())
        except (OSError, ValueError) as exc:
            print(f"  {os.path.basename(path)}: not readable ({exc})", file=out)
            continue
        print(f"  {summary_line(doc, os.path.basename(path))}", file=out)
    print(
        f"  the counters: the .txt beside each; again: h5subfile report {profiled.folder} --text",
        file=out,
    )
    out.flush()


def summary_line(doc: dict[str, Any], name: str) -> str:
    """One profile in a line: ranks, files, operations and bytes, the slowest rank."""
    totals = doc["totals"]
    line = (
        f"{name}: {doc['nprocs']} rank(s), {len(doc['files'])} file(s), "
        f"{totals['writes']} writes ({format_bytes(totals['bytes_written'])}), "
        f"{totals['reads']} reads ({format_bytes(totals['bytes_read'])}), "
        f"{doc['run_time']:.3f} s"
    )
    if "slowest_rank" in totals:
        line += (
            f"; slowest rank {totals['slowest_rank']} ({totals['slowest_rank_time']:.3f} s of I/O)"
        )
    return line

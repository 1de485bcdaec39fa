"""Pieces shared by the CLI verbs: the argument parser every verb uses (errors and help printed
once, defaults shown), the one way errors become a message and an exit status, plan flags,
the progress flags and JSON output (progress itself: ``h5subfile/progress.py``).

Exit statuses (README, *Command line*): 0 success; 1 the command failed (an error, or ``info`` /
``verify`` found the file damaged); 2 the command line is wrong (an unknown option, a value that
cannot be right, a missing argument); 130 interrupted; 141 the reader of the output went away
(``| head``).

Progress: :func:`progress_line` gives the verb's :class:`~h5subfile.progress.Progress`, shown
as ``progress_wanted`` decides. Profiling: :func:`add_profile_flags` and :func:`profiling` are
the ``--profile DIR`` / ``--profile-trace`` flags of ``vpic``, ``bdcats``, ``bench`` and ``demo``.
"""

from __future__ import annotations

import argparse
import array
import errno
import fcntl
import json
import os
import re
import stat
import sys
import termios
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from ..errors import H5SubfileError
from ..plan import PLAN_FIELDS
from ..progress import LINE_INTERVAL, PROGRESS_VARIABLE, Progress, progress_wanted

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a C tool killed by it
DEBUG_VARIABLE = "H5SUBFILE_DEBUG"

#: Environment variables MPI launchers set to each process's rank (mpiexec of MPICH, Intel MPI,
#: Open MPI, PMIx, MVAPICH, Slurm's srun), read before MPI is initialised.
_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


class UsageError(H5SubfileError, ValueError):
    """A command line that cannot be right (exit status 2). Raise it on every rank alike: it is
    decided from the arguments, which every rank shares."""

    collective = True


def launched_rank() -> int:
    """This process's rank: from MPI once initialised, else from the launcher's environment
    (0 when not launched by an MPI launcher)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return int(mpi.COMM_WORLD.rank)
    for name in _RANK_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    if "SLURM_STEP_ID" in os.environ and os.environ.get("SLURM_PROCID", "").isdigit():
        return int(os.environ["SLURM_PROCID"])
    return 0


def launched_size() -> int:
    """How many processes the MPI launcher started (1 when not launched by one)."""
    for name in _SIZE_VARIABLES:  # not Slurm's SLURM_NTASKS: a batch script has it too
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


#: How long a rank ending the job waits, at most, for the launcher to read what it printed:
#: MPI_Abort kills every process at once, and bytes still in the pipe to the launcher are lost.
ABORT_DRAIN_SECONDS = 2.0


def abort_job(status: int, text: str) -> NoReturn:
    """Print TEXT on stderr, then end the whole job with MPI_Abort(STATUS) once the launcher has
    read it (its pipe is empty), or after :data:`ABORT_DRAIN_SECONDS`. TEXT goes out in one write
    where the pipe takes it whole (up to PIPE_BUF bytes), so another rank's output cannot cut it."""
    from mpi4py import MPI

    sys.stderr.flush()
    data = text.encode(errors="replace")
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass  # stderr is gone: nothing more can be said
    _wait_until_read(2, ABORT_DRAIN_SECONDS)
    MPI.COMM_WORLD.Abort(status)
    raise SystemExit(status)  # MPI_Abort does not return; for type checkers


def _wait_until_read(fd: int, seconds: float) -> None:
    """Wait until the pipe at FD holds no unread bytes (at most SECONDS); at once if FD is not a
    pipe."""
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        unread = array.array("i", [0])
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            fcntl.ioctl(fd, termios.FIONREAD, unread)
            if unread[0] == 0:
                return
            time.sleep(0.005)
    except OSError:
        return


# ---------------------------------------------------------------------------------------------
# The parser


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, with each option's default shown unless its help gives it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            text
            and "default" not in text
            and not any(default is nothing for nothing in (None, False, argparse.SUPPRESS))
            and action.option_strings
            and not isinstance(default, (list, dict))
        ):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """The parser of ``h5subfile`` and every verb: output only on rank 0 (every rank parses the
    same argv), an error as one line naming the option, exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def _print_message(self, message: str, file: Any = None) -> None:
        if launched_rank() == 0:
            super()._print_message(message, file)

    def error(self, message: str) -> NoReturn:
        if launched_rank() == 0:
            print(
                f"{self.prog}: error: {message} (see '{self.prog} --help')",
                file=sys.stderr,
                flush=True,
            )
        sys.exit(EXIT_USAGE)

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        """A value the option's type refuses is named in words, not by the type's function."""
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as exc:
            kind = action.type
            if not callable(kind) or isinstance(kind, argparse.FileType):
                raise
            try:
                kind(arg_string)
            except (TypeError, ValueError) as why:
                if kind is int:
                    reason = f"expected a whole number, got {arg_string!r}"
                elif kind is float:
                    reason = f"expected a number, got {arg_string!r}"
                else:
                    reason = user_message(why)
                raise argparse.ArgumentError(action, reason) from None
            except argparse.ArgumentTypeError:
                pass
            raise exc from None


def count_at_least(low: int) -> Any:
    """An argparse type: a count (``1024``, ``4M``, ``8Mi``) of at least ``low``."""
    from ..units import parse_count

    def parse(text: str) -> int:
        value = parse_count(text)
        if value < low:
            raise ValueError(f"must be at least {low}, got {text}")
        return value

    parse.__name__ = "count"
    return parse


def int_at_least(low: int) -> Any:
    """An argparse type: a whole number of at least ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def fraction(text: str) -> float:
    """An argparse type: a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise ValueError(f"must be in (0, 1] (0.1 reads a tenth), got {text}")
    return value


# ---------------------------------------------------------------------------------------------
# Errors as the user reads them

_CLASS_PREFIX = re.compile(r"(?<![\w.])[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning): ")
_ERRNO = re.compile(r"\[Errno \d+\] ")
_STAGING = re.compile(r"(\S+?)\.repack-[0-9a-f]+\.partial(?:/[^\s'\",;:)]+)?")
_PARTIAL_NOTE = re.compile(r"\s*\([^()]*\.partial\b[^()]*\)")
_PARTIAL = re.compile(r"(\S+?)\.partial\b")
_HDF5_DETAIL = re.compile(r"\s*\((?:[^()]*\btime = |file read failed)[^()]*\)")


def user_message(exc: BaseException) -> str:
    """``exc``'s message in the user's terms, on one line: without exception class names,
    errno tags, HDF5's call details, or the names of files h5subfile writes on the way (a
    master's ``.partial`` copy, repack's staging folder)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _HDF5_DETAIL.sub("", text)
    text = _CLASS_PREFIX.sub("", text)
    text = _ERRNO.sub("", text)
    text = _STAGING.sub(r"\1", text)
    text = _PARTIAL_NOTE.sub("", text)
    return _PARTIAL.sub(r"\1", text)


def exit_status(exc: BaseException) -> int:
    """The exit status an exception leaving a verb ends the command with."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if broken_pipe(exc):
        return EXIT_BROKEN_PIPE
    return EXIT_FAILED


def broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` says the reader of this process's output went away (``| head``)."""
    if isinstance(exc, BrokenPipeError):
        return True
    return isinstance(exc, OSError) and (
        exc.errno == errno.EPIPE or str(exc).startswith("BrokenPipeError")
    )


def describe_failure(exc: BaseException) -> str:
    """The line a failure is reported with (after ``h5subfile VERB: error:``): the message, and
    for an error that is not h5subfile's (a bug) how to see more."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    message = user_message(exc)
    if not isinstance(exc, (H5SubfileError, OSError)) and not debugging():
        message += f" (unexpected {type(exc).__name__}: rerun with {DEBUG_VARIABLE}=1 for details)"
    return message


def debugging() -> bool:
    """Whether tracebacks are wanted (``h5subfile --debug`` or ``H5SUBFILE_DEBUG=1``)."""
    return os.environ.get(DEBUG_VARIABLE, "").strip().lower() not in ("", "0", "no", "false")


def silence_stdout() -> None:
    """After a broken pipe: send what is left of stdout nowhere, so that Python's flush at exit
    does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def check_input_file(comm: Any, path: str) -> None:
    """Collective: refuse a folder given as the file to read, saying which file to give (rank
    0 looks; every rank raises the same error). A missing file is left to ``File``."""
    from ..mpi.collective import root_only

    def look() -> None:
        if not os.path.isdir(path):
            return
        folder = os.path.normpath(path)
        if folder.endswith(".subfiles"):
            stem = folder[: -len(".subfiles")]
            master = next((m for m in (stem + ".h5", stem) if os.path.isfile(m)), stem + ".h5")
            raise H5SubfileError(
                f"{path} is the folder of a file's subfiles, not a file: give its master, {master}"
            )
        raise H5SubfileError(
            f"{path} is a folder, not an HDF5 file: give a file (the master NAME.h5 of a "
            "subfiled file, or any HDF5 file)"
        )

    root_only(comm, look)


# ---------------------------------------------------------------------------------------------
# Plan flags and output


def _plan_value(field: Any) -> Any:
    """An argparse type checking a plan flag when the command line is parsed: the parsed value
    (``--subfiles 2`` is the number 2), or the word given for "off" (``direct``), which
    overrides the environment variable."""

    def parse(text: str) -> Any:
        value = field.parse(text)
        return text.strip().lower() if value is None else value

    parse.__name__ = field.name
    return parse


def add_plan_flags(
    parser: argparse.ArgumentParser,
    only: tuple[str, ...] | None = None,
    skip: tuple[str, ...] = (),
    title: str = "plan (also settable by environment variables)",
) -> None:
    """One flag per plan field (``--subfiles``, ``--aggregators``, ``--fsync``...), and
    ``--plan auto``."""
    group = parser.add_argument_group(title)
    group.add_argument(
        "--plan",
        choices=["auto"],
        default=None,
        help="auto: the fields not given come from the tuning profile matching this file "
        "system, mount and job size (h5subfile tune, docs/TUNING.md)",
    )
    for field in PLAN_FIELDS:
        if (only is not None and field.name not in only) or field.name in skip:
            continue
        if field.switch:
            group.add_argument(
                field.flag,
                action="store_true",
                default=None,
                help=f"{field.help} (env {field.env})",
            )
        else:
            group.add_argument(
                field.flag,
                type=_plan_value(field),
                default=None,
                help=f"{field.help} (env {field.env})",
            )


def plan_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The plan flags given, as ``File`` arguments (``plan="auto"`` with ``--plan auto``)."""
    found = {
        field.name: getattr(args, field.name) for field in PLAN_FIELDS if hasattr(args, field.name)
    }
    if getattr(args, "plan", None):
        found["plan"] = args.plan
    return found


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def add_progress_flags(parser: argparse.ArgumentParser) -> None:
    """``--progress`` and ``--quiet``: progress lines on rank 0 (stderr)."""
    parser.add_argument(
        "--progress",
        action="store_true",
        help="progress lines on stderr even when it is not a terminal "
        f"(also {PROGRESS_VARIABLE}=1)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def progress_line(args: argparse.Namespace, rank: int, interval: float = LINE_INTERVAL) -> Progress:
    """This rank's progress line, shown as ``progress_wanted`` decides from ``--quiet`` and
    ``--progress`` (a context manager: use it in a ``with``)."""
    return Progress(progress_wanted(rank, quiet=args.quiet, asked=args.progress), interval=interval)


# ---------------------------------------------------------------------------------------------
# Profiling (docs/PROFILING.md, *Use*)


def trace_bound(text: str) -> str:
    """An argparse type: the trace's bound per rank, ``N``, ``N:first`` or ``N:last`` (what
    ``H5SUBFILE_PROFILE_TRACE`` takes), returned as that variable's value."""
    limit, _, keep = text.strip().partition(":")
    if not limit.isdigit() or int(limit) < 1 or keep not in ("", "first", "last"):
        raise ValueError(
            f"expected N, N:first or N:last (operations kept per rank, N >= 1), got {text!r}"
        )
    return f"{int(limit)}:{keep or 'first'}"


def add_profile_flags(parser: argparse.ArgumentParser, what: str = "every file it opens") -> None:
    """``--profile DIR`` and ``--profile-trace N[:last]``: the verb profiles ``what`` as
    ``File(..., profile=DIR)`` does (``profiling`` reads them)."""
    group = parser.add_argument_group("profiling (docs/PROFILING.md)")
    group.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help=f"profile {what}: Darshan-style counters per file and rank, written by rank 0 to "
        "DIR/NAME.write.json (.read.json) and .txt (read them again with 'h5subfile report')",
    )
    group.add_argument(
        "--profile-trace",
        metavar="N[:last]",
        type=trace_bound,
        default=None,
        help="with --profile: also keep a trace of the first N operations per rank (N:last: "
        "the last N); as H5SUBFILE_PROFILE_TRACE",
    )


@dataclass
class Profiling:
    """A verb's profiling: the folder (absolute; None: not profiled) and what it held before
    the verb ran, so that :meth:`written` names the profiles this run wrote."""

    folder: str | None
    before: dict[str, tuple[int, int, int]]
    since_ns: int

    def written(self) -> list[str]:
        """The profiles (``*.json``) written into the folder since the verb started, sorted."""
        if self.folder is None:
            return []
        now = _json_files(self.folder)
        return sorted(
            path
            for path, seen in now.items()
            if self.before.get(path) != seen or seen[0] >= self.since_ns
        )

    def announce(self, args: argparse.Namespace, rank: int, stream: Any = None) -> None:
        """Rank 0, unless ``--quiet``: where the profiles went (on ``stream``, default
        stdout); a note when the folder received none."""
        if self.folder is None or rank != 0 or getattr(args, "quiet", False):
            return
        out = sys.stdout if stream is None else stream
        written = self.written()
        if not written:
            print(f"Profile: nothing written to {self.folder}", file=out, flush=True)
            return
        names = ", ".join(os.path.basename(path) for path in written)
        print(
            f"Profile: {len(written)} written to {self.folder}: {names} (with .txt beside each; "
            f"redraw: h5subfile report {self.folder} --text)",
            file=out,
            flush=True,
        )


def profiling(args: argparse.Namespace, rank: int = 0) -> Profiling:
    """The verb's profiling from ``--profile`` and ``--profile-trace`` (the trace's bound is
    set in ``H5SUBFILE_PROFILE_TRACE``, which every profiled session of this process reads).
    ``--profile-trace`` without ``--profile`` is a usage error. Only rank 0, which announces
    the profiles, looks at what the folder holds."""
    from ..profiler.counters import TRACE_ENV

    folder = getattr(args, "profile", None)
    trace = getattr(args, "profile_trace", None)
    if trace and not folder:
        raise UsageError("--profile-trace needs --profile DIR (the folder the profiles go to)")
    if not folder:
        return Profiling(None, {}, 0)
    if trace:
        os.environ[TRACE_ENV] = trace
    folder = os.path.abspath(folder)
    return Profiling(folder, _json_files(folder) if rank == 0 else {}, time.time_ns())


def profile_flags(args: argparse.Namespace) -> list[str]:
    """The profiling flags again, for a verb that runs others (``demo``)."""
    flags = ["--profile", os.path.abspath(args.profile)] if args.profile else []
    return flags + (["--profile-trace", args.profile_trace] if args.profile_trace else [])


def _json_files(folder: str) -> dict[str, tuple[int, int, int]]:
    """The ``*.json`` files of ``folder`` with (modification time ns, size, inode)."""
    found = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    for name in names:
        if name.endswith(".json"):
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return found

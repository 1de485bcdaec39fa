"""``h5subfile report PROFILE [--out DIR]``: the report of a profile written by a profiled
session (``File(..., profile=DIR)``, ``H5SUBFILE_PROFILE=DIR``) or of a Darshan log read through
PyDarshan (``io/darshan_log.py``): a Markdown page with PNG pictures and findings;
``--text``: the profile in darshan-parser's layout (docs/PROFILING.md, *Report*)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import CorruptFileError, H5SubfileError, MissingFileError
from .common import UsageError


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "report",
        help="report on a profile of h5subfile's I/O (File(..., profile=DIR)) or a Darshan log: "
        "pictures and findings, or --text",
        description="Report on a profile written by a profiled session, or on a Darshan log "
        "(read through PyDarshan): a Markdown page "
        "(report.md) with PNG pictures (per-rank timeline, rate over time, access sizes, bytes "
        "and time per rank and per file, phases) and findings that name the plan field to "
        "change (needs matplotlib: the 'plots' extra); or, with --text, Darshan's POSIX counters "
        "per file and rank (rank -1: a file every rank opened), the DXT-style trace when one "
        "was kept, and h5subfile's phases, in darshan-parser's tab-separated layout.",
    )
    parser.add_argument(
        "profile",
        help="a profile's JSON file (DIR/NAME.write.json), a Darshan log (NAME.darshan; needs "
        "PyDarshan: pip install 'h5subfile[darshan]'), or a folder: every profile and log in it",
    )
    parser.add_argument(
        "--text", action="store_true", help="print darshan-parser's text layout instead"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="the folder of the page and pictures (with several profiles, one subfolder each); "
        "default: beside the profile, NAME.write.report/ for NAME.write.json",
    )
    parser.set_defaults(run=run)


def profile_files(path: str) -> list[str]:
    """The profile files ``path`` names: itself, or the ``*.json`` and ``*.darshan`` of a folder
    (sorted)."""
    if os.path.isdir(path):
        found = sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if name.endswith((".json", ".darshan"))
        )
        if not found:
            raise MissingFileError(f"{path} holds no profile (*.json) or Darshan log (*.darshan)")
        return found
    if not os.path.exists(path):
        raise MissingFileError(f"{path} does not exist")
    return [path]


def load(path: str) -> dict[str, Any]:
    """The profile document of one file: a Darshan log (by its name or header) read through
    PyDarshan, else h5subfile's JSON; CorruptFileError naming it if it is neither."""
    from ..io.darshan_log import is_darshan_path, read_log
    from ..io.regular import read_regular
    from ..profiler.reduction import from_json

    if is_darshan_path(path):
        return read_log(path)
    try:
        return from_json(read_regular(path, "profile").decode())
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"{path} is not a readable h5subfile profile: {exc}") from None


def render(path: str) -> str:
    """One profile file as text; CorruptFileError naming it if it is not a profile."""
    from ..profiler.reduction import format_text

    doc = load(path)
    try:
        return format_text(doc)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"{path} is not a readable h5subfile profile: {exc}") from None


def report_folder(path: str, out: str | None, several: bool) -> str:
    """Where the report of profile ``path`` goes: beside it (``run.h5.write.json`` ->
    ``run.h5.write.report``), or ``out``, or with several profiles a folder of that name in
    ``out``."""
    stem = os.path.splitext(path)[0] if path.endswith((".json", ".darshan")) else path
    if out is None:
        return stem + ".report"
    return os.path.join(out, os.path.basename(stem) + ".report") if several else out


def write_page(path: str, folder: str) -> str:
    """The report of one profile file in ``folder``; returns the page's path. CorruptFileError
    naming the file if it is not a profile; H5SubfileError naming the extra when matplotlib is
    missing."""
    from ..profiler.pictures import PAGE, pyplot, write_report

    try:
        pyplot()
    except ImportError as exc:
        raise H5SubfileError(str(exc)) from None
    doc = load(path)  # a Darshan log too: the same document, the same page
    try:
        write_report(doc, folder, os.path.basename(path))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptFileError(f"{path} is not a readable h5subfile profile: {exc}") from None
    return os.path.join(folder, PAGE)


def run(args: argparse.Namespace) -> int:
    """Rank 0 prints or writes; every rank returns its status or raises the same error."""
    from mpi4py import MPI

    from ..mpi.collective import root_only

    if args.text and args.out is not None:
        raise UsageError("--out is where the report's page goes; --text prints: give one")

    def on_root() -> int:
        paths = profile_files(args.profile)
        if args.text:
            texts = [render(path) for path in paths]
            print("\n".join(texts), end="", flush=True)
            return 0
        for path in paths:
            page = write_page(path, report_folder(path, args.out, len(paths) > 1))
            print(page, flush=True)
        return 0

    return root_only(MPI.COMM_WORLD, on_root)

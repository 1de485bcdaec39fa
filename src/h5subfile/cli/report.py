"""``h5subfile report PROFILE --text``: a profile written by a profiled session
(``File(..., profile=DIR)``, ``H5SUBFILE_PROFILE=DIR``), or a Darshan log read through PyDarshan
(``io/profile_darshan.py``), in darshan-parser's layout (docs/PROFILING.md). The pictures and
findings are still to come."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import CorruptFileError, MissingFileError


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "report",
        help="print a profile of h5subfile's I/O (File(..., profile=DIR))",
        description="Print a profile written by a profiled session: Darshan's POSIX counters per "
        "file and rank (rank -1: a file every rank opened), the DXT-style trace when one was "
        "kept, and h5subfile's phases, in darshan-parser's tab-separated layout.",
    )
    parser.add_argument(
        "profile",
        help="a profile's JSON file (DIR/NAME.write.json), a Darshan log (NAME.darshan; needs "
        "PyDarshan: pip install 'h5subfile[darshan]'), or a folder: every profile and log in it",
    )
    parser.add_argument(
        "--text", action="store_true", help="darshan-parser's text layout (the only one so far)"
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
    from ..io.profile_darshan import is_darshan_path, read_log
    from ..io.profile_report import from_json

    if is_darshan_path(path):
        return read_log(path)
    try:
        with open(path) as source:
            return from_json(source.read())
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"{path} is not a readable h5subfile profile: {exc}") from None


def render(path: str) -> str:
    """One profile file as text; CorruptFileError naming it if it is not a profile."""
    from ..io.profile_report import format_text

    doc = load(path)
    try:
        return format_text(doc)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"{path} is not a readable h5subfile profile: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Rank 0 prints; every rank returns its status or raises the same error."""
    from mpi4py import MPI

    from ..mpi.collective import root_only

    def on_root() -> int:
        texts = [render(path) for path in profile_files(args.profile)]
        print("\n".join(texts), end="", flush=True)
        return 0

    return root_only(MPI.COMM_WORLD, on_root)

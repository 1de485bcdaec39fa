"""The ``h5subfile`` command line: one module per verb.

Run MPI verbs under ``mpiexec -n P h5subfile VERB ...``. An error agreed on every rank is printed
once and every rank exits with status 1; an error on some ranks only is printed with its rank and
aborts the whole job (never a hang).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .._version import __version__
from . import bdcats, bench, demo, info, repack, verify, vpic

VERBS = (vpic, bdcats, bench, info, verify, repack, demo)


def _rank() -> int:
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi.COMM_WORLD.rank if mpi is not None else 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # every rank parses the same argv: speak once
        if _rank() == 0:
            self.print_usage(sys.stderr)
            print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="h5subfile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"h5subfile {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    for module in VERBS:
        module.add_parser(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the job must end, not hang
        mpi = sys.modules.get("mpi4py.MPI")
        if getattr(exc, "collective", False) or mpi is None or mpi.COMM_WORLD.size == 1:
            if _rank() == 0:
                print(f"h5subfile {args.verb}: error: {exc}", file=sys.stderr, flush=True)
            return 1
        print(
            f"[rank {_rank()}] h5subfile {args.verb}: {type(exc).__name__}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        mpi.COMM_WORLD.Abort(1)
        return 1

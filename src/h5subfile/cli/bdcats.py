"""``h5subfile bdcats FILE --pattern full|partial|strided|random``: the BD-CATS-IO read kernel."""

from __future__ import annotations

import argparse
from typing import Any

from ..units import parse_count
from .common import add_plan_flags, plan_arguments, print_json


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "bdcats",
        help="BD-CATS-IO read kernel",
        description="Read every dataset of every Timestep_<s> group, split over the ranks as in "
        "BD-CATS-IO (rank p reads [p*N/P, (p+1)*N/P)); run under mpiexec.",
    )
    parser.add_argument("file", help="file written by 'h5subfile vpic', h5bench or anything else")
    parser.add_argument(
        "--pattern",
        choices=("full", "partial", "strided", "random"),
        default="full",
        help="access pattern (default full)",
    )
    parser.add_argument(
        "--count",
        type=parse_count,
        default=parse_count("1Mi"),
        help="partial: particles read from the start of each share (default 1Mi)",
    )
    parser.add_argument("--start", type=parse_count, default=0, help="strided: first offset")
    parser.add_argument("--stride", type=parse_count, default=16, help="strided: stride")
    parser.add_argument("--block", type=parse_count, default=4, help="strided: block length")
    parser.add_argument(
        "--blocks",
        type=parse_count,
        default=0,
        help="strided: number of blocks (0: as many as fit)",
    )
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.1,
        help="random: fraction of each share read (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=1, help="random: seed")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every value read against what 'h5subfile vpic' wrote",
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    from ..plan import READ_FIELDS

    add_plan_flags(parser, only=READ_FIELDS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from ..kernels.bdcats import Pattern, run_bdcats

    if args.stride < 1 or args.block < 1 or not 0 < args.fraction <= 1:
        raise ValueError("--stride and --block must be >= 1 and --fraction in (0, 1]")
    comm = MPI.COMM_WORLD
    pattern = Pattern(
        args.pattern,
        args.count,
        args.start,
        args.stride,
        args.block,
        args.blocks,
        args.fraction,
        args.seed,
    )
    metrics = run_bdcats(
        args.file,
        pattern,
        comm,
        verify=args.verify,
        progress=not (args.quiet or args.json),
        **plan_arguments(args),
    )
    if comm.rank == 0:
        if args.json:
            data = metrics.as_dict()
            data.update(file=args.file, pattern=args.pattern, verified=args.verify)
            print_json(data)
        else:
            print(metrics.report())
            if args.verify:
                print("Verification: every value read matches what VPIC-IO wrote")
    return 0

"""``h5subfile bdcats FILE --pattern full|partial|strided|random``: the BD-CATS-IO read kernel."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..units import parse_duration
from .common import (
    UsageError,
    add_plan_flags,
    add_profile_flags,
    add_progress_flags,
    check_input_file,
    count_at_least,
    fraction,
    plan_arguments,
    print_json,
    profiling,
    progress_line,
)


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "bdcats",
        help="BD-CATS-IO read kernel",
        description="Read every dataset of every Timestep_<s> group, split over the ranks as in "
        "BD-CATS-IO (rank p of P reads [p*N/P, (p+1)*N/P), the last rank also the remainder); "
        "run under mpiexec.",
    )
    parser.add_argument("file", help="file written by 'h5subfile vpic', h5bench or anything else")
    parser.add_argument(
        "--pattern",
        choices=("full", "partial", "strided", "random"),
        default="full",
        help="what each rank reads of its share: all of it, the first --count particles, "
        "--blocks blocks of --block particles every --stride from --start, or --fraction of it "
        "at random",
    )
    parser.add_argument(
        "--count",
        type=count_at_least(1),
        default=None,
        help="partial: particles read from the start of each share, at most a share (default: "
        "half a rank's share of the shortest dataset; the count used is printed)",
    )
    parser.add_argument(
        "--start", type=count_at_least(0), default=0, help="strided: first offset in the share"
    )
    parser.add_argument(
        "--stride", type=count_at_least(1), default=16, help="strided: particles between blocks"
    )
    parser.add_argument(
        "--block", type=count_at_least(1), default=4, help="strided: particles per block"
    )
    parser.add_argument(
        "--blocks",
        type=count_at_least(0),
        default=0,
        help="strided: number of blocks (default 0: as many as fit)",
    )
    parser.add_argument(
        "--fraction",
        type=fraction,
        default=0.1,
        help="random: fraction of each share read, in (0, 1] (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=1, help="random: seed")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every value read against what 'h5subfile vpic' wrote",
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument(
        "--follow",
        action="store_true",
        help="read each step as soon as the writer commits it (the writer runs with "
        "--commit-every-step), until the writer closes the file; not with --profile",
    )
    parser.add_argument(
        "--timeout",
        type=parse_duration,
        default=60.0,
        help="--follow: seconds to wait for the next step before failing (0: for ever)",
    )
    add_progress_flags(parser)
    add_profile_flags(parser, "the file read")
    from ..plan import READ_FIELDS

    add_plan_flags(
        parser,
        only=READ_FIELDS,
        title="reading through aggregators (two-phase I/O; also settable by environment variables)",
    )
    for action in parser._actions:  # the plan's help speaks of writing
        if action.dest in READ_HELP:
            action.help = READ_HELP[action.dest]
    parser.set_defaults(run=run)


#: The read-side meaning of the plan flags bdcats takes.
READ_HELP = {
    "aggregators": "ranks per file that read for the others (two-phase I/O: each reads whole "
    "windows of the file and sends every rank its part); 'direct' (the default): every rank "
    "reads its own share (env H5SUBFILE_AGGREGATORS)",
    "buffer_size": "bytes an aggregator reads at a time (bounds its memory; default 16m; env "
    "H5SUBFILE_BUFFER_SIZE)",
    "transfer_size": "the largest single read a rank issues (default: 1 GiB; env "
    "H5SUBFILE_TRANSFER_SIZE)",
}


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from ..kernels.bdcats import follow_bdcats, run_bdcats

    comm = MPI.COMM_WORLD
    if args.follow:  # a file that may not exist yet, reopened at every step
        if args.profile or args.profile_trace is not None:
            raise UsageError("--follow reads a file reopened at every step: it cannot be profiled")
        profiled = None
        kernel: Any = follow_bdcats
        options: dict[str, Any] = {"timeout": args.timeout or None}
    else:
        check_input_file(comm, args.file)
        profiled = profiling(args, comm.rank)
        kernel, options = run_bdcats, {"profile": profiled.folder}
    with progress_line(args, comm.rank) as progress:
        progress.phase(
            "bdcats --follow:" if args.follow else "bdcats:",
            0,
            lambda done, n: f"dataset {done}/{n} read" if n else f"dataset {done} read",
            "dataset",
        )
        metrics = kernel(
            args.file,
            pattern_of(args),
            comm,
            verify=args.verify,
            progress=progress,
            **options,
            **plan_arguments(args),
        )
    _report(args, comm, metrics)
    if profiled is not None:
        profiled.announce(args, comm.rank, sys.stderr if args.json else None)
    return 0


def pattern_of(args: argparse.Namespace) -> Any:
    from ..kernels.bdcats import Pattern

    return Pattern(
        args.pattern,
        args.count,
        args.start,
        args.stride,
        args.block,
        args.blocks,
        args.fraction,
        args.seed,
    )


def _report(args: argparse.Namespace, comm: Any, metrics: Any) -> None:
    if comm.rank != 0:
        return
    if args.json:
        data = metrics.as_dict()
        data.update(file=args.file, pattern=args.pattern, verified=args.verify, follow=args.follow)
        print_json(data)
        return
    print(metrics.report())
    if args.verify:
        print("Verification: every value read matches what VPIC-IO wrote")

"""``h5subfile vpic FILE --particles N --steps S``: the VPIC-IO write kernel."""

from __future__ import annotations

import argparse
from typing import Any

from ..units import parse_count
from .common import add_plan_flags, plan_arguments, print_json


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "vpic",
        help="VPIC-IO write kernel (h5bench layout)",
        description="Write VPIC-IO particle data: Timestep_<s> groups with x y z px py pz "
        "(float32), id_1 (int32), id_2 (float32); run under mpiexec.",
    )
    parser.add_argument("file", help="master file to write (NAME.h5)")
    parser.add_argument(
        "--particles",
        type=parse_count,
        default=parse_count("8Mi"),
        help="particles per rank: 1024, 4M (10**6), 8Mi (2**20); default 8Mi",
    )
    parser.add_argument("--steps", type=int, default=1, help="time steps (default 1)")
    add_plan_flags(parser)
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from ..kernels.vpic import run_vpic

    comm = MPI.COMM_WORLD
    metrics = run_vpic(
        args.file,
        args.particles,
        args.steps,
        comm,
        progress=not (args.quiet or args.json),
        **plan_arguments(args),
    )
    if comm.rank == 0:
        if args.json:
            data = metrics.as_dict()
            data.update(
                file=args.file,
                particles_per_rank=args.particles,
                steps=args.steps,
                plan=plan_arguments(args),
            )
            print_json(data)
        else:
            print(metrics.report())
    return 0

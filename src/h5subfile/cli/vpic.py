"""``h5subfile vpic FILE --particles N --steps S [--compute-time 0.5s] [--api phdf5
[--collective]]``: the VPIC-IO write kernel, through h5subfile or, as the baseline, through
parallel HDF5."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..units import parse_count, parse_duration
from .common import (
    UsageError,
    add_plan_flags,
    add_profile_flags,
    add_progress_flags,
    count_at_least,
    int_at_least,
    plan_arguments,
    print_json,
    profiling,
    progress_line,
)


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
        type=count_at_least(0),
        default=parse_count("8Mi"),
        help="particles per rank: 1024, 4M (10**6), 8Mi (2**20); default 8Mi",
    )
    parser.add_argument("--steps", type=int_at_least(1), default=1, help="time steps (default 1)")
    parser.add_argument(
        "--compute-time",
        type=_duration,
        default=0.0,
        metavar="TIME",
        help="emulated computation after each step but the last, as h5bench's "
        "EMULATED_COMPUTE_TIME_PER_TIMESTEP: 0.5s, 500ms, 0.5 (seconds); left out of the "
        "observed time, counted in the observed time per step; with --async-writes the "
        "background writes overlap it (default 0)",
    )
    parser.add_argument(
        "--api",
        choices=("h5subfile", "phdf5"),
        default="h5subfile",
        help="h5subfile (default), or phdf5: parallel HDF5 through h5py's mpio driver, one "
        "shared file, h5bench's way (needs `make phdf5`: .venv-phdf5/bin/h5subfile)",
    )
    parser.add_argument(
        "--collective",
        action="store_true",
        help="with --api phdf5: collective H5Dwrite calls (default: independent)",
    )
    parser.add_argument(
        "--style",
        choices=("blocks", "blocks-each", "h5py-collective", "h5py-independent"),
        default="blocks",
        help="with --api h5subfile: blocks (default): each step's datasets created with every "
        "rank's block declared and written in one call (write_datasets); blocks-each: the "
        "same, then each dataset written in a call of its own (d.write); h5py-collective, "
        "h5py-independent: as a parallel h5py program writes them, created with their global "
        "shape alone, each rank's slab written with d[a:b] = x, inside 'with d.collective:' "
        "or independently",
    )
    add_plan_flags(parser)
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    add_progress_flags(parser)
    add_profile_flags(parser, "the file written (--api h5subfile)")
    parser.set_defaults(run=run)


def _duration(text: str) -> float:
    return parse_duration(text)


_duration.__name__ = "duration"


def _phdf5_problem(args: argparse.Namespace) -> str | None:
    """Why this run cannot go ahead (the same on every rank), or None; options that do not go
    together raise UsageError."""
    if args.api != "phdf5":
        if args.collective:
            raise UsageError("--collective applies to --api phdf5 only: add --api phdf5 or drop it")
        return None
    if args.style != "blocks":
        raise UsageError("--style applies to --api h5subfile only")
    flags = [f"--{name.replace('_', '-')}" for name, v in plan_arguments(args).items() if v]
    if flags:
        raise UsageError(f"{', '.join(flags)}: plan flags apply to --api h5subfile only")
    if args.profile:
        raise UsageError("--profile applies to --api h5subfile only (phdf5 is not profiled)")
    from ..bench.backends import PHDF5Backend

    return PHDF5Backend.unavailable()


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from ..errors import H5SubfileError
    from ..kernels.vpic import run_vpic, run_vpic_phdf5

    comm = MPI.COMM_WORLD
    problem = _phdf5_problem(args)  # usage errors raise; this is what the h5py build lacks
    if problem:
        error = H5SubfileError(problem)
        error.collective = True  # decided from the h5py build: the same on every rank
        raise error
    profiled = profiling(args, comm.rank)
    with progress_line(args, comm.rank) as progress:
        progress.phase("vpic:", args.steps, lambda done, n: f"step {done}/{n} written", "step")
        if args.api == "phdf5":
            metrics = run_vpic_phdf5(
                args.file,
                args.particles,
                args.steps,
                comm,
                progress,
                collective=args.collective,
                compute_time=args.compute_time,
            )
        else:
            metrics = run_vpic(
                args.file,
                args.particles,
                args.steps,
                comm,
                progress,
                profile=profiled.folder,
                compute_time=args.compute_time,
                style=args.style,
                **plan_arguments(args),
            )
    if comm.rank == 0:
        if args.json:
            data = metrics.as_dict()
            data.update(
                file=args.file,
                particles_per_rank=args.particles,
                steps=args.steps,
                compute_time=args.compute_time,
                api=args.api,
                collective=args.collective,
                style=args.style,
                plan=plan_arguments(args),
            )
            print_json(data)
        else:
            print(metrics.report())
    profiled.announce(args, comm.rank, sys.stderr if args.json else None)
    return 0

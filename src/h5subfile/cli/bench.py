"""``h5subfile bench``: the IOR-style benchmark (run under mpiexec), or ``--sweep FILE.toml``."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Any

from ..units import parse_size
from .common import add_plan_flags, plan_arguments

if TYPE_CHECKING:  # imported when a verb runs, not when the command line is parsed
    from mpi4py import MPI

    from ..bench.options import BenchOptions

#: Plan fields with bench flags of their own (-e is fsync; --alignment also serves phdf5).
OWN_FLAGS = ("subfiles", "ranks_per_subfile", "fsync", "alignment")


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "bench",
        help="IOR-style benchmark of posix, mpiio, hdf5, subfile and phdf5",
        description="IOR's options with IOR's meanings; sizes accept k, m, g (binary). Run under "
        "mpiexec. With --sweep FILE.toml, run a matrix of configurations (launching mpiexec "
        "itself) and write results JSON and PNG plots.",
        conflict_handler="resolve",
    )
    _add_ior_flags(parser)
    _add_api_flags(parser)
    _add_output_flags(parser)
    parser.set_defaults(run=run)


def _add_ior_flags(parser: argparse.ArgumentParser) -> None:
    """IOR's own options, with IOR's meanings."""
    parser.add_argument(
        "-a",
        dest="api",
        default="posix",
        help="API: posix, mpiio, hdf5 (h5subfile, one shared file), subfile "
        "(h5subfile with subfiling), phdf5 (parallel HDF5 via h5py)",
    )
    parser.add_argument(
        "-b",
        dest="block",
        type=parse_size,
        default=parse_size("1m"),
        help="block size per rank per segment (default 1m)",
    )
    parser.add_argument(
        "-t",
        dest="transfer",
        type=parse_size,
        default=parse_size("256k"),
        help="transfer size (default 256k)",
    )
    parser.add_argument("-s", dest="segments", type=int, default=1, help="segments (default 1)")
    parser.add_argument("-i", dest="iterations", type=int, default=1, help="iterations")
    parser.add_argument("-w", dest="write", action="store_true", help="write phase")
    parser.add_argument("-r", dest="read", action="store_true", help="read phase")
    parser.add_argument("-e", dest="fsync", action="store_true", help="fsync after the write phase")
    parser.add_argument(
        "-C",
        dest="reorder",
        action="store_true",
        help="readers read another rank's data (one node over; one rank over "
        "on a single node), defeating the writer's page cache",
    )
    parser.add_argument("-F", dest="file_per_proc", action="store_true", help="file per process")
    parser.add_argument(
        "-c", dest="collective", action="store_true", help="collective transfers (mpiio, phdf5)"
    )
    parser.add_argument("-o", dest="test_file", default="testFile", help="test file (or prefix)")
    parser.add_argument("-k", dest="keep", action="store_true", help="keep the test files")
    parser.add_argument("-W", dest="check_write", action="store_true", help="check written data")
    parser.add_argument("-R", dest="check_read", action="store_true", help="check read data")
    parser.add_argument(
        "--hint",
        action="append",
        metavar="KEY=VALUE",
        help="MPI-IO hint (repeatable); also IOR_HINT__MPI__<key>=<value>",
    )


def _add_api_flags(parser: argparse.ArgumentParser) -> None:
    """Options of particular APIs (subfiling, phdf5) and the h5subfile plan."""
    parser.add_argument("--subfiles", default=None, help="subfile API: subfiles, 'node', 'rank'")
    parser.add_argument(
        "--ranks-per-subfile",
        type=int,
        default=None,
        help="subfile API: ranks per subfile (subfiling factor)",
    )
    parser.add_argument(
        "--coll-metadata", action="store_true", help="phdf5: collective metadata reads and writes"
    )
    parser.add_argument(
        "--alignment",
        type=parse_size,
        default=0,
        help="phdf5, hdf5, subfile: H5Pset_alignment of every object (bytes)",
    )
    parser.add_argument("--no-fill", action="store_true", help="phdf5: never write fill values")
    add_plan_flags(parser, skip=OWN_FLAGS)


def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    """What to print or write, and sweeps."""
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="write results as JSON to PATH ('-': print JSON instead of text)",
    )
    parser.add_argument("--csv", metavar="PATH", help="write results as CSV to PATH ('-': print)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--sweep",
        metavar="FILE.toml",
        help="run the matrix described in FILE.toml (see docs/BENCHMARKS.md)",
    )
    parser.add_argument("--out", default=None, help="--sweep: folder for results and plots")


def options_from(args: argparse.Namespace) -> BenchOptions:
    from ..bench.options import BenchOptions, parse_hints
    from ..plan import parse_subfiles

    write, read = args.write, args.read
    if not (write or read):
        write = read = True  # as IOR: neither flag means both
    return BenchOptions(
        api=args.api,
        block=args.block,
        transfer=args.transfer,
        segments=args.segments,
        iterations=args.iterations,
        write=write,
        read=read,
        fsync=args.fsync,
        reorder=args.reorder,
        file_per_proc=args.file_per_proc,
        collective=args.collective,
        test_file=args.test_file,
        keep=args.keep,
        check_write=args.check_write,
        check_read=args.check_read,
        hints=parse_hints(args.hint),
        subfiles=parse_subfiles(args.subfiles),
        ranks_per_subfile=args.ranks_per_subfile,
        coll_metadata=args.coll_metadata,
        alignment=args.alignment,
        no_fill=args.no_fill,
        plan={k: v for k, v in plan_arguments(args).items() if k not in OWN_FLAGS},
    )


def _write(path: str | None, text: str) -> None:
    if path is None:
        return
    if path == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    with open(path, "w") as out:
        out.write(text)


def details_for(options: BenchOptions, comm: MPI.Comm, nodes: tuple[int, ...]) -> dict[str, Any]:
    """The API version and, for h5subfile, the plan and grouping used."""
    from ..bench.backends import BACKENDS
    from ..layout.grouping import plan_groups
    from ..plan import Plan

    details: dict[str, Any] = {"api_version": BACKENDS[options.api].version()}
    if options.api in ("hdf5", "subfile"):
        grouping = (
            {"subfiles": 1}
            if options.api == "hdf5"
            else {"subfiles": options.subfiles, "ranks_per_subfile": options.ranks_per_subfile}
        )
        storage = {k: v for k, v in options.plan.items() if v is not None}
        if options.alignment:
            storage["alignment"] = options.alignment
        plan = Plan.parse(fsync=options.fsync, **grouping, **storage)
        size = 1 if options.file_per_proc else comm.size
        details["plan"] = plan.to_dict()
        details["grouping"] = plan_groups(size, plan, nodes[:size]).describe()
    if options.api == "phdf5":
        details["phdf5"] = {
            "coll_metadata": options.coll_metadata,
            "alignment": options.alignment,
            "no_fill": options.no_fill,
        }
    return details


def run(args: argparse.Namespace) -> int:
    if args.sweep:
        from ..bench.sweep import run_sweep

        return run_sweep(args.sweep, args.out, quiet=args.quiet)
    from mpi4py import MPI

    from ..bench import report
    from ..bench.backends import BACKENDS
    from ..bench.driver import run as run_bench
    from ..mpi.collective import agree
    from ..mpi.nodes import node_of_ranks

    comm = MPI.COMM_WORLD
    options: BenchOptions | None = None
    error: ValueError | None = None
    try:
        options = options_from(args)
    except ValueError as exc:  # the same on every rank: agreed, printed once
        error = exc
    agree(comm, error)
    assert options is not None  # agree raised on every rank otherwise
    nodes = node_of_ranks(comm)
    tasks_per_node = nodes.count(nodes[0])
    reason = BACKENDS[options.api].unavailable()
    if reason:
        if comm.rank == 0:
            print(reason, flush=True)
            record = report.to_json(
                [], options, comm.size, tasks_per_node, {"api_version": ""}, unavailable=reason
            )
            if args.json and args.json != "-":
                _write(args.json, report.dump_json(record))
        return 0
    details = details_for(options, comm, nodes)
    results = run_bench(options, comm, progress=not args.quiet)
    if comm.rank == 0:
        record = report.to_json(results, options, comm.size, tasks_per_node, details)
        command = "h5subfile bench " + shlex.join(sys.argv[2:] if len(sys.argv) > 2 else [])
        if args.json != "-" and args.csv != "-":
            print(
                report.render(results, options, comm.size, tasks_per_node, details, command),
                flush=True,
            )
        _write(args.json, report.dump_json(record))
        _write(args.csv, report.to_csv(record))
    bad = sum(r.bad_transfers or 0 for r in results)
    return 1 if bad else 0

"""``h5subfile bench``: the IOR-style benchmark (run under mpiexec), or ``--sweep FILE.toml``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

from ..units import parse_size
from .common import (
    UsageError,
    add_plan_flags,
    add_profile_flags,
    add_progress_flags,
    plan_arguments,
    profiling,
    progress_line,
)

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
        "mpiexec. Several APIs (-a posix,mpiio,subfile or -a all) run in turns and end with a "
        "comparison table. With --compression the hdf5 and subfile APIs write each rank's whole "
        "block of a segment in one collective write (chunks are compressed whole; -t still sets "
        "the read size). With --sweep FILE.toml (without mpiexec), run a matrix of "
        "configurations, launching mpiexec itself, and write results JSON and PNG plots.",
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
        "(h5subfile with subfiling), phdf5 (parallel HDF5 via h5py); a comma list "
        "(posix,mpiio,subfile) or 'all' runs several in turns, repetition by repetition, and "
        "compares them (default posix)",
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
    parser.add_argument(
        "-i", dest="iterations", type=int, default=1, help="iterations (repetitions; default 1)"
    )
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
    parser.add_argument(
        "--fs-hints",
        action="store_true",
        help="start from the MPI-IO hints the tuner picks for the test file's file system "
        "(romio_cb/ds on a local disk, striping_factor/unit on Lustre; docs/TUNING.md); "
        "--hint and IOR_HINT__MPI__ values win",
    )


def _add_api_flags(parser: argparse.ArgumentParser) -> None:
    """Options of particular APIs (subfiling, phdf5) and the h5subfile plan."""
    parser.add_argument(
        "--subfiles",
        default=None,
        help="subfile API: number of subfiles, 'node', 'rank'",
    )
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
    add_progress_flags(parser)
    add_profile_flags(
        parser,
        "each timed phase (the last iteration's is kept): posix and mpiio as "
        "DIR/FILE.API.write.json, hdf5 and subfile as their File does; phdf5 is not profiled",
    )
    parser.add_argument(
        "--sweep",
        metavar="FILE.toml",
        help="run the matrix described in FILE.toml (see docs/BENCHMARKS.md)",
    )
    parser.add_argument("--out", default=None, help="--sweep: folder for results and plots")


def options_from(
    args: argparse.Namespace, api: str | None = None, several: bool = False
) -> BenchOptions:
    """The options of one API (``api``, default ``-a``). With ``several`` APIs in one run, each
    writes its own test file (``-o`` + ``.API``) and the subfile API's own flags (--subfiles,
    --ranks-per-subfile) apply to it alone."""
    from ..bench.options import BenchOptions
    from ..plan import parse_subfiles

    api = args.api if api is None else api
    write, read = args.write, args.read
    if not (write or read):
        write = read = True  # as IOR: neither flag means both
    own = not several or api == "subfile"
    return BenchOptions(
        api=api,
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
        test_file=f"{args.test_file}.{api}" if several else args.test_file,
        keep=args.keep,
        check_write=args.check_write,
        check_read=args.check_read,
        hints=_hints(args, api),
        subfiles=parse_subfiles(args.subfiles) if own else None,
        ranks_per_subfile=args.ranks_per_subfile if own else None,
        coll_metadata=args.coll_metadata,
        alignment=args.alignment,
        no_fill=args.no_fill,
        plan={k: v for k, v in plan_arguments(args).items() if k not in (*OWN_FLAGS, "plan")},
    )


def _hints(args: argparse.Namespace, api: str) -> tuple[tuple[str, str], ...]:
    """``--hint`` and IOR_HINT__MPI__ values, over the file system's with ``--fs-hints``."""
    from mpi4py import MPI

    from ..bench.options import filesystem_hints, parse_hints

    given = parse_hints(args.hint)
    if not args.fs_hints or api not in ("mpiio", "phdf5"):
        return given
    files = MPI.COMM_WORLD.size if args.file_per_proc else 1
    hints = filesystem_hints(args.test_file, files, args.block)
    hints.update(dict(given))
    return tuple(sorted(hints.items()))


def options_for_apis(args: argparse.Namespace) -> list[BenchOptions]:
    """One :class:`BenchOptions` per API of ``-a`` (a name, a comma list or ``all``)."""
    from ..bench.options import parse_apis

    apis = parse_apis(args.api)
    return [options_from(args, api, several=len(apis) > 1) for api in apis]


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
    details["access"] = "file-per-process" if options.file_per_proc else "single-shared-file"
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
        groups = plan_groups(size, plan, nodes[:size])
        details["grouping"] = groups.describe()
        details["access"] = access(options, groups.ngroups, size)
        if plan.compression is not None:
            details["transfers"] = (
                f"{plan.compression}-compressed chunked datasets: each rank writes its whole "
                "block of a segment in one collective write; reads are -t transfers"
            )
    if options.api == "phdf5":
        details["phdf5"] = {
            "coll_metadata": options.coll_metadata,
            "alignment": options.alignment,
            "no_fill": options.no_fill,
        }
    return details


def access(options: BenchOptions, subfiles: int, ranks: int) -> str:
    """IOR's ``access`` line for an h5subfile API: what the ranks share."""
    if options.file_per_proc:
        return "file-per-process"
    if subfiles == 1:
        return "single-shared-file" + (
            " (subfiling: 1 subfile)" if options.api == "subfile" else ""
        )
    if subfiles == ranks:
        return f"file-per-process (subfiling: {subfiles} subfiles, 1 rank each, plus a master file)"
    return f"subfiling: {subfiles} shared subfiles for {ranks} ranks, plus a master file"


def _auto_plans(runs: list[BenchOptions], comm: Any) -> tuple[list[BenchOptions], dict]:
    """Collective, ``--plan auto``: the subfile API's plan filled in from the tuning profile
    of its test file's folder (engine/autoplan.py), as ``File(..., plan="auto")`` would; the
    reason by API. The other APIs have no plan."""
    import dataclasses

    from ..engine import autoplan

    done, sources = [], {}
    for options in runs:
        if options.api != "subfile":
            done.append(options)
            continue
        given = dict(
            options.plan,
            subfiles=options.subfiles,
            ranks_per_subfile=options.ranks_per_subfile,
            alignment=options.alignment or None,
        )
        fields, sources[options.api] = autoplan.resolve(comm, options.test_file, "w", given)
        own = {"subfiles", "ranks_per_subfile", "alignment", "fsync"}
        done.append(
            dataclasses.replace(
                options,
                subfiles=fields.get("subfiles"),
                ranks_per_subfile=fields.get("ranks_per_subfile"),
                alignment=fields.get("alignment") or 0,
                plan={k: v for k, v in fields.items() if k not in own},
            )
        )
    return done, sources


def run(args: argparse.Namespace) -> int:
    if args.sweep:
        if args.profile:
            raise UsageError("--profile applies to one run, not to --sweep")
        return _sweep(args)
    from mpi4py import MPI

    from ..mpi.collective import agree
    from ..mpi.nodes import locate_nodes

    comm = MPI.COMM_WORLD
    runs: list[BenchOptions] = []
    error: UsageError | None = None
    try:
        runs = options_for_apis(args)
    except ValueError as exc:  # IOR options that cannot be right: the command line is wrong
        error = UsageError(str(exc))
    agree(comm, error)  # the same on every rank (all parse the same argv): printed once
    sources: dict[str, str] = {}
    if getattr(args, "plan", None) == "auto":
        runs, sources = _auto_plans(runs, comm)
    profiled = profiling(args, comm.rank)
    located = locate_nodes(comm, every_rank=True)  # for the grouping of every run
    nodes, per_node = located.of_rank, len(located.members)
    assert nodes is not None
    available, unavailable = _available(runs)
    notes = sys.stderr if "-" in (args.json, args.csv) else sys.stdout
    if comm.rank == 0:
        _say_unavailable(args, unavailable)
        if profiled.folder and any(o.api == "phdf5" for o in available) and not args.quiet:
            print("phdf5: not profiled (its I/O is inside parallel HDF5)", file=notes, flush=True)
    if not available:
        if comm.rank == 0:
            _write_unavailable(args, runs, unavailable, comm.size, per_node)
        return 0
    details = [details_for(options, comm, nodes) for options in available]
    for options, found in zip(available, details):
        if options.api in sources:
            found["plan_source"] = sources[options.api]
    from ..bench.driver import run_interleaved

    # Benchmarks run for hours: without a terminal, a line every 10 s inside a long phase.
    with progress_line(args, comm.rank, interval=10.0) as progress:
        results = run_interleaved(available, comm, progress, profiled.folder)
    if comm.rank == 0:
        several = len(runs) > 1  # as asked: the output's form does not depend on what ran
        _output(
            args,
            available,
            results,
            details,
            unavailable,
            several,
            comm.size,
            per_node,
        )
    profiled.announce(args, comm.rank, notes)
    bad = sum(r.bad_transfers or 0 for rows in results for r in rows)
    return 1 if bad else 0


def _available(runs: list[BenchOptions]) -> tuple[list[BenchOptions], dict[str, str]]:
    """The APIs that can run here, and why the others cannot."""
    from ..bench.backends import BACKENDS

    unavailable = {o.api: BACKENDS[o.api].unavailable() or "" for o in runs}
    unavailable = {api: reason for api, reason in unavailable.items() if reason}
    return [o for o in runs if o.api not in unavailable], unavailable


def _say_unavailable(args: argparse.Namespace, unavailable: dict[str, str]) -> None:
    """Rank 0: why an API is left out (on stderr when stdout carries JSON or CSV)."""
    stream = sys.stderr if "-" in (args.json, args.csv) else sys.stdout
    for reason in unavailable.values():
        print(reason, file=stream, flush=True)


def _write_unavailable(
    args: argparse.Namespace,
    runs: list[BenchOptions],
    unavailable: dict[str, str],
    ranks: int,
    tasks_per_node: int,
) -> None:
    """Rank 0, nothing could run: a JSON record saying why (for sweeps)."""
    from ..bench import report

    reason = "; ".join(unavailable.values())
    record = report.to_json([], runs[0], ranks, tasks_per_node, {"api_version": ""}, reason)
    if args.json and args.json != "-":
        _write(args.json, report.dump_json(record))


def _output(
    args: argparse.Namespace,
    runs: list[BenchOptions],
    results: list[list[Any]],
    details: list[dict[str, Any]],
    unavailable: dict[str, str],
    several: bool,
    ranks: int,
    tasks_per_node: int,
) -> None:
    """Rank 0: IOR's text per API (and, when ``several`` were asked for, their comparison),
    JSON and CSV."""
    from ..bench import compare, report

    command = "h5subfile bench " + shlex.join(sys.argv[2:] if len(sys.argv) > 2 else [])
    records = [
        report.to_json(rows, options, ranks, tasks_per_node, info)
        for rows, options, info in zip(results, runs, details)
    ]
    texts = [
        report.render(rows, options, ranks, tasks_per_node, info, command)
        for rows, options, info in zip(results, runs, details)
    ]
    rows = compare.compare([(o.api, r) for o, r in zip(runs, results)])
    if several:
        texts.append(compare.render(rows, runs[0].iterations))
    if args.json != "-" and args.csv != "-":
        print(("\n\n" + "=" * 80 + "\n\n").join(texts), flush=True)
    if not several:
        record = records[0]
    else:
        record = {"apis": [o.api for o in runs], "runs": records, "comparison": rows}
        record["unavailable"] = unavailable
    _write(args.json, report.dump_json(record))
    _write(args.csv, report.to_csv(records))


def launched_ranks(env: dict[str, str] | None = None) -> tuple[int, int]:
    """(rank, size) this process was started with by an MPI launcher, (0, 1) without one."""
    env = dict(os.environ) if env is None else env
    for rank, size in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if env.get(size, "").isdigit():
            return int(env.get(rank, "0") or 0), int(env[size])
    return 0, 1


def _sweep(args: argparse.Namespace) -> int:
    from ..bench.sweep import run_sweep

    rank, size = launched_ranks()
    if size > 1:  # each rank would run the whole sweep, each launching its own jobs
        if rank == 0:
            print(
                f"h5subfile bench: error: --sweep launches mpiexec itself, but runs here under "
                f"an MPI launcher with {size} ranks: run `h5subfile bench --sweep "
                f"{args.sweep}` without mpiexec",
                file=sys.stderr,
                flush=True,
            )
        return 1
    from ..progress import progress_wanted

    show = progress_wanted(0, quiet=args.quiet, asked=args.progress)
    return run_sweep(args.sweep, args.out, progress=show)

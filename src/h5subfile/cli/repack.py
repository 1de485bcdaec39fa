"""``h5subfile repack IN OUT [plan flags]``: copy a file into a new one written with a chosen
plan, in parallel under mpiexec: a subfiled file into one conventional HDF5 file
(``--subfiles 1``), any HDF5 file into a subfiled one (``--subfiles M``), with or without
compression (``--compression zstd``). IN is verified first; a damaged IN is refused with the
report ``h5subfile verify IN`` prints (exit status 1), unless ``--no-verify``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import DamagedFileError
from ..progress import Progress, percent
from ..units import format_bytes, parse_size
from . import verify
from .common import (
    add_plan_flags,
    add_progress_flags,
    check_input_file,
    plan_arguments,
    print_json,
    progress_line,
)


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "repack",
        help="copy a file into a new one with another plan (subfiled <-> conventional)",
        description="Copy every group, dataset (bit for bit) and attribute of IN into a new file "
        "OUT written with the plan given by the flags below: --subfiles 1 writes one "
        "conventional HDF5 file (contiguous datasets, no virtual datasets: parallel-HDF5 "
        "applications and every HDF5 tool read it), --subfiles M a subfiled file, "
        "--compression chunked and compressed datasets. IN may be any HDF5 file (h5subfile's, "
        "h5py's, h5bench's). Run under mpiexec: every dataset is split over the ranks. IN is "
        "verified first, as 'h5subfile verify IN' verifies it: a damaged IN is refused with "
        "verify's report and exit status 1. OUT appears only once complete; on failure nothing "
        "is left.",
    )
    parser.add_argument("source", metavar="IN", help="file to read (h5subfile or plain HDF5)")
    parser.add_argument("target", metavar="OUT", help="file to write (must not exist)")
    parser.add_argument(
        "--force", action="store_true", help="replace OUT (and its subfile folder) if it exists"
    )
    parser.add_argument(
        "--skip-links",
        action="store_true",
        help="leave soft, external and further hard links out (each object copied under its "
        "first name only, the links listed); without it they are made again as they were",
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="copy what can be read without checking IN's checksums and subfiles first (OUT's "
        "record says it was copied without verifying)",
    )
    parser.add_argument(
        "--slab-size",
        type=parse_size,
        default="256m",
        help="bytes each rank reads and writes at a time (default 256m; with compression each "
        "rank writes its whole share of a dataset at once)",
    )
    add_plan_flags(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    add_progress_flags(parser)
    parser.set_defaults(run=run)


def _describe(done: int, total: int) -> str:
    """Where the copy is, in bytes (every rank copies its share of each dataset alike)."""
    return f"{percent(done, total)} ({format_bytes(done)} of {format_bytes(total)})"


def render(summary: dict[str, Any]) -> str:
    kind = (
        f"{summary['subfiles']} subfiles" if summary["subfiles"] else "one conventional HDF5 file"
    )
    compression = summary["plan"].get("compression")
    checked = summary["verification"]
    said = (
        "copied without verifying (--no-verify): its checksums were not checked"
        if checked is None
        else f"verified first: {verify.checked(checked)}, {checked['seconds']:.2f} s"
    )
    lines = [
        f"{summary['source']} -> {summary['target']} ({kind}"
        f"{', ' + compression if compression else ''}): {summary['groups']} group(s), "
        f"{summary['datasets']} dataset(s), {summary['attributes']} attribute(s), "
        f"{format_bytes(summary['bytes'])} in {summary['seconds']:.2f} s "
        f"({summary['mib_per_second']:.1f} MiB/s) with {summary['ranks']} rank(s); {said}"
    ]
    if checked is not None and checked["no_checksums"]:
        lines.append(verify.no_checksums(checked["no_checksums"]))
    return "\n".join(lines)


def _repack(args: argparse.Namespace, comm: Any, progress: Progress) -> Any:
    """Collective: the repack, its phases (verifying, copying) shown by ``progress``."""
    from ..repack import repack

    checking = not args.no_verify
    copying: list[bool] = []
    progress.phase("repack: verifying IN:" if checking else "repack:", 0, verify.describe_share)

    def report(done: int, total: int, datasets: int, count: int) -> None:
        if not copying:  # the copy starts
            copying.append(True)
            progress.phase("repack:", 0, _describe)
        progress.step(done, total, last=datasets == count, note=f"{datasets}/{count} datasets")

    return repack(
        args.source,
        args.target,
        comm,
        force=args.force,
        slab_size=args.slab_size,
        progress=report,
        skip_links=args.skip_links,
        verify=checking,
        verify_progress=progress if checking else None,
        **plan_arguments(args),
    )


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    check_input_file(comm, args.source)
    try:
        with progress_line(args, comm.rank) as progress:
            summary = _repack(args, comm, progress)
    except DamagedFileError as exc:  # verify's report, as verify prints it; then the error
        if comm.rank == 0 and exc.report:
            if args.json:
                print_json(exc.report)
            else:
                print(verify.render(exc.report), flush=True)
        raise
    if comm.rank == 0:
        data = summary.as_dict()
        if summary.skipped_links and not args.quiet:
            shown = "; ".join(summary.skipped_links[:10])
            more = "; ..." if len(summary.skipped_links) > 10 else ""
            print(f"repack: links not copied: {shown}{more}", file=sys.stderr, flush=True)
        if args.json:
            print_json(data)
        else:
            print(render(data), flush=True)
    return 0

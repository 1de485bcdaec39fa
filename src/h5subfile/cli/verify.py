"""``h5subfile verify FILE``: check every stored byte against its checksum, the identity and
size of every subfile, and report what the open-time scan found. Parallel under mpiexec (any
rank count; the pieces are split over the ranks). Exit status 0 clean, 1 damaged."""

from __future__ import annotations

import argparse
from typing import Any

from ..progress import percent
from ..units import format_bytes
from .common import add_progress_flags, check_input_file, print_json, progress_line


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "verify",
        help="check every byte of a file against its checksums",
        description="Check every stored piece against the checksum its writer recorded, every "
        "subfile's identity and size, and list what the open-time scan found; each damaged "
        "piece is listed with its subfile, byte offset and length. Run under mpiexec to split "
        "the work over the ranks. Exit status 0: clean; 1: damaged.",
    )
    parser.add_argument("file", help="the file to check (the master NAME.h5 of a subfiled file)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_progress_flags(parser)
    parser.set_defaults(run=run)


def describe_share(done: int, total: int) -> str:
    """Where rank 0 is in its share of the pieces (the ranks check theirs side by side)."""
    share = f"{format_bytes(done)} of {format_bytes(total)}"
    return f"{percent(done, total)} of rank 0's share ({share})"


def checked(report: dict[str, Any]) -> str:
    """What a report checked: ``32 checksummed piece(s), 384 MiB checked, 2 subfile
    identities`` (also said by ``repack``, which verifies its input first)."""
    return (
        f"{report['pieces']} checksummed piece(s), {format_bytes(report['checked_bytes'])} "
        f"checked, {report['subfiles']} subfile identit{'y' if report['subfiles'] == 1 else 'ies'}"
    )


def no_checksums(names: list[str]) -> str:
    """The line naming the datasets a report could not check (also printed by ``repack``)."""
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return (
        f"no checksums: {len(names)} dataset(s) written with checksums=False, before "
        f"checksums existed or by another tool ({shown}); their bytes are unchecked"
    )


def through_hdf5(names: list[str]) -> str:
    """The line naming the datasets another program added, which only HDF5's checks cover."""
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return (
        f"read through HDF5: {len(names)} dataset(s) not written by h5subfile ({shown}); "
        "every value was read, so HDF5's own checks (a filter's, Fletcher32's) ran, but "
        "h5subfile holds no checksums of them"
    )


def render(report: dict[str, Any]) -> str:
    lines = [
        f"{report['file']}: {checked(report)}, {report['ranks']} rank(s), {report['seconds']:.2f} s"
    ]
    if report["no_checksums"]:
        lines.append(no_checksums(report["no_checksums"]))
    if report.get("read_through_hdf5"):
        lines.append(through_hdf5(report["read_through_hdf5"]))
    for bad in report["bad"]:
        if "subfile" in bad:
            lines.append(f"BAD subfile {bad['subfile']}: {bad['message']}")
            continue
        if "start" not in bad:  # a dataset read through HDF5
            lines.append(f"BAD {bad['dataset']}: {bad['error']}: {bad['message']}")
            continue
        where = f"{bad['file']}"
        if bad.get("offset") is not None:
            where += f" at byte offset {bad['offset']}, length {bad['length']}"
        why = "checksum differs" if bad["error"] == "ChecksumError" else bad["message"]
        lines.append(
            f"BAD {bad['dataset']} piece start {bad['start']} shape {bad['shape']} in {where}: "
            f"{bad['error']}: {why}"
        )
    if report["problems"]:
        lines.append("problems found when opening:")
        lines.extend(f"  - {p}" for p in report["problems"])
    lines.append("clean" if report["clean"] else "DAMAGED")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import warnings

    from mpi4py import MPI

    from ..files import File

    comm = MPI.COMM_WORLD
    check_input_file(comm, args.file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # problems are listed in the report
        f = File(args.file, "r", comm=comm)
    with f, progress_line(args, comm.rank) as progress:
        progress.phase("verify:", 0, describe_share)
        report = f.verify(progress)
    if comm.rank == 0:
        if args.json:
            print_json(report)
        else:
            print(render(report), flush=True)
    return 0 if report["clean"] else 1

"""``h5subfile info FILE``: datasets, subfiles, blocks, plans, sizes and problems of a file."""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..errors import UnsafePathError
from ..units import format_bytes

if TYPE_CHECKING:  # imported when the verb runs, not when the command line is parsed
    from ..layout.names import SourcePaths
from .common import check_input_file, print_json


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "info",
        help="describe a file (h5subfile or plain HDF5)",
        description="Datasets with shape and dtype, subfiles and the blocks they hold, the plan of "
        "each write session, sizes, and anything wrong (missing subfiles, unfinished sessions).",
    )
    parser.add_argument(
        "file",
        help="the file to describe: the master NAME.h5 of a subfiled file, a plain HDF5 file, "
        "or one subfile (which names its master)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON description")
    parser.set_defaults(run=run)


def describe(path: str) -> dict[str, Any]:
    """Describe the file (run on one rank)."""
    from mpi4py import MPI

    from ..files import Dataset, Datatype, File
    from ..layout.dtypes import dtype_text
    from ..layout.names import SourcePaths
    from ..repack import described_links, links_of

    with File(path, "r", comm=MPI.COMM_SELF) as f:
        datasets = []
        files: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"blocks": 0, "ranks": set(), "datasets": []}
        )

        types: list[str] = []

        def visit(name: str) -> None:
            obj = f[name]
            if isinstance(obj, Datatype):
                types.append(f"{obj.name} {dtype_text(obj.dtype)}")
            if not isinstance(obj, Dataset):  # groups: their members are visited too
                return
            entry: dict[str, Any] = {
                "name": obj.name,
                "shape": list(obj.shape),
                "dtype": str(obj.dtype),
                "nbytes": obj.nbytes,
                "storage": obj.storage,
                "problem": obj.problem,
            }
            if obj.layout is not None and obj.layout.learned and obj.problem is None:
                written = sum(p.elements for e in obj.layout.extents for p in e.pieces)
                entry["written_fraction"] = written / obj.size if obj.size else 1.0
                entry["storage"] += f", {100 * entry['written_fraction']:.4g}% of elements written"
            datasets.append(entry)
            if obj.layout is not None:
                learned = obj.layout.learned
                for extent in obj.layout.extents:
                    stats = files[extent.file or os.path.basename(f.filename)]
                    stats["blocks"] += len(extent.pieces) if learned else 1
                    stats["ranks"].update(
                        (p.rank for p in extent.pieces if p.rank >= 0) if learned else extent.ranks
                    )
                    if obj.name not in stats["datasets"]:
                        stats["datasets"].append(obj.name)

        f.visit(visit)
        kind, master = _kind(f)
        paths = SourcePaths(f.filename)
        subfiles = []
        for name, stats in sorted(files.items()) if kind == "master" else ():
            size, state = _file_state(paths, name)
            subfiles.append(
                {
                    "file": name,
                    "bytes": size,
                    "disk_bytes": _disk_bytes(paths, name) if size is not None else None,
                    "state": state,
                    "blocks": stats["blocks"],
                    "ranks": sorted(stats["ranks"]),
                    "datasets": stats["datasets"],
                }
            )
        return {
            "file": f.filename,
            "kind": kind,
            "master": master,
            "bytes": os.path.getsize(f.filename),
            "master_bytes": os.path.getsize(f.filename) if kind == "master" else None,
            "sessions": f.sessions,
            "datasets": datasets,
            "links": described_links(links_of(f)),
            "types": types,
            "files": subfiles,
            "data_bytes": sum(d["nbytes"] for d in datasets),
            "problems": _problems(f.problems, datasets, subfiles),
        }


def _kind(f: Any) -> tuple[str, str | None]:
    """What the file is: ("master", None) for a file h5subfile wrote, ("subfile", its master's
    path) for one of its subfiles, ("plain", None) for any other HDF5 file."""
    from ..layout.integrity import IDENTITY_DATASET

    if f.sessions:
        return "master", None
    if IDENTITY_DATASET not in f:
        return "plain", None
    folder = os.path.dirname(os.path.abspath(f.filename))
    stem = folder[: -len(".subfiles")] if folder.endswith(".subfiles") else folder
    master = next((m for m in (stem + ".h5", stem) if os.path.isfile(m)), stem + ".h5")
    return "subfile", master


def _problems(
    problems: list[str], datasets: list[dict[str, Any]], files: list[dict[str, Any]]
) -> list[str]:
    """The file's problems, a file that cannot be read said once (naming the datasets it
    holds) rather than once per dataset."""
    bad = [entry for entry in files if entry["state"].startswith(("MISSING", "UNREADABLE"))]
    explained = {
        d["problem"]
        for d in datasets
        if d["problem"] and any(d["name"] in entry["datasets"] for entry in bad)
    }
    lines = []
    for entry in bad:
        names = entry["datasets"]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        state, _, reason = entry["state"].partition(" (")
        what = "is missing" if state == "MISSING" else f"cannot be read ({reason.rstrip(')')})"
        lines.append(
            f"subfile {entry['file']} {what}: the data of {len(names)} dataset(s) it holds "
            f"cannot be read ({shown}); a VDS reader would silently return fill values"
        )
    lines.extend(p for p in problems if p not in explained)
    return lines


def _file_state(paths: SourcePaths, name: str) -> tuple[int | None, str]:
    """(size, "ok") of a recorded file, or (None, why not): a path leaving the master's
    folder is not looked at; a missing, unreadable or irregular file is said to be."""
    from ..io.posix import probe_file

    try:
        full = paths.resolve(name)
    except UnsafePathError as exc:
        if exc.loop:
            return None, "UNREADABLE (a loop of symbolic links: ELOOP)"
        return None, "OUTSIDE the master's folder (not examined)"
    size, error = probe_file(full)
    if error is None:
        return size, "ok"
    if isinstance(error, FileNotFoundError):
        return None, "MISSING"
    return None, f"UNREADABLE ({error.strerror or error})"


def _disk_bytes(paths: SourcePaths, name: str) -> int | None:
    """What a recorded file takes on disk (a subfile of datasets whose layout is learned is
    sparse: its size is its sources', only what its group wrote takes room)."""
    try:
        return os.stat(paths.resolve(name)).st_blocks * 512
    except (OSError, UnsafePathError):
        return None


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks[:8])) + (",..." if len(ranks) > 8 else "")


def _set_fields(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan fields that were set (defaults left out)."""
    from ..plan import set_fields

    return set_fields(plan)


def _repacked(fact: dict[str, Any]) -> str:
    """Where a session written by ``repack`` took its data from (its ``extra["repack"]``)."""
    said = f"repacked from {fact.get('source')}, "
    if fact.get("verified") is not True:
        return said + "copied without verifying (its checksums were not checked)"
    unchecked = fact.get("no_checksums")
    if isinstance(unchecked, int) and unchecked > 0:
        return said + f"verified first ({unchecked} dataset(s) had no checksums to check)"
    return said + "verified first"


#: How each way of a write-behind session's calls is said (``extra["write_behind"]``).
WAY_NAMES = {
    "direct": "written directly",
    "copy": "behind from a copy",
    "zero_copy": "behind from the caller's arrays",
}


def _ways(ways: dict[str, Any]) -> str:
    """How a write-behind session's calls went (its ``extra["write_behind"]``)."""
    said = [
        f"{counts['calls']} call(s) {WAY_NAMES.get(way, way)} ({format_bytes(counts['bytes'])})"
        for way, counts in ways.items()
        if isinstance(counts, dict) and "calls" in counts and "bytes" in counts
    ]
    return "write-behind: " + ", ".join(said)


def render(info: dict[str, Any]) -> str:
    label = {
        "master": "master",
        "plain": "plain HDF5 file (not written by h5subfile)",
        "subfile": f"subfile of {info['master']}",
    }[info["kind"]]
    lines = [
        f"{info['file']}: {label}, {format_bytes(info['bytes'])}, "
        f"{len(info['datasets'])} dataset(s), {format_bytes(info['data_bytes'])} of data"
    ]
    if info["kind"] == "subfile":
        lines.append(
            "one part of a subfiled file, written by h5subfile; describe the whole file with: "
            f"h5subfile info {info['master']}"
        )
    for s in info["sessions"]:
        state = f"closed {s['closed']}" if s["closed"] else "NOT FINISHED"
        lines.append(
            f"session {s['id']}: mode {s['mode']!r}, {s['ranks']} rank(s), {s['grouping']}, "
            f"plan {_set_fields(s['plan'])}, h5subfile {s['version']}, started {s['started']}, {state}"
        )
        extra = s.get("extra") or {}
        if extra.get("plan_source"):
            lines.append(f"  plan=auto: {extra['plan_source']}")
        if isinstance(extra.get("repack"), dict):
            lines.append(f"  {_repacked(extra['repack'])}")
        if isinstance(extra.get("write_behind"), dict):
            lines.append(f"  {_ways(extra['write_behind'])}")
        if extra.get("steps"):
            lines.append(f"  steps completed: {', '.join(p.lstrip('/') for p in extra['steps'])}")
    lines.append("datasets:")
    width = max((len(d["name"]) for d in info["datasets"]), default=4)
    for d in info["datasets"]:
        shape = "(" + ", ".join(map(str, d["shape"])) + ("," if len(d["shape"]) == 1 else "") + ")"
        lines.append(
            f"  {d['name']:<{width}}  {shape:<16} {d['dtype']:<10} "
            f"{format_bytes(d['nbytes']):>12}  {d['storage']}"
        )
    if info.get("links"):
        lines.append("links:")
        lines.extend(f"  {link}" for link in info["links"])
    if info.get("types"):
        lines.append("named types:")
        lines.extend(f"  {named}" for named in info["types"])
    if info["files"]:
        lines.append("files holding data:")
        for s in info["files"]:
            size = s["state"] if s["bytes"] is None else format_bytes(s["bytes"])
            if s.get("disk_bytes") is not None and s["disk_bytes"] < 0.9 * s["bytes"]:
                size += f" ({format_bytes(s['disk_bytes'])} on disk: sparse)"
            lines.append(
                f"  {s['file']}  {size}, {s['blocks']} block(s) from rank(s) {_ranks(s['ranks'])}"
            )
    if info["problems"]:
        lines.append("problems:")
        lines.extend(f"  - {p}" for p in info["problems"])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Rank 0 describes the file; every rank returns its status, or raises its error
    (agreed: printed once)."""
    import warnings

    from mpi4py import MPI

    from ..mpi.collective import root_only

    check_input_file(MPI.COMM_WORLD, args.file)

    def describe_on_root() -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # problems are listed in the output
            info = describe(args.file)
        if args.json:
            print_json(info)
        else:
            print(render(info), flush=True)
        return 1 if info["problems"] else 0

    return root_only(MPI.COMM_WORLD, describe_on_root)

"""IOR-style text output, JSON and CSV for a benchmark run.

Each CSV column comes from one named source: the API's name in ``api``, its version in
``api_version``, the options, the machine and every library's version in columns of their own.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import platform
import socket
import sys
from typing import Any

from .._version import __version__
from .driver import PhaseResult, summarize
from .options import BenchOptions

TABLE_HEADER = (
    "access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   "
    "close(s)   total(s)   iter"
)
TABLE_RULE = (
    "------    ---------  ----       ----------  ---------- ---------  --------   --------   "
    "--------   --------   ----"
)
SUMMARY_HEADER = (
    "Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     "
    "StdDev    Mean(s) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    "
    "xsize aggs(MiB)   API RefNum"
)


def machine() -> dict[str, Any]:
    """Where the numbers were measured."""
    return {
        "hostname": socket.gethostname(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def versions(api_version: str) -> dict[str, str]:
    import h5py
    import mpi4py
    import numpy
    from mpi4py import MPI

    return {
        "h5subfile": __version__,
        "api": api_version,
        "numpy": numpy.__version__,
        "h5py": h5py.version.version,
        "hdf5": h5py.version.hdf5_version,
        "h5py_mpi": str(bool(h5py.get_config().mpi)),
        "mpi4py": mpi4py.__version__,
        "mpi": MPI.Get_library_version().splitlines()[0].strip(),
    }


def _kib(n: int) -> str:
    return f"{n / 1024:.2f}"


def options_block(
    options: BenchOptions, ranks: int, tasks_per_node: int, details: dict[str, Any], command: str
) -> str:
    aggregate = ranks * options.segments * options.block
    lines = [
        f"IOR-style benchmark: h5subfile {__version__}",
        f"Began               : {machine()['date']}",
        f"Command line        : {command}",
        f"Machine             : {platform.system()} {socket.gethostname()} ({os.cpu_count()} cores)",
        "",
        "Options: ",
        f"api                 : {options.api}",
        f"apiVersion          : {details.get('api_version', '')}",
        f"test filename       : {options.test_file}",
        f"access              : {details.get('access') or _access(options)}",
        f"type                : {_type(options, details)}",
        f"segments            : {options.segments}",
        "ordering in a file  : sequential",
        f"ordering inter file : {'constant task offset' if options.reorder else 'no tasks offsets'}",
        f"nodes               : {max(1, ranks // max(tasks_per_node, 1))}",
        f"tasks               : {ranks}",
        f"clients per node    : {tasks_per_node}",
        f"repetitions         : {options.iterations}",
        f"xfersize            : {_size(options.transfer)}",
        f"blocksize           : {_size(options.block)}",
        f"aggregate filesize  : {_size(aggregate)}",
        f"fsync               : {'yes' if options.fsync else 'no'}",
    ]
    if options.hints:
        lines.append("hints               : " + ", ".join(f"{k}={v}" for k, v in options.hints))
    for key, value in details.items():
        if key not in ("api_version", "access") and value not in (None, {}, ""):
            lines.append(f"{key:<20}: {value}")
    return "\n".join(lines)


def _type(options: BenchOptions, details: dict[str, Any]) -> str:
    kind = "collective" if options.collective else "independent"
    if "transfers" in details:  # compressed: whole blocks, written collectively
        return f"collective whole-block writes, {kind} reads"
    return kind


def _access(options: BenchOptions) -> str:
    return "file-per-process" if options.file_per_proc else "single-shared-file"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


def table_row(result: PhaseResult, options: BenchOptions) -> str:
    return (
        f"{result.access:<10}{result.bw_mib:<11.2f}{result.iops:<11.2f}"
        f"{result.latency_s:<12.6f}{_kib(options.block):<11}{_kib(options.transfer):<11}"
        f"{result.open_s:<11.6f}{result.xfer_s:<11.6f}{result.close_s:<11.6f}"
        f"{result.total_s:<11.6f}{result.iteration:<4}"
    )


def summary_lines(
    results: list[PhaseResult], options: BenchOptions, ranks: int, tasks_per_node: int
) -> list[str]:
    lines = ["Summary of all tests:", SUMMARY_HEADER]
    aggregate_mib = ranks * options.segments * options.block / 2**20
    for access, s in summarize(results).items():
        lines.append(
            f"{access:<9}{s['max_mib']:>11.2f}{s['min_mib']:>11.2f}{s['mean_mib']:>11.2f}"
            f"{s['stddev_mib']:>11.2f}{s['max_ops']:>11.2f}{s['min_ops']:>11.2f}"
            f"{s['mean_ops']:>11.2f}{s['stddev_ops']:>11.2f}{s['mean_s']:>11.5f}"
            f"{0:>6}{ranks:>7}{tasks_per_node:>4}{options.iterations:>5}"
            f"{int(options.file_per_proc):>4}{int(options.reorder):>6}{int(options.reorder):>9}"
            f"{0:>10}{0:>5}{options.segments:>7}{options.block:>9}{options.transfer:>9}"
            f"{aggregate_mib:>10.1f} {options.api:>7}{0:>7}"
        )
    return lines


def max_lines(results: list[PhaseResult]) -> list[str]:
    lines = []
    for access, label in (("write", "Max Write"), ("read", "Max Read")):
        rates = [r.bw_mib for r in results if r.access == access]
        if rates:
            best = max(rates)
            lines.append(f"{label + ':':<10} {best:.2f} MiB/sec ({best * 1.048576:.2f} MB/sec)")
    return lines


def render(
    results: list[PhaseResult],
    options: BenchOptions,
    ranks: int,
    tasks_per_node: int,
    details: dict[str, Any],
    command: str,
) -> str:
    parts = [
        options_block(options, ranks, tasks_per_node, details, command),
        "",
        "Results: ",
        "",
        TABLE_HEADER,
        TABLE_RULE,
    ]
    parts += [table_row(r, options) for r in results]
    checks = [r for r in results if r.bad_transfers is not None]
    for r in checks:
        parts.append(
            f"check {r.access} iteration {r.iteration}: "
            + (
                "all data correct"
                if r.bad_transfers == 0
                else f"{r.bad_transfers} transfer(s) WRONG"
            )
        )
    parts += [
        "",
        *summary_lines(results, options, ranks, tasks_per_node),
        "",
        f"Finished            : {machine()['date']}",
        "",
        *max_lines(results),
    ]
    return "\n".join(parts)


def to_json(
    results: list[PhaseResult],
    options: BenchOptions,
    ranks: int,
    tasks_per_node: int,
    details: dict[str, Any],
    unavailable: str | None = None,
) -> dict[str, Any]:
    return {
        "options": options.to_dict(),
        "ranks": ranks,
        "tasks_per_node": tasks_per_node,
        "details": details,
        "versions": versions(details.get("api_version", "")),
        "machine": machine(),
        "unavailable": unavailable,
        "iterations": [r.as_dict() for r in results],
        "summary": summarize(results),
    }


#: Columns taken from the run's options, from each phase's row, from the machine and versions.
OPTION_COLUMNS = (
    "block",
    "transfer",
    "segments",
    "file_per_proc",
    "collective",
    "fsync",
    "reorder",
    "subfiles",
    "ranks_per_subfile",
    "coll_metadata",
    "alignment",
    "no_fill",
)
ROW_COLUMNS = (
    "access",
    "iteration",
    "bw_mib_s",
    "iops",
    "latency_s",
    "open_s",
    "xfer_s",
    "close_s",
    "total_s",
    "bytes",
    "ops",
    "bad_transfers",
)
MACHINE_COLUMNS = ("hostname", "cores", "date")
VERSION_COLUMNS = ("h5subfile", "hdf5", "mpi", "h5py", "numpy", "mpi4py")
CSV_FIELDS = (
    "api",
    "ranks",
    "tasks_per_node",
    *ROW_COLUMNS,
    *OPTION_COLUMNS[: OPTION_COLUMNS.index("subfiles")],
    "hints",
    *OPTION_COLUMNS[OPTION_COLUMNS.index("subfiles") :],
    "grouping",
    *MACHINE_COLUMNS,
    *VERSION_COLUMNS[:3],
    "api_version",
    *VERSION_COLUMNS[3:],
)


def csv_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per phase and iteration of one API's record; every column named once, so that
    no source overwrites another (the API's name stays in ``api``, its version in
    ``api_version``)."""
    options, versions_ = record["options"], record["versions"]
    rows = []
    for phase in record["iterations"]:
        row = {
            "api": options["api"],
            "ranks": record["ranks"],
            "tasks_per_node": record["tasks_per_node"],
            **{key: phase[key] for key in ROW_COLUMNS},
            **{key: options[key] for key in OPTION_COLUMNS},
            "hints": ";".join(f"{k}={v}" for k, v in options["hints"].items()),
            "grouping": record["details"].get("grouping") or "",
            **{key: record["machine"][key] for key in MACHINE_COLUMNS},
            **{key: versions_[key] for key in VERSION_COLUMNS},
            "api_version": record["details"].get("api_version", ""),
        }
        rows.append(row)
    return rows


def to_csv(records: list[dict[str, Any]]) -> str:
    """One row per API, phase and iteration, with every parameter."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for record in records:
        writer.writerows(csv_rows(record))
    return out.getvalue()


def dump_json(record: dict[str, Any]) -> str:
    return json.dumps(record, default=str, indent=1)

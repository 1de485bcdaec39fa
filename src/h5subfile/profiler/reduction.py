"""The job's profile from every rank's (docs/PROFILING.md): Darshan's reduction of a file
every rank opened into one shared record (rank -1), per-rank totals with the fastest and
slowest rank, the JSON document and the darshan-parser-like text. Pure: the ranks' profiles
(``Profile.as_dict()``) come in, plain data and text go out.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from typing import Any

from .counters import COUNTERS, FCOUNTERS

FORMAT = "h5subfile-profile"
VERSION = 1

#: Integer counters reduced by maximum; the alignments, mode and the counters Darshan marks as
#: not collected are copied from the first rank; all others are summed.
_MAX = {"POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"}
_COPY = {
    "POSIX_MODE",
    "POSIX_MEM_ALIGNMENT",
    "POSIX_FILE_ALIGNMENT",
    "POSIX_MMAPS",
    "POSIX_RENAMED_FROM",
    *(name for name in COUNTERS if name.startswith(("POSIX_STRIDE", "POSIX_ACCESS"))),
}
#: Set by the reduction itself.
_RANKED = {
    "POSIX_FASTEST_RANK",
    "POSIX_FASTEST_RANK_BYTES",
    "POSIX_SLOWEST_RANK",
    "POSIX_SLOWEST_RANK_BYTES",
    "POSIX_MAX_READ_TIME_SIZE",
    "POSIX_MAX_WRITE_TIME_SIZE",
}
_TIMES = ("POSIX_F_READ_TIME", "POSIX_F_WRITE_TIME", "POSIX_F_META_TIME")


def record_id(path: str) -> str:
    """The record id of a file: 16 hex digits of a 64-bit BLAKE2b hash of its path."""
    return hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def io_time(record: dict[str, Any]) -> float:
    """Darshan's time of a record: read + write + meta seconds."""
    return float(sum(record["fcounters"][name] for name in _TIMES))


def io_bytes(record: dict[str, Any]) -> int:
    counters = record["counters"]
    return int(counters["POSIX_BYTES_READ"] + counters["POSIX_BYTES_WRITTEN"])


def shared_record(per_rank: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Darshan's reduction of one file's records on every rank (``{rank: record}``) into the
    shared record: sums, maxima, earliest starts and latest ends, the fastest and slowest rank
    by read + write + meta time (ties: the lowest rank) with their bytes, and the population
    variance of time and bytes over the ranks."""
    ranks = sorted(per_rank)
    records = [per_rank[r] for r in ranks]
    counters: dict[str, int] = {}
    for name in COUNTERS:
        values = [rec["counters"][name] for rec in records]
        if name in _MAX:
            counters[name] = max(values)
        elif name in _COPY:
            counters[name] = values[0]
        elif name not in _RANKED:
            counters[name] = sum(values)
    fcounters: dict[str, float] = {}
    for name in FCOUNTERS:
        values = [rec["fcounters"][name] for rec in records]
        if name.endswith("_START_TIMESTAMP"):
            fcounters[name] = min((v for v in values if v > 0), default=0.0)
        elif name.endswith("_END_TIMESTAMP"):
            fcounters[name] = max(values)
        elif name in _TIMES:
            fcounters[name] = sum(values)
    for kind in ("READ", "WRITE"):
        slowest_op = max(records, key=lambda rec: rec["fcounters"][f"POSIX_F_MAX_{kind}_TIME"])
        fcounters[f"POSIX_F_MAX_{kind}_TIME"] = slowest_op["fcounters"][f"POSIX_F_MAX_{kind}_TIME"]
        counters[f"POSIX_MAX_{kind}_TIME_SIZE"] = slowest_op["counters"][
            f"POSIX_MAX_{kind}_TIME_SIZE"
        ]
    times = [io_time(rec) for rec in records]
    nbytes = [io_bytes(rec) for rec in records]
    fastest = min(range(len(ranks)), key=lambda i: (times[i], ranks[i]))
    slowest = max(range(len(ranks)), key=lambda i: (times[i], -ranks[i]))
    counters.update(
        POSIX_FASTEST_RANK=ranks[fastest],
        POSIX_FASTEST_RANK_BYTES=nbytes[fastest],
        POSIX_SLOWEST_RANK=ranks[slowest],
        POSIX_SLOWEST_RANK_BYTES=nbytes[slowest],
    )
    fcounters.update(
        POSIX_F_FASTEST_RANK_TIME=times[fastest],
        POSIX_F_SLOWEST_RANK_TIME=times[slowest],
        POSIX_F_VARIANCE_RANK_TIME=statistics.pvariance(times),
        POSIX_F_VARIANCE_RANK_BYTES=float(statistics.pvariance(nbytes)),
    )
    return {
        "counters": {name: counters[name] for name in COUNTERS},
        "fcounters": {name: fcounters[name] for name in FCOUNTERS},
    }


def rank_summary(profile: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """One rank's totals over its files, its phases and its trace (paths replaced by ids)."""
    records = profile["records"]
    trace = profile.get("trace")
    if trace is not None:
        trace = {**trace, "records": [[ids[r[0]], *r[1:]] for r in trace["records"]]}
    return {
        "rank": profile["rank"],
        "bytes_read": sum(rec["counters"]["POSIX_BYTES_READ"] for rec in records),
        "bytes_written": sum(rec["counters"]["POSIX_BYTES_WRITTEN"] for rec in records),
        "reads": sum(rec["counters"]["POSIX_READS"] for rec in records),
        "writes": sum(rec["counters"]["POSIX_WRITES"] for rec in records),
        "io_time": sum(io_time(rec) for rec in records),
        "phases": profile.get("phases", {}),
        "trace": trace,
        "unparsed": profile.get("unparsed", 0),
    }


def job_totals(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the ranks, and the fastest and slowest rank by I/O time and the ranks that
    moved the fewest and the most bytes (ties: the lowest rank)."""
    totals: dict[str, Any] = {
        key: sum(row[key] for row in ranks) for key in ("bytes_read", "bytes_written", "reads")
    }
    totals["writes"] = sum(row["writes"] for row in ranks)
    if not ranks:
        return totals
    moved = {row["rank"]: row["bytes_read"] + row["bytes_written"] for row in ranks}
    timed = {row["rank"]: row["io_time"] for row in ranks}
    fastest = min(timed, key=lambda r: (timed[r], r))
    slowest = max(timed, key=lambda r: (timed[r], -r))
    least = min(moved, key=lambda r: (moved[r], r))
    most = max(moved, key=lambda r: (moved[r], -r))
    totals.update(
        fastest_rank=fastest,
        fastest_rank_time=timed[fastest],
        slowest_rank=slowest,
        slowest_rank_time=timed[slowest],
        least_bytes_rank=least,
        least_bytes=moved[least],
        most_bytes_rank=most,
        most_bytes=moved[most],
    )
    return totals


def reduce_profiles(
    profiles: list[dict[str, Any]],
    nprocs: int | None = None,
    start: float = 0.0,
    run_time: float = 0.0,
    mounts: list[tuple[str, str]] | None = None,
    module: str = "POSIX",
) -> dict[str, Any]:
    """The job's profile document (docs/PROFILING.md, *JSON*) from every rank's
    ``Profile.as_dict()``. A file every one of the ``nprocs`` ranks opened gets a shared record
    (rank -1) before its per-rank records; ``mounts``: (mount point, file system type) pairs,
    as :func:`parse_mounts` returns them; ``module``: what the records count, in each record
    (``POSIX``: system calls; ``MPIIO-AS-POSIX``: MPI-IO calls in POSIX counters)."""
    nprocs = len(profiles) if nprocs is None else nprocs
    by_path: dict[str, dict[int, dict[str, Any]]] = {}
    for profile in profiles:
        for rec in profile["records"]:
            by_path.setdefault(rec["path"], {})[profile["rank"]] = rec
    ids = {path: record_id(path) for path in by_path}
    files, records = [], []
    for path in sorted(by_path):
        mount, fs = mount_of(path, mounts or [])
        files.append({"id": ids[path], "path": path, "mount": mount, "fs": fs})
        per_rank = by_path[path]
        if nprocs > 0 and len(per_rank) == nprocs:
            records.append(
                {"id": ids[path], "module": module, "rank": -1, **shared_record(per_rank)}
            )
        for rank in sorted(per_rank):
            rec = per_rank[rank]
            records.append(
                {
                    "id": ids[path],
                    "module": module,
                    "rank": rank,
                    "counters": rec["counters"],
                    "fcounters": rec["fcounters"],
                }
            )
    ranks = [rank_summary(p, ids) for p in sorted(profiles, key=lambda p: p["rank"])]
    return {
        "format": FORMAT,
        "version": VERSION,
        "nprocs": nprocs,
        "start": start,
        "run_time": run_time,
        "clock": "monotonic",
        "files": files,
        "records": records,
        "ranks": ranks,
        "totals": job_totals(ranks),
    }


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


def from_json(text: str) -> dict[str, Any]:
    """A profile document read back; ValueError if it is not one this version reads."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not an h5subfile profile (format {FORMAT!r} expected)")
    if doc.get("version") != VERSION:
        raise ValueError(f"profile version {doc.get('version')!r}; this h5subfile reads {VERSION}")
    return doc


def parse_mounts(text: str) -> list[tuple[str, str]]:
    """(mount point, file system type) pairs from /proc/self/mounts (``\\040``-style escapes
    undone)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            point = fields[1].encode().decode("unicode_escape")
            mounts.append((point, fields[2]))
    return mounts


def mount_of(path: str, mounts: list[tuple[str, str]]) -> tuple[str, str]:
    """The mount holding ``path`` (absolute): the longest mount point that is a leading part
    of it (the last such mount wins, as the kernel's table stacks them); ("-", "-") if none."""
    best = ("-", "-")
    for point, fs in mounts:
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0] if best[0] != "-" else ""):
            best = (point, fs)
    return best


_HEADER = """\
#
# description of columns:
#   <module>: module responsible for this I/O record.
#   <rank>: MPI rank.  -1 indicates that the file is shared
#      across all processes and statistics are aggregated.
#   <record id>: hash of the record's file path
#   <counter name> and <counter value>: statistical counters.
#   <file name>: full file path for the record.
#   <mount pt>: mount point that the file resides on.
#   <fs type>: type of file system that the file resides on.

#<module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>\t<fs type>
"""


def format_text(doc: dict[str, Any]) -> str:
    """The profile as darshan-parser prints a log: a header, then one tab-separated line per
    counter of every record (counters, then fcounters with six decimals), then the DXT-style
    trace as darshan-dxt-parser prints it, then the phases."""
    files = {f["id"]: f for f in doc["files"]}
    lines = [
        f"# h5subfile profile version: {doc['version']}",
        f"# nprocs: {doc['nprocs']}",
        f"# start_time: {doc['start']:.6f}",
        f"# run time: {doc['run_time']:.6f}",
        *_source_lines(doc),
        _HEADER,
    ]
    for rec in doc["records"]:
        f = files[rec["id"]]
        tail = f"{f['path']}\t{f['mount']}\t{f['fs']}"
        head = f"{rec.get('module', 'POSIX')}\t{rec['rank']}\t{rec['id']}"
        lines.extend(f"{head}\t{name}\t{value}\t{tail}" for name, value in rec["counters"].items())
        lines.extend(
            f"{head}\t{name}\t{value:.6f}\t{tail}" for name, value in rec["fcounters"].items()
        )
    modules = {rec["id"]: rec.get("module", "POSIX") for rec in doc["records"]}
    lines.extend(_dxt_lines(doc, files, modules))
    lines.append("")
    lines.append("#<phase>\t<rank>\t<name>\t<seconds>\t<count>")
    if "phases" in doc.get("unavailable", {}):
        lines.append(f"# no phases: {doc['unavailable']['phases']}")
    for row in doc["ranks"]:
        for name, phase in row["phases"].items():
            lines.append(f"PHASE\t{row['rank']}\t{name}\t{phase['seconds']:.6f}\t{phase['count']}")
    return "\n".join(lines) + "\n"


def _source_lines(doc: dict[str, Any]) -> list[str]:
    """For a document read from another tool's log (a Darshan log): where it came from, and
    each thing the log cannot fill with why."""
    source = doc.get("source")
    if not source:
        return []
    lines = [
        f"# source: {source['format']} log {source['log']} (format {source['log_version']}, "
        f"library {source['library_version'] or '-'})",
        f"# exe: {source['exe'] or '-'}",
        f"# modules: {', '.join(source['modules']) or '-'} (read: {', '.join(source['mapped']) or 'none'})",
    ]
    lines.extend(f"# unavailable: {what}: {why}" for what, why in doc["unavailable"].items())
    return lines


def _dxt_lines(
    doc: dict[str, Any], files: dict[str, dict[str, Any]], modules: dict[str, str]
) -> list[str]:
    """darshan-dxt-parser's layout: per file and rank a header, then one row per operation
    (``X_<module>``, as ``X_POSIX``)."""
    lines: list[str] = []
    for row in doc["ranks"]:
        trace = row["trace"]
        if trace is None:
            continue
        by_file: dict[str, list[list[Any]]] = {}
        for entry in trace["records"]:
            by_file.setdefault(entry[0], []).append(entry)
        lines.append("")
        lines.append(
            f"# DXT, rank: {row['rank']}, limit: {trace['limit']}, keep: {trace['keep']}, "
            f"dropped: {trace['dropped']}"
        )
        for file_id, entries in by_file.items():
            f = files[file_id]
            writes = sum(1 for e in entries if e[1] == "write")
            lines.append(f"# DXT, file_id: {file_id}, file_name: {f['path']}")
            lines.append(f"# DXT, rank: {row['rank']}, hostname: -")
            lines.append(f"# DXT, write_count: {writes}, read_count: {len(entries) - writes}")
            lines.append(f"# DXT, mnt_pt: {f['mount']}, fs_type: {f['fs']}")
            lines.append(
                "# Module    Rank  Wt/Rd  Segment          Offset       Length    Start(s)      End(s)"
            )
            segment = {"read": 0, "write": 0}
            module = f"X_{modules.get(file_id, 'POSIX')}"
            for _, kind, offset, length, start, end in entries:
                lines.append(
                    f" {module} {row['rank']:>7} {kind:>6} {segment[kind]:>8} {offset:>15} "
                    f"{length:>12} {start:>11.4f} {end:>11.4f}"
                )
                segment[kind] += 1
    return lines

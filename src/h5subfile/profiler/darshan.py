"""A Darshan log's data as h5subfile's profile document (docs/PROFILING.md, *Reading Darshan
logs*), so that ``h5subfile report`` reads a site's logs as it reads its own profiles.

:func:`from_darshan` (pure) maps the data :func:`~..io.darshan_log.read_log` gets from
PyDarshan (the log's job, mounts, names, POSIX records and DXT_POSIX segments, as PyDarshan gives
them) into the document :func:`~.reduction.reduce_profiles` makes: per-rank records, the shared
record (rank -1) of a file every rank opened (Darshan's own when the log has it, else made by
our reduction), per-rank totals and traces, the job's totals, and what a log cannot say.
"""

from __future__ import annotations

from typing import Any

from .counters import COUNTERS, FCOUNTERS
from .reduction import (
    FORMAT,
    VERSION,
    io_time,
    job_totals,
    mount_of,
    rank_summary,
    record_id,
    shared_record,
)

#: Darshan's modules this mapping reads; a log's other modules are listed in ``source``.
MAPPED = ("POSIX", "DXT_POSIX")
NO_PHASES = "a Darshan log has no h5subfile phases (agree, create, transfer, ...)"


def _normalised(rec: dict[str, Any], missing: set[str]) -> dict[str, Any]:
    """A record with exactly our counters, in Darshan's order (a name the log lacks is 0 and
    noted in ``missing``)."""
    counters, fcounters = rec["counters"], rec["fcounters"]
    missing.update(n for n in COUNTERS if n not in counters)
    missing.update(n for n in FCOUNTERS if n not in fcounters)
    return {
        "counters": {n: int(counters.get(n, 0)) for n in COUNTERS},
        "fcounters": {n: float(fcounters.get(n, 0.0)) for n in FCOUNTERS},
    }


def _traces(raw: dict[str, Any], names: dict[int, str], nprocs: int) -> dict[int, Any]:
    """Each rank's DXT_POSIX segments as our trace (file name, kind, offset, length, start,
    end), in order of start; empty when the log has no DXT_POSIX. ``dropped`` is -1 (some
    were, how many the log does not say) when DXT's module is marked partial."""
    if raw.get("dxt") is None:
        return {}
    partial = bool(raw["modules"].get("DXT_POSIX", {}).get("partial_flag"))
    entries: dict[int, list[tuple[str, str, int, int, float, float]]] = {
        r: [] for r in range(nprocs)
    }
    for rec in raw["dxt"]:
        path = names[int(rec["id"])]
        for kind in ("write", "read"):
            entries.setdefault(int(rec["rank"]), []).extend(
                (path, kind, int(s["offset"]), int(s["length"]))
                + (float(s["start_time"]), float(s["end_time"]))
                for s in rec.get(f"{kind}_segments", [])
            )
    traces = {}
    for rank, kept in entries.items():
        kept.sort(key=lambda e: (e[4], e[5]))
        traces[rank] = {
            "limit": len(kept),
            "keep": "first",
            "dropped": -1 if partial else 0,
            "records": [list(e) for e in kept],
        }
    return traces


def _names(raw: dict[str, Any]) -> dict[int, str]:
    """Record id -> file name, for every record of POSIX and DXT_POSIX (an id the log names
    nowhere gets a name that says so)."""
    names = {int(i): str(n) for i, n in raw.get("names", {}).items()}
    for rec in [*raw.get("posix", []), *(raw.get("dxt") or [])]:
        names.setdefault(int(rec["id"]), f"<unnamed Darshan record {int(rec['id'])}>")
    return names


def from_darshan(raw: dict[str, Any], log: str = "") -> dict[str, Any]:
    """The profile document (docs/PROFILING.md, *JSON*) of a Darshan log's data as
    :func:`~..io.darshan_log.read_log` gets it from PyDarshan. A file with Darshan's shared
    record (rank -1) keeps it, and has no per-rank records (Darshan dropped them); a file with a record on each of the
    ``nprocs`` ranks gets the shared record our reduction makes; ids are our ids of the names
    (``darshan_id`` in ``files``: the log's). ``unavailable`` says what the log cannot fill."""
    job = raw["job"]
    nprocs = int(job["nprocs"])
    names = _names(raw)
    missing: set[str] = set()
    by_file: dict[str, dict[int, dict[str, Any]]] = {}
    for rec in raw.get("posix", []):
        by_file.setdefault(names[int(rec["id"])], {})[int(rec["rank"])] = _normalised(rec, missing)
    darshan_ids = {name: i for i, name in names.items()}
    ids = {name: record_id(name) for name in names.values()}
    traces = _traces(raw, names, nprocs)
    traced = {e[0] for trace in traces.values() for e in trace["records"]}
    files, records, reduced_by_darshan = [], [], []
    for path in sorted(set(by_file) | traced):
        mount, fs = mount_of(path, list(raw.get("mounts", [])))
        files.append({"id": ids[path], "path": path, "mount": mount, "fs": fs})
        files[-1]["darshan_id"] = darshan_ids[path]
        per_rank = dict(by_file.get(path, {}))
        shared = per_rank.pop(-1, None)
        if shared is None and nprocs > 0 and sorted(per_rank) == list(range(nprocs)):
            shared = shared_record(per_rank)
        elif shared is not None and not per_rank:
            reduced_by_darshan.append(shared)
        if shared is not None:
            records.append({"id": ids[path], "rank": -1, **shared})
        records.extend({"id": ids[path], "rank": r, **per_rank[r]} for r in sorted(per_rank))
    profiles = _rank_profiles(by_file, traces, nprocs)
    ranks = [rank_summary(p, ids) for p in profiles]
    return {
        "format": FORMAT,
        "version": VERSION,
        "nprocs": nprocs,
        "start": float(job["start_time_sec"]) + float(job.get("start_time_nsec", 0)) * 1e-9,
        "run_time": float(job["run_time"]),
        "clock": "darshan",
        "files": files,
        "records": records,
        "ranks": ranks,
        "totals": _totals(ranks, reduced_by_darshan),
        "source": _source(raw, log),
        "unavailable": _unavailable(raw, reduced_by_darshan, missing),
    }


def _rank_profiles(
    by_file: dict[str, dict[int, dict[str, Any]]], traces: dict[int, Any], nprocs: int
) -> list[dict[str, Any]]:
    """One rank profile (as ``Profile.as_dict()`` makes it) per rank of the job and per rank a
    record or a trace names: its per-rank records, its trace, no phases."""
    ranks = set(range(nprocs)) | set(traces)
    ranks |= {r for per_rank in by_file.values() for r in per_rank if r >= 0}
    return [
        {
            "rank": rank,
            "records": [
                {"path": path, **per_rank[rank]}
                for path, per_rank in sorted(by_file.items())
                if rank in per_rank
            ],
            "phases": {},
            "trace": traces.get(rank),
            "unparsed": 0,
        }
        for rank in sorted(ranks)
    ]


def _totals(ranks: list[dict[str, Any]], reduced: list[dict[str, Any]]) -> dict[str, Any]:
    """The job's totals: the ranks' (their per-rank records), plus the shared records Darshan
    reduced, whose ranks' shares the log does not hold."""
    totals = job_totals(ranks)
    for rec in reduced:
        c = rec["counters"]
        totals["bytes_read"] += c["POSIX_BYTES_READ"]
        totals["bytes_written"] += c["POSIX_BYTES_WRITTEN"]
        totals["reads"] += c["POSIX_READS"]
        totals["writes"] += c["POSIX_WRITES"]
    totals["unattributed_io_time"] = sum(io_time(rec) for rec in reduced)
    return totals


def _source(raw: dict[str, Any], log: str) -> dict[str, Any]:
    job = raw["job"]
    modules = raw.get("modules", {})
    return {
        "format": "darshan",
        "log": log,
        "log_version": str(job.get("log_ver", "")),
        "library_version": str(job.get("metadata", {}).get("lib_ver", "")),
        "exe": str(raw.get("exe", "")).strip(),
        "jobid": int(job.get("jobid", 0)),
        "end": float(job.get("end_time_sec", 0)) + float(job.get("end_time_nsec", 0)) * 1e-9,
        "modules": sorted(modules),
        "mapped": [m for m in MAPPED if m in modules],
        "partial": sorted(m for m, info in modules.items() if info.get("partial_flag")),
    }


def _unavailable(
    raw: dict[str, Any], reduced: list[dict[str, Any]], missing: set[str]
) -> dict[str, str]:
    """What the document cannot fill from this log, each with why."""
    modules = raw.get("modules", {})
    out = {"phases": NO_PHASES}
    if "POSIX" not in modules:
        out["posix"] = "the log has no POSIX module: no file's counters"
    elif modules["POSIX"].get("partial_flag"):
        out["posix"] = "Darshan's POSIX module ran out of records: some files are not in the log"
    if reduced:
        out["rank_shares"] = (
            f"{len(reduced)} file(s) every rank opened are one shared record (rank -1) in the "
            "log: Darshan dropped their per-rank records, so the ranks' totals and the fastest "
            "and slowest rank leave them out (the job's totals include them)"
        )
    if raw.get("dxt") is None:
        out["trace"] = "the log has no DXT_POSIX module (DXT was not enabled)"
    elif modules.get("DXT_POSIX", {}).get("partial_flag"):
        out["trace"] = "DXT ran out of memory: later segments were dropped, how many is not logged"
    if missing:
        out["counters"] = "not in this log's POSIX records, shown as 0: " + ", ".join(
            sorted(missing)
        )
    others = sorted(set(modules) - set(MAPPED))
    if others:
        out["modules"] = "not mapped (POSIX and DXT_POSIX are): " + ", ".join(others)
    return out

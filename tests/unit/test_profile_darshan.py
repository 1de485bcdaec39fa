"""Darshan logs as profile documents (docs/PROFILING.md, *Reading Darshan logs*): the mapping on
crafted data shaped as PyDarshan gives it (runs without PyDarshan), then real logs read through
PyDarshan and checked against PyDarshan's own view of them (skipped, saying why, without it),
and ``h5subfile report LOG --text`` in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import pytest

from h5subfile.errors import CorruptFileError, H5SubfileError, MissingFileError
from h5subfile.io.darshan_log import DARSHAN_MAGIC, has_darshan_header, is_darshan_path, read_log
from h5subfile.profiler.counters import COUNTERS, FCOUNTERS
from h5subfile.profiler.darshan import from_darshan
from h5subfile.profiler.reduction import (
    format_text,
    from_json,
    record_id,
    shared_record,
    to_json,
)

MOUNTS = [("/", "ext4"), ("/scratch", "lustre")]


def counters(**values: int) -> dict[str, int]:
    out = dict.fromkeys(COUNTERS, 0)
    out["POSIX_MMAPS"] = -1
    out.update({f"POSIX_{name}": v for name, v in values.items()})
    return out


def fcounters(**values: float) -> dict[str, float]:
    out = dict.fromkeys(FCOUNTERS, 0.0)
    out.update({f"POSIX_F_{name}": v for name, v in values.items()})
    return out


def posix(rid: int, rank: int, written: int, seconds: float, **more: int) -> dict[str, Any]:
    """One POSIX record as PyDarshan's ``to_dict()`` gives it."""
    return {
        "id": rid,
        "rank": rank,
        "counters": counters(OPENS=1, WRITES=1, BYTES_WRITTEN=written, **more),
        "fcounters": fcounters(WRITE_TIME=seconds, MAX_WRITE_TIME=seconds),
    }


def log_data(nprocs: int, records: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A log's data as ``_pydarshan_view`` returns it."""
    return {
        "job": {
            "nprocs": nprocs,
            "start_time_sec": 1700000000,
            "start_time_nsec": 500000000,
            "end_time_sec": 1700000010,
            "end_time_nsec": 0,
            "run_time": 11.0,
            "jobid": 42,
            "log_ver": "3.41",
            "metadata": {"lib_ver": "3.4.7"},
        },
        "exe": "/bin/app -x ",
        "mounts": MOUNTS,
        "modules": {"POSIX": {"partial_flag": False}, "STDIO": {"partial_flag": False}},
        "names": {11: "/scratch/out.h5", 22: "/home/u/in.dat", 33: "/scratch/trace.only"},
        "posix": records,
        "dxt": None,
        **extra,
    }


def by_key(doc: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    paths = {f["id"]: f["path"] for f in doc["files"]}
    return {(paths[r["id"]], r["rank"]): r for r in doc["records"]}


# --- the mapping, on crafted data -----------------------------------------------------------


def test_records_of_every_rank_get_the_shared_record_our_reduction_makes() -> None:
    raw = log_data(2, [posix(11, 1, 300, 1.0), posix(11, 0, 100, 2.0), posix(22, 1, 7, 0.5)])
    doc = from_darshan(raw, log="run.darshan")
    assert (doc["nprocs"], doc["start"], doc["run_time"]) == (2, 1700000000.5, 11.0)
    out, inp = "/scratch/out.h5", "/home/u/in.dat"
    assert [f["path"] for f in doc["files"]] == [inp, out]
    assert doc["files"][1] == {
        "id": record_id(out),
        "path": out,
        "mount": "/scratch",
        "fs": "lustre",
        "darshan_id": 11,
    }
    assert [(r["id"], r["rank"]) for r in doc["records"]] == [
        (record_id(inp), 1),
        (record_id(out), -1),
        (record_id(out), 0),
        (record_id(out), 1),
    ]
    records = by_key(doc)
    per_rank = {r: {k: records[(out, r)][k] for k in ("counters", "fcounters")} for r in (0, 1)}
    shared = records[(out, -1)]
    assert {k: shared[k] for k in ("counters", "fcounters")} == shared_record(per_rank)
    assert shared["counters"]["POSIX_BYTES_WRITTEN"] == 400
    assert shared["counters"]["POSIX_SLOWEST_RANK"] == 0
    assert records[(out, 1)]["counters"] == raw["posix"][0]["counters"]  # kept as logged
    assert [(row["rank"], row["bytes_written"]) for row in doc["ranks"]] == [(0, 100), (1, 307)]
    assert all(row["phases"] == {} and row["trace"] is None for row in doc["ranks"])
    totals = doc["totals"]
    assert (totals["bytes_written"], totals["writes"], totals["slowest_rank"]) == (407, 3, 0)
    assert totals["unattributed_io_time"] == 0
    assert set(doc["unavailable"]) == {"phases", "trace", "modules"}
    assert "STDIO" in doc["unavailable"]["modules"]
    assert doc["source"]["mapped"] == ["POSIX"] and doc["source"]["jobid"] == 42
    assert doc["source"]["exe"] == "/bin/app -x" and doc["source"]["log"] == "run.darshan"


def test_a_shared_record_darshan_reduced_is_kept_and_counted_in_the_totals() -> None:
    logged = posix(11, -1, 4000, 3.0, FASTEST_RANK=2, SLOWEST_RANK=1, READS=5, BYTES_READ=50)
    raw = log_data(4, [logged, posix(22, 3, 10, 0.25)])
    doc = from_darshan(raw)
    records = by_key(doc)
    assert sorted(records) == [("/home/u/in.dat", 3), ("/scratch/out.h5", -1)]
    shared = records[("/scratch/out.h5", -1)]
    assert shared["counters"] == logged["counters"]  # Darshan's own reduction, not redone
    assert shared["fcounters"] == logged["fcounters"]
    assert [row["rank"] for row in doc["ranks"]] == [0, 1, 2, 3]
    assert [row["bytes_written"] for row in doc["ranks"]] == [0, 0, 0, 10]
    totals = doc["totals"]
    assert (totals["bytes_written"], totals["bytes_read"]) == (4010, 50)
    assert (totals["writes"], totals["reads"]) == (2, 5)
    assert totals["unattributed_io_time"] == 3.0
    assert "1 file(s) every rank opened" in doc["unavailable"]["rank_shares"]


def test_dxt_segments_become_each_ranks_trace_in_time_order() -> None:
    segment = {"offset": 0, "length": 10, "start_time": 0.0, "end_time": 0.0}
    dxt = [
        {
            "id": 11,
            "rank": 0,
            "hostname": "n1",
            "write_segments": [{**segment, "start_time": 2.0, "end_time": 2.5}],
            "read_segments": [{**segment, "offset": 64, "start_time": 1.0, "end_time": 1.5}],
        },
        {
            "id": 33,  # a file with segments but no POSIX record
            "rank": 0,
            "hostname": "n1",
            "write_segments": [{**segment, "length": 4, "start_time": 1.2, "end_time": 1.3}],
            "read_segments": [],
        },
    ]
    modules = {"POSIX": {"partial_flag": False}, "DXT_POSIX": {"partial_flag": False}}
    raw = log_data(2, [posix(11, 0, 10, 0.5)], dxt=dxt, modules=modules)
    doc = from_darshan(raw)
    out, only = record_id("/scratch/out.h5"), record_id("/scratch/trace.only")
    trace = doc["ranks"][0]["trace"]
    assert trace["records"] == [
        [out, "read", 64, 10, 1.0, 1.5],
        [only, "write", 0, 4, 1.2, 1.3],
        [out, "write", 0, 10, 2.0, 2.5],
    ]
    assert (trace["dropped"], trace["limit"], trace["keep"]) == (0, 3, "first")
    assert doc["ranks"][1]["trace"]["records"] == []  # traced, and did nothing
    assert only in {f["id"] for f in doc["files"]}
    assert "trace" not in doc["unavailable"]
    text = format_text(doc)
    rows = [line.split() for line in text.splitlines() if line.startswith(" X_POSIX")]
    assert [row[2:6] for row in rows] == [
        ["read", "0", "64", "10"],
        ["write", "0", "0", "10"],
        ["write", "0", "0", "4"],
    ]
    modules["DXT_POSIX"]["partial_flag"] = True
    doc = from_darshan(raw)
    assert doc["ranks"][0]["trace"]["dropped"] == -1
    assert "DXT ran out of memory" in doc["unavailable"]["trace"]


def test_counters_a_log_lacks_are_zero_and_named() -> None:
    record = posix(22, 0, 5, 0.1)
    del record["counters"]["POSIX_RENAMED_FROM"]
    doc = from_darshan(log_data(1, [record]))
    assert [r["rank"] for r in doc["records"]] == [-1, 0]  # one rank: shared, as ours
    assert list(doc["records"][1]["counters"]) == list(COUNTERS)
    assert doc["records"][1]["counters"]["POSIX_RENAMED_FROM"] == 0
    assert doc["unavailable"]["counters"].endswith(": POSIX_RENAMED_FROM")


def test_no_posix_module_and_a_partial_one_are_said() -> None:
    raw = log_data(2, [], modules={"STDIO": {"partial_flag": False}})
    doc = from_darshan(raw)
    assert doc["files"] == doc["records"] == [] and doc["totals"]["bytes_written"] == 0
    assert "no POSIX module" in doc["unavailable"]["posix"]
    raw = log_data(1, [posix(22, 0, 5, 0.1)], modules={"POSIX": {"partial_flag": True}})
    assert "ran out of records" in from_darshan(raw)["unavailable"]["posix"]
    assert from_darshan(raw)["source"]["partial"] == ["POSIX"]


def test_text_and_json_of_a_converted_log() -> None:
    doc = from_darshan(log_data(2, [posix(11, 0, 100, 2.0), posix(11, 1, 300, 1.0)]), log="x")
    assert from_json(to_json(doc)) == doc
    text = format_text(doc)
    out = record_id("/scratch/out.h5")
    line = f"POSIX\t-1\t{out}\tPOSIX_BYTES_WRITTEN\t400\t/scratch/out.h5\t/scratch\tlustre\n"
    assert line in text
    assert "# source: darshan log x (format 3.41, library 3.4.7)" in text
    assert "# unavailable: phases: a Darshan log has no h5subfile phases" in text
    assert "# no phases: a Darshan log has no h5subfile phases" in text
    assert "\nPHASE\t" not in text


# --- recognising a log, and the errors ------------------------------------------------------


def header(order: Literal["little", "big"] = "little") -> bytes:
    """The first 16 bytes of a Darshan log: its version string and magic number."""
    return b"3.41\0\0\0\0" + DARSHAN_MAGIC.to_bytes(8, order)


def test_a_log_is_recognised_by_its_header_or_its_name(tmp_path: Path) -> None:
    little, big, text = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    little.write_bytes(header("little") + bytes(32))
    big.write_bytes(header("big") + bytes(32))
    text.write_text('{"format": "h5subfile-profile"}')
    assert has_darshan_header(str(little)) and has_darshan_header(str(big))
    assert not has_darshan_header(str(text)) and not has_darshan_header(str(tmp_path / "none"))
    assert is_darshan_path(str(little)) and not is_darshan_path(str(text))
    assert is_darshan_path(str(tmp_path / "missing.darshan"))
    assert is_darshan_path(str(tmp_path / "job.darshan_partial"))
    from h5subfile.cli.report import profile_files

    (tmp_path / "job.darshan").write_bytes(header() + bytes(32))
    (tmp_path / "run.h5.write.json").write_text("{}")
    assert profile_files(str(tmp_path)) == [
        str(tmp_path / name) for name in ("job.darshan", "run.h5.write.json")
    ]


def test_a_file_that_is_not_a_log_or_is_missing_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "run.darshan"
    fake.write_text("not a log\n")
    with pytest.raises(CorruptFileError, match="run.darshan is not a Darshan log"):
        read_log(str(fake))
    with pytest.raises(MissingFileError, match="none.darshan does not exist"):
        read_log(str(tmp_path / "none.darshan"))


def test_without_pydarshan_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "run.darshan"
    log.write_bytes(header() + bytes(64))
    monkeypatch.setitem(sys.modules, "darshan", None)  # import darshan raises ImportError
    with pytest.raises(
        H5SubfileError, match=r"needs PyDarshan.*pip install 'h5subfile\[darshan\]'"
    ):
        read_log(str(log))


def report(*args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """``h5subfile report ARGS`` in a process of its own (``code`` runs first)."""
    script = f"import sys\n{code}\nfrom h5subfile.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", script, "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert lines[0].startswith("h5subfile report: error: "), lines
    return lines[0]


def test_report_on_a_file_that_is_not_a_log_says_so_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "run.darshan"
    fake.write_text("hello\n")
    line = one_line_error(report(str(fake), "--text"))
    assert line.endswith("run.darshan is not a Darshan log (it does not start with one's header)")


def test_report_without_pydarshan_names_the_extra_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "run.darshan"
    log.write_bytes(header() + bytes(64))
    line = one_line_error(report(str(log), "--text", code="sys.modules['darshan'] = None"))
    assert "needs PyDarshan, not installed: pip install 'h5subfile[darshan]'" in line


# --- real logs, through PyDarshan -----------------------------------------------------------


def example_log(name: str) -> Path:
    """One of the logs PyDarshan's wheel ships (its examples and its own tests' inputs)."""
    darshan = pytest.importorskip(
        "darshan", reason="PyDarshan is not installed (pip install 'h5subfile[darshan]')"
    )
    package = Path(os.path.dirname(darshan.__file__))
    for folder in (package / "examples" / "example_logs", package / "tests" / "input"):
        if (folder / name).is_file():
            return folder / name
    pytest.skip(f"this PyDarshan ships no example log {name}")


def pydarshan_view(path: Path) -> tuple[Any, Any, dict[int, str], list[Any] | None]:
    """PyDarshan's own view: the job, the POSIX counters and fcounters as data frames (with
    id and rank), the names, and the DXT_POSIX records."""
    import darshan

    with darshan.DarshanReport(str(path), read_all=True) as log:
        frames = log.records["POSIX"].to_df()
        dxt = log.records["DXT_POSIX"].to_numpy() if "DXT_POSIX" in log.records else None
        return log.metadata["job"], frames, dict(log.name_records), dxt


#: Logs of PyDarshan's wheel: one file shared by 4 ranks (Darshan reduced it) with DXT, 16 ranks
#: with per-rank records (two files on every rank: our shared record) and DXT, one rank with 214
#: files and DXT, 2048 ranks without DXT.
LOGS = [
    "ior_hdf5_example.darshan",
    "sample-dxt-simple.darshan",
    "dxt.darshan",
    "sample-badost.darshan",
]


@pytest.mark.parametrize("name", LOGS)
def test_a_real_log_has_the_counters_pydarshan_reads(name: str) -> None:
    path = example_log(name)
    job, frames, names, dxt = pydarshan_view(path)
    doc = read_log(str(path))
    assert doc["nprocs"] == job["nprocs"] and doc["run_time"] == job["run_time"]
    ints, floats = frames["counters"], frames["fcounters"]
    records = by_key(doc)
    for i in range(len(ints)):
        key = (names[int(ints["id"][i])], int(ints["rank"][i]))
        mine = records[key]
        assert mine["counters"] == {n: int(ints[n][i]) for n in COUNTERS}, key
        assert mine["fcounters"] == {n: float(floats[n][i]) for n in FCOUNTERS}, key
    logged = {(names[int(i)], int(r)) for i, r in zip(ints["id"], ints["rank"])}
    made = {(path, -1) for path, rank in records if rank == -1} - logged
    assert set(records) == logged | made  # ours: only the shared records of all-rank files
    on_every_rank = Counter(p for p, r in logged if r >= 0 and (p, -1) not in logged)
    assert {p for p, _ in made} == {p for p, n in on_every_rank.items() if n == job["nprocs"]}
    # a log holds a file's shared record or its per-rank records: every byte counted once
    assert doc["totals"]["bytes_read"] == int(ints["POSIX_BYTES_READ"].sum())
    assert doc["totals"]["bytes_written"] == int(ints["POSIX_BYTES_WRITTEN"].sum())
    segments = sum(rec["write_count"] + rec["read_count"] for rec in dxt or [])
    traced = [row["trace"] for row in doc["ranks"] if row["trace"] is not None]
    assert sum(len(t["records"]) for t in traced) == segments
    assert ("trace" in doc["unavailable"]) == (dxt is None)
    assert doc["unavailable"]["phases"] and all(row["phases"] == {} for row in doc["ranks"])


def test_report_prints_a_real_logs_counters_and_segments() -> None:
    path = example_log("ior_hdf5_example.darshan")
    job, frames, names, dxt = pydarshan_view(path)
    ints = frames["counters"]
    result = report(str(path), "--text")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    name = names[int(ints["id"][0])]
    rank = int(ints["rank"][0])
    for counter in ("POSIX_BYTES_WRITTEN", "POSIX_BYTES_READ", "POSIX_WRITES", "POSIX_SEEKS"):
        row = f"POSIX\t{rank}\t{record_id(name)}\t{counter}\t{int(ints[counter][0])}\t{name}\t"
        assert row in result.stdout, row
    rows = [line for line in result.stdout.splitlines() if line.startswith(" X_POSIX")]
    assert len(rows) == sum(rec["write_count"] + rec["read_count"] for rec in dxt or []) > 0
    assert result.stdout.splitlines()[1] == f"# nprocs: {job['nprocs']}"


def test_report_draws_the_page_of_a_real_log(tmp_path: Path) -> None:
    """The page and pictures come from a Darshan log as from a profile: the same document."""
    pytest.importorskip("matplotlib", reason="the pictures need matplotlib (the plots extra)")
    path = example_log("sample-dxt-simple.darshan")
    result = report(str(path), "--out", str(tmp_path / "page"))
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "page" / "report.md").read_text()
    for picture in ("timeline.png", "sizes.png", "ranks.png", "files.png"):
        assert f"({picture})" in page and (tmp_path / "page" / picture).stat().st_size > 5000
    assert "Read from a darshan log" in page and "has no h5subfile phases" in page, page[:3000]


def test_a_log_cut_short_is_refused_in_one_line(tmp_path: Path) -> None:
    whole = example_log("dxt.darshan").read_bytes()
    for size in (3000, len(whole) - 1000):  # names cut; the last module's region cut
        cut = tmp_path / f"cut{size}.darshan"
        cut.write_bytes(whole[:size])
        line = one_line_error(report(str(cut), "--text"))
        assert (
            f"is not a readable Darshan log: cut short: its header says {len(whole)} bytes" in line
        )

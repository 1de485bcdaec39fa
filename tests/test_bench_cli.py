"""``h5subfile bench`` as a user meets it: compressed runs, several APIs in turns with one
comparison, the CSV and JSON fields, the access line, progress, sweeps started the wrong way.

Each CLI test is one small job (2 ranks, 256 KiB blocks); the pure helpers are tested in-process.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from conftest import MPIEXEC, run_cli
from h5subfile.bench.compare import compare
from h5subfile.bench.driver import PhaseResult
from h5subfile.bench.options import APIS, BenchOptionError, BenchOptions, parse_apis
from h5subfile.bench.report import CSV_FIELDS
from h5subfile.cli.bench import access, launched_ranks
from h5subfile.progress import Progress

KIB = 1024
B, T, S = 256 * KIB, 64 * KIB, 2
SMALL = ("-b", B, "-t", T)


def test_api_lists() -> None:
    assert parse_apis("subfile") == ("subfile",)
    assert parse_apis("posix, mpiio,subfile") == ("posix", "mpiio", "subfile")
    assert parse_apis("all") == APIS
    for bad, words in (("posix,nfs", "'nfs'"), ("posix,,mpiio", "empty"), ("hdf5,hdf5", "twice")):
        with pytest.raises(BenchOptionError, match=words):
            parse_apis(bad)


def test_access_line_says_what_the_ranks_share() -> None:
    subfile, hdf5 = BenchOptions(api="subfile"), BenchOptions(api="hdf5")
    assert access(hdf5, 1, 4) == "single-shared-file"
    assert access(subfile, 1, 4) == "single-shared-file (subfiling: 1 subfile)"
    assert access(subfile, 2, 4) == "subfiling: 2 shared subfiles for 4 ranks, plus a master file"
    assert access(subfile, 4, 4).startswith("file-per-process (subfiling: 4 subfiles")
    assert access(BenchOptions(api="hdf5", file_per_proc=True), 4, 4) == "file-per-process"


def test_launcher_detection() -> None:
    assert launched_ranks({}) == (0, 1)
    assert launched_ranks({"PMI_RANK": "1", "PMI_SIZE": "2"}) == (1, 2)
    assert launched_ranks({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"}) == (0, 4)


def _phase(access: str, iteration: int, total_s: float) -> PhaseResult:
    return PhaseResult(access, iteration, 2**20, 1, 0.0, total_s, 0.0, total_s, 0.0)


def test_comparison_ratios_pair_repetitions() -> None:
    first = [_phase("write", i, s) for i, s in enumerate((1.0, 2.0, 4.0))]  # 1, 0.5, 0.25 MiB/s
    other = [_phase("write", i, s) for i, s in enumerate((0.5, 1.0, 1.0))]  # 2, 1, 1 MiB/s
    rows = compare([("posix", first), ("subfile", other)])
    assert [(r["access"], r["api"]) for r in rows] == [("write", "posix"), ("write", "subfile")]
    assert rows[0]["ratio"] == rows[0]["ratio_min"] == rows[0]["ratio_max"] == 1.0
    assert rows[1]["median_mib_s"] == 1.0 and (rows[1]["min_mib_s"], rows[1]["max_mib_s"]) == (1, 2)
    assert rows[1]["ratio"] == pytest.approx(1.0 / 0.5)  # median over median
    assert (rows[1]["ratio_min"], rows[1]["ratio_max"]) == (2.0, 4.0)  # per repetition


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_and_in_a_pipe() -> None:
    tty = _Terminal()
    line = Progress(True, tty)
    line.phase("bench: [1/2] posix iteration 1/1 write", 10)
    line.finish("bench: [1/2] posix iteration 1/1 write 5.0 MiB/s")
    line.close()
    assert tty.getvalue().startswith("\rbench: [1/2]") and tty.getvalue().endswith("MiB/s\n")
    pipe = io.StringIO()
    line = Progress(True, pipe)  # asked for (--progress) without a terminal: whole lines
    line.phase("bench: [1/2] posix iteration 1/1 write", 10)
    line.step(5)
    line.finish("bench: [1/2] posix iteration 1/1 write 5.0 MiB/s")
    line.close()
    assert pipe.getvalue() == "bench: [1/2] posix iteration 1/1 write 5.0 MiB/s\n"
    silent = _Terminal()
    Progress(False, silent).finish("never")  # other ranks, --quiet
    assert silent.getvalue() == ""


def test_compressed_bench_writes_whole_blocks(tmp_path: Path) -> None:
    """--compression works for hdf5 and subfile (whole blocks written, -t transfers read), the
    data checks pass, the files are chunked and compressed, the access line describes the
    grouping (4 ranks in 2 subfiles), and without a terminal (and without --progress) no
    progress is printed."""
    out, ranks = tmp_path / "f", 4
    result = run_cli(
        ranks, "bench", "-a", "hdf5,subfile", "--subfiles", "2", "--compression", "zstd", *SMALL,
        "-s", S, "-W", "-R", "-C", "-k", "-o", out, "--json", tmp_path / "r.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "bench: [" not in result.stderr and "Error" not in result.stderr
    assert result.stdout.count("zstd-compressed chunked datasets: each rank writes its whole") == 2
    assert (
        result.stdout.count("type                : collective whole-block writes, independent") == 2
    )
    assert result.stdout.count("access              : single-shared-file\n") == 1  # hdf5
    assert (
        result.stdout.count("access              : subfiling: 2 shared subfiles for 4 ranks") == 1
    )
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["apis"] == ["hdf5", "subfile"]
    for run in record["runs"]:
        write, read = run["iterations"]
        assert write["bad_transfers"] == read["bad_transfers"] == 0
        assert write["ops"] == ranks * S  # one write per rank and segment
        assert read["ops"] == ranks * S * (B // T)  # reads stay IOR's transfers
    for api in ("hdf5", "subfile"):
        with h5py.File(f"{out}.{api}") as f:
            assert f["segment_0000"].shape == (ranks * B // 8,)
        assert not list(tmp_path.glob(f"f.{api}*.partial"))
    with h5py.File(f"{out}.hdf5") as f:  # one conventional file: the dataset itself is chunked
        assert f["segment_0001"].chunks is not None
        assert f["segment_0001"].id.get_create_plist().get_nfilters() == 1  # zstd (a plugin)


def _check_csv(text: str, record: dict) -> None:
    """Every column present, typed and valued as the JSON says."""
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_FIELDS and len(rows) == 2 * 2 * 2  # APIs x iterations x phases
    runs = {run["options"]["api"]: run for run in record["runs"]}
    for row in rows:
        run = runs[row["api"]]
        phase = next(
            p
            for p in run["iterations"]
            if p["access"] == row["access"] and p["iteration"] == int(row["iteration"])
        )
        assert int(row["ranks"]) == 2 and int(row["tasks_per_node"]) == run["tasks_per_node"]
        for key in ("bw_mib_s", "iops", "latency_s", "open_s", "xfer_s", "close_s", "total_s"):
            assert float(row[key]) == pytest.approx(phase[key]) and float(row[key]) >= 0, key
        assert int(row["bytes"]) == 2 * B and int(row["ops"]) == 2 * (B // T)
        assert row["bad_transfers"] == ""  # no -W/-R: not checked
        assert (int(row["block"]), int(row["transfer"]), int(row["segments"])) == (B, T, 1)
        for key in ("file_per_proc", "collective", "fsync", "reorder", "coll_metadata", "no_fill"):
            assert row[key] == "False", key
        assert row["hints"] == "" and int(row["alignment"]) == 0
        subfile = row["api"] == "subfile"
        assert row["subfiles"] == ("2" if subfile else "") and row["ranks_per_subfile"] == ""
        assert row["grouping"] == (run["details"]["grouping"] if subfile else "")
        assert row["api_version"] == run["details"]["api_version"] != ""
        assert row["api_version"].startswith("h5subfile " if subfile else "POSIX ")
        for key in ("h5subfile", "hdf5", "mpi", "h5py", "numpy", "mpi4py"):
            assert row[key] == run["versions"][key] != "", key
        assert row["hostname"] == run["machine"]["hostname"] and int(row["cores"]) >= 1
        assert row["date"] == run["machine"]["date"]


def test_several_apis_in_turns_with_one_comparison(tmp_path: Path) -> None:
    result = run_cli(
        2, "bench", "-a", "posix,subfile", "--subfiles", "2", *SMALL, "-i", "2",
        "-o", tmp_path / "f", "--csv", tmp_path / "r.csv", "--json", tmp_path / "r.json",
        "--progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # IOR's output per API, then the comparison, once
    assert out.count("IOR-style benchmark:") == 2 and out.count("Summary of all tests:") == 2
    assert out.count("Comparison of APIs (2 repetition(s), run in turns") == 1
    assert out.count("access              : single-shared-file\n") == 1  # posix
    assert "access              : file-per-process (subfiling: 2 subfiles" in out  # not shared
    table = out[out.index("Comparison of APIs") :].splitlines()[2:]
    assert [line.split()[:2] for line in table] == [
        ["write", "posix"], ["write", "subfile"], ["read", "posix"], ["read", "subfile"],
    ]  # fmt: skip
    assert table[0].split()[-2:] == ["1.00", "1.00-1.00"]
    # progress: rank 0 only, numbered without gaps, the APIs taking turns
    lines = [line for line in result.stderr.splitlines() if line.startswith("bench:")]
    expected = [
        (api, i, access) for i in (1, 2) for api in ("posix", "subfile") for access in ("write", "read")
    ]  # fmt: skip
    assert len(lines) == len(expected)
    for number, (line, (api, i, kind)) in enumerate(zip(lines, expected), start=1):
        assert re.fullmatch(
            rf"bench: \[{number}/8\] {api} iteration {i}/2 {kind} [\d.]+ MiB/s", line
        )
    record = json.loads((tmp_path / "r.json").read_text())
    assert set(record) == {"apis", "runs", "comparison", "unavailable"}
    assert record["apis"] == ["posix", "subfile"] and record["unavailable"] == {}
    assert [run["options"]["api"] for run in record["runs"]] == ["posix", "subfile"]
    assert [run["options"]["test_file"] for run in record["runs"]] == [
        f"{tmp_path / 'f'}.posix", f"{tmp_path / 'f'}.subfile",
    ]  # fmt: skip
    for row in record["comparison"]:
        assert row["repetitions"] == 2
        for key in ("median_mib_s", "min_mib_s", "max_mib_s", "ratio", "ratio_min", "ratio_max"):
            assert isinstance(row[key], float) and row[key] > 0, key
        assert row["min_mib_s"] <= row["median_mib_s"] <= row["max_mib_s"]
    _check_csv((tmp_path / "r.csv").read_text(), record)
    assert not list(tmp_path.glob("f.*"))  # no -k: every API's files removed


def test_unavailable_api_is_skipped_once(tmp_path: Path) -> None:
    if h5py.get_config().mpi:
        pytest.skip("this h5py has MPI: phdf5 is available here")
    result = run_cli(2, "bench", "-a", "posix,phdf5", *SMALL, "-o", tmp_path / "f", "--json", "-")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("phdf5: unavailable") == 1  # stdout carries the JSON
    record = json.loads(result.stdout)
    assert record["apis"] == ["posix"] and set(record["unavailable"]) == {"phdf5"}


def test_bad_api_list_is_reported_once() -> None:
    result = run_cli(2, "bench", "-a", "posix,nfs", *SMALL)
    assert result.returncode == 2  # the command line is wrong, as for every verb
    assert result.stderr.count("unknown API 'nfs'") == 1 and result.stdout == ""


def test_sweep_refuses_mpiexec_and_missing_matplotlib(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.toml"
    spec.write_text('ranks = [2]\napis = ["posix"]\nblock = "256k"\ntransfer = ["64k"]\n')
    out = tmp_path / "out"
    under = subprocess.run(
        [str(MPIEXEC), "-n", "2", sys.executable, "-m", "h5subfile", "bench", "--sweep", str(spec)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert under.returncode == 1
    assert under.stderr.count("--sweep launches mpiexec itself") == 1
    assert not (tmp_path / "tiny-results").exists()
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    missing = subprocess.run(
        [sys.executable, "-m", "h5subfile", "bench", "--sweep", str(spec), "--out", str(out)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.count("plots need matplotlib") == 1
    assert not (out / "results.json").exists()  # refused before any run


def test_fs_hints_start_from_the_file_systems_and_given_hints_win(tmp_path: Path) -> None:
    from h5subfile.bench.options import filesystem_hints

    out = tmp_path / "f"
    result = run_cli(
        2, "bench", "-a", "mpiio", "-b", B, "-t", T, "-w", "-o", out, "--fs-hints",
        "--hint", "romio_cb_read=enable", "--json", tmp_path / "r.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "r.json").read_text())
    expected = dict(filesystem_hints(str(out), 1, B), romio_cb_read="enable")
    assert run["options"]["hints"] == expected
    assert "hints               : " in result.stdout

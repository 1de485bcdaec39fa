"""The IOR-style benchmark: options, hints, every API's bytes, IOR output, JSON/CSV, sweeps."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli
from h5subfile.bench import pattern
from h5subfile.bench.options import ROMIO9, BenchOptionError, BenchOptions, parse_hints
from h5subfile.bench.report import SUMMARY_HEADER, TABLE_HEADER
from h5subfile.bench.sweep import expand

KIB = 1024
B, T, S = 256 * KIB, 64 * KIB, 2


def test_options_follow_ior_rules() -> None:
    BenchOptions(api="mpiio", block=B, transfer=T)
    for bad in (
        dict(block=100 * KIB, transfer=64 * KIB),
        dict(api="netcdf"),
        dict(api="subfile", file_per_proc=True),
        dict(api="posix", subfiles=2),
        dict(transfer=12, block=24),
        dict(write=False, read=False),
        dict(api="phdf5", alignment=3000),
    ):
        with pytest.raises(BenchOptionError):
            BenchOptions(**bad)


def test_hints_from_environment_and_arguments() -> None:
    env = {"IOR_HINT__MPI__romio_cb_write": "enable", "IOR_HINT__MPI__cb_nodes": "2", "OTHER": "x"}
    hints = dict(parse_hints(["cb_nodes=4", "striping_unit=1048576"], env))
    assert hints == {"romio_cb_write": "enable", "cb_nodes": "4", "striping_unit": "1048576"}
    with pytest.raises(BenchOptionError):
        parse_hints(["novalue"], {})
    assert len({label for label, _ in ROMIO9}) == 9


def test_sweep_expansion() -> None:
    configs = expand(
        {
            "ranks": [2, 4],
            "apis": ["posix", "mpiio", "subfile"],
            "block": "1m",
            "transfer": ["64k", "1m"],
            "file_per_proc": [False, True],
            "collective": [False, True],
            "ranks_per_subfile": [1, 2, 4],
            "hints": ["none", "romio9"],
        }
    )
    count = lambda api, ranks: sum(c.api == api and c.ranks == ranks for c in configs)  # noqa: E731
    assert count("posix", 2) == 2 * 2  # transfers x file_per_proc
    assert count("mpiio", 4) == 2 * 2 * 2 * 10  # transfers x fpp x collective x (none + 9)
    assert count("subfile", 2) == 2 * 2  # factor 4 > 2 ranks is skipped
    assert count("subfile", 4) == 2 * 3


def expected_transfer(writer: int, segment: int, index: int) -> np.ndarray:
    words = pattern.transfer_words(T, writer, 0)
    pattern.stamp(words, segment, index)
    return words


def check_raw_layout(read_words, ranks: int, per_process: bool) -> None:
    """Every transfer sits where IOR's layout puts it, with its writer's data."""
    for rank in range(ranks):
        for segment in range(S):
            for index in range(B // T):
                within = index * T
                got = read_words(rank, segment, within)
                assert np.array_equal(got, expected_transfer(rank, segment, index)), (
                    rank,
                    segment,
                    index,
                )


@pytest.mark.parametrize(
    "api, flags",
    [
        ("posix", []),
        ("posix", ["-F"]),
        ("mpiio", []),
        ("mpiio", ["-F"]),
        ("mpiio", ["-c"]),
        ("hdf5", []),
        ("hdf5", ["-F"]),
        ("subfile", ["--ranks-per-subfile", "2"]),
        ("subfile", ["--subfiles", "rank"]),
    ],
)
def test_each_api_writes_and_reads_the_right_bytes(tmp_path: Path, api: str, flags: list) -> None:
    ranks = 3
    test_file = tmp_path / "testFile"
    result = run_cli(
        ranks,
        "bench",
        "-a",
        api,
        "-b",
        B,
        "-t",
        T,
        "-s",
        S,
        "-i",
        "2",
        "-W",
        "-R",
        "-C",
        "-k",
        "-o",
        test_file,
        "--json",
        tmp_path / "r.json",
        *flags,
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    rows = record["iterations"]
    assert [(r["access"], r["iteration"]) for r in rows] == [
        ("write", 0),
        ("read", 0),
        ("write", 1),
        ("read", 1),
    ]
    assert all(r["bad_transfers"] == 0 for r in rows)
    assert all(r["bytes"] == ranks * S * B and r["ops"] == ranks * S * (B // T) for r in rows)
    # independent check of what is on disk, without the benchmark's code
    per_process = "-F" in flags
    if api in ("posix", "mpiio"):

        def read_words(rank, segment, within):
            path = f"{test_file}.{rank:08d}" if per_process else test_file
            offset = (
                segment * B + within if per_process else segment * B * ranks + rank * B + within
            )
            with open(path, "rb") as handle:
                handle.seek(offset)
                return np.frombuffer(handle.read(T), dtype=np.uint64)
    else:

        def read_words(rank, segment, within):
            path = f"{test_file}.{rank:08d}" if per_process else test_file
            start = (0 if per_process else rank * B // 8) + within // 8
            code = (
                "import h5py, sys, numpy as np\n"
                "d = h5py.File(sys.argv[1])[sys.argv[2]]\n"
                "sys.stdout.buffer.write(d[int(sys.argv[3]):int(sys.argv[4])].tobytes())\n"
            )
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    code,
                    str(path),
                    f"segment_{segment:04d}",
                    str(start),
                    str(start + T // 8),
                ],
                capture_output=True,
                check=True,
            )
            return np.frombuffer(out.stdout, dtype=np.uint64)

    check_raw_layout(read_words, ranks, per_process)


def test_ior_output_lines_parse(tmp_path: Path) -> None:
    result = run_cli(
        2,
        "bench",
        "-a",
        "subfile",
        "-b",
        B,
        "-t",
        T,
        "-s",
        S,
        "-i",
        "3",
        "-o",
        tmp_path / "f",
        "--csv",
        tmp_path / "r.csv",
        "--progress",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert TABLE_HEADER in lines and SUMMARY_HEADER in lines
    assert "Summary of all tests:" in lines
    rows = [line.split() for line in lines if re.match(r"^(write|read)\s+\d", line)]
    table = [r for r in rows if len(r) == 11]
    assert len(table) == 6
    for row in table:
        bw, iops, latency, block, xfer, open_s, wr, close_s, total, iteration = map(float, row[1:])
        assert bw > 0 and block == B / 1024 and xfer == T / 1024 and total >= wr
        assert abs(bw - 2 * S * B / 2**20 / total) / bw < 0.02  # IOR's definition
    summary = [r for r in rows if len(r) > 11]
    assert {r[0] for r in summary} == {"write", "read"}
    maxima = [line for line in lines if line.startswith(("Max Write:", "Max Read:"))]
    assert lines[-2:] == maxima
    for line in maxima:
        mib, mb = map(float, re.findall(r"([\d.]+) MiB/sec \(([\d.]+) MB/sec\)", line)[0])
        assert abs(mb - mib * 1.048576) < 0.02
    progress = [line for line in result.stderr.splitlines() if line.startswith("bench:")]
    assert len(progress) == 6 and progress[-1].startswith("bench: [6/6] subfile iteration 3/3 read")
    csv_lines = (tmp_path / "r.csv").read_text().splitlines()
    assert csv_lines[0].startswith("api,ranks,tasks_per_node,access") and len(csv_lines) == 7
    assert all(line.startswith("subfile,2,") for line in csv_lines[1:])  # the API, not a version


def test_json_has_every_field(tmp_path: Path) -> None:
    result = run_cli(
        2,
        "bench",
        "-a",
        "mpiio",
        "-c",
        "-b",
        B,
        "-t",
        T,
        "-o",
        tmp_path / "f",
        "--hint",
        "romio_cb_write=enable",
        "--json",
        "-",
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert set(record) >= {
        "options",
        "ranks",
        "tasks_per_node",
        "details",
        "versions",
        "machine",
        "iterations",
        "summary",
        "unavailable",
    }
    assert record["options"]["hints"] == {"romio_cb_write": "enable"}
    assert record["options"]["collective"] is True
    assert record["options"]["api"] == "mpiio" and record["unavailable"] is None
    assert (record["options"]["block"], record["options"]["transfer"]) == (B, T)
    assert record["ranks"] == 2 and isinstance(record["tasks_per_node"], int)
    assert record["details"]["api_version"].startswith("MPICH")  # the MPI library's own line
    assert record["details"]["access"] == "single-shared-file"
    for key in ("h5subfile", "numpy", "h5py", "hdf5", "mpi4py", "mpi"):
        assert isinstance(record["versions"][key], str) and record["versions"][key], key
    assert isinstance(record["machine"]["cores"], int) and record["machine"]["hostname"]
    assert set(record["machine"]) >= {"hostname", "cores", "platform", "date"}
    assert [(r["access"], r["iteration"]) for r in record["iterations"]] == [
        ("write", 0),
        ("read", 0),
    ]
    for row in record["iterations"]:
        for key in ("bw_mib_s", "iops", "latency_s", "open_s", "xfer_s", "close_s", "total_s"):
            assert isinstance(row[key], float) and row[key] >= 0, key
        assert row["bytes"] == 2 * B and row["ops"] == 2 * (B // T) and row["bad_transfers"] is None
        assert row["bw_mib_s"] == pytest.approx(row["bytes"] / 2**20 / row["total_s"])
        assert row["total_s"] >= max(row["open_s"], row["xfer_s"], row["close_s"])
    for access in ("write", "read"):
        summary = record["summary"][access]
        assert summary["min_mib"] <= summary["median_mib"] <= summary["max_mib"]
        assert all(isinstance(v, float) for v in summary.values())


def test_bad_options_are_reported_once(tmp_path: Path) -> None:
    result = run_cli(3, "bench", "-a", "posix", "-b", "100k", "-t", "64k")
    assert result.returncode == 2  # a usage error, as for every verb
    assert result.stderr.count("must be a multiple of the transfer size") == 1


PHDF5_PYTHON = ROOT.parent / ".venv-phdf5" / "bin" / "python"


def test_phdf5_says_why_it_is_unavailable(tmp_path: Path) -> None:
    if h5py.get_config().mpi:
        pytest.skip("this h5py has MPI: phdf5 is available here")
    result = run_cli(2, "bench", "-a", "phdf5", "-o", tmp_path / "f", "--json", tmp_path / "r.json")
    assert result.returncode == 0
    assert result.stdout.count("phdf5: unavailable") == 1 and "make phdf5" in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["unavailable"].startswith("phdf5")


@pytest.mark.skipif(
    not (PHDF5_PYTHON.parent.parent / ".installed").exists(),
    reason="parallel HDF5 environment not built (run `make phdf5`)",
)
@pytest.mark.parametrize(
    "flags", [[], ["-c", "--coll-metadata", "--no-fill"], ["--alignment", "64k"], ["-F"]]
)
def test_phdf5_runs_in_its_environment(tmp_path: Path, flags: list) -> None:
    mpiexec = PHDF5_PYTHON.parent / "mpiexec"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [
            str(mpiexec),
            "-n",
            "2",
            str(PHDF5_PYTHON),
            "-m",
            "h5subfile",
            "bench",
            "-a",
            "phdf5",
            "-b",
            str(B),
            "-t",
            str(T),
            "-s",
            str(S),
            "-W",
            "-R",
            "-C",
            "-o",
            str(tmp_path / "f"),
            "--json",
            "-",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["iterations"]
    assert [r["bad_transfers"] for r in rows] == [0, 0]


def test_sweep_writes_results_and_plots(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        'title = "tiny"\nrepetitions = 1\nranks = [2]\napis = ["posix", "subfile", "phdf5"]\n'
        'block = "256k"\ntransfer = ["64k", "256k"]\nfile_per_proc = [false, true]\n'
        "ranks_per_subfile = [1, 2]\n"
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "h5subfile",
            "bench",
            "--sweep",
            str(spec),
            "--out",
            str(out),
            "--progress",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "results.json").read_text())
    total = 2 * 2 + 2 * 2 + (2 if h5py.get_config().mpi else 0)  # phdf5: 2 transfer sizes
    assert len(record["runs"]) == total
    counters = re.findall(r"^\[(\d+)/(\d+)\] ", result.stderr, flags=re.M)
    assert counters == [(str(n), str(total)) for n in range(1, total + 1)]  # none skipped
    assert f"sweep: {total} of {total} run(s) done" in result.stdout
    if not h5py.get_config().mpi:  # said once, before the runs, and not counted
        assert result.stderr.count("phdf5: unavailable") == 1
        assert result.stderr.index("phdf5: unavailable") < result.stderr.index("[1/")
    for name in (
        "bandwidth_vs_subfiling_factor.png",
        "bandwidth_vs_transfer_size.png",
        "bandwidth_per_api.png",
    ):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
    assert not shutil.which("nonexistent-tool")  # the sweep needs no extra tools

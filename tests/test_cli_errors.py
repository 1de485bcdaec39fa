"""The command line ends a failing job the same way on the read side as on the write side: one
message, printed once by rank 0, exit status 1 on every rank, no warnings, no per-rank
tracebacks, no MPI_Abort. `info` reports unreadable subfiles as such and never looks at files
outside the master's folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import run_cli

PARTICLES = 300


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two VPIC-IO steps of 300 particles per rank, 2 ranks in 2 subfiles (written once)."""
    path = tmp_path_factory.mktemp("written") / "run.h5"
    result = run_cli(
        2, "vpic", path, "--particles", PARTICLES, "--steps", 2, "--subfiles", 2, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture
def run(written: Path, tmp_path: Path) -> Path:
    """A copy of the written file (master and subfiles) for one test to damage."""
    shutil.copy(written, tmp_path / written.name)
    shutil.copytree(written.parent / "run.subfiles", tmp_path / "run.subfiles")
    return tmp_path / written.name


def assert_one_clean_message(result, fragment: str) -> str:
    """Exit status 1, ``fragment`` said once, nothing else on stderr."""
    err = result.stderr
    assert result.returncode == 1, (result.returncode, err)
    assert err.count(fragment) == 1, err
    for noise in ("Traceback", "Warning", "[rank", "Abort", "MPI_Abort"):
        assert noise not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("plan", [[], ["--aggregators", "1"]], ids=["independent", "aggregated"])
def test_bdcats_on_a_missing_subfile_says_so_once(run: Path, plan: list[str]) -> None:
    subfile = next((run.parent / "run.subfiles").glob("s0-*-00001.h5"))  # names carry the id
    subfile.unlink()
    result = run_cli(3, "bdcats", run, "--quiet", *plan, timeout=120)
    line = assert_one_clean_message(result, "h5subfile bdcats: error:")
    assert line.startswith(f"h5subfile bdcats: error: subfile run.subfiles/{subfile.name}")
    assert "is missing" in line


def test_info_under_mpiexec_reports_an_unreadable_subfile(run: Path) -> None:
    subfile = next((run.parent / "run.subfiles").glob("s0-*-00001.h5"))  # names carry the id
    subfile.unlink()
    subfile.mkdir()  # there, but not a file anyone can read data from
    result = run_cli(2, "info", run, "--json", timeout=120)
    assert result.returncode == 1, result.stderr
    assert not result.stderr.strip(), result.stderr
    info = json.loads(result.stdout)  # printed once, by rank 0
    (state,) = [f["state"] for f in info["files"] if f["file"].endswith(subfile.name)]
    assert state.startswith("UNREADABLE"), state
    assert any("cannot be read" in p and "not a regular file" in p for p in info["problems"])


def test_info_never_looks_outside_the_masters_folder(run: Path) -> None:
    with h5py.File(run, "r+") as f:
        record = json.loads(f["Timestep_0/x"].attrs["h5subfile.layout"])
        record["extents"][0]["file"] = "../elsewhere/secret.h5"
        f["Timestep_0/x"].attrs["h5subfile.layout"] = json.dumps(record)
    secret = run.parent.parent / "elsewhere" / "secret.h5"  # exists: it could be looked at
    secret.parent.mkdir(exist_ok=True)
    secret.write_bytes(b"secret")
    result = run_cli(1, "info", run, "--json", timeout=120)
    info = json.loads(result.stdout)
    (entry,) = [f for f in info["files"] if "secret" in f["file"]]
    assert entry["bytes"] is None and entry["state"].startswith("OUTSIDE")
    assert result.returncode == 1  # the escaping path is a problem of the file


def test_info_on_a_missing_file_is_one_message(tmp_path: Path) -> None:
    result = run_cli(2, "info", tmp_path / "nothing.h5", timeout=120)
    line = assert_one_clean_message(result, "h5subfile info: error:")
    assert "nothing.h5 does not exist" in line


# --- One way of reporting errors: printed once under mpiexec, one line, documented statuses ---


def assert_said_once(result, status: int, fragment: str) -> str:
    """Exit status ``status`` on the job, ``fragment`` in one line printed once, no usage
    block, traceback or MPI abort."""
    err = result.stderr
    assert result.returncode == status, (result.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert fragment in lines[0], err
    for noise in ("Traceback", "usage:", "Abort", "invalid parse_", "Error: "):
        assert noise not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["vpic", "x.h5", "--bogus"], "h5subfile vpic: error: unrecognized arguments: --bogus"),
        (["vpic", "x.h5", "--particles", "abc"], "argument --particles: cannot read 'abc'"),
        (["bdcats"], "the following arguments are required: file"),
        (["bdcats", "x.h5", "--fraction", "2"], "argument --fraction: must be in (0, 1]"),
        (["vpic", "x.h5", "--collective"], "--collective applies to --api phdf5 only"),
    ],
    ids=["bad-flag", "bad-count", "missing-file-argument", "fraction", "collective"],
)
def test_usage_errors_are_printed_once_with_status_2(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    args = [str(tmp_path / a) if a == "x.h5" else a for a in args]
    result = run_cli(2, *args, timeout=120)
    line = assert_said_once(result, 2, fragment)
    assert line.startswith("h5subfile "), line
    assert not list(tmp_path.iterdir())


def test_help_is_printed_once(tmp_path: Path) -> None:
    result = run_cli(2, "bdcats", "--help", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("usage: h5subfile bdcats") == 1, result.stdout


def test_a_folder_is_named_as_such(run: Path) -> None:
    for verb in ("info", "bdcats"):
        result = run_cli(2, verb, run.parent, timeout=120)
        assert_said_once(result, 1, f"h5subfile {verb}: error: {run.parent} is a folder")
    result = run_cli(2, "info", run.parent / "run.subfiles", timeout=120)
    line = assert_said_once(result, 1, "is the folder of a file's subfiles")
    assert line.endswith(f"give its master, {run}"), line


def test_an_error_on_one_rank_only_is_still_printed_once(tmp_path: Path) -> None:
    """Rank 0 alone fails (writing the results where no folder is): the others agree on the
    outcome with it, so the job ends with one line and status 1, not with MPI_Abort."""
    result = run_cli(
        2, "bench", "-a", "posix", "-b", "8k", "-t", "8k", "-o", tmp_path / "t", "--quiet",
        "--json", tmp_path / "none" / "r.json", timeout=120,
    )  # fmt: skip
    line = assert_said_once(result, 1, "r.json")
    assert "h5subfile bench: error:" in line


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run_cli(1, "--debug", "info", tmp_path / "none.h5", timeout=120)
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.count("h5subfile info: error:") == 1


# --- info ---


def test_info_labels_plain_files_and_subfiles(run: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f["a"] = list(range(10))
    first = run_cli(1, "info", plain, timeout=120).stdout.splitlines()[0]
    assert "plain HDF5 file" in first and "master" not in first, first
    subfile = sorted((run.parent / "run.subfiles").iterdir())[0]
    result = run_cli(1, "info", subfile, timeout=120)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert f"subfile of {run}" in first and ": master" not in first, first
    info = json.loads(run_cli(1, "info", subfile, "--json", timeout=120).stdout)
    assert info["kind"] == "subfile" and info["master"] == str(run)


def test_info_says_a_missing_subfile_once(run: Path) -> None:
    subfile = next((run.parent / "run.subfiles").glob("s0-*-00001.h5"))
    subfile.unlink()
    result = run_cli(2, "info", run, timeout=120)
    assert result.returncode == 1 and not result.stderr.strip(), result.stderr
    problems = result.stdout.split("problems:\n", 1)[1].splitlines()
    assert len(problems) == 1, result.stdout
    assert problems[0].startswith(f"  - subfile run.subfiles/{subfile.name} is missing"), problems
    assert "16 dataset(s)" in problems[0]


def test_info_json_into_a_closed_pipe_ends_quietly(run: Path) -> None:
    """``info --json | head``: the reader goes away before the output is written."""
    with subprocess.Popen(
        [sys.executable, "-m", "h5subfile", "info", str(run), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        err = process.stderr.read().decode()
        assert process.wait(timeout=120) == 141
    assert not err.strip(), err


# --- vpic and bdcats ---


def test_vpic_json_records_the_number_of_subfiles(tmp_path: Path) -> None:
    result = run_cli(
        2, "vpic", tmp_path / "v.h5", "--particles", 10, "--subfiles", 2, "--json", timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["plan"]["subfiles"] == 2
    result = run_cli(
        2, "vpic", tmp_path / "w.h5", "--particles", 10, "--subfiles", "rank", "--json"
    )
    assert json.loads(result.stdout)["plan"]["subfiles"] == "rank"


def test_bdcats_partial_count_beyond_a_share_is_an_error(run: Path) -> None:
    result = run_cli(2, "bdcats", run, "--pattern", "partial", "--count", 301, timeout=120)
    line = assert_said_once(result, 1, "--count 301 is more than a rank's share")
    assert "give --count 300 or less" in line
    result = run_cli(2, "bdcats", run, "--pattern", "partial", "--count", 300, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_bytes"] == 2 * 2 * 300 * 32


@pytest.mark.parametrize("ranks", [1, 2])
def test_bdcats_partial_reads_half_a_share_unless_given_a_count(written: Path, ranks: int) -> None:
    """Without --count, a partial read fits any file: half a rank's share, said in the output
    (the default was once 1Mi, more than a share of most files)."""
    count = 2 * PARTICLES // ranks // 2  # the datasets hold 600 particles
    args = ["bdcats", written, "--pattern", "partial", "--verify"]
    result = run_cli(ranks, *args, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"\nParticles read per rank per dataset (partial): {count}\n" in result.stdout
    assert "Verification: every value read matches what VPIC-IO wrote" in result.stdout
    data = json.loads(run_cli(ranks, *args, "--json", timeout=120).stdout)
    assert data["count"] == count and data["verified"]
    assert data["total_bytes"] == ranks * 2 * count * 32  # 2 steps of 8 four-byte fields
    given = json.loads(run_cli(ranks, *args, "--count", 7, "--json", timeout=120).stdout)
    assert given["count"] == 7 and given["total_bytes"] == ranks * 2 * 7 * 32


def test_progress_lines_only_when_asked_and_only_from_rank_0(tmp_path: Path) -> None:
    path = tmp_path / "p.h5"
    quiet = run_cli(2, "vpic", path, "--particles", 10, "--steps", 2)  # stderr: not a terminal
    assert quiet.returncode == 0 and not quiet.stderr.strip(), quiet.stderr
    shown = run_cli(2, "vpic", path, "--particles", 10, "--steps", 2, "--progress")
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.count("vpic: step 2/2 written") == 1, shown.stderr
    read = run_cli(2, "bdcats", path, "--progress", "--json")
    assert read.returncode == 0, read.stderr
    assert read.stderr.count("bdcats: dataset 16/16 read") == 1, read.stderr


def test_info_lists_links(tmp_path: Path) -> None:
    """`info` names a file's soft, external and further hard links with what they point to,
    and its named types, in text and JSON."""
    plain = tmp_path / "linked.h5"
    with h5py.File(plain, "w") as f:
        f["g/a"] = list(range(4))
        f["soft"] = h5py.SoftLink("/g/a")
        f["hard"] = f["g/a"]
        f["ext"] = h5py.ExternalLink("other.h5", "/x")
        f["t"] = np.dtype("<i2")
    text = run_cli(1, "info", plain, timeout=120).stdout
    assert "links:\n  /ext (external link to other.h5:/x)\n" in text, text
    assert "named types:\n  /t <i2\n" in text, text
    info = json.loads(run_cli(1, "info", plain, "--json", timeout=120).stdout)
    assert info["links"] == [
        "/ext (external link to other.h5:/x)",
        "/hard (hard link to /g/a)",
        "/soft (soft link to /g/a)",
    ]
    assert info["types"] == ["/t <i2"]

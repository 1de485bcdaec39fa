"""``h5subfile tune`` on this machine (2 ranks, a small pattern): a ranked table, a
recommendation only beyond the noise, a tuning profile saved where ``H5SUBFILE_TUNING_DIR``
says; then ``--plan auto`` writes with that profile's plan and records it (``info``), and plain
h5py reads the file in a separate process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli, run_python


@pytest.fixture
def tuning_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "profiles"
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(folder))
    return folder


def test_tune_measures_ranks_and_saves_a_profile(tmp_path: Path, tuning_dir: Path) -> None:
    trials = tmp_path / "trials"  # made by the tuner
    result = run_cli(
        2, "tune", trials, "--particles", "16Ki", "--repetitions", 3, "--budget", "60s", "--json"
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["ranks"] == 2 and found["trials"] >= 3 * len(found["rows"])
    assert any(row["plan"] == {} for row in found["rows"])  # the default, measured every round
    kept_default = found["reason"].startswith("keep the default")
    assert (found["recommendation"] is None) == kept_default, found["reason"]
    (saved,) = tuning_dir.glob("*.json")
    assert found["profile"] == str(saved)
    profile = json.loads(saved.read_text())
    assert (profile["ranks"], profile["filesystem"]) == (2, found["filesystem"])
    assert profile["plan"] == (found["recommendation"] or {})
    assert list(trials.iterdir()) == []  # every trial file deleted


def test_plan_auto_uses_the_profile_and_records_it(tmp_path: Path, tuning_dir: Path) -> None:
    result = run_cli(2, "tune", tmp_path, "--particles", "1Ki", "--repetitions", 3, "--json")
    assert result.returncode == 0, result.stderr
    (saved,) = tuning_dir.glob("*.json")
    profile = json.loads(saved.read_text())
    profile["plan"] = {"subfiles": "rank", "alignment": 65536}  # a plan that shows in the file
    saved.write_text(json.dumps(profile))
    path = tmp_path / "run.h5"
    written = run_cli(
        2, "vpic", path, "--particles", 500, "--steps", 1, "--plan", "auto", "--quiet"
    )
    assert written.returncode == 0, written.stderr
    described = json.loads(run_cli(1, "info", path, "--json").stdout)
    (session,) = described["sessions"]
    assert session["plan"]["subfiles"] == "rank" and session["plan"]["alignment"] == 65536
    assert session["extra"]["plan_source"].startswith(f"tuning profile {saved}")
    read = run_python(
        "import sys, h5py\nwith h5py.File(sys.argv[1]) as f: print(f['Timestep_0/x'].shape)",
        str(path),
    )
    assert read.returncode == 0 and "(1000,)" in read.stdout, read.stderr


def test_plan_auto_without_a_profile_says_so(tmp_path: Path, tuning_dir: Path) -> None:
    path = tmp_path / "run.h5"
    written = run_cli(
        1, "vpic", path, "--particles", 100, "--steps", 1, "--plan", "auto", "--quiet"
    )
    assert written.returncode == 0, written.stderr
    shown = run_cli(1, "info", path).stdout
    assert "plan=auto: no tuning profile for" in shown and ": defaults" in shown


def test_plan_auto_passes_over_a_profile_for_more_ranks(tmp_path: Path, tuning_dir: Path) -> None:
    """The nearest profile, tuned for 64 ranks with 32 subfiles, cannot be used by 2 ranks:
    the job writes with the defaults, as it would without --plan auto, and says why."""
    from h5subfile.io.filesystem import probe
    from h5subfile.io.tuning_profiles import Profile, save_profile

    fs = probe(tmp_path)
    saved = save_profile(Profile(fs.name, fs.mount, 64, 2, {"subfiles": 32}), tuning_dir)
    path = tmp_path / "run.h5"
    written = run_cli(
        2, "vpic", path, "--particles", 100, "--steps", 1, "--plan", "auto", "--quiet"
    )
    assert written.returncode == 0, written.stderr
    shown = run_cli(1, "info", path).stdout
    assert f"plan=auto: no tuning profile fits {fs.name} on {fs.mount}, 2 ranks" in shown
    assert f"not fitting this job: {saved} (subfiles=32 but the communicator has only 2" in shown


def test_tune_refuses_a_folder_it_cannot_make(tmp_path: Path, tuning_dir: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_cli(2, "tune", blocker / "sub", "--particles", "1Ki")
    assert result.returncode == 1
    assert result.stderr.count("error") == 1 and "sub" in result.stderr, result.stderr
    assert not tuning_dir.exists()


def test_tune_refuses_a_tuning_folder_it_cannot_write_before_searching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tuning folder under a regular file cannot be made, even by root (ENOTDIR): every
    rank stops before the first round with the same error, named once, and the job ends by
    its exit status, not MPI_Abort."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    folder = blocker / "profiles"
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(folder))
    trials = tmp_path / "trials"
    result = run_cli(2, "tune", trials, "--particles", "1Ki", "--repetitions", 3, timeout=120)
    assert result.returncode == 1, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "error" in line]
    assert line == (
        f"h5subfile tune: error: tuning folder {folder} is not writable: ENOTDIR (Not a "
        "directory); set H5SUBFILE_TUNING_DIR to a folder this job can write"
    )
    assert "round" not in result.stderr and "Abort" not in result.stderr
    assert result.stdout == "" and list(trials.iterdir()) == []
    saved = run_cli(2, "tune", trials, "--particles", "1Ki", "--repetitions", 3, "--no-save")
    assert saved.returncode == 0, saved.stderr  # nothing to save: the folder does not matter


def test_bench_plan_auto_writes_with_the_profiles_plan(tmp_path: Path, tuning_dir: Path) -> None:
    from h5subfile.io.filesystem import probe
    from h5subfile.io.tuning_profiles import Profile, save_profile

    fs = probe(tmp_path)
    saved = save_profile(Profile(fs.name, fs.mount, 2, 1, {"subfiles": "rank"}), tuning_dir)
    out = tmp_path / "b.json"
    result = run_cli(2, "bench", "-a", "subfile", "-b", "64k", "-t", "64k", "-w",
                     "-o", tmp_path / "f", "--plan", "auto", "--json", out)  # fmt: skip
    assert result.returncode == 0, result.stderr
    details = json.loads(out.read_text())["details"]
    assert details["plan"]["subfiles"] == "rank"
    assert details["plan_source"].startswith(f"tuning profile {saved}")


def test_tune_like_a_profiled_job_writes_as_many_bytes_per_rank(
    tmp_path: Path, tuning_dir: Path
) -> None:
    job = run_cli(2, "vpic", tmp_path / "job.h5", "--particles", 4096, "--steps", 1,
                  "--profile", tmp_path / "prof", "--quiet")  # fmt: skip
    assert job.returncode == 0, job.stderr
    profile = tmp_path / "prof" / "job.h5.write.json"
    result = run_cli(2, "tune", tmp_path / "t", "--like", profile, "--repetitions", 3,
                     "--budget", "20s", "--json", "--no-save")  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = sorted(r["bytes_written"] for r in json.loads(profile.read_text())["ranks"])
    block = written[1] // 8 // 8 * 8  # the median of 2 ranks' bytes, in 8 datasets
    assert json.loads(result.stdout)["pattern"].startswith(f"8 datasets x {block // 1024} KiB")
    refused = run_cli(2, "tune", tmp_path / "t", "--like", tmp_path / "job.h5", "--no-save")
    assert refused.returncode == 1 and f"--like {tmp_path / 'job.h5'}: " in refused.stderr
    assert refused.stderr.count("error") == 1 and "H5SUBFILE_DEBUG" not in refused.stderr

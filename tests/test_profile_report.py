"""``h5subfile report`` end to end: a real profile of a 2-rank VPIC-IO write (traced, in small
pieces) becomes a page with every picture and the findings the run deserves; a missing or
corrupt profile, or a missing matplotlib, is one line and exit status 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPIEXEC

PNG = b"\x89PNG\r\n\x1a\n"
PICTURES = ("timeline.png", "rate.png", "sizes.png", "ranks.png", "files.png", "phases.png")


def h5subfile(*args: str, code: str = "pass", timeout: float = 120) -> subprocess.CompletedProcess:
    """``h5subfile ARGS`` in a plain process (``code`` runs first, in the same interpreter)."""
    run = f"import sys; {code}; from h5subfile.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", run, *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The profile of two VPIC-IO steps by 2 ranks, file per process, cut into 4 KiB writes
    (many small, unaligned writes), with the trace on."""
    folder = tmp_path_factory.mktemp("profiled")
    env = {
        **os.environ,
        "H5SUBFILE_PROFILE": str(folder / "prof"),
        "H5SUBFILE_PROFILE_TRACE": "100000",
    }
    command = [str(MPIEXEC), "-n", "2", sys.executable, "-m", "h5subfile", "vpic"]
    command += [str(folder / "run.h5"), "--particles", "64Ki", "--steps", "2"]
    command += ["--subfiles", "rank", "--transfer-size", "4k", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    return folder / "prof" / "run.h5.write.json"


def test_the_report_of_a_real_run(profile: Path, tmp_path: Path) -> None:
    result = h5subfile("report", str(profile), "--out", str(tmp_path / "report"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "report" / "report.md")
    page = (tmp_path / "report" / "report.md").read_text()
    for name in PICTURES:
        data = (tmp_path / "report" / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5000, (name, len(data))
        assert f"]({name})" in page, name
    findings = page.split("## Findings")[1].split("## Pictures")[0]
    assert "1. **Small writes** (`small_writes`)" in findings
    assert "(`unaligned`)" in findings and "`alignment` (`--alignment`" in findings
    assert "| 0 | 4.0" in page and "| 1 | 4.0" in page  # each rank wrote its 4 MiB


def test_the_default_folder_is_beside_the_profile_and_text_is_unchanged(profile: Path) -> None:
    result = h5subfile("report", str(profile))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(profile.parent / "run.h5.write.report" / "report.md")
    text = h5subfile("report", str(profile), "--text")
    assert text.returncode == 0 and text.stdout == profile.with_suffix(".txt").read_text()


def test_missing_or_corrupt_profiles_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"format": "h5subfile-profile", "version": 1}')
    for path, says in (
        (tmp_path / "none.json", "none.json does not exist"),
        (tmp_path / "bad.json", "bad.json is not a readable h5subfile profile"),
    ):
        result = h5subfile("report", str(path))
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("h5subfile report: error: ") and says in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "bad.report").exists()


def test_without_matplotlib_only_text_works(profile: Path, tmp_path: Path) -> None:
    hide = "sys.modules['matplotlib'] = None"
    result = h5subfile("report", str(profile), "--out", str(tmp_path / "r"), code=hide)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "h5subfile report: error: the report's pictures need matplotlib, which h5subfile's "
        "'plots' extra installs: pip install 'h5subfile[plots]' (--text needs nothing more)"
    ]
    text = h5subfile("report", str(profile), "--text", code=hide)
    assert text.returncode == 0 and text.stdout.startswith("# h5subfile profile version: 1")

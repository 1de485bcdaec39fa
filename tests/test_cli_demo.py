"""``h5subfile demo`` checks its arguments before it launches anything, and leaves nothing
behind unless asked to keep its files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def demo(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``h5subfile demo ARGS`` as a plain command, its temporary files under ``tmp``."""
    return subprocess.run(
        [sys.executable, "-m", "h5subfile", "demo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TMPDIR=str(tmp)),
    )


def test_bad_arguments_are_refused_before_mpiexec(tmp_path: Path) -> None:
    for args, said in (
        (["--writers", "1"], "argument --writers: must be at least 2, got 1"),
        (["--readers", "0"], "argument --readers: must be at least 1, got 0"),
        (["--steps", "0"], "argument --steps: must be at least 1, got 0"),
    ):
        result = demo(*args, tmp=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count(said) == 1 and len(result.stderr.splitlines()) == 1
        assert not result.stdout  # nothing started
    assert not list(tmp_path.iterdir())


def test_the_demo_leaves_nothing_behind_unless_kept(tmp_path: Path) -> None:
    tiny = ["--particles", "100", "--steps", "1", "--writers", "2", "--readers", "1"]
    result = demo(*tiny, tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "now removed (keep them with --keep DIR)" in result.stdout
    assert not list(tmp_path.iterdir())  # the temporary folder went at the end
    kept = tmp_path / "kept"
    result = demo(*tiny, "--keep", str(kept), tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in kept.iterdir()) == [
        "per_rank.h5",
        "per_rank.subfiles",
        "shared.h5",
        "subfiled.h5",
        "subfiled.subfiles",
    ]
    assert f"in {kept}" in result.stdout

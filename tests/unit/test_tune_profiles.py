"""Tuning profiles: where they live, save / load / match, the reasons given, damaged files and
files that are not regular (skipped with a warning), a folder that cannot be written."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from h5subfile.errors import RankIOError
from h5subfile.io.tuning_profiles import (
    FORMAT_VERSION,
    MAX_PROFILE_BYTES,
    Found,
    Profile,
    auto_plan,
    load_profiles,
    profile_dir,
    ranked,
    require_writable,
    save_profile,
)
from h5subfile.plan import Plan
from h5subfile.tune.search import Row, TuningResult
from h5subfile.tune.tuning import profile_from_result


def profile(fs: str, mount: str, ranks: int, nodes: int = 1, **plan: object) -> Profile:
    return Profile(fs, mount, ranks, nodes, dict(plan), {"margin": 0.2, "trials": 100})


def test_where_profiles_live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("H5SUBFILE_TUNING_DIR", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert profile_dir() == tmp_path / "home" / ".config" / "h5subfile" / "tuning"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")  # ignored, as the XDG specification says
    assert profile_dir() == tmp_path / "home" / ".config" / "h5subfile" / "tuning"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert profile_dir() == tmp_path / "xdg" / "h5subfile" / "tuning"
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path / "mine"))
    assert profile_dir() == tmp_path / "mine"
    path = save_profile(profile("ext4", "/work", 2))
    assert path.parent == tmp_path / "mine" and path.name == "ext4-work-2r-1n.json"
    assert [p for p, _ in load_profiles().profiles] == [path]


def match_profile(
    filesystem: str, mount: str, ranks: int, nodes: int, directory: Path
) -> tuple[Path, Profile] | None:
    """The best-ranked profile of ``directory`` for a job, or None."""
    best = ranked(load_profiles(directory).profiles, filesystem, mount, ranks, nodes)
    return best[0] if best else None


def test_save_load_match(tmp_path: Path) -> None:
    assert load_profiles(tmp_path / "none") == Found([], [])
    saved = [
        profile("ext4", "/work", 2, aggregators=1),
        profile("ext4", "/work", 8, subfiles="rank"),
        profile("lustre", "/scratch", 64, 2, ranks_per_subfile=16, alignment=4 << 20),
        profile("lustre", "/scratch", 256, 4, ranks_per_subfile=32),
    ]
    paths = [save_profile(p, tmp_path) for p in saved]
    assert len(set(paths)) == 4
    loaded = dict(load_profiles(tmp_path).profiles)
    assert loaded[paths[2]] == saved[2]
    assert json.loads(paths[0].read_text())["version"] == FORMAT_VERSION
    assert match_profile("ext4", "/work", 8, 1, tmp_path) == (paths[1], saved[1])
    assert match_profile("ext4", "/home", 3, 1, tmp_path) == (paths[0], saved[0])  # nearest
    assert match_profile("lustre", "/scratch2", 200, 4, tmp_path) == (paths[3], saved[3])
    assert match_profile("xfs", "/data", 2, 1, tmp_path) is None
    assert match_profile("xfs", "/work", 2, 1, tmp_path) is None  # same mount, other file system
    save_profile(profile("ext4", "/work", 2, aggregators=2), tmp_path)  # replaces the first
    assert match_profile("ext4", "/work", 2, 1, tmp_path) == (
        paths[0],
        profile("ext4", "/work", 2, aggregators=2),
    )


def test_auto_plan_reasons(tmp_path: Path) -> None:
    path = save_profile(profile("ext4", "/work", 2, aggregators=1), tmp_path)
    plan, reason = auto_plan("ext4", "/work", 2, 1, tmp_path)
    assert plan == Plan(aggregators=1)
    assert reason == f"tuning profile {path} for ext4 on /work, 2 ranks"
    plan, reason = auto_plan("ext4", "/home", 4, 1, tmp_path)
    assert plan == Plan(aggregators=1)
    assert (
        reason
        == f"tuning profile {path} for ext4 on /work, 2 ranks (nearest to ext4 on /home, 4 ranks)"
    )
    plan, reason = auto_plan("xfs", "/data", 2, 1, tmp_path)
    assert plan is None and reason == "no tuning profile for xfs on /data, 2 ranks: defaults"


def valid(**changed: object) -> str:
    """A profile's JSON text for ext4 on /work, 2 ranks, with some keys changed."""
    data: dict[str, object] = {
        "version": FORMAT_VERSION,
        "filesystem": "ext4",
        "mount": "/work",
        "ranks": 2,
        "nodes": 1,
        "plan": {"subfiles": "rank"},
    }
    return json.dumps({**data, **changed})


DAMAGED = {
    "not JSON": "{not json",
    "not an object": "[1, 2]",
    "another version": json.dumps({"version": 99, "filesystem": "ext4"}),
    "keys missing": json.dumps({"version": FORMAT_VERSION, "filesystem": "ext4"}),
    "bad plan value": valid(plan={"subfiles": "banana"}),
    "unknown plan field": valid(plan={"speed": "max"}),
    "plan not an object": valid(plan=["subfiles", 2]),
    "infinite ranks": valid().replace('"ranks": 2', '"ranks": 1e999'),
    "fractional ranks": valid(ranks=2.5),
    "ranks a flag": valid(ranks=True),
    "no nodes": valid(nodes=0),
    "more nodes than ranks": valid(nodes=3),
    "ranks beyond an int": valid(ranks=2**31),
    "file system not text": valid(filesystem=3),
    "infinite plan count": valid().replace('"rank"}', '"rank", "aggregators": 1e999}'),
    "huge alignment": valid(plan={"alignment": 2**50}),
    "summary not an object": valid(summary="fast"),
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "too large": valid(summary={"pad": "x" * MAX_PROFILE_BYTES}),
}


@pytest.mark.parametrize("text", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_profile_is_named_skipped_and_warned_about_once(
    tmp_path: Path, text: str
) -> None:
    good = save_profile(profile("ext4", "/work", 3, aggregators=1), tmp_path)  # nearest
    bad = tmp_path / "broken.json"
    bad.write_text(text)
    with pytest.warns(RuntimeWarning, match=f"tuning profile {bad} is damaged") as caught:
        plan, reason = auto_plan("ext4", "/work", 2, 1, tmp_path)
    assert len(caught) == 1 and "skipped (delete it, or tune again" in str(caught[0].message)
    assert plan == Plan(aggregators=1) and reason.startswith(f"tuning profile {good} ")
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        assert auto_plan("ext4", "/work", 2, 1, tmp_path) == (plan, reason)
    assert again == []  # once per process, not at every file opened
    bad.unlink()
    assert auto_plan("ext4", "/work", 2, 1, tmp_path) == (plan, reason)


def test_only_damaged_profiles_leave_the_defaults(tmp_path: Path) -> None:
    bad = tmp_path / "ext4-work-2r-1n.json"
    bad.write_text(valid(plan={"alignment": 2**50}))
    with pytest.warns(RuntimeWarning, match="alignment=1125899906842624: at most"):
        plan, reason = auto_plan("ext4", "/work", 2, 1, tmp_path)
    assert plan is None and reason == "no tuning profile for ext4 on /work, 2 ranks: defaults"


def test_a_buffer_larger_than_memory_is_a_damaged_profile(tmp_path: Path) -> None:
    """``async_buffer_size: 2**62`` failed at the first write behind, in numpy ("Unable to
    allocate 4.00 EiB"), not naming the profile; now the plan refuses it, so the profile is
    named and skipped."""
    bad = tmp_path / "ext4-work-2r-1n.json"
    bad.write_text(valid(plan={"async_writes": True, "async_buffer_size": 2**62}))
    with pytest.warns(RuntimeWarning, match=f"tuning profile {bad} is damaged") as caught:
        plan, _ = auto_plan("ext4", "/work", 2, 1, tmp_path)
    assert "async_buffer_size=4611686018427387904: a buffer in memory, larger than" in str(
        caught[0].message
    )
    assert plan is None


def test_an_unreadable_or_non_regular_profile_is_skipped(tmp_path: Path) -> None:
    save_profile(profile("ext4", "/work", 2, aggregators=1), tmp_path)
    (tmp_path / "folder.json").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.json")
    with pytest.warns(RuntimeWarning) as caught:
        plan, _ = auto_plan("ext4", "/work", 2, 1, tmp_path)
    assert plan == Plan(aggregators=1)
    dangling, folder = sorted((str(w.message) for w in caught), key=lambda m: "folder" in m)
    assert dangling.startswith(f"tuning profile {tmp_path / 'dangling.json'} cannot be read")
    assert f"tuning profile {tmp_path / 'folder.json'} is a folder, not a regular" in folder


#: Run in a process of its own, so that a profile whose open blocks fails the test by the
#: timeout instead of hanging the suite.
FIFO_JOB = """
import sys, warnings
from pathlib import Path
from h5subfile.io.tuning_profiles import auto_plan
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    plan, reason = auto_plan("ext4", "/work", 2, 1, Path(sys.argv[1]))
print(plan.aggregators, reason)
for warning in caught:
    print(warning.message)
"""


def test_a_fifo_in_the_tuning_folder_is_skipped_without_blocking(tmp_path: Path) -> None:
    good = save_profile(profile("ext4", "/work", 2, aggregators=1), tmp_path)
    fifo = tmp_path / "ext4-work-2r-1n-copy.json"
    os.mkfifo(fifo)
    try:
        done = subprocess.run(
            [sys.executable, "-c", FIFO_JOB, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"plan='auto' blocked on the FIFO {fifo}")
    assert done.returncode == 0, done.stderr
    chosen, warned = done.stdout.splitlines()
    assert chosen == f"1 tuning profile {good} for ext4 on /work, 2 ranks"
    assert warned.endswith(
        f"tuning profile {fifo} is a FIFO (named pipe), not a regular file: skipped (delete "
        "it, or tune again to replace it)"
    )


def test_a_tuning_folder_that_cannot_be_written_is_named_with_its_errno(tmp_path: Path) -> None:
    """Under a regular file (ENOTDIR): a folder no one can write, root included (permission
    bits do not stop root, so they would not make the test fail for real)."""
    assert require_writable(tmp_path / "new" / "profiles") == tmp_path / "new" / "profiles"
    assert list((tmp_path / "new" / "profiles").iterdir()) == []  # the trial file is gone
    blocker = tmp_path / "file"
    blocker.write_text("")
    folder = blocker / "profiles"
    expected = (
        f"tuning folder {folder} is not writable: ENOTDIR ([Errno 20] Not a directory); set "
        "H5SUBFILE_TUNING_DIR to a folder this job can write"
    )
    for attempt in (
        lambda: require_writable(folder),
        lambda: save_profile(profile("ext4", "/w", 2), folder),
    ):
        with pytest.raises(RankIOError) as info:
            attempt()
        assert str(info.value) == expected and info.value.errno == errno.ENOTDIR


def test_profile_from_result() -> None:
    row = Row({"aggregators": 1}, 0.8, 0.7, 0.9, 0.8, 0.7, 0.9, 10)
    result = TuningResult([row], {"aggregators": 1}, "why", 0.2, (0.7, 0.9), 0.03, 40, 1.5)
    made = profile_from_result(result, "ext4", "/work", 2, 1, "2026-01-01T00:00:00")
    assert made.plan == {"aggregators": 1}
    assert made.summary["margin"] == 0.2 and made.summary["spread"] == [0.7, 0.9]
    assert made.summary["noise"] == 0.03 and made.summary["trials"] == 40
    kept = TuningResult([row], None, "keep", 0.0, (1.0, 1.0), 0.05, 40, 1.5)
    assert profile_from_result(kept, "ext4", "/work", 2, 1, "d").plan == {}

"""Tuning profiles: where they live, save / load / match, the reasons given, damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from h5subfile.errors import CorruptFileError
from h5subfile.io.tuning_profiles import (
    FORMAT_VERSION,
    Profile,
    auto_plan,
    load_profiles,
    match_profile,
    profile_dir,
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
    assert [p for p, _ in load_profiles()] == [path]


def test_save_load_match(tmp_path: Path) -> None:
    assert load_profiles(tmp_path / "none") == []
    saved = [
        profile("ext4", "/work", 2, aggregators=1),
        profile("ext4", "/work", 8, subfiles="rank"),
        profile("lustre", "/scratch", 64, 2, ranks_per_subfile=16, alignment=4 << 20),
        profile("lustre", "/scratch", 256, 4, ranks_per_subfile=32),
    ]
    paths = [save_profile(p, tmp_path) for p in saved]
    assert len(set(paths)) == 4
    loaded = dict(load_profiles(tmp_path))
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


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps({"version": 99, "filesystem": "ext4"}),
        json.dumps({"version": FORMAT_VERSION, "filesystem": "ext4"}),
        json.dumps(
            {
                "version": FORMAT_VERSION,
                "filesystem": "ext4",
                "mount": "/work",
                "ranks": 2,
                "nodes": 1,
                "plan": {"subfiles": "banana"},
            }
        ),
    ],
)
def test_damaged_profile_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    save_profile(profile("ext4", "/work", 2), tmp_path)
    bad = tmp_path / "broken.json"
    bad.write_text(text)
    with pytest.raises(CorruptFileError, match=f"tuning profile {bad} is damaged") as info:
        auto_plan("ext4", "/work", 2, 1, tmp_path)
    assert "delete it or tune again" in str(info.value)


def test_profile_from_result() -> None:
    row = Row({"aggregators": 1}, 0.8, 0.7, 0.9, 0.8, 0.7, 0.9, 10)
    result = TuningResult([row], {"aggregators": 1}, "why", 0.2, (0.7, 0.9), 0.03, 40, 1.5)
    made = profile_from_result(result, "ext4", "/work", 2, 1, "2026-01-01T00:00:00")
    assert made.plan == {"aggregators": 1}
    assert made.summary["margin"] == 0.2 and made.summary["spread"] == [0.7, 0.9]
    assert made.summary["noise"] == 0.03 and made.summary["trials"] == 40
    kept = TuningResult([row], None, "keep", 0.0, (1.0, 1.0), 0.05, 40, 1.5)
    assert profile_from_result(kept, "ext4", "/work", 2, 1, "d").plan == {}

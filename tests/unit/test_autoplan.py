"""``plan="auto"`` (engine/autoplan.py): explicit arguments win over the profile, the profile
over nothing; a grouping given replaces the profile's; reads take only the read fields; the
profile matching a (faked) Lustre mount is the one used, with its reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from h5subfile.engine import autoplan
from h5subfile.errors import PlanError
from h5subfile.io.filesystem import FileSystem
from h5subfile.io.tuning_profiles import Profile, save_profile

GIVEN = {"subfiles": None, "ranks_per_subfile": None, "aggregators": None, "alignment": 4096}


def test_explicit_fields_win_and_the_profile_fills_the_rest() -> None:
    profile = {"ranks_per_subfile": 8, "alignment": 1 << 20, "aggregators": 2}
    merged = autoplan.merge(profile, GIVEN, "w")
    assert merged == {**GIVEN, "ranks_per_subfile": 8, "aggregators": 2}  # alignment given


def test_a_grouping_given_replaces_the_profiles() -> None:
    merged = autoplan.merge({"ranks_per_subfile": 8}, dict(GIVEN, subfiles="rank"), "w")
    assert merged["subfiles"] == "rank" and merged["ranks_per_subfile"] is None


def test_reading_takes_only_the_read_fields() -> None:
    profile = {"ranks_per_subfile": 8, "aggregators": 2, "buffer_size": 1 << 22}
    merged = autoplan.merge(profile, {}, "r")
    assert merged == {"aggregators": 2, "buffer_size": 1 << 22}


def test_plan_takes_auto_or_nothing() -> None:
    autoplan.check_choice(None)
    autoplan.check_choice("auto")
    with pytest.raises(PlanError, match="expected 'auto'"):
        autoplan.check_choice("fast")


def test_the_profile_of_the_folders_file_system_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lustre = FileSystem(name="lustre", magic=0x0BD00BD0, mount="/scratch", source="fs@tcp")
    monkeypatch.setattr(autoplan, "probe", lambda folder: lustre)
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path))
    saved = save_profile(Profile("lustre", "/scratch", 64, 2, {"ranks_per_subfile": 16}))
    fields, reason = autoplan.profile_fields(str(tmp_path / "run.h5"), 64, 2)
    assert fields == {"ranks_per_subfile": 16}
    assert reason == f"tuning profile {saved} for lustre on /scratch, 64 ranks"
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path / "empty"))
    assert autoplan.profile_fields(str(tmp_path / "run.h5"), 64, 2) == (
        {},
        "no tuning profile for lustre on /scratch, 64 ranks: defaults",
    )


LUSTRE = FileSystem(name="lustre", magic=0x0BD00BD0, mount="/scratch", source="fs@tcp")


def test_a_write_on_lustre_stripes_the_subfile_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake ``lfs`` on the PATH records its arguments: the real one is never needed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "lfs").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (bin_dir / "lfs").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(autoplan, "probe", lambda folder: LUSTRE)
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path / "none"))
    path = str(tmp_path / "run.h5")
    given = {"ranks_per_subfile": 16, "alignment": None}
    fields, reason = autoplan.decide(path, "w", given, 64, 2)
    folder = tmp_path / "run.subfiles"
    assert calls.read_text().split() == ["setstripe", "-c", "4", "-S", "4M", str(folder)]
    assert fields["alignment"] == 4 << 20 and folder.is_dir()
    assert reason.endswith(f"; Lustre: lfs setstripe -c 4 -S 4M {folder}")
    fields, _ = autoplan.decide(path, "w", dict(given, alignment=1 << 20), 64, 2)
    assert fields["alignment"] == 1 << 20  # an alignment given stays
    calls.unlink()
    autoplan.decide(path, "r", {}, 64, 2)  # reading stripes nothing
    assert not calls.exists()


def test_without_lfs_the_stripes_are_left_and_the_record_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no lfs here
    monkeypatch.setattr(autoplan, "probe", lambda folder: LUSTRE)
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path / "none"))
    _, reason = autoplan.decide(str(tmp_path / "run.h5"), "w", {"subfiles": "rank"}, 8, 1)
    assert "lfs not found" in reason


def test_other_file_systems_are_not_striped(tmp_path: Path) -> None:
    ext4 = FileSystem(name="ext4", magic=0xEF53, mount="/", source="/dev/sda")
    assert autoplan.stripe_lustre(ext4, str(tmp_path / "r.h5"), {}, 8, 1, run=None) == ""
    assert autoplan.subfile_count({"subfiles": "rank"}, 8, 1) == 8
    assert autoplan.subfile_count({"ranks_per_subfile": 3}, 8, 1) == 3
    assert autoplan.subfile_count({}, 8, 2) == 2

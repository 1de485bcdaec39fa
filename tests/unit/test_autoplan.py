"""``plan="auto"`` (engine/autoplan.py): explicit arguments win over the profile, the profile
over nothing; a grouping given replaces the profile's; reads take only the read fields; the
profile matching a (faked) Lustre mount is the one used, with its reason."""

from __future__ import annotations

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

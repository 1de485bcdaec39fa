"""``plan="auto"`` (engine/autoplan.py): explicit arguments win over the profile, the profile
over nothing; a grouping given replaces the profile's; reads take only the read fields; the
profile matching a (faked) Lustre mount is the one used, with its reason; a profile whose plan
does not fit the job (its ranks, its nodes, the fields given) is passed over for the next."""

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


EXT4 = FileSystem(name="ext4", magic=0xEF53, mount="/work", source="/dev/sda")
TOO_MANY = (
    "subfiles=32 but the communicator has only 2 rank(s): each subfile needs at least one rank"
)


def test_a_profile_that_does_not_fit_the_job_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nearest profile was tuned for 64 ranks with 32 subfiles: a 2-rank job cannot have
    them. The next nearest that fits is used, and the reason names the one passed over."""
    monkeypatch.setattr(autoplan, "probe", lambda folder: EXT4)
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path))
    path = str(tmp_path / "run.h5")
    big = save_profile(Profile("ext4", "/work", 64, 2, {"subfiles": 32}))
    fields, reason = autoplan.decide(path, "w", {}, 2, 1)
    assert fields == {}
    assert reason == (
        f"no tuning profile fits ext4 on /work, 2 ranks, 1 node(s): defaults; not fitting "
        f"this job: {big} ({TOO_MANY})"
    )
    bigger = save_profile(Profile("ext4", "/work", 128, 4, {"subfiles": "rank"}))
    fields, reason = autoplan.decide(path, "w", {}, 2, 1)
    assert fields == {"subfiles": "rank"}
    assert reason == (
        f"tuning profile {bigger} for ext4 on /work, 128 ranks (nearest to ext4 on /work, "
        f"2 ranks); not fitting this job: {big} ({TOO_MANY})"
    )
    assert autoplan.decide(path, "w", {}, 64, 2)[0] == {"subfiles": 32}  # its own job
    fields, reason = autoplan.decide(path, "r", {}, 2, 1)  # a read takes no grouping: it fits
    assert fields == {} and reason.startswith(f"tuning profile {big} for ext4 on /work, 64 ")


def test_the_node_count_and_the_fields_given_decide_the_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two aggregators per node (the default grouping) fit 2 ranks on one node, not 2 ranks on
    two nodes; nor does the profile fit when a grouping given leaves one rank per subfile. A
    compression filter must be one new datasets can use."""
    monkeypatch.setattr(autoplan, "probe", lambda folder: EXT4)
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path))
    path = str(tmp_path / "run.h5")
    saved = save_profile(Profile("ext4", "/work", 2, 1, {"aggregators": 2}))
    assert autoplan.decide(path, "w", {}, 2, 1)[0] == {"aggregators": 2}
    fields, reason = autoplan.decide(path, "w", {}, 2, 2, of_rank=(0, 1))
    assert fields == {} and f"not fitting this job: {saved} (aggregators=2 but a " in reason
    fields, reason = autoplan.decide(path, "w", {"subfiles": "rank"}, 2, 1)
    assert fields == {"subfiles": "rank"} and reason.startswith("no tuning profile fits")
    saved.unlink()
    squeezed = save_profile(Profile("ext4", "/work", 2, 1, {"compression": "gzip:99"}))
    fields, reason = autoplan.decide(path, "w", {}, 2, 1)  # a filter new datasets cannot use
    assert fields == {} and f"{squeezed} (gzip level 99: expected an integer from 0" in reason


def test_environment_and_profile_are_checked_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan is parsed with the environment, as the open parses it: a profile's
    aggregators beyond the ranks the environment's grouping gives a subfile do not fit."""
    monkeypatch.setattr(autoplan, "probe", lambda folder: EXT4)
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(tmp_path))
    monkeypatch.setenv("H5SUBFILE_RANKS_PER_SUBFILE", "1")
    save_profile(Profile("ext4", "/work", 4, 1, {"aggregators": 2}))
    fields, reason = autoplan.decide(str(tmp_path / "run.h5"), "w", {}, 4, 1)
    assert fields == {} and "aggregators=2 but a subfile of this grouping" in reason

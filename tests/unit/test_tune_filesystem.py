"""File-system detection and the Lustre commands and hints, with fake probes (nothing here
touches a real Lustre)."""

from __future__ import annotations

from pathlib import Path

import pytest

from h5subfile.errors import MissingFileError, PlanError
from h5subfile.io.filesystem import (
    MAGIC,
    FileSystem,
    Mount,
    find_mount,
    local_type,
    lustre_setup,
    lustre_stripe_command,
    mount_of,
    probe,
    romio_hints,
    starting_points,
    stripe_size_for,
)
from h5subfile.tune.space import plan_from_point

MOUNTINFO = r"""22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:40 / /scratch rw,relatime shared:9 - lustre 10.0.0.1@o2ib:/scratch rw,flock
31 22 0:41 / /scratch/my\040data rw shared:10 - xfs /dev/sdb1 rw
32 22 0:42 / /dev/shm rw shared:11 - tmpfs tmpfs rw
"""

NAMED = {
    "ext4": 0xEF53,
    "xfs": 0x58465342,
    "btrfs": 0x9123683E,
    "nfs": 0x6969,
    "lustre": 0x0BD00BD0,
    "gpfs": 0x47504653,
    "beegfs": 0x19830326,
    "tmpfs": 0x01021994,
    "overlay": 0x794C7630,
}


def fake(name: str, mount: str = "/scratch") -> FileSystem:
    return FileSystem(name=name, magic=NAMED.get(name, 0), mount=mount, source="src")


def test_magic_numbers() -> None:
    for name, magic in NAMED.items():
        assert MAGIC[magic] == name


def test_mount_of_takes_the_longest_prefix() -> None:
    assert mount_of("/scratch/run/a.h5", MOUNTINFO) == (
        "/scratch",
        "lustre",
        "10.0.0.1@o2ib:/scratch",
    )
    assert mount_of("/scratch/my data/x", MOUNTINFO)[:2] == ("/scratch/my data", "xfs")
    assert mount_of("/scratchy", MOUNTINFO)[:2] == ("/", "ext4")
    assert mount_of("/dev/shm", MOUNTINFO)[:2] == ("/dev/shm", "tmpfs")
    assert mount_of("/x", "garbage\n") == ("/", "", "")


def test_find_mount_gives_the_mount_and_super_block_options() -> None:
    lines = MOUNTINFO.splitlines()
    found = find_mount("/scratch/run", lines)
    assert found == Mount(
        "/scratch", "lustre", "10.0.0.1@o2ib:/scratch", frozenset({"rw", "relatime", "flock"})
    )
    assert find_mount("/x", ["garbage"]) is None
    assert [local_type(k) for k in ("ext3", "xfs", "tmpfs", "lustre", "nfs4", "")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_probe_this_machine(tmp_path: Path) -> None:
    found = probe(tmp_path)
    assert found.magic != 0 and found.name and found.mount.startswith("/")
    assert str(tmp_path.resolve()).startswith(found.mount)
    with pytest.raises(MissingFileError, match="statfs"):
        probe(tmp_path / "missing")


def test_lustre_stripe_command() -> None:
    command = lustre_stripe_command("/scratch/run.subfiles", 8, 4 << 20)
    assert command == ["lfs", "setstripe", "-c", "8", "-S", "4M", "/scratch/run.subfiles"]
    assert lustre_stripe_command("d", -1, 64 << 10)[2:6] == ["-c", "-1", "-S", "64K"]
    with pytest.raises(PlanError, match="multiple of 64 KiB"):
        lustre_stripe_command("d", 4, 1000)
    with pytest.raises(PlanError, match="stripe count 0"):
        lustre_stripe_command("d", 0, 1 << 20)


def test_stripe_sizes() -> None:
    assert stripe_size_for(1 << 20) == 1 << 20  # never below Lustre's 1 MiB default
    assert stripe_size_for(32 << 20) == 4 << 20  # larger than 1 MiB for 32 MiB blocks
    assert stripe_size_for(8 << 30) == 64 << 20


def test_hints_for_each_file_system() -> None:
    lustre = romio_hints(fake("lustre"), subfiles=16, stripe_size=4 << 20, osts=8)
    assert lustre["striping_factor"] == "8" and lustre["striping_unit"] == str(4 << 20)
    assert romio_hints(fake("lustre"), 4, 1 << 20)["striping_factor"] == "4"
    with pytest.raises(PlanError, match="multiple of 64 KiB"):
        romio_hints(fake("lustre"), 4, 1000)
    for name in ("ext4", "xfs", "btrfs", "tmpfs", "overlay"):
        hints = romio_hints(fake(name), 2, 1 << 20)
        assert hints["romio_cb_write"] == "disable" and hints["romio_ds_write"] == "disable"
        assert "striping_factor" not in hints
    assert romio_hints(fake("nfs"), 2, 1 << 20) == {"romio_ds_write": "disable"}
    assert romio_hints(fake("gpfs"), 2, 1 << 20) == {}
    assert romio_hints(fake("beegfs"), 2, 1 << 20) == {}


def test_starting_points() -> None:
    points = starting_points(fake("lustre"), ranks=128)
    assert [p["ranks_per_subfile"] for p in points] == [8, 16, 32, 64]
    assert all(p["alignment"] == 4 << 20 for p in points)
    for point in points:
        plan_from_point(point, 128)
    assert starting_points(fake("lustre"), ranks=4) == [
        {"ranks_per_subfile": 2, "alignment": 4 << 20}
    ]
    for name in ("ext4", "xfs", "btrfs", "nfs", "gpfs", "beegfs", "tmpfs", "overlay"):
        assert starting_points(fake(name), 64) == [{}]


def test_lustre_setup() -> None:
    setup = lustre_setup(fake("lustre"), "/scratch/run.subfiles", 16, 32 << 20, osts=4)
    assert setup["command"] == ["lfs", "setstripe", "-c", "4", "-S", "4M", "/scratch/run.subfiles"]
    assert setup["hints"]["striping_unit"] == str(setup["alignment"])
    assert lustre_setup(fake("ext4"), "d", 2, 1 << 20) == {}

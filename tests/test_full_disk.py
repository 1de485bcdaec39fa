"""Writes that fail for the disk's sake (io/causes.py): a full disk, a read-only one. HDF5
reports them in its own words (``Can't close file``), often without the errno; every such
failure, HDF5's or one of our own writes, is raised with its cause by name (ENOSPC, EROFS...)
and the user's file, never an internal name. The disks are tmpfs mounts of their own
(``small_disk``: skipped where this process may not mount one)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from conftest import fill, remount, run_cli, run_mpi, run_python

ENOSPC = "No space left on device (ENOSPC)"


def one_line(result) -> str:  # type: ignore[no-untyped-def]
    """The command failed (status 1) with one line on stderr, printed once."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, (result.returncode, result.stderr)
    return lines[0]


@pytest.mark.parametrize(
    "plan", [[], ["--async-writes", "--async-always"]], ids=["foreground", "behind"]
)
def test_vpic_on_a_full_disk_names_enospc_and_the_file(small_disk: Path, plan: list) -> None:
    """Was ``error: Can't close file`` (HDF5's words, neither the cause nor the file)."""
    path = small_disk / "run.h5"
    result = run_cli(2, "vpic", path, "--particles", "200000", "--steps", "3", "--quiet", *plan)
    line = one_line(result)
    assert line.startswith("h5subfile vpic: error: cannot "), line
    # the master's close, or (when the close found room) the write that filled the disk
    assert f"{path}: {ENOSPC}" in line or f"{small_disk}/run.subfiles/" in line, line
    assert line.endswith(ENOSPC) or f"{ENOSPC} (HDF5: " in line, line
    assert ".partial" not in line and "Errno" not in line
    assert sorted(os.listdir(small_disk)) == []  # the failed session's files are gone


def test_in_place_appends_on_a_full_disk_say_so_and_change_nothing(small_disk: Path) -> None:
    """A master appended to in place (copy limit 0) on a disk with one page left: each append
    fails with ENOSPC naming the master before the master changes (was: HDF5's ``Unable to
    flush file``, then ``slist already enabled?`` for the next append in the same process,
    the master grown by each and left with unfinished sessions). Once room is made, the same
    process appends."""
    path = small_disk / "run.h5"
    env = {"H5SUBFILE_MASTER_COPY_LIMIT": "0"}
    run_mpi(2, "full_disk_append.py", path, "w", 1, env=env)
    size = path.stat().st_size
    filler = fill(small_disk, leave=4096)  # room for the claim file, not for the append
    said = appends(path, 2, env)
    for attempt in said:
        assert attempt["class"] == "RankIOError" and attempt["errno"] == errno.ENOSPC, said
        assert f"cannot append to {path}: [Errno 28] {ENOSPC}" in attempt["message"], said
    assert path.stat().st_size == size  # nothing written, nothing left behind
    info = run_cli(1, "info", path, "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["problems"] == [], info.stdout
    filler.unlink()
    assert appends(path, 1, env) == [{"ok": True}]


def test_an_in_place_append_that_fills_the_disk_gives_its_room_back(small_disk: Path) -> None:
    """An append in place whose data does not fit the disk, written as h5py programs write it,
    fails with ENOSPC where a rank's write does; the objects it made in the master are unlinked, so HDF5 gives their room back: a later small append
    starts and succeeds, and the earlier data reads back. (The master kept the failed step's
    16 MB and the disk stayed full: the next append said it needed 1048576 bytes free.)"""
    path = small_disk / "run.h5"
    env = {"H5SUBFILE_MASTER_COPY_LIMIT": "0"}
    run_mpi(2, "full_disk_append.py", path, "w", 1, env=env)
    size = path.stat().st_size
    job = run_mpi(2, "full_disk_append.py", path, "a", 1, 1_000_000, "slab", env=env)
    said = json.loads(job.stdout.splitlines()[-1])  # 16 MB: more than the 16 MiB disk holds
    assert any(rank.get("errno") == errno.ENOSPC for rank in said), said
    assert path.stat().st_size < size + 2**20, path.stat().st_size  # its room given back
    assert appends(path, 1, env, 1000) == [{"ok": True}]
    values = run_python(
        "import sys, h5py, numpy as np\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    print(np.array_equal(f['T0/x'][...], np.repeat([0.0, 1.0], 100_000)))\n",
        str(path),
    )
    assert values.stdout.strip() == "True", values  # plain h5py, in a process of its own
    read = run_cli(1, "info", path, "--json")
    shapes = {d["name"]: d["shape"] for d in json.loads(read.stdout)["datasets"]}
    assert shapes == {"/T0/x": [200_000], "/T1/x": [2000]} or shapes == {
        "/T0/x": [200_000],
        "/T2/x": [2000],
    }, shapes


def appends(path: Path, count: int, env: dict[str, str], elements: int = 100_000) -> list[dict]:
    """``count`` appends to ``path`` in one 2-rank job: what each said."""
    job = run_mpi(2, "full_disk_append.py", path, "a", count, elements, env=env)
    return [json.loads(line) for line in job.stdout.splitlines() if line.startswith("{")]


def test_vpic_on_a_read_only_disk_names_the_claim_file_and_erofs(small_disk: Path) -> None:
    """Was ``Read-only file system: '.../.run.h5.lock.<uuid>'``: the claim's internal name."""
    remount(small_disk, "ro")
    path = small_disk / "run.h5"
    line = one_line(run_cli(2, "vpic", path, "--particles", "1000", "--quiet"))
    assert f"cannot write {path}: its claim file {path}.lock: " in line, line
    assert line.endswith("Read-only file system (EROFS)"), line
    assert ".run.h5.lock." not in line


def test_hdf5_failures_are_given_their_cause(small_disk: Path, tmp_path: Path) -> None:
    """The errno HDF5's detail names, else the one a probe of the folder meets; the user's
    file named (a ``.partial`` copy is the master); no cause found: HDF5's words, the file
    named, the class the failure maps to."""
    from h5subfile import errors
    from h5subfile.io.causes import hdf5_error, probe_folder

    detail = (
        "Unable to flush file (file write failed: time = Sat Nov 28 09:53:28 2026\n, filename = "
        "'/d/run.h5.partial', file descriptor = 30, errno = 122, error message = 'Disk quota "
        "exceeded', buf = 0x55a656852c28, total write size = 1127)"
    )
    quota = hdf5_error(RuntimeError(detail), "/d/run.h5.partial", "write")
    assert isinstance(quota, errors.RankIOError) and quota.errno == errno.EDQUOT
    assert str(quota) == (
        "cannot write /d/run.h5: [Errno 122] Disk quota exceeded (EDQUOT) (HDF5: Unable to "
        "flush file)"
    )
    stuck = RuntimeError("Can't decrement id ref count (slist already enabled?)")
    assert probe_folder(str(small_disk)) is None and probe_folder(str(tmp_path)) is None
    fill(small_disk)
    assert probe_folder(str(small_disk)) == errno.ENOSPC
    full = hdf5_error(stuck, str(small_disk / "run.h5.partial"), "close")
    assert isinstance(full, errors.RankIOError) and full.errno == errno.ENOSPC
    assert str(full).startswith(f"cannot close {small_disk / 'run.h5'}: [Errno 28] {ENOSPC}")
    assert "slist already enabled?" in str(full)
    (small_disk / "filler").unlink()
    remount(small_disk, "ro")
    assert probe_folder(str(small_disk)) == errno.EROFS
    read_only = hdf5_error(OSError("Can't close file"), str(small_disk / "x.h5"), "close")
    assert isinstance(read_only, errors.PermissionDeniedError) and read_only.errno == errno.EROFS
    unknown = hdf5_error(stuck, str(tmp_path / "run.h5"), "close")
    assert isinstance(unknown, errors.RankFailedError)
    assert str(unknown) == f"cannot close {tmp_path / 'run.h5'}: HDF5: {stuck}"


def test_probe_names_what_a_test_write_meets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quota or a failing disk shows only when written to: the probe's test write says it."""
    from h5subfile.io import causes

    def failing(fd: int, data: bytes) -> int:
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(causes.os, "write", failing)
    assert causes.probe_folder(str(tmp_path)) == errno.EDQUOT
    assert os.listdir(tmp_path) == []  # the test file is removed


def test_our_own_writes_on_a_full_disk_name_the_file_and_enospc(small_disk: Path) -> None:
    from h5subfile import errors
    from h5subfile.io.posix import RawFile

    fill(small_disk)
    target = small_disk / "run.h5.partial"
    target.write_bytes(b"")
    raw = RawFile(str(target), writable=True)
    try:
        with pytest.raises(errors.RankIOError) as raised:
            raw.pwrite(memoryview(bytes(2**20)), 0)
    finally:
        raw.close()
    assert raised.value.errno == errno.ENOSPC
    assert str(raised.value) == f"cannot write {small_disk / 'run.h5'}: [Errno 28] {ENOSPC}"

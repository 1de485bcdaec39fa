"""Exclusive writers (io/claim.py): one write session at a time per file.

Two writer jobs started together against the same path, in many rounds: in every round one wins
and the other gets FileBusyError (or both succeed one after the other), and the file holds
exactly one job's data, bit for bit, read by h5subfile and by plain h5py. A reader reads the
last committed state while a writer holds the file, and a second writer is refused without
touching it. The claim files themselves (stale, foreign, unreadable): in this process. Nested
opens in one job and release after close or errors: tests/mpi/test_claims.py. A killed writer's
claim: tests/test_crash_and_damage.py.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import MPIEXEC, SCRIPTS, fill, finish_job, remount, run_mpi

ROUNDS = 10
GAP = 0.5  # seconds between rounds; a round's writes take a few tens of ms


def start_job(ranks: int, *args: object) -> subprocess.Popen[str]:
    """Start ``race_writer.py ARGS`` on ``ranks`` ranks without waiting for it."""
    command = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py"]
    return subprocess.Popen(
        [*command, str(SCRIPTS / "race_writer.py"), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(job: subprocess.Popen[str], timeout: float = 180) -> tuple[int, list[dict], str]:
    """Wait for a writer job (killed after ``timeout`` s): its status, rounds and stderr."""
    out, err = finish_job(job, timeout, "writer job")
    rounds = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return job.returncode, rounds, err


def read_back(*paths: Path) -> tuple[dict, dict]:
    """Every file as plain h5py (a process without h5subfile) and h5subfile (2 ranks) see it."""
    plain = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_rounds.py"), "h5py", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0, plain.stderr
    ours = run_mpi(2, "check_rounds.py", "h5subfile", *paths)
    return json.loads(plain.stdout), json.loads(ours.stdout.strip().splitlines()[-1])


def check_round(i: int, a: dict, b: dict) -> str:
    """The outcome of one round: one winner, the other refused (naming the winner's session) or
    both, one after the other. Returns the uuid the file must hold."""
    won = [o for o in (a, b) if o["ok"]]
    assert won, f"round {i}: both jobs failed: {a}, {b}"
    for loser in (o for o in (a, b) if not o["ok"]):
        assert loser["error"] == "FileBusyError", f"round {i}: {loser}"
        assert "is being written by another session" in loser["message"], loser
        assert f"session {won[0]['uuid'][:8]}" in loser["message"], (loser, won)
    if len(won) == 1:
        return won[0]["uuid"]
    (open_a, close_a), (open_b, close_b) = a["held"], b["held"]
    # each job held the file open from its open to its close: never both at once
    assert close_a <= open_b or close_b <= open_a, f"round {i}: both wrote at once: {a}, {b}"
    return a["uuid"] if open_a > open_b else b["uuid"]


def test_two_jobs_writing_one_file_never_mix(tmp_path: Path) -> None:
    for i in range(ROUNDS):
        (tmp_path / f"round{i}").mkdir()
    jobs = {tag: start_job(2, tmp_path, "w", tag, 2, ROUNDS, GAP) for tag in (1, 2)}
    results = {tag: finish(job) for tag, job in jobs.items()}
    for _, (status, rounds, err) in results.items():
        assert len(rounds) == ROUNDS, err[-3000:]
        lost = [r for r in rounds if not r["ok"]]
        assert status == (1 if lost else 0), err[-3000:]
        for r in lost:  # each refusal, with its message, on stderr
            assert f"FileBusyError: {r['message']}" in err
    refused = sum(not r["ok"] for _, rounds, _ in results.values() for r in rounds)
    assert refused, "no round had the two jobs at once: the race was not exercised"
    winners = [check_round(i, *(results[t][1][i] for t in (1, 2))) for i in range(ROUNDS)]
    paths = [tmp_path / f"round{i}" / "run.h5" for i in range(ROUNDS)]
    for seen in read_back(*paths):
        for i, (path, winner) in enumerate(zip(paths, winners)):
            found = seen[str(path)]
            assert found.get("uuids") == [winner], (i, found)
            tag = next(t for t in (1, 2) if results[t][1][i].get("uuid") == winner)
            # exactly the winner's data, every value (no zeros, nothing of the other job)
            assert found["groups"] == {f"job{tag}": [True, True, True]}, (i, found)
            assert not found.get("problems"), found
        assert not any(p.name.endswith(".lock") for p in tmp_path.rglob("*")), "claim left"


def test_reader_and_refused_writer_while_a_writer_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "round0" / "run.h5"
    path.parent.mkdir()
    status, rounds, err = finish(start_job(2, tmp_path, "w", 1, 1, 1, GAP))
    assert status == 0 and rounds[0]["ok"], err
    hold = tmp_path / "hold"
    hold.touch()
    holder = start_job(2, tmp_path, "a", 2, 1, 1, GAP, hold)
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{hold}.waiting").exists():  # it has written job2 and holds the file
            assert holder.poll() is None and time.monotonic() < deadline, finish(holder)
            time.sleep(0.05)
        owner = json.loads(Path(f"{path}.lock").read_text())
        assert owner["host"] == socket.gethostname() and owner["mode"] == "a", owner
        # a reader sees the last committed state, without complaint (a writer at work is normal)
        plain, ours = read_back(path)
        for seen in (plain, ours):
            assert seen[str(path)]["groups"] == {"job1": [True, True, True]}, seen
        assert ours[str(path)]["problems"] == [], ours
        # a second writer (mode w would delete the file) is refused, naming the holder
        status, rounds, err = finish(start_job(2, tmp_path, "w", 3, 1, 1, GAP))
        assert status == 1 and rounds[0]["error"] == "FileBusyError", (rounds, err)
        assert f"host {owner['host']}, pid {owner['pid']}, session {owner['session'][:8]}" in err
        assert holder.poll() is None
    finally:
        hold.unlink()
    status, rounds, err = finish(holder)
    assert status == 0 and rounds[0]["ok"], err
    plain, ours = read_back(path)
    for seen in (plain, ours):  # the refused writer touched nothing; the holder's data is in
        found = seen[str(path)]
        assert found["groups"] == {"job1": [True] * 3, "job2": [True] * 3}, found
        assert found["uuids"][-1] == rounds[0]["uuid"]
    assert not Path(f"{path}.lock").exists()


# The claim files themselves, in this process (no MPI) --------------------------------------------

HOLD_CLAIM = (
    "import sys; from h5subfile.io import claim; c = claim.take(sys.argv[1], 'f' * 32, 'a'); "
    "print('held', flush=True); sys.stdin.read()"
)


def foreign(path: Path, **fields: object) -> dict:
    """Write a claim file as another writer would have left it."""
    owner = dict(host=socket.gethostname(), pid=1, started="2026-01-01T00:00:00+00:00")
    owner.update(session="e" * 32, mode="a", locks="shared", pid_start=None)
    owner.update(fields)
    Path(f"{path}.lock").write_text(json.dumps(owner))
    return owner


def test_claim_is_exclusive_in_this_process_and_released(tmp_path: Path) -> None:
    from h5subfile.errors import FileBusyError
    from h5subfile.io import claim

    path = str(tmp_path / "run.h5")
    first = claim.take(path, "a" * 32, "w")
    assert first.recovered is None
    assert json.loads(Path(f"{path}.lock").read_text())["session"] == "a" * 32
    with pytest.raises(FileBusyError, match="already open for writing in this process"):
        claim.take(path, "b" * 32, "a")
    assert claim.claim_state(path) == ("alive", first.owner)
    first.release()
    first.release()  # idempotent
    assert not Path(f"{path}.lock").exists() and claim.claim_state(path) == ("none", None)
    assert sorted(os.listdir(tmp_path)) == []  # nothing else left beside the master
    claim.take(path, "c" * 32, "a").release()


def test_live_claim_of_another_process_then_its_death(tmp_path: Path) -> None:
    from h5subfile.errors import FileBusyError
    from h5subfile.io import claim

    path = str(tmp_path / "run.h5")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_CLAIM, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(FileBusyError, match=f"pid {holder.pid}, session ffffffff.*holds its"):
            claim.take(path, "a" * 32, "w")
        assert claim.claim_state(path)[0] == "alive"  # readers see a writer at work
        # the same test by a reader does not disturb the holder
        with pytest.raises(FileBusyError):
            claim.take(path, "a" * 32, "w")
    finally:
        holder.kill()  # SIGKILL: it releases nothing itself
        holder.communicate(timeout=30)
    assert claim.claim_state(path)[0] == "stale"  # a reader removes nothing
    assert Path(f"{path}.lock").exists()
    taken = claim.take(path, "a" * 32, "w")
    assert taken.recovered is not None
    assert f"pid {holder.pid}, session ffffffff" in taken.recovered
    assert f"process {holder.pid} ended" in taken.recovered
    taken.release()


@pytest.mark.parametrize(
    "fields, state, why",
    [
        # no usable lock: on the owner's host its pid decides
        (dict(locks="none", pid=2**22 + 12345), "stale", "no longer runs"),
        (dict(locks="none", pid=os.getppid()), "alive", "still runs"),
        (dict(locks="none", pid=os.getppid(), pid_start=1), "stale", "no longer runs"),  # reused
        # a free lock is trusted on the owner's host, and across hosts when locks reach them
        (dict(locks="local"), "stale", "ended"),
        (dict(host="elsewhere", locks="shared"), "stale", "ended"),
        (dict(host="elsewhere", locks="local"), "unknown", "do not reach across hosts"),
        (dict(host="elsewhere", locks="none"), "unknown", "do not reach across hosts"),
    ],
)
def test_stale_and_undecidable_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict, state: str, why: str
) -> None:
    from h5subfile.errors import FileBusyError
    from h5subfile.io import claim

    monkeypatch.setattr(claim, "lock_scope", lambda folder, mounts=None: "shared")
    path = str(tmp_path / "run.h5")
    owner = foreign(tmp_path / "run.h5", **fields)
    assert claim.claim_state(path)[0] == state
    named = f"host {owner['host']}, pid {owner['pid']}, session eeeeeeee, mode 'a', since 2026"
    if state == "stale":
        taken = claim.take(path, "a" * 32, "w")
        assert taken.recovered and named in taken.recovered and why in taken.recovered
        taken.release()
        return
    with pytest.raises(FileBusyError) as busy:
        claim.take(path, "a" * 32, "w")
    assert named in str(busy.value) and why in str(busy.value)
    if state == "unknown":  # the way out is in the message
        assert f"delete {path}.lock or set H5SUBFILE_BREAK_CLAIM=1" in str(busy.value)
        monkeypatch.setenv("H5SUBFILE_BREAK_CLAIM", "1")
        taken = claim.take(path, "a" * 32, "w")
        assert taken.recovered and "H5SUBFILE_BREAK_CLAIM is set" in taken.recovered
        taken.release()
    assert not Path(f"{path}.lock").exists() or state == "alive"


def test_unreadable_claim_is_kept_until_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h5subfile.errors import FileBusyError
    from h5subfile.io import claim

    path = str(tmp_path / "run.h5")
    Path(f"{path}.lock").write_text("")
    with pytest.raises(FileBusyError, match="holds no complete record"):
        claim.take(path, "a" * 32, "w")
    monkeypatch.setenv("H5SUBFILE_BREAK_CLAIM", "1")
    claim.take(path, "a" * 32, "w").release()


MOUNTS = [
    "22 1 0:21 / / rw,relatime - ext4 /dev/vda rw",
    "30 22 0:40 / /lustre rw,relatime - lustre 10.0.0.1@o2ib:/fs rw,flock,lazystatfs",
    "31 22 0:41 / /lustre/local rw - lustre 10.0.0.1@o2ib:/fs2 rw,localflock",
    "32 22 0:42 / /home rw - nfs4 srv:/home rw,vers=4.2,local_lock=none,addr=10.0.0.2",
    "33 22 0:43 / /scratch\\040old rw - nfs srv:/s rw,vers=3,nolock,addr=10.0.0.2",
    "34 22 0:44 / /beegfs rw - beegfs beegfs_nodev rw,cfgFile=/etc/beegfs/beegfs-client.conf",
]


@pytest.mark.parametrize(
    "folder, scope",
    [
        ("/tmp/x", "shared"),
        ("/lustre/project", "shared"),
        ("/lustre/local/project", "local"),
        ("/lustre/localother", "shared"),  # not inside /lustre/local
        ("/home/me", "shared"),
        ("/scratch old/run", "local"),
        ("/beegfs/run", "local"),
    ],
)
def test_lock_scope_from_mount_options(folder: str, scope: str) -> None:
    from h5subfile.io import claim

    assert claim.lock_scope(folder, MOUNTS) == scope


@pytest.mark.parametrize(
    "folder, synced",
    [
        ("/tmp/x", False),  # ext4: read from this host's page cache only
        ("/lustre/project", True),
        ("/home/me", True),
        ("/beegfs/run", True),
    ],
)
def test_claim_record_synced_where_other_hosts_read_it(folder: str, synced: bool) -> None:
    from h5subfile.io import claim

    assert claim.record_synced(folder, MOUNTS) is synced
    assert claim.record_synced(folder, []) is True  # type unknown: synced


def test_claim_record_is_synced_only_off_local_disks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h5subfile.io import claim

    synced: list[int] = []
    monkeypatch.setattr(claim.os, "fsync", lambda fd: synced.append(fd))
    for remote in (False, True):
        monkeypatch.setattr(claim, "record_synced", lambda folder, mounts=None, r=remote: r)
        held = claim.take(str(tmp_path / "run.h5"), "a" * 32, "w")
        assert len(synced) == int(remote)
        assert json.loads(Path(held.path).read_text())["session"] == "a" * 32
        held.release()


def test_claim_in_a_missing_folder_names_it(tmp_path: Path) -> None:
    from h5subfile.errors import MissingFileError
    from h5subfile.io import claim

    with pytest.raises(MissingFileError, match=f"its folder {tmp_path / 'no'} does not exist"):
        claim.take(str(tmp_path / "no" / "run.h5"), "a" * 32, "w")


def test_a_dangling_link_in_the_claims_place_is_named(tmp_path: Path) -> None:
    """A symbolic link to nothing where the claim file goes takes the claim's name and cannot
    be read: said as such, with the way out (was: "other writers kept claiming it")."""
    from h5subfile.errors import NotRegularFileError
    from h5subfile.io import claim

    path = tmp_path / "run.h5"
    os.symlink(tmp_path / "nowhere", f"{path}.lock")
    with pytest.raises(NotRegularFileError) as refused:
        claim.take(str(path), "a" * 32, "w")
    message = str(refused.value)
    assert (
        f"claim file {path}.lock is a dangling symbolic link (to {tmp_path / 'nowhere'}" in message
    )
    assert f"remove it (rm {path}.lock)" in message and "attempts" not in message
    assert claim.claim_state(str(path)) == ("none", None)  # readers are not refused
    os.unlink(f"{path}.lock")
    claim.take(str(path), "a" * 32, "w").release()


@pytest.mark.parametrize("disk", ["read-only", "full"])
def test_a_claim_that_cannot_be_made_names_the_claim_file_and_why(
    small_disk: Path, disk: str
) -> None:
    """The claim is made under a unique internal name first: a failure names the claim file
    and the errno, never that name (was: ``Read-only file system: '.../.run.h5.lock.<uuid>'``)."""
    from h5subfile.errors import PermissionDeniedError, RankIOError
    from h5subfile.io import claim

    if disk == "read-only":
        remount(small_disk, "ro")
    else:
        fill(small_disk)
    path = small_disk / "run.h5"
    expected = PermissionDeniedError if disk == "read-only" else RankIOError
    with pytest.raises(expected) as refused:
        claim.take(str(path), "a" * 32, "w")
    code = errno.EROFS if disk == "read-only" else errno.ENOSPC
    assert refused.value.errno == code
    message = str(refused.value)
    assert message.startswith(f"cannot write {path}: its claim file {path}.lock: [Errno {code}]")
    assert message.endswith(f"({errno.errorcode[code]})") and ".run.h5.lock." not in message
    assert not [name for name in os.listdir(small_disk) if ".lock" in name]

"""Writing behind (``async_writes``): the bytes a session stores are those of the same session
written in the foreground, on every write path (direct, in the master, two-phase, chunked,
``d[box] = x``), even though the caller changes its arrays as soon as each write returns; the
buffer bound holds; errors met in the background (a full disk, a removed folder) are raised on
every rank at the next collective call and at close, never lost, and close publishes only
what was stored; an exception on one rank abandons the session without hanging. Any rank
count from 2 (2 and 3 in the suite)."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import on_root, raises_on_every_rank, same_on_every_rank

import h5subfile as hs

pytestmark = pytest.mark.skipif(MPI.COMM_WORLD.size < 2, reason="2 subfiles need 2 ranks")

#: The write paths, by the plan that selects them.
PATHS = {
    "direct": dict(subfiles=2),
    "master": dict(subfiles=1),  # rank 0's h5py handle holds the file the ranks write into
    "two-phase": dict(subfiles=2, aggregators=1, buffer_size="4k"),
    "chunked": dict(subfiles=2, compression="gzip", chunk_size="4k"),
}
#: Smaller than most single writes below: they go in parts, and submits wait for room.
BUFFER = 8192


def _x(rank: int) -> np.ndarray:
    return np.arange(3000 + 1000 * rank, dtype="f8") * (rank + 1)  # 24-40 KB: > BUFFER


def _grid(rank: int) -> np.ndarray:
    return np.arange(48, dtype="i4").reshape(8, 6) + 100 * rank


def _line(rank: int) -> np.ndarray:
    return (np.arange(40) * 3 + rank).astype("i2")


def _expected(size: int, chunked: bool) -> dict[str, np.ndarray]:
    """Every dataset :func:`_write` makes, as plain h5py must read it."""
    expected = {
        "step/x": np.concatenate([_x(r) for r in range(size)]),
        "step/id": np.concatenate([np.arange(_x(r).size, dtype="i8") + r for r in range(size)]),
        "grid": np.concatenate([_grid(r) for r in range(size)], axis=1),
        "s": np.float64(np.pi),
    }
    if not chunked:
        expected["line"] = np.concatenate([_line(r) for r in range(size)])
    return expected


def _spoil(*arrays: np.ndarray) -> None:
    """What the caller may do once a write returns: reuse its buffers (not with
    async_zero_copy, whose contract is to leave them alone until flush, commit or close)."""
    if _ZERO_COPY:
        return
    for array in arrays:
        array.reshape(-1).view(np.uint8)[...] = 0x5A


_ZERO_COPY = False  # set while _write writes with async_zero_copy


def _write(path: Path, rank: int, size: int, **plan: object) -> dict[str, float]:
    """Collective: the same datasets through every kind of call; each array is spoiled as soon
    as its write returns. Returns this rank's I/O counters."""
    global _ZERO_COPY
    _ZERO_COPY = bool(plan.get("async_zero_copy"))
    chunked = "compression" in plan
    with hs.File(path, "w", **plan) as f:
        x, ids = _x(rank), np.arange(_x(rank).size, dtype="i8") + rank
        f.create_group("step").write_datasets({"x": x, "id": ids})
        _spoil(x, ids)
        grid = f.create_dataset("grid", (8, 6 * size), "i4", start=(0, 6 * rank), count=(8, 6))
        block = _grid(rank)
        grid.write(block)
        _spoil(block)
        if not chunked:  # chunks are compressed whole: no pieces
            line = f.create_dataset("line", (40 * size,), "i2", start=(40 * rank,), count=(40,))
            piece = _line(rank)
            for lo, hi in ((20, 40), (0, 20)):  # independent pieces, in any order
                part = piece[lo:hi].copy()
                line[40 * rank + lo : 40 * rank + hi] = part
                _spoil(part)
            assert np.array_equal(line[40 * rank : 40 * rank + 40], piece)  # reads wait
        value = np.array(np.pi + rank)
        f.write_dataset("s", value.reshape(()))
        _spoil(value)
        writing = f._session.writing
        assert writing is not None
        queue = writing.pool.queue
        assert (queue is not None) == bool(plan.get("async_writes"))
    stats = f.stats.as_dict()  # after the close: every background write is done
    if queue is not None:  # the bound holds (chunked: only leaders write)
        assert queue.high_water <= BUFFER
        assert (queue.high_water > 0) == (stats["bytes_written"] > 0)
    return stats


PLAIN_READER = """
import hashlib, json, sys
import h5py
out = {}
for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        out[path] = {n: hashlib.sha256(f[n][()].tobytes()).hexdigest() for n in sorted(names)}
print(json.dumps(out))
"""


def _digests(paths: list[Path]) -> dict[str, dict[str, str]]:
    """Every dataset of each file, read with plain h5py in another process (rank 0)."""
    run = subprocess.run(
        [sys.executable, "-c", PLAIN_READER, *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout)


@pytest.mark.parametrize("kind", list(PATHS))
def test_background_writes_store_what_foreground_writes_store(
    comm: MPI.Intracomm, shared_tmp: Path, kind: str
) -> None:
    rank, size = comm.rank, comm.size
    plan = PATHS[kind]
    foreground = _write(shared_tmp / "fg.h5", rank, size, **plan)
    background = _write(
        shared_tmp / "bg.h5",
        rank,
        size,
        async_writes=True,
        async_always=True,
        async_buffer_size=BUFFER,
        **plan,
    )
    paths = [shared_tmp / "fg.h5", shared_tmp / "bg.h5"]
    found = on_root(comm, lambda: _digests(paths))
    with hs.File(paths[1], "r") as f:  # checksums taken from the data at call time
        report = f.verify()
    want = {
        name: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
        for name, a in _expected(size, "compression" in plan).items()
    }
    assert found[str(paths[0])] == want
    assert found[str(paths[1])] == want
    assert report["clean"] and not report["no_checksums"], report
    # every byte counted alike (the background's writes go through the same RawFile counting)
    assert background["bytes_written"] == foreground["bytes_written"]
    assert foreground["async_wait_seconds"] == 0
    assert background["async_wait_seconds"] > 0 or not background["bytes_written"]


@pytest.mark.parametrize("kind", ["direct", "master"])
def test_zero_copy_background_writes_store_the_same_bytes(
    comm: MPI.Intracomm, shared_tmp: Path, kind: str
) -> None:
    rank, size = comm.rank, comm.size
    plan = dict(
        PATHS[kind],
        async_writes=True,
        async_always=True,
        async_buffer_size=BUFFER,
        async_zero_copy=True,
    )
    stats = _write(shared_tmp / "zero.h5", rank, size, **plan)
    found = on_root(comm, lambda: _digests([shared_tmp / "zero.h5"]))
    want = {
        name: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
        for name, a in _expected(size, False).items()
    }
    assert found[str(shared_tmp / "zero.h5")] == want
    assert stats["bytes_written"] > 0


def test_a_full_disk_is_raised_on_every_rank_and_close_keeps_what_was_stored(
    comm: MPI.Intracomm, shared_tmp: Path
) -> None:
    rank = comm.rank
    with _small_disk(comm, shared_tmp / "run.subfiles") as why:
        if why:
            pytest.skip(why)
        f = hs.File(shared_tmp / "run.h5", "w", subfiles=2, async_writes=True, async_always=True)
        first = np.arange(2048, dtype="f8") + rank
        f.create_group("s0").write_dataset("x", first)
        f.flush()  # stored: 16 KiB per rank
        f.create_group("s1").write_dataset("x", np.ones(200_000, dtype="f8"))  # > 1 MiB
        with raises_on_every_rank(comm, hs.RankIOError, "No space left on device") as info:
            f.flush()
        assert info.value.errno == errno.ENOSPC and "in the background" in str(info.value)
        f.create_group("s2")  # a metadata call: no round, so nothing to raise it in
        with raises_on_every_rank(comm, hs.RankIOError, "No space left on device"):
            f.flush()  # kept: every later collective call raises it
        with raises_on_every_rank(
            comm, hs.RankIOError, "No space left on device", "not stored by background writes"
        ) as info:
            f.close()
        assert info.value.errno == errno.ENOSPC and "/s1/x" in str(info.value)
        with hs.File(shared_tmp / "run.h5", "r") as g:  # what was stored is published
            assert sorted(g.keys()) == ["s0"] and not g.problems
            stored = [np.arange(2048, dtype="f8") + r for r in range(comm.size)]
            assert g["s0/x"][...].tobytes() == np.concatenate(stored).tobytes()
            assert g.verify()["clean"]


def test_a_removed_folder_is_raised_at_the_next_collective_call(
    comm: MPI.Intracomm, shared_tmp: Path
) -> None:
    """The subfiles' folder removed after dataset creation, before the first write: the
    write returns (the file is opened in the background); the error comes back at the next
    read, at every collective call, and at close, which publishes nothing."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / "gone.h5"
    f = hs.File(path, "w", subfiles=2, async_writes=True, async_always=True)
    d = f.create_dataset("x", (10 * size,), "f8", start=(10 * rank,), count=(10,))
    on_root(comm, lambda: shutil.rmtree(shared_tmp / "gone.subfiles"))
    d.write(np.arange(10.0))  # returns: nothing is opened yet
    with pytest.raises(hs.MissingFileError, match="in the background"):
        d[10 * rank : 10 * rank + 10]  # a read waits for this rank's writes
    with raises_on_every_rank(comm, hs.MissingFileError, "(in the background: async_writes)"):
        f.create_dataset("next", (size,), "f8")  # already known on every rank: no waiting
    with raises_on_every_rank(comm, hs.MissingFileError, "gone.subfiles"):
        f.close()  # the subfiles are gone: nothing of the session is published
    assert not same_on_every_rank(comm, path.exists(), "the master exists")
    with hs.File(path, "w", subfiles=2) as again:  # the claim was released
        again.write_dataset("y", np.arange(3))


def test_an_exception_on_one_rank_abandons_queued_writes_without_hanging(
    comm: MPI.Intracomm, shared_tmp: Path
) -> None:
    path = shared_tmp / "left.h5"
    before = set(_write_behind_threads())
    with pytest.raises((ValueError, hs.CollectiveMismatchError)) as info:
        with hs.File(
            path, "w", subfiles=2, async_writes=True, async_always=True, async_buffer_size="1m"
        ) as f:
            f.write_dataset("x", np.zeros(1 << 19))  # 4 MiB per rank, in parts of 1 MiB
            if comm.rank == 1:
                raise ValueError("boom")
            f.flush()
    assert isinstance(info.value, ValueError if comm.rank == 1 else hs.CollectiveMismatchError)
    assert not same_on_every_rank(comm, path.exists(), "the master exists")
    assert set(_write_behind_threads()) <= before  # this session's thread ended


def _write_behind_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "h5subfile-write-behind"]


def test_regions_never_written_are_named_at_close_as_in_the_foreground(
    comm: MPI.Intracomm, shared_tmp: Path
) -> None:
    rank, last = comm.rank, comm.size - 1
    path = shared_tmp / "half.h5"
    with raises_on_every_rank(
        comm, hs.IncompleteFileError, f"/line (rank {last})", f"rank {last} [{10 * last + 5}:"
    ):
        with hs.File(
            path, "w", subfiles=2, async_writes=True, async_always=True, profile=shared_tmp / "p"
        ) as f:
            line = f.create_dataset(
                "line", (10 * comm.size,), "i4", start=(10 * rank,), count=(10,)
            )
            line[10 * rank : 10 * rank + 5] = np.arange(5, dtype="i4")
            if rank != last:
                line[10 * rank + 5 : 10 * rank + 10] = np.arange(5, 10, dtype="i4")
    assert (shared_tmp / "p" / "half.h5.write.json").exists()  # published, then profiled


def test_the_profile_counts_background_writes(comm: MPI.Intracomm, shared_tmp: Path) -> None:
    folder = shared_tmp / "profile"
    data = np.arange(5000, dtype="f8") + comm.rank
    with hs.File(
        shared_tmp / "p.h5", "w", subfiles=2, async_writes=True, async_always=True, profile=folder
    ) as f:
        f.write_dataset("x", data)
        data[...] = -1
    stats = f.stats
    assert stats.bytes_written == 40_000 and stats.write_behind
    doc = json.loads((folder / "p.h5.write.json").read_text())
    mine = doc["ranks"][comm.rank]
    assert mine["bytes_written"] >= stats.bytes_written  # HDF5's own writes come on top
    assert mine["writes"] >= stats.writes > 0


class _small_disk:
    """Collective: a 1 MiB tmpfs mounted at ``folder`` on rank 0 (every rank of the suite runs
    on one machine); yields why it could not be mounted ("" when it is), unmounted at the end."""

    def __init__(self, comm: MPI.Intracomm, folder: Path) -> None:
        self.comm, self.folder = comm, folder

    def __enter__(self) -> str:
        return on_root(self.comm, self._mount)

    def _mount(self) -> str:
        self.folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(self.folder)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            return f"cannot mount a small tmpfs to fill ({done.stderr.strip()}); needs root"
        return ""

    def __exit__(self, *exc: object) -> None:
        self.comm.Barrier()  # every rank's files are closed

        def unmount() -> None:
            if self.folder.is_mount() and subprocess.run(["umount", str(self.folder)]).returncode:
                subprocess.run(["umount", "-l", str(self.folder)], check=True)

        on_root(self.comm, unmount)


@pytest.mark.parametrize("subfiles", [1, 2])
def test_zero_copy_rewrites_of_learned_datasets_store_the_values_passed(
    comm: MPI.Intracomm, shared_tmp: Path, subfiles: int
) -> None:
    """A dataset whose layout is learned, written whole, then element by element from one
    buffer the program reuses at once (breaking async_zero_copy's contract): a write over
    bytes the rank wrote before is hashed from the file at close, which proves nothing of
    what was passed, so it is written from a copy. The values passed are stored, and
    verify and verifying reads agree (before: values of later calls, and verify clean)."""
    rank, n = comm.rank, 2000
    path = shared_tmp / "reused.h5"
    mine = slice(rank * n, (rank + 1) * n)
    indices = [*range(100), *range(1000, 1100)]
    with hs.File(
        path, "w", subfiles=subfiles, async_writes=True, async_always=True, async_zero_copy=True
    ) as f:
        d = f.create_dataset("x", (comm.size * n,), "f8")
        d[mine] = np.zeros(n)
        buffer = np.empty(1)
        for i in indices:
            buffer[0] = i
            d[rank * n + i] = buffer
        buffer[0] = -1
    want = np.zeros(n)
    want[indices] = indices
    with hs.File(path, "r", verify=True) as f:
        np.testing.assert_array_equal(f["x"][mine], want)
        report = same_on_every_rank(comm, f.verify(), "report")
        assert report["clean"], report

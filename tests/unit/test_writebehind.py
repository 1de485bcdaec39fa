"""The write-behind queue (io/writebehind.py) on real files: order, ownership of the bytes,
the bound on memory, a write larger than the buffer, errors kept and never lost, stopping."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from h5subfile.errors import MissingFileError, RankIOError
from h5subfile.io.pool import FilePool
from h5subfile.io.posix import IOStats, RawFile
from h5subfile.io.writebehind import Lost, QueuedFile, WriteBehind, byte_ranges, split


def _file(path: Path, size: int) -> str:
    path.write_bytes(bytes(size))
    return str(path)


def _queue(limit: int, stats: IOStats | None = None) -> tuple[WriteBehind, FilePool]:
    pool = FilePool(True, stats or IOStats())
    return WriteBehind(limit, pool.get, pool.stats), pool


def _view(data: bytes | np.ndarray) -> memoryview:
    return memoryview(data).cast("B")


def test_split_cuts_parts_that_fit() -> None:
    data = _view(bytes(range(10)))
    parts = split([(100, data[:7]), (200, data[7:]), (300, data[:0])], 4)
    assert [[(o, bytes(d)) for o, d in part] for part in parts] == [
        [(100, bytes(range(4)))],
        [(104, bytes(range(4, 7))), (200, bytes([7]))],
        [(201, bytes([8, 9]))],
    ]
    assert split([], 4) == [] and split([(0, data[:0])], 4) == []
    assert byte_ranges([(10, data[:5]), (0, data[:4]), (15, data[:2]), (30, data[:1])]) == (
        (0, 4),
        (10, 17),
        (30, 31),
    )


def test_writes_land_in_order_and_the_caller_keeps_its_buffer(tmp_path: Path) -> None:
    path = _file(tmp_path / "a.bin", 64)
    queue, pool = _queue(1 << 20)
    buffer = np.zeros(16, dtype=np.uint8)
    for value in range(1, 50):  # the same bytes rewritten: the last submitted must win
        buffer[:] = value
        queue.submit(path, [(8, _view(buffer)), (40, _view(buffer[:4]))])
        buffer[:] = 255  # changed as soon as submit returns: the queue holds its own copy
    assert queue.wait() is None
    pool.close_all()
    data = Path(path).read_bytes()
    assert data[8:24] == bytes([49] * 16) and data[40:44] == bytes([49] * 4)
    assert data[:8] == bytes(8) and data[24:40] == bytes(16) and data[44:] == bytes(20)
    assert pool.stats.bytes_written == 49 * 20 and pool.stats.writes >= 49


def test_the_bound_holds_and_a_full_queue_makes_submit_wait(tmp_path: Path) -> None:
    path = _file(tmp_path / "a.bin", 1 << 16)
    queue, pool = _queue(8192)
    release = threading.Event()
    queue.submit_call(release.wait, 8000, (Lost(path),), path)  # holds 8000 bytes until set
    done = threading.Event()

    def second() -> None:
        queue.submit(path, [(0, _view(np.full(1000, 7, dtype=np.uint8)))])
        done.set()

    helper = threading.Thread(target=second)
    helper.start()
    time.sleep(0.3)
    assert not done.is_set() and queue.held == 8000  # 8000 + 1000 > 8192: it waits
    release.set()
    helper.join(10)
    assert done.is_set()
    assert queue.wait() is None
    assert queue.high_water <= 8192
    pool.close_all()
    assert Path(path).read_bytes()[:1000] == bytes([7] * 1000)


def test_a_write_larger_than_the_buffer_goes_in_parts(tmp_path: Path) -> None:
    path = _file(tmp_path / "a.bin", 0)
    queue, pool = _queue(4096)
    data = np.random.default_rng(1).integers(0, 256, 50_000, dtype=np.uint8)
    queue.submit(path, [(0, _view(data[:30_000])), (30_000, _view(data[30_000:]))])
    assert queue.wait() is None
    assert queue.high_water <= 4096
    pool.close_all()
    assert Path(path).read_bytes() == data.tobytes()


def test_an_error_is_kept_and_later_jobs_are_never_attempted(tmp_path: Path) -> None:
    good = _file(tmp_path / "good.bin", 16)
    gone = str(tmp_path / "removed" / "sub.bin")  # its folder does not exist
    stats = IOStats()
    queue, pool = _queue(1 << 20, stats)
    release = threading.Event()
    queue.submit_call(release.wait, 0, (), good)
    queue.submit(gone, [(0, _view(b"abcd"))])  # opened in the background: fails there
    queue.submit(good, [(0, _view(b"wxyz"))])  # queued after it: dropped, never written
    assert queue.error() is None  # nothing ran yet
    release.set()
    error = queue.wait()
    assert isinstance(error, MissingFileError)
    assert gone in str(error) and "in the background" in str(error)
    assert queue.wait() is error and queue.error() is error  # kept, never lost
    with pytest.raises(MissingFileError):
        queue.submit(good, [(0, _view(b"late"))])  # refused: its bytes would be lost
    assert queue.lost() == [Lost(gone, ((0, 4),)), Lost(good, ((0, 4),))]
    pool.close_all()
    assert Path(good).read_bytes() == bytes(16)
    assert stats.bytes_written == 0


def test_os_errors_keep_their_errno(tmp_path: Path) -> None:
    path = _file(tmp_path / "a.bin", 0)
    read_only = RawFile(path)  # a positioned write to it fails with EBADF
    queue, pool = _queue(1 << 20)
    queue.submit(read_only, [(0, _view(b"data"))])
    error = queue.wait()
    assert isinstance(error, RankIOError) and error.errno == 9
    assert str(error).startswith(f"cannot write {path}: [Errno 9] Bad file descriptor (EBADF)")
    read_only.close()
    pool.close_all()


def test_stop_drops_what_is_queued_and_ends_the_thread(tmp_path: Path) -> None:
    path = _file(tmp_path / "a.bin", 8)
    queue, pool = _queue(1 << 20)
    release = threading.Event()
    queue.submit_call(release.wait, 0, (), path)
    queue.submit(path, [(0, _view(b"dropped!"))])
    threading.Timer(0.2, release.set).start()
    assert queue.stop(timeout=10)
    assert queue.lost() == [Lost(path, ((0, 8),))]
    pool.close_all()
    assert Path(path).read_bytes() == bytes(8)
    with pytest.raises(RuntimeError):
        queue.submit(path, [(0, _view(b"x"))])


def test_a_write_behind_pool_hands_out_queued_files(tmp_path: Path) -> None:
    path = _file(tmp_path / "a.bin", 8)
    stats = IOStats(write_behind=True)
    pool = FilePool(True, stats, write_behind=4096)
    writer = pool.writer(path)
    assert isinstance(writer, QueuedFile) and pool.writer(path) is writer
    writer.write_pieces([(0, _view(b"12345678"))])
    pool.close_all()  # waits for the queue first
    assert Path(path).read_bytes() == b"12345678"
    assert stats.bytes_written == 8 and stats.async_wait_seconds > 0
    assert stats.data_write_seconds == stats.async_wait_seconds  # the caller's share
    assert isinstance(FilePool(True, IOStats()).writer(path), RawFile)
    assert os.path.getsize(path) == 8


def test_the_ring_is_reused_and_wraps_without_overwriting_what_is_queued(tmp_path: Path) -> None:
    """Copies of many steps, of sizes that do not divide the ring, with the writes held back
    so that the ring fills and wraps: every byte lands as it was passed, each array changed
    right after its write; the ring is one allocation, and its bytes in use never pass it."""
    path = _file(tmp_path / "a.bin", 0)
    limit = 10_000
    queue, pool = _queue(limit)
    rng = np.random.default_rng(7)
    expected = np.zeros(0, dtype=np.uint8)
    rings = set()
    gate = threading.Event()
    queue.submit_call(gate.wait, 1, (Lost(path),), path)  # nothing is written until set
    threading.Timer(0.2, gate.set).start()
    offset = 0
    for _ in range(40):
        size = int(rng.integers(1, 3_700))
        data = rng.integers(0, 256, size, dtype=np.uint8)
        queue.submit(path, [(offset, _view(data))])
        assert queue._ring_held <= limit
        rings.add(id(queue._ring))
        expected = np.concatenate([expected, data])
        data[:] = 0  # the queue holds its own copy
        offset += size
    assert queue.wait() is None
    pool.close_all()
    assert len(rings) == 1 and queue._ring_held == 0
    assert Path(path).read_bytes() == expected.tobytes()


def test_a_hasher_is_fed_the_copy_in_order_as_it_is_written(tmp_path: Path) -> None:
    import xxhash

    from h5subfile.layout.integrity import FedHash

    path = _file(tmp_path / "a.bin", 0)
    queue, pool = _queue(3 << 20)
    hasher = FedHash()
    parts = [
        np.random.default_rng(k).integers(0, 256, n, dtype=np.uint8)
        for k, n in enumerate([100, 2 << 20, 5, 1 << 20])
    ]
    offset = 0
    for part in parts:
        queue.submit(path, [(offset, _view(part))], hasher=hasher)
        offset += part.size
        part[:] = 1  # changed at once: the checksum is of what was passed
    assert queue.wait() is None
    pool.close_all()
    whole = Path(path).read_bytes()
    assert hasher.nbytes == len(whole) == offset
    assert hasher.hasher.hexdigest() == xxhash.xxh3_64_hexdigest(whole)
    original = [
        np.random.default_rng(k).integers(0, 256, p.size, dtype=np.uint8)
        for k, p in enumerate(parts)
    ]
    assert whole == np.concatenate(original).tobytes()


def test_small_writes_that_continue_each_other_are_combined(tmp_path: Path) -> None:
    """Consecutive small writes reach the file in calls of the combining buffer; a write that
    does not continue them (here one rewriting bytes already combined) goes after them, so
    the last bytes written win; wait() writes what is left."""
    path = _file(tmp_path / "a.bin", 0)
    pool = FilePool(True, IOStats(), combine=4096)
    writer = pool.writer(path)
    rng = np.random.default_rng(3)
    expected = rng.integers(0, 256, 10_000, dtype=np.uint8)
    for at in range(0, 10_000, 500):
        writer.write_pieces([(at, _view(expected[at : at + 500].copy()))])
    assert pool.stats.writes == 2  # two buffers of 8 pieces (4000 bytes; a 9th does not fit)
    again = np.full(700, 9, dtype=np.uint8)
    writer.write_pieces([(100, _view(again))])  # out of order: the buffer goes first
    expected[100:800] = 9
    assert pool.wait() is None
    pool.close_all()
    assert Path(path).read_bytes() == expected.tobytes()


def test_a_failed_combined_write_is_kept_raised_and_its_bytes_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    path = _file(tmp_path / "a.bin", 0)
    pool = FilePool(True, IOStats(), combine=4096)
    writer = pool.writer(path)
    writer.write_pieces([(0, _view(np.ones(1000, dtype=np.uint8)))])

    def full(self, pieces, owned=False):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RawFile, "write_pieces", full)
    with pytest.raises(RankIOError) as raised:
        writer.write_pieces([(5000, _view(np.ones(10, dtype=np.uint8)))])  # flushes first
    assert raised.value.errno == errno.ENOSPC
    assert "bytes 0-1000" in str(raised.value) and path in str(raised.value)
    assert pool.error() is raised.value and pool.wait() is raised.value
    assert pool.lost() == [Lost(path, ((0, 1000),))]
    with pytest.raises(RankIOError):  # nothing more is written once one failed
        writer.write_pieces([(1000, _view(np.ones(10, dtype=np.uint8)))])
    monkeypatch.undo()
    pool.close_all()

"""Identities and checksums (layout/integrity.py) and their place in the layout record."""

from __future__ import annotations

import dataclasses

import numpy as np

from h5subfile.layout.integrity import (
    IDENTITY_BYTES,
    PieceSum,
    checksum,
    describe_identity,
    identity,
    new_hasher,
)
from h5subfile.layout.record import DatasetLayout, FileRecord, Session, StoredExtent

UUID = "3f2a9c1e5d0b4e7a9a61c2f08d3b5e77"


def test_identity_names_session_and_subfile() -> None:
    found = identity(UUID, "run.subfiles/s0-3f2a9c1e-00001.h5")
    assert len(found) == IDENTITY_BYTES
    assert found != identity(UUID, "run.subfiles/s0-3f2a9c1e-00000.h5")
    assert found == identity(UUID, "moved.subfiles/s0-3f2a9c1e-00001.h5")  # only the name
    assert "s0-3f2a9c1e-00001.h5" in describe_identity(found) and UUID in describe_identity(found)
    assert "overwritten" in describe_identity(np.random.default_rng(0).bytes(IDENTITY_BYTES))


def test_checksum_is_the_same_whole_or_in_batches() -> None:
    data = np.arange(100_000, dtype="f8")
    hasher = new_hasher()
    raw = data.view(np.uint8)
    for start in range(0, raw.size, 77_777):
        hasher.update(raw[start : start + 77_777])
    assert hasher.hexdigest() == checksum(data) == checksum(raw.tobytes())
    assert len(checksum(b"")) == 16 and checksum(b"a") != checksum(b"b")


def test_pieces_and_subfile_info_round_trip_through_the_record() -> None:
    piece = PieceSum((4, 0), (4, 3), checksum(b"x"))
    extent = StoredExtent("run.subfiles/a.h5", "/x", (4, 0), (4, 3), 2048, (1,), (), (piece,))
    layout = DatasetLayout(0, (extent,), dtype="<f4", checksum="xxh3_64")
    assert DatasetLayout.from_json(layout.to_json(), "test") == layout
    old = DatasetLayout.from_json('{"session": 0, "extents": []}', "test")
    assert old.checksum == "" and old.extents == ()
    session = Session(
        0, "w", 1, {}, "", [], "0", "now", subfile_info={"a": {"bytes": 1, "identity_offset": 0}}
    )
    record = FileRecord.from_json(FileRecord([session]).to_json(), "test")
    assert record.sessions[0].subfile_info == {"a": {"bytes": 1, "identity_offset": 0}}


def test_a_layout_crosses_between_ranks_whole_and_without_its_caches() -> None:
    """to_wire / from_wire (what rank 0 sends readers): every field of the layout, its extents
    and their checksums arrives equal, whatever its value; what was cached on the sender
    (an extent's block, the wire bytes themselves) is not sent; and each class pickles as all
    of its fields, in order, so a field added later cannot be dropped on the way."""
    piece = PieceSum((4, 0), (4, 3), checksum(b"x"))
    extents = (
        StoredExtent("run.subfiles/a.h5", "/x", (4, 0), (4, 3), 2048, (1, 2), (), (piece,)),
        StoredExtent("run.subfiles/b.h5", "/x", (8, 0), (4, 3), -1, (3,), (2, 3), ()),
    )
    layout = DatasetLayout(
        7, extents, False, (2, 3), False, {"name": "gzip", "level": 4}, "<f4", "xxh3_64"
    )
    for extent in extents:
        assert extent.block.count == (4, 3) and "block" in extent.__dict__  # cached
    wire = layout.to_wire()
    assert isinstance(wire, bytes) and layout.to_wire() is wire  # made once
    got = DatasetLayout.from_wire(wire)
    assert got == layout and got is not layout
    assert [type(e) for e in got.extents] == [StoredExtent] * 2
    assert got.extents[0].pieces == (piece,) and isinstance(got.extents[0].pieces[0], PieceSum)
    assert all("block" not in e.__dict__ for e in got.extents) and "_wire" not in got.__dict__
    assert len(wire) < len(layout.to_json())
    for value in (layout, extents[0], piece):
        made, fields = value.__reduce__()
        assert made is type(value)
        assert fields == tuple(getattr(value, f.name) for f in dataclasses.fields(value))


def test_small_writes_are_hashed_at_once_large_ones_in_the_thread(monkeypatch) -> None:
    """start_hashing: whole blocks under INLINE_HASH_BYTES in all are hashed in the calling
    thread (handing them over costs more than hashing them); larger ones in the hashing
    thread; a piecewise write gets None (hashed from the file at close). The values are the
    buffers' checksums either way."""
    from concurrent.futures import ThreadPoolExecutor

    from h5subfile.engine import integrity
    from h5subfile.engine.messages import PreparedWrite, Transfer, WriteTarget
    from h5subfile.layout.blocks import Block

    submitted: list[int] = []
    pool = ThreadPoolExecutor(max_workers=1)

    def recording_pool() -> ThreadPoolExecutor:
        submitted.append(1)
        return pool

    monkeypatch.setattr(integrity, "_pool", recording_pool)

    def write(n: int, whole: bool = True) -> PreparedWrite:
        block = Block((0,), (n,))
        target = WriteTarget(block, "/nowhere", 0, block, 0, Transfer.DIRECT)
        box = block if whole else Block((0,), (n - 1,))
        data = np.arange(n if whole else n - 1, dtype="u1")
        return PreparedWrite("/x", target, box, data)

    limit = integrity.INLINE_HASH_BYTES
    small = [write(limit // 2 - 1), write(limit // 2), write(10, whole=False)]
    hashing = integrity.start_hashing(small, as_written=False)
    assert hashing.rest.done() and not submitted and not hashing.fed
    assert hashing.rest.result() == [checksum(small[0].data), checksum(small[1].data), None]
    large = [write(limit // 2), write(limit // 2)]  # INLINE_HASH_BYTES in all: the thread
    hashing = integrity.start_hashing(large, as_written=False)
    assert submitted == [1]
    assert hashing.rest.result() == [checksum(w.data) for w in large]
    pool.shutdown()


def test_write_hashed_hashes_each_slice_before_writing_it(tmp_path, monkeypatch) -> None:
    """RawFile.write_hashed: every piece lands bit for bit at its offset, the hash is of the
    pieces' bytes in order (the same as one checksum of them), and each slice (HASH_SLICE
    bytes, a piece's last one with the remainder) is given to the hasher just before the
    write that copies it."""
    import os

    from h5subfile.io import posix

    slice_ = posix.HASH_SLICE
    rng = np.random.default_rng(3)
    first = rng.integers(0, 256, 2 * slice_ + 1000, dtype=np.uint8)
    second = rng.integers(0, 256, 5000, dtype=np.uint8)
    pieces = [(4096, memoryview(first)), (4096 + first.size + 512, memoryview(second))]
    events: list[tuple[str, int]] = []
    writing = os.pwritev

    class Spy:
        def __init__(self) -> None:
            self.hasher = new_hasher()

        def update(self, data: memoryview) -> None:
            events.append(("hash", data.nbytes))
            self.hasher.update(data)

    def pwritev(fd, buffers, offset):  # type: ignore[no-untyped-def]
        events.append(("write", sum(memoryview(b).nbytes for b in buffers)))
        return writing(fd, buffers, offset)

    monkeypatch.setattr(os, "pwritev", pwritev)
    path = tmp_path / "f.bin"
    raw = posix.RawFile(str(path), writable=True, create=True)
    spy = Spy()
    raw.write_hashed(pieces, spy)
    raw.close()
    assert posix.block_size(str(tmp_path)) in (0, 512, 1024, 2048, 4096)  # divides a slice
    sizes = [slice_, slice_ + 1000, 5000]  # a piece's last slice takes its remainder
    assert events == [e for n in sizes for e in (("hash", n), ("write", n))]
    assert raw.stats.writes == 3 and raw.stats.bytes_written == first.size + second.size
    assert spy.hasher.hexdigest() == checksum(np.concatenate([first, second]))
    stored = np.fromfile(path, dtype=np.uint8)
    np.testing.assert_array_equal(stored[4096 : 4096 + first.size], first)
    start = 4096 + first.size + 512
    np.testing.assert_array_equal(stored[start : start + second.size], second)


def test_direct_writes_are_hashed_as_written_unless_writing_behind_without_copy() -> None:
    """start_hashing(as_written=True) gives each direct whole-block write of at least a slice
    a hasher to feed as it writes (nothing for the thread); writing behind without a copy
    (False) they go to the thread, as do two-phase writes and smaller blocks always.
    finish_hashing keeps a fed block's hasher, read at close: its checksum when it was fed the
    whole block, otherwise the block is hashed from the file."""
    from types import SimpleNamespace

    from h5subfile.engine import integrity
    from h5subfile.engine.messages import PreparedWrite, Transfer, WriteTarget
    from h5subfile.io.posix import HASH_SLICE
    from h5subfile.layout.blocks import Block

    def write(path: str, n: int, transfer: Transfer = Transfer.DIRECT) -> PreparedWrite:
        block = Block((0,), (n,))
        target = WriteTarget(block, "/nowhere", 0, block, 0, transfer)
        return PreparedWrite(path, target, block, np.arange(n, dtype="u4").astype("u1"))

    size = HASH_SLICE
    writes = [
        write("/a", size + 3),
        write("/b", size),
        write("/c", 100, Transfer.TWO_PHASE),
        write("/d", size - 1),  # under a slice: goes out with its neighbours
    ]
    hashing = integrity.start_hashing(writes, as_written=True)
    fed_a, fed_b = hashing.fed_by(writes[0]), hashing.fed_by(writes[1])
    assert fed_a is not None and fed_b is not None
    assert hashing.fed_by(writes[2]) is None and hashing.fed_by(writes[3]) is None
    assert hashing.rest.result() == [None, None, checksum(writes[2].data), checksum(writes[3].data)]
    fed_a.update(memoryview(writes[0].data)[:100])
    fed_a.update(memoryview(writes[0].data)[100:])
    fed_b.update(memoryview(writes[1].data)[:150])  # not the whole block
    session = SimpleNamespace(writing=SimpleNamespace(streams={}, sums={}, checksums=True))
    integrity.finish_hashing(session, hashing, ok=True)  # type: ignore[arg-type]
    sums = session.writing.sums
    assert sums["/c"][(0,)].checksum == checksum(writes[2].data)
    assert sums["/d"][(0,)].checksum == checksum(writes[3].data)
    fed_sum_a, fed_sum_b = sums["/a"][(0,)], sums["/b"][(0,)]
    assert fed_sum_a.hasher.nbytes == fed_sum_a.nbytes  # fed whole: its digest at close
    assert fed_sum_a.hasher.hasher.hexdigest() == checksum(writes[0].data)
    assert fed_sum_b.hasher.nbytes < fed_sum_b.nbytes  # short: hashed from the file at close
    behind = integrity.start_hashing(writes, as_written=False)
    assert not behind.fed
    assert behind.rest.result() == [checksum(w.data) for w in writes]


def test_slices_are_a_slice_long_at_least_and_start_on_blocks() -> None:
    """slice_ends: the slices of a piece cover it, each at least HASH_SLICE (unless the piece
    is smaller), every one after the first starting on a block boundary of the file, also
    when the piece starts inside a block, and when a block is larger than a slice."""
    from h5subfile.io.posix import HASH_SLICE, slice_ends

    for offset in (0, 100, 4096, 12_345_678):
        for length in (10, HASH_SLICE - 1, HASH_SLICE, 3 * HASH_SLICE + 7, 40 * HASH_SLICE + 1):
            for block in (0, 4096, 16 << 20):
                ends = slice_ends(offset, length, block)
                starts = [0, *ends[:-1]]
                assert ends[-1] == length and ends == sorted(set(ends))
                sizes = [e - s for s, e in zip(starts, ends)]
                assert all(size >= min(HASH_SLICE, length) for size in sizes), sizes
                if block:
                    assert all((offset + s) % block == 0 for s in starts[1:]), (offset, block)
                if block <= HASH_SLICE:
                    assert all(size < 2 * HASH_SLICE + max(block, 1) for size in sizes)
    assert slice_ends(100, 3 * HASH_SLICE, 4096) == [HASH_SLICE + 3996, 3 * HASH_SLICE]

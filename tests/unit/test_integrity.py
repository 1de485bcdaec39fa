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
    future = integrity.start_hashing(small)
    assert future.done() and not submitted
    assert future.result() == [checksum(small[0].data), checksum(small[1].data), None]
    large = [write(limit // 2), write(limit // 2)]  # INLINE_HASH_BYTES in all: the thread
    future = integrity.start_hashing(large)
    assert submitted == [1]
    assert future.result() == [checksum(w.data) for w in large]
    pool.shutdown()

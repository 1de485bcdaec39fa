"""Datasets without declared blocks, the pure parts: write selections against numpy, a rank's
pieces as it writes (engine/learned.py), growing sources (engine/resize.py) and the checks of
a learned layout record (layout/validate.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.engine import learned_state as learned
from h5subfile.engine.messages import Transfer, WriteTarget
from h5subfile.engine.resize import grown, new_segments, new_shape
from h5subfile.errors import OverlapError, PlanError, SelectionError
from h5subfile.layout.blocks import Block
from h5subfile.layout.hyperslab import Slab
from h5subfile.layout.integrity import PieceSum
from h5subfile.layout.record import DatasetLayout, StoredExtent
from h5subfile.layout.selection import plan_write
from h5subfile.layout.validate import Mapping, RecordError, check_learned, check_piece_mappings

SHAPE = (7, 6)


@st.composite
def write_selections(draw: st.DrawFn) -> tuple:
    """A selection h5py writes: integers, slices with positive steps, at most one list."""
    items = []
    listed = False
    for n in SHAPE:
        kind = draw(st.sampled_from(["int", "slice", "list"] if not listed else ["int", "slice"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(0, n))
            stop = draw(st.none() | st.integers(0, n))
            items.append(slice(start, stop, draw(st.none() | st.integers(1, 3))))
        else:
            listed = True
            items.append(sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))))
    return tuple(items)


@settings(max_examples=300)
@given(write_selections())
def test_a_write_plan_writes_what_numpy_assigns(selection: tuple) -> None:
    plan = plan_write(SHAPE, selection)
    expected = np.zeros(SHAPE, dtype=np.int64)
    data = np.arange(1, 1 + int(np.prod(plan.shape)), dtype=np.int64).reshape(plan.shape)
    expected[selection] = data
    got = np.zeros(SHAPE, dtype=np.int64)
    full = data.reshape(plan.full)
    for box, index in plan.boxes:
        got[box.slices] = full[index]
    assert np.array_equal(got, expected)
    assert sum(box.size for box, _ in plan.boxes) == data.size  # every element once


def test_write_plans_refuse_what_h5py_refuses() -> None:
    with pytest.raises(SelectionError, match="must increase"):
        plan_write(SHAPE, ([3, 1], slice(None)))
    with pytest.raises(SelectionError, match="steps must be positive"):
        plan_write(SHAPE, (slice(None, None, -1),))
    with pytest.raises(SelectionError, match="out of range"):
        plan_write(SHAPE, (7, 0))
    assert plan_write((), ()).boxes[0][0] == Block((), ())


def _target(extents: list[Block]) -> learned.LearnedTarget:
    targets = [WriteTarget(e, "f", 4096, e, 0, Transfer.DIRECT, learned=True) for e in extents]
    stored = [
        StoredExtent("s.h5", f"/x@{k}", e.start, e.count, 4096) for k, e in enumerate(extents)
    ]
    return learned.LearnedTarget("/x", np.dtype("f8"), stored, targets)


def _pieces(target: learned.LearnedTarget) -> list[tuple[Slab, str]]:
    return [(p.slab, p.checksum) for _, _, p in learned.reported(target, 0)]


def test_writes_that_continue_each_other_are_one_piece_hashed_in_order() -> None:
    whole = Block((0, 0), (12, 3))
    target = _target([whole])
    rows = np.arange(36, dtype="f8").reshape(12, 3)
    for i in range(1, 12, 4):  # rank 1 of 4, round robin
        box = Block((i, 0), (1, 3))
        hasher = learned.note_write(target, 0, box)
        assert hasher is not None
        hasher.update(memoryview(rows[i].tobytes()))
    [(slab, checksum)] = _pieces(target)
    assert slab == Slab.made((1, 0), (4, 3), (3, 1), (1, 3))
    from h5subfile.layout.integrity import checksum as hash_of

    assert checksum == hash_of(rows[1::4].tobytes())


def test_writing_ones_own_bytes_again_replaces_or_leaves_them_to_the_file() -> None:
    target = _target([Block((0,), (20,))])
    first = learned.note_write(target, 0, Block((0,), (5,)))
    assert first is not None
    again = learned.note_write(target, 0, Block((0,), (5,)))  # the same box: fed anew
    assert again is not None and again is not first
    assert learned.note_write(target, 0, Block((3,), (4,))) is None  # over part of it
    slabs = sorted(slab.describe() for slab, _ in _pieces(target))
    assert slabs == ["[0:5]", "[5:7]"]  # what is left of the new box is its own piece
    assert all(checksum == "" for _, checksum in _pieces(target))  # hashed at close, from the file


def test_a_box_across_segments_is_split_and_overlaps_are_found() -> None:
    target = _target([Block((0,), (4,)), Block((4,), (8,))])
    assert target.parts(Block((2,), (4,))) == [(0, Block((2,), (2,))), (1, Block((4,), (2,)))]
    book = learned.Book()
    piece = PieceSum.of_slab(Slab.made((0,), (3,), (4,), (1,)), "", 0)  # 0, 3, 6, 9
    other = PieceSum.of_slab(Slab.made((1,), (3,), (4,), (2,)), "", 1)  # 1-2, 4-5, 7-8, 10-11
    book.update("/x", 0, [("s.h5", "/x", piece)])
    book.update("/x", 1, [("s.h5", "/x", other)])
    book.check("/x")  # interleaved, never the same element
    book.update("/x", 2, [("t.h5", "/x", PieceSum((9,), (1,), "", (), (), 2))])
    with pytest.raises(OverlapError, match=r"rank 2 region \[9:10\] overlaps rank 0"):
        book.check("/x")


def test_growing_doubles_the_capacity_up_to_maxshape() -> None:
    assert grown((4, 3), (5, 3), (-1, 3)) == (8, 3)
    assert grown((4, 3), (5, 3), (6, 3)) == (6, 3)
    assert grown((0, 3), (1, 3), (-1, 3)) == (1, 3)
    assert grown((8, 3), (5, 3), (-1, 3)) == (8, 3)  # shrunk: nothing new
    assert new_segments((4, 3), (8, 3)) == [Block((4, 0), (4, 3))]
    assert new_segments((0, 3), (1, 3)) == [Block((0, 0), (1, 3))]
    assert sum(b.size for b in new_segments((2, 2), (4, 5))) == 20 - 4
    assert new_shape((3, 4), 7, 0) == (7, 4) and new_shape((3, 4), (1, 2), None) == (1, 2)
    with pytest.raises(PlanError):
        new_shape((3, 4), 7, 2)


def _layout(pieces_a: tuple[PieceSum, ...], pieces_b: tuple[PieceSum, ...]) -> DatasetLayout:
    extents = (
        StoredExtent("s/a.h5", "/x", (0, 0), (6, 3), 4096, (), (), pieces_a),
        StoredExtent("s/b.h5", "/x", (0, 0), (6, 3), 4096, (), (), pieces_b),
    )
    return DatasetLayout(0, extents, learned=True, checksum="xxh3_64", dtype="<f8")


def test_learned_records_are_checked_piece_by_piece() -> None:
    rows_a = PieceSum((0, 0), (1, 3), "a", (2, 3), (3, 1), 0)
    rows_b = PieceSum((1, 0), (1, 3), "b", (2, 3), (3, 1), 1)
    good = _layout((rows_a,), (rows_b,))
    check_learned(good, (6, 3), 8, 2)
    mappings = tuple(
        Mapping(file, "/x", (0, 0), (6, 3), False, 9, slab, slab)
        for file, slab in (("s/a.h5", rows_a.slab), ("s/b.h5", rows_b.slab))
    )
    check_piece_mappings(good.extents, mappings)
    with pytest.raises(RecordError, match="overlaps"):
        check_learned(_layout((rows_a,), (PieceSum((2, 1), (1, 1), "c", (), (), 1),)), (6, 3), 8, 2)
    with pytest.raises(RecordError, match="outside the dataset"):
        check_learned(_layout((PieceSum((5, 0), (2, 3), "d", (), (), 0),), ()), (6, 3), 8, 2)
    with pytest.raises(RecordError, match="rank 5"):
        check_learned(_layout((PieceSum((0, 0), (1, 3), "d", (), (), 5),), ()), (6, 3), 8, 2)
    with pytest.raises(RecordError, match="closer than their size"):
        check_learned(
            _layout((PieceSum((0, 0), (2, 3), "d", (1, 3), (2, 1), 0),), ()), (6, 3), 8, 2
        )
    moved = (
        mappings[0],
        Mapping("s/b.h5", "/x", (0, 0), (6, 3), False, 9, rows_a.slab, rows_b.slab),
    )
    with pytest.raises(RecordError, match="maps"):
        check_piece_mappings(good.extents, moved)


@st.composite
def writes_of(draw: st.DrawFn, shape: tuple[int, ...]) -> list[Block]:
    boxes = []
    for _ in range(draw(st.integers(1, 14))):
        lo = [draw(st.integers(0, n - 1)) for n in shape]
        hi = [draw(st.integers(a + 1, min(n, a + 3))) for a, n in zip(lo, shape)]
        boxes.append(Block(tuple(lo), tuple(b - a for a, b in zip(lo, hi))))
    return boxes


@settings(max_examples=300)
@given(writes_of((9, 5)), st.randoms(use_true_random=False))
def test_pieces_hold_every_write_once_and_their_checksums_are_the_final_bytes(
    boxes: list[Block], rnd
) -> None:
    """Writes in any order, repeated or overlapping: the pieces cover what was written, each
    element once, and each checksum taken as the bytes were written is that of the final
    bytes (a stale one is left empty, for the file)."""
    from h5subfile.layout.integrity import checksum

    shape = (9, 5)
    target = _target([Block((0, 0), shape)])
    stored = np.zeros(shape, dtype="f8")
    written = np.zeros(shape, dtype=bool)
    for box in boxes:
        data = np.array([rnd.random() for _ in range(box.size)]).reshape(box.count)
        hasher = learned.note_write(target, 0, box)
        if hasher is not None:
            hasher.update(memoryview(data.tobytes()))
        stored[box.slices] = data
        written[box.slices] = True
    cover = np.zeros(shape, dtype=np.int64)
    for slab, recorded in _pieces(target):
        parts = list(slab.blocks())
        for part in parts:
            cover[part.slices] += 1
        if recorded:
            assert recorded == checksum(b"".join(stored[p.slices].tobytes() for p in parts))
    assert np.array_equal(cover, written.astype(np.int64))

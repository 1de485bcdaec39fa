"""How a learned layout's pieces become VDS mappings (layout/hyperslab.py ``merged``) and how a
reader checks the mappings against the record (layout/validate.py ``check_piece_mappings``):
pieces of one source that make one regular hyperslab are one mapping, and the check accepts
that form and the older one (a mapping per piece) and nothing that selects other elements."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.layout.blocks import Block
from h5subfile.layout.hyperslab import Slab, merged
from h5subfile.layout.integrity import PieceSum
from h5subfile.layout.record import StoredExtent
from h5subfile.layout.validate import Mapping, RecordError, check_piece_mappings


def _cover(slabs: list[Slab], shape: tuple[int, ...]) -> np.ndarray:
    """How many of ``slabs`` select each element."""
    cover = np.zeros(shape, dtype=np.int64)
    for slab in slabs:
        for block in slab.blocks():
            cover[block.slices] += 1
    return cover


def _box(start: tuple[int, ...], count: tuple[int, ...]) -> Slab:
    return Slab.of_box(Block(start, count))


def test_tiles_side_by_side_are_one_box() -> None:
    """A group's tiles of one row of tiles (16 ranks, 4 x 4 tiles, 4 ranks per subfile)."""
    tiles = [_box((0, 512 * j), (512, 512)) for j in (2, 0, 3, 1)]
    assert merged(tiles) == [_box((0, 0), (512, 2048))]
    square = [_box((i, j), (2, 2)) for i in (0, 2) for j in (0, 2)]
    assert merged(square) == [_box((0, 0), (4, 4))]


def test_a_group_straddling_rows_of_tiles_has_a_box_per_row() -> None:
    """4 x 4 tiles in row-major rank order, 3 ranks per subfile (docs/FORMAT.md's table): the
    group of ranks 3-5 holds the last tile of the first row and two of the second."""
    tile = 4
    ranks = [divmod(r, 4) for r in (3, 4, 5)]
    tiles = [_box((i * tile, j * tile), (tile, tile)) for i, j in ranks]
    assert merged(tiles) == [_box((0, 12), (4, 4)), _box((4, 0), (4, 8))]


def test_rows_of_neighbouring_ranks_are_one_strided_slab() -> None:
    """Rank r of 4 writing rows r, r + 4, ...: ranks 0 and 1 (one subfile) give rows 0, 1, 4,
    5, ... (blocks of two rows); all four ranks give every row (one box)."""
    rows = [Slab.made((r, 0), (4, 8), (6, 1), (1, 8)) for r in range(4)]
    assert merged(rows[:2]) == [Slab.made((0, 0), (4, 8), (6, 1), (2, 8))]
    assert merged(rows) == [_box((0, 0), (24, 8))]
    assert merged([rows[0], rows[2]]) == [rows[0], rows[2]]  # rows 1 and 3 missing: two


def test_a_progression_carries_on() -> None:
    """A time series grown step by step, each step's rows at the same place in the period."""
    first = Slab.made((0,), (10,), (3,), (2,))
    later = Slab.made((30,), (10,), (2,), (2,))
    alone = _box((50,), (2,))
    assert merged([later, alone, first]) == [Slab.made((0,), (10,), (6,), (2,))]
    assert merged([_box((0,), (1,)), _box((5,), (1,))]) == [Slab.made((0,), (5,), (2,), (1,))]


def test_nothing_to_merge_keeps_every_piece() -> None:
    pieces = [_box((0, 0), (2, 2)), _box((2, 1), (2, 2)), Slab.made((5, 0), (2, 3), (2, 1), (1, 3))]
    assert sorted(merged(pieces), key=lambda s: s.start) == sorted(pieces, key=lambda s: s.start)
    assert merged([]) == []


@st.composite
def disjoint_slabs(draw: st.DrawFn) -> tuple[tuple[int, int], list[Slab]]:
    """Disjoint slabs of a small 2-D dataset: round-robin rows, tiles or single elements, some
    left out (never written)."""
    shape = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    kind = draw(st.sampled_from(["rows", "tiles", "elements"]))
    slabs = []
    if kind == "rows":
        ranks = draw(st.integers(1, 5))
        for r in range(min(ranks, shape[0])):
            count = len(range(r, shape[0], ranks))
            slabs.append(Slab.made((r, 0), (ranks, shape[1]), (count, 1), (1, shape[1])))
    elif kind == "tiles":
        ty, tx = draw(st.integers(1, shape[0])), draw(st.integers(1, shape[1]))
        for i in range(0, shape[0], ty):
            for j in range(0, shape[1], tx):
                slabs.append(_box((i, j), (min(ty, shape[0] - i), min(tx, shape[1] - j))))
    else:
        slabs = [_box((i, j), (1, 1)) for i in range(shape[0]) for j in range(shape[1])]
    kept = [s for s in slabs if draw(st.booleans()) or draw(st.booleans())]
    return shape, kept


@settings(max_examples=300, deadline=None)
@given(disjoint_slabs(), st.randoms(use_true_random=False))
def test_merged_slabs_select_exactly_the_pieces_elements(drawn, rnd) -> None:
    """Whatever the pieces and their order: the same elements, each once, in no more slabs,
    and the same slabs for the same set; the check accepts them as mappings."""
    shape, slabs = drawn
    found = merged(slabs)
    assert np.array_equal(_cover(found, shape), _cover(slabs, shape))
    assert len(found) <= len(slabs)
    shuffled = list(slabs)
    rnd.shuffle(shuffled)
    assert merged(shuffled) == found
    extent = StoredExtent("s/a.h5", "/x", (0, 0), shape, 4096, (), (), _pieces(slabs))
    check_piece_mappings([extent], [_mapping("s/a.h5", slab, slab) for slab in found])


def _pieces(slabs: list[Slab]) -> tuple[PieceSum, ...]:
    return tuple(PieceSum.of_slab(slab, "", 0) for slab in slabs)


def _mapping(file: str, virtual: Slab, source: Slab) -> Mapping:
    return Mapping(
        file, "/x", virtual.start, virtual.bounds.count, False, virtual.size, virtual, source
    )


def test_the_check_refuses_mappings_that_select_other_elements() -> None:
    """Against a record of two rows in one source (rows 0 and 1 of every 4): one merged
    mapping, or one mapping each, pass; a merged mapping reaching a row nobody wrote, one
    leaving a piece out, one read from elsewhere in the source, or one in another file fail."""
    pieces = [Slab.made((r, 0), (4, 3), (2, 1), (1, 3)) for r in (0, 1)]
    extent = StoredExtent("s/a.h5", "/x", (0, 0), (8, 3), 4096, (), (), _pieces(pieces))
    both = Slab.made((0, 0), (4, 3), (2, 1), (2, 3))
    check_piece_mappings([extent], [_mapping("s/a.h5", both, both)])
    check_piece_mappings([extent], [_mapping("s/a.h5", p, p) for p in pieces])
    wider = Slab.made((0, 0), (4, 3), (2, 1), (3, 3))
    with pytest.raises(RecordError, match="maps 18 element"):
        check_piece_mappings([extent], [_mapping("s/a.h5", wider, wider)])
    with pytest.raises(RecordError, match=r"record maps \[1:6:4"):
        check_piece_mappings([extent], [_mapping("s/a.h5", pieces[0], pieces[0])])
    elsewhere = Slab.made((1, 0), (4, 3), (2, 1), (2, 3))
    with pytest.raises(RecordError, match="does not"):
        check_piece_mappings([extent], [_mapping("s/a.h5", both, elsewhere)])
    with pytest.raises(RecordError, match="another shape"):
        other = Slab.made((0, 0), (3, 3), (2, 1), (2, 3))
        check_piece_mappings([extent], [_mapping("s/a.h5", both, other)])
    with pytest.raises(RecordError, match="s/b.h5"):
        check_piece_mappings([extent], [_mapping("s/b.h5", both, both)])


@settings(max_examples=200, deadline=None)
@given(disjoint_slabs(), st.integers(0, 3), st.integers(0, 3))
def test_a_slab_placed_at_once_lands_where_its_blocks_do(drawn, lo, hi) -> None:
    """``place_slab`` (a read's pieces copied into the caller's array through one strided
    view) puts every element where copying block by block does, inside the box read or
    cut by it."""
    from h5subfile.io.boxes import place_blocks, place_slab

    shape, slabs = drawn
    box = Block((min(lo, shape[0] - 1), 0), (max(shape[0] - lo - hi, 1), shape[1]))
    for slab in slabs:
        data = np.arange(slab.size, dtype="f8").reshape(slab.count + slab.block) + 1
        at_once = np.zeros(box.count)
        by_block = np.zeros(box.count)
        place_slab(at_once, box, slab, data)
        grid = data.reshape((slab.blocks_count, *slab.block))
        place_blocks(by_block, box, zip(slab.blocks(), grid))
        assert np.array_equal(at_once, by_block), (slab, box)


@settings(max_examples=200, deadline=None)
@given(disjoint_slabs(), st.integers(0, 2))
def test_a_slabs_runs_at_once_are_its_blocks_runs(drawn, margin) -> None:
    """``slab_runs`` (a read planned for all of a slab's blocks at once) gives each block's
    one run, in block order, exactly as :func:`box_runs` gives it block by block."""
    from h5subfile.layout.runs import box_runs, slab_runs

    shape, slabs = drawn
    extent = Block((0, 0), (shape[0] + margin, shape[1]))
    buffer = Block((0, 0), shape)
    for slab in slabs:
        found = slab_runs(slab, extent, buffer, 8)
        expected = [box_runs(extent, block, buffer, 8) for block in slab.blocks()]
        if found is None:
            assert any(len(runs) != 1 for runs in expected) or slab.ndim == 0
            continue
        at, taken, nbytes = found
        assert [[(a, t, nbytes)] for a, t in zip(at.tolist(), taken.tolist())] == expected

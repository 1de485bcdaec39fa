"""Pure decomposition logic: blocks, grouping, extents, byte runs (hypothesis against brute force)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.errors import BlockError, PlanError
from h5subfile.layout.blocks import Block, check_blocks, corner_block, parse_block, prefix_blocks
from h5subfile.layout.extents import plan_extents
from h5subfile.layout.grouping import plan_groups
from h5subfile.plan import Plan

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


@st.composite
def box_in(draw, shape):
    start = tuple(draw(st.integers(0, n - 1)) for n in shape)
    count = tuple(draw(st.integers(0, n - s)) for s, n in zip(start, shape))
    return Block(start, count)


@st.composite
def shape_and_blocks(draw, max_blocks=5):
    shape = draw(shapes)
    blocks = draw(st.lists(box_in(shape), min_size=1, max_size=max_blocks))
    return shape, blocks


def cells(block: Block) -> set[tuple[int, ...]]:
    return set(itertools.product(*(range(s, s + c) for s, c in zip(block.start, block.count))))


@given(shape_and_blocks())
def test_overlap_check_agrees_with_brute_force(case) -> None:
    shape, blocks = case
    overlapping = any(cells(a) & cells(b) for a, b in itertools.combinations(blocks, 2))
    if overlapping:
        with pytest.raises(BlockError, match="overlaps"):
            check_blocks("/d", shape, blocks)
    else:
        check_blocks("/d", shape, blocks)


def test_out_of_bounds_names_rank_and_region() -> None:
    with pytest.raises(BlockError, match=r"rank 1 block \[8:12\] lies outside the shape \(10,\)"):
        check_blocks("/d", (10,), [Block((0,), (8,)), Block((8,), (4,))])


def test_empty_blocks_never_overlap_or_leave_the_shape() -> None:
    check_blocks("/d", (4,), [Block((0,), (4,)), Block((2,), (0,)), Block((9,), (0,))])


@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=9), st.lists(st.integers(1, 3), max_size=2)
)
def test_prefix_blocks_tile_axis_0_exactly_once(lengths, trailing) -> None:
    blocks = prefix_blocks(lengths, tuple(trailing))
    shape = (sum(lengths), *trailing)
    check_blocks("/d", shape, blocks)
    assert sum(b.size for b in blocks) == math.prod(shape)


def test_parse_block_forms() -> None:
    assert parse_block((10, 4), (slice(2, 5), slice(None))) == Block((2, 0), (3, 4))
    assert parse_block((10,), start=(3,), count=(2,)) == Block((3,), (2,))
    assert parse_block((10, 4)).is_empty
    assert corner_block((1, 2), (3, 4)) == Block((1, 2), (3, 4))
    for bad in [
        dict(block=(slice(0, 2),)),
        dict(start=(1,)),
        dict(start=(0, 0), count=(-1, 1)),
        dict(block=(slice(0, 4, 2), slice(None))),
        dict(block=(1, 2)),
    ]:
        with pytest.raises(BlockError):
            parse_block((10, 4), **bad)


@given(st.integers(1, 64), st.data())
def test_every_rank_is_in_exactly_one_group(size, data) -> None:
    choice = data.draw(st.sampled_from(["int", "k", "rank", "node"]))
    if choice == "int":
        plan = Plan(subfiles=data.draw(st.integers(1, size)))
    elif choice == "k":
        plan = Plan(ranks_per_subfile=data.draw(st.integers(1, size + 3)))
    elif choice == "rank":
        plan = Plan(subfiles="rank")
    else:
        plan = Plan(subfiles="node")
    per_node = data.draw(st.integers(1, 8))
    grouping = plan_groups(size, plan, [r // per_node for r in range(size)])
    members = sorted(r for m in grouping.members for r in m)
    assert members == list(range(size))
    assert all(m for m in grouping.members)
    assert grouping.leaders == tuple(min(m) for m in grouping.members)
    if choice == "int":
        assert grouping.ngroups == plan.subfiles
        sizes = [len(m) for m in grouping.members]
        assert max(sizes) - min(sizes) <= 1
        assert all(list(m) == list(range(m[0], m[-1] + 1)) for m in grouping.members)
    if choice == "k":
        assert grouping.ngroups == -(-size // plan.ranks_per_subfile)
    if choice == "node":
        assert grouping.ngroups == -(-size // per_node)


def test_grouping_refuses_more_subfiles_than_ranks() -> None:
    with pytest.raises(PlanError, match="subfiles=5 but the communicator has only 4"):
        plan_groups(4, Plan(subfiles=5))
    with pytest.raises(PlanError, match="not both"):
        Plan(subfiles=2, ranks_per_subfile=2)


@settings(max_examples=200)
@given(shape_and_blocks(max_blocks=8), st.integers(1, 4))
def test_extents_hold_each_block_once_contiguously(case, ngroups) -> None:
    shape, blocks = case
    # keep a non-overlapping subset, as check_blocks guarantees for real input
    kept: list[Block] = []
    for b in blocks:
        if b.is_empty or not any(cells(b) & cells(k) for k in kept):
            kept.append(b)
    size = len(kept)
    grouping = plan_groups(size, Plan(subfiles=min(ngroups, size)))
    extents, placements = plan_extents(kept, grouping)
    covered = [c for e in extents for c in cells(e.block)]
    assert len(covered) == len(set(covered))  # extents never overlap
    assert set(covered) == set().union(*(cells(b) for b in kept))  # exactly the blocks' cells
    for rank, (block, placement) in enumerate(zip(kept, placements)):
        if block.is_empty:
            assert placement is None
            continue
        extent = extents[placement.extent]
        assert extent.group == grouping.group_of_rank[rank] and rank in extent.ranks
        # the block is one contiguous run of its extent, starting at element_offset
        strides = [math.prod(extent.shape[a + 1 :]) for a in range(len(shape))]
        offsets = sorted(
            sum((c[a] - extent.start[a]) * strides[a] for a in range(len(shape)))
            for c in cells(block)
        )
        assert offsets == list(
            range(placement.element_offset, placement.element_offset + block.size)
        )


def test_vpic_pattern_gets_one_extent_per_group() -> None:
    blocks = prefix_blocks([5, 0, 7, 3, 4, 9], ())
    extents, _ = plan_extents(blocks, plan_groups(6, Plan(subfiles=2)))
    assert [(e.group, e.start, e.shape) for e in extents] == [(0, (0,), (12,)), (1, (12,), (16,))]


def test_datasets_with_the_same_blocks_are_checked_and_coalesced_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A creation call's datasets placed by prefix sum with equal lengths (a VPIC step) share
    one block map, checked and coalesced once; each gets the extents it gets alone, and a
    dataset with the same rows but other trailing dimensions is coalesced on its own."""
    import numpy as np

    from h5subfile.engine import creation_plan
    from h5subfile.engine.messages import DatasetRequest, RequestKind
    from h5subfile.layout import planning
    from h5subfile.layout.blockmap import BlockMap
    from h5subfile.layout.catalog import Catalog, NodeInfo
    from h5subfile.layout.record import FileRecord

    rows = [5, 0, 7, 3, 4, 9]
    shapes = {  # name: (rows per rank, trailing dimensions)
        "x": (rows, ()),
        "y": (rows, ()),
        "id": (rows, ()),
        "other": ([1, 2, 3, 4, 5, 6], ()),
        "wide": (rows, (3,)),
    }
    gathered = [
        [
            DatasetRequest(
                f"/s/{name}",
                np.dtype("f4"),
                RequestKind.PREFIX,
                None,
                Block((0,) * (1 + len(trailing)), (n[r], *trailing)),
            )
            for name, (n, trailing) in shapes.items()
        ]
        for r in range(6)
    ]
    grouping = plan_groups(6, Plan(subfiles=2))
    coalesced: list[str] = []
    real = planning.coalesce

    def counted(path, *args):  # type: ignore[no-untyped-def]
        coalesced.append(path)
        return real(path, *args)

    monkeypatch.setattr(planning, "coalesce", counted)
    catalog = Catalog({"/": NodeInfo("group"), "/s": NodeInfo("group")}, FileRecord())
    together = creation_plan.plan_creation(
        "run.h5", catalog, grouping, Plan(subfiles=2), lambda g: f"s{g}.h5", gathered
    )
    assert coalesced == ["/s/x", "/s/other", "/s/wide"]  # y and id reuse x's
    for placed, (name, (n, trailing)) in zip(together.placed, shapes.items()):
        shape = (sum(n), *trailing)
        alone = real(f"/s/{name}", shape, BlockMap.prefix(n, trailing), grouping)
        shared = placed.placement
        assert shared.shape == shape
        assert [(e.start, e.shape, e.ranks) for e in shared.extents] == [
            (box.start, box.count, ranks) for box, ranks in zip(alone.boxes, alone.ranks)
        ]
        assert [e.dataset for e in shared.extents] == [f"/s/{name}"] * len(alone.boxes)
        assert shared.groups == alone.groups
        np.testing.assert_array_equal(shared.extent_of_rank, alone.extent_of_rank)

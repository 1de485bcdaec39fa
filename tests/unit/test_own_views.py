"""Own views (engine/creation_plan.py): with file per process, a rank's assignment already says what the
rank will know of the new datasets but its own extent's offset; completed with that offset it is
exactly what rank 0 would have sent once the datasets were published. Pure."""

from __future__ import annotations

import numpy as np
import pytest

from h5subfile.engine import creation_plan
from h5subfile.engine.messages import CONTIGUOUS, DatasetRequest, RequestKind, Storage
from h5subfile.layout.blocks import Block
from h5subfile.layout.catalog import Catalog, NodeInfo
from h5subfile.layout.grouping import RankGrouping, plan_groups
from h5subfile.layout.record import FileRecord
from h5subfile.plan import Plan

SESSION = 3


def _plan(
    rows: list[int], plan: Plan, storage: Storage = CONTIGUOUS, only_rank_0: bool = False
) -> creation_plan.CreationPlan:
    """Rank 0's plan of a call creating three datasets: two at the prefix sum of ``rows``
    (one of them 2-D), and one of explicit shape that no rank writes (or rank 0 alone)."""
    size = len(rows)
    total = sum(rows)

    def requests(rank: int) -> list[DatasetRequest]:
        alone = Block((0,), (total if rank == 0 and only_rank_0 else 0,))
        return [
            DatasetRequest(
                "/g/a",
                np.dtype("f4"),
                RequestKind.PREFIX,
                None,
                Block((0,), (rows[rank],)),
                storage,
            ),
            DatasetRequest(
                "/g/b", np.dtype("<i8"), RequestKind.PREFIX, None, Block((0, 0), (rows[rank], 3))
            ),
            DatasetRequest("/c", np.dtype("u1"), RequestKind.EXPLICIT, (total,), alone),
        ]

    catalog = Catalog({"/": NodeInfo("group")}, FileRecord())
    return creation_plan.plan_creation(
        "run.h5",
        catalog,
        plan_groups(size, plan),
        plan,
        lambda group: f"run.subfiles/s{group}.h5",
        [requests(rank) for rank in range(size)],
    )


def _offset(dataset: int, extent: int) -> int:
    return 69632 + 4096 * dataset + (extent << 20)


@pytest.mark.parametrize("rows", [[5, 7], [4, 0, 3, 9, 1]])
def test_a_completed_own_view_is_what_rank_0_would_send(rows: list[int]) -> None:
    plan = Plan(subfiles="rank")
    creation = _plan(rows, plan)
    own = creation_plan.own_views(creation, SESSION, plan)
    assert own is not None and len(own) == len(rows)
    offsets = {
        (index, k): _offset(index, k)
        for index, dataset in enumerate(creation.datasets)
        for k in range(len(dataset.extents))
    }
    nodes = creation_plan.published_nodes(creation, SESSION, offsets)
    for rank in range(1, len(rows)):  # rank 0 keeps the whole layouts it published
        sent = creation_plan.rank_view(nodes, creation, rank)
        for index, (placed, view) in enumerate(zip(creation.placed, own[rank])):
            extent = placed.placement.extent_of(rank)
            offset = None if extent is None else _offset(index, extent)
            made = creation_plan.completed_view(view, placed.dataset.dtype, offset)
            assert made == sent[placed.dataset.path], (rank, placed.dataset.path)
            assert made[0].local_view == (len(placed.dataset.extents) > 1)
    assert [len(d.extents) for d in creation.datasets] == [sum(1 for r in rows if r)] * 2 + [0]


def test_offsets_sent_without_an_answer_fit_the_bound_own_views_checks() -> None:
    """The offsets message ``root_collects`` sends (the offsets in task order, and no failure)
    stays within ``OFFSET_BYTES`` per task plus ``OFFSETS_OVERHEAD``, for offsets up to
    2**62 and up to 500 tasks: rank 0 decides with that bound that it fits one slot."""
    from h5subfile.mpi.slots import pickled as _pickled

    for tasks in (0, 1, 8, 500):
        for offset in (0, 69632, 2**31, 2**62):
            size = _pickled(([offset + k for k in range(tasks)], None)).size
            bound = tasks * creation_plan.OFFSET_BYTES + creation_plan.OFFSETS_OVERHEAD
            assert size <= bound, (tasks, offset, size)


def test_own_views_only_where_every_rank_creates_what_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [4, 2, 3, 5]
    assert creation_plan.own_views(_plan(rows, Plan(subfiles="rank")), 0, Plan(subfiles="rank"))
    one = Plan(subfiles=1)
    assert creation_plan.own_views(_plan([3], one), 0, one) is not None  # the one rank holds all
    for plan in (Plan(subfiles=2), Plan(subfiles=1)):  # members need their leader's offsets
        assert creation_plan.own_views(_plan(rows, plan), 0, plan) is None
    aggregated = Plan(subfiles="rank", aggregators=1)  # two-phase writes: rounds of their own
    assert creation_plan.own_views(_plan(rows, aggregated), 0, aggregated) is None
    per_rank = Plan(subfiles="rank")
    chunked = _plan(rows, per_rank, Storage(chunks=True))
    assert creation_plan.own_views(chunked, 0, per_rank) is None
    shared = _plan(rows, per_rank, only_rank_0=True)  # one extent: every rank is sent it whole
    assert creation_plan.own_views(shared, 0, per_rank) is None
    monkeypatch.setattr(
        creation_plan, "one_slot_bytes", lambda size: creation_plan.OFFSET_BYTES + 64
    )
    assert (
        creation_plan.own_views(_plan(rows, per_rank), 0, per_rank) is None
    )  # 2 offsets: too many


def test_a_rank_plans_a_learned_call_in_one_group_as_rank_0_does() -> None:
    """Datasets created without a round (engine/announced.py): a rank other than 0 plans the
    call itself, with the grouping it knows (one node: not the whole, which rank 0 alone
    holds), and makes its views from the offsets rank 0 announces: the same views as rank 0's
    published nodes give it."""
    size, plan = 3, Plan(subfiles=1)
    whole = plan_groups(size, plan)
    known = RankGrouping(2, 0, tuple(range(size)), 1, size, size, size, whole.rule)
    assert known.whole is None and known.known_whole == whole
    requests = [
        DatasetRequest(
            path,
            np.dtype(dtype),
            RequestKind.EXPLICIT,
            shape,
            Block((0,) * len(shape), shape),
            **extra,
        )
        for path, dtype, shape, extra in (
            ("/g/a", "f8", (100,), {"declared": False}),
            ("/g/b", "i4", (4, 5), {"declared": False}),
            ("/s", "u2", (), {"declared": False}),
            ("/g/e", "f4", (0, 3), {"declared": False}),
            ("/g/f", "f8", (6,), {"declared": False, "fill": np.float64(-1).tobytes()}),
        )
    ]
    catalog = Catalog({"/": NodeInfo("group")}, FileRecord())

    def planned(grouping):  # noqa: ANN001, ANN202
        return creation_plan.plan_creation(
            "run.h5", catalog, grouping, plan, lambda g: f"run.subfiles/s{g}.h5", [requests] * size
        )

    on_root, alike = planned(whole), planned(known.known_whole)
    assert on_root.datasets == alike.datasets and on_root.tasks == alike.tasks
    offsets = {
        (i, k): 4096 * (i + 1)
        for i, d in enumerate(on_root.datasets)
        for k in range(len(d.extents))
    }
    published = creation_plan.published_nodes(on_root, SESSION, offsets)
    for rank in range(1, size):
        made = creation_plan.rank_view(
            creation_plan.published_nodes(alike, SESSION, dict(offsets)), alike, rank
        )
        assert made == creation_plan.rank_view(published, on_root, rank)
    layouts = {path: info.layout for path, info in published.items()}
    assert all(layout.learned and layout.session == SESSION for layout in layouts.values())
    assert layouts["/g/a"].extents[0].offset == 4096 and layouts["/g/e"].extents == ()
    assert layouts["/g/f"].extents[0].file == "run.subfiles/s0.h5"  # a fill value: a source

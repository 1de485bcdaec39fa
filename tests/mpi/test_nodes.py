"""The node grouping under MPI (3 ranks in the suite, nodes faked of 2 ranks: {0, 1}, {2}): rank 0
groups the processor names and tells every other rank its own node only, unless the plan's
aggregators need every subfile's ranks on every rank; the file reads back the same either way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ranks import plain_h5py, raises_on_every_rank, same_on_every_rank

import h5subfile as hs


@pytest.fixture(autouse=True)
def nodes_of_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H5SUBFILE_RANKS_PER_NODE", "2")


def expected_members(rank: int, size: int) -> tuple[int, ...]:
    first = rank // 2 * 2
    return tuple(range(first, min(first + 2, size)))


@pytest.mark.parametrize("aggregators", [None, 1])
def test_each_rank_knows_its_own_node_and_rank_0_every_node(
    comm, shared_tmp: Path, aggregators: int | None
) -> None:
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"nodes-{aggregators}.h5"
    with hs.File(path, "w", subfiles="node", aggregators=aggregators) as f:
        grouping = f.grouping
        assert grouping is not None
        assert (grouping.group, grouping.members) == (
            rank // 2,
            expected_members(rank, size),  # a tuple on every rank
        )
        assert grouping.leader == rank // 2 * 2 and grouping.is_leader == (rank % 2 == 0)
        assert grouping.ngroups == (size + 1) // 2 and grouping.size == size
        described = same_on_every_rank(comm, grouping.describe(), "describe()")
        assert described.startswith(f"{(size + 1) // 2} subfile(s) for {size} rank(s)")
        holds_whole = rank == 0 or aggregators is not None
        assert (grouping.whole is not None) == holds_whole
        if grouping.whole is not None:
            assert grouping.whole.group_of_rank == tuple(r // 2 for r in range(size))
            assert grouping.members_of(grouping.ngroups - 1) == expected_members(size - 1, size)
        elif grouping.ngroups > 1:
            with pytest.raises(LookupError, match="its own subfile only"):
                grouping.members_of(1 - grouping.group)
        f.write_dataset("x", np.arange(rank * 10, rank * 10 + 10, dtype="<i8"))
    shown = plain_h5py(
        comm,
        "import sys, h5py; f = h5py.File(sys.argv[1], 'r'); print(f['x'][...].tolist())",
        str(path),
    )
    assert shown == str(list(range(size * 10)))


def test_aggregators_more_than_a_node_has_raise_on_every_rank(comm, shared_tmp: Path) -> None:
    if comm.size % 2 == 0:
        pytest.skip("needs a node of one rank (an odd rank count)")
    with raises_on_every_rank(comm, hs.PlanError, "aggregators=2", "has only 1 rank(s)"):
        hs.File(shared_tmp / "too-many-aggregators.h5", "w", subfiles="node", aggregators=2)

"""Grouping: which rank writes which subfile."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import PlanError
from ..plan import Plan


@dataclass(frozen=True)
class Grouping:
    """Ranks grouped into subfiles: ``group_of_rank[r]`` is rank r's subfile index.

    Groups are numbered in the order of their lowest rank; that rank is the group's leader.
    """

    group_of_rank: tuple[int, ...]
    rule: str

    @property
    def size(self) -> int:
        return len(self.group_of_rank)

    @cached_property
    def ngroups(self) -> int:
        return max(self.group_of_rank) + 1

    @cached_property
    def rank_groups(self) -> np.ndarray:
        """``group_of_rank`` as an int64 array (for planning with numpy)."""
        return np.array(self.group_of_rank, dtype=np.int64)

    @cached_property
    def members(self) -> tuple[tuple[int, ...], ...]:
        order = np.argsort(self.rank_groups, kind="stable")
        ends = np.cumsum(np.bincount(self.rank_groups, minlength=self.ngroups))
        ranks = order.tolist()
        return tuple(tuple(ranks[a:b]) for a, b in zip([0, *ends[:-1].tolist()], ends.tolist()))

    @cached_property
    def leaders(self) -> tuple[int, ...]:
        return tuple(m[0] for m in self.members)

    def is_leader(self, rank: int) -> bool:
        return self.members[self.group_of_rank[rank]][0] == rank

    def describe(self) -> str:
        sizes = sorted({len(m) for m in self.members})
        per = "-".join(str(s) for s in (sizes[0], sizes[-1])) if len(sizes) > 1 else str(sizes[0])
        return (
            f"{self.ngroups} subfile(s) for {self.size} rank(s), {per} rank(s) each ({self.rule})"
        )


def _renumber(keys: Sequence[int]) -> tuple[int, ...]:
    """Number groups by their first (lowest) rank."""
    order: dict[int, int] = {}
    for key in keys:
        order.setdefault(key, len(order))
    return tuple(order[key] for key in keys)


def plan_groups(size: int, plan: Plan, node_of_rank: Sequence[int] | None = None) -> Grouping:
    """Group ``size`` ranks as ``plan`` says, and check that the plan's aggregator count fits.

    ``node_of_rank`` (any hashable node id per rank) is needed for ``subfiles="node"`` only.
    """
    grouping = _group(size, plan, node_of_rank)
    if plan.aggregators is not None:
        smallest = min(len(m) for m in grouping.members)
        if plan.aggregators > smallest:
            raise PlanError(
                f"aggregators={plan.aggregators} but a subfile of this grouping ({grouping.rule}) "
                f"has only {smallest} rank(s): use 1 to {smallest} aggregators per subfile, or "
                "'direct'"
            )
    return grouping


def aggregators_of(members: Sequence[int], count: int) -> tuple[int, ...]:
    """``count`` aggregators spread evenly over a group's ``members`` (the leader first)."""
    count = max(1, min(count, len(members)))
    return tuple(members[i * len(members) // count] for i in range(count))


def _group(size: int, plan: Plan, node_of_rank: Sequence[int] | None) -> Grouping:
    if size < 1:
        raise PlanError(f"a communicator of size {size} has no ranks")
    if plan.ranks_per_subfile is not None:
        k = plan.ranks_per_subfile
        return Grouping(tuple(r // k for r in range(size)), f"ranks_per_subfile={k}")
    grouping = plan.grouping
    if grouping == "rank":
        return Grouping(tuple(range(size)), "subfiles='rank': file per process")
    if grouping == "node":
        if node_of_rank is None or len(node_of_rank) != size:
            raise PlanError("subfiles='node' needs the node of every rank")
        return Grouping(_renumber(list(node_of_rank)), "subfiles='node': one subfile per node")
    assert isinstance(grouping, int)
    if grouping > size:
        raise PlanError(
            f"subfiles={grouping} but the communicator has only {size} rank(s): "
            "each subfile needs at least one rank"
        )
    return Grouping(tuple(r * grouping // size for r in range(size)), f"subfiles={grouping}")

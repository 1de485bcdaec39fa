"""Grouping: which rank writes which subfile.

:func:`plan_groups` groups the ranks as the plan says (M subfiles of contiguous ranks, k ranks
per subfile, one subfile per node, one per rank) into a :class:`Grouping`;
:class:`RankGrouping` is the grouping as one rank knows it (its group and that group's ranks,
the others counted), and :func:`aggregators_of` spreads a group's aggregators over its ranks.
"""

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

    def describe(self) -> str:
        sizes = [len(m) for m in self.members]
        return _described(self.ngroups, self.size, min(sizes), max(sizes), self.rule)


def _described(ngroups: int, size: int, smallest: int, largest: int, rule: str) -> str:
    per = f"{smallest}-{largest}" if smallest != largest else str(smallest)
    return f"{ngroups} subfile(s) for {size} rank(s), {per} rank(s) each ({rule})"


@dataclass(frozen=True)
class RankGrouping:
    """A grouping as one rank knows it: its own group (``group``, its ``members``, lowest
    first), the others in counts, and the ``whole`` grouping where this rank holds it.

    Every rank holds the whole grouping where it is computed without a message (file per
    process, ``ranks_per_subfile``, a number of subfiles). The node grouping is rank 0's alone
    (it grouped the processor names, and its planners read every rank's group) unless the plan
    has aggregators (the two-phase plan looks up every subfile's aggregators on every rank).
    """

    rank: int
    group: int
    members: tuple[int, ...]
    ngroups: int
    size: int
    smallest: int
    largest: int
    rule: str
    whole: Grouping | None = None

    @classmethod
    def of(cls, whole: Grouping, rank: int) -> RankGrouping:
        """Rank ``rank``'s view of the ``whole`` grouping (which it keeps)."""
        group = whole.group_of_rank[rank]
        sizes = [len(m) for m in whole.members]
        return cls(
            rank=rank,
            group=group,
            members=whole.members[group],
            ngroups=whole.ngroups,
            size=whole.size,
            smallest=min(sizes),
            largest=max(sizes),
            rule=whole.rule,
            whole=whole,
        )

    @cached_property
    def known_whole(self) -> Grouping | None:
        """The whole grouping where this rank holds it, or knows it without a message (one
        group: every rank in it); None otherwise."""
        if self.whole is not None or self.ngroups != 1:
            return self.whole
        return Grouping((0,) * self.size, self.rule)

    @property
    def leader(self) -> int:
        """The lowest rank of this rank's group: the one that creates its subfile."""
        return self.members[0]

    @property
    def is_leader(self) -> bool:
        return self.leader == self.rank

    def members_of(self, group: int) -> Sequence[int]:
        """The ranks of ``group``: this rank's own, or any where it holds the whole grouping."""
        if group == self.group:
            return self.members
        if self.whole is None:
            raise LookupError(f"rank {self.rank} knows the ranks of its own subfile only")
        return self.whole.members[group]

    def describe(self) -> str:
        return _described(self.ngroups, self.size, self.smallest, self.largest, self.rule)


NODE_RULE = "subfiles='node': one subfile per node"


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
        return Grouping(_renumber(list(node_of_rank)), NODE_RULE)
    assert isinstance(grouping, int)
    if grouping > size:
        raise PlanError(
            f"subfiles={grouping} but the communicator has only {size} rank(s): "
            "each subfile needs at least one rank"
        )
    return Grouping(tuple(r * grouping // size for r in range(size)), f"subfiles={grouping}")

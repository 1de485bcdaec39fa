"""Which node each rank runs on, learnt through rank 0: each rank is told its own node, and the
others only in counts (O(1) per rank where a node's ranks follow each other)."""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from mpi4py import MPI

from ..errors import PlanError
from .collective import bcast, root_decides

RANKS_PER_NODE_ENV = "H5SUBFILE_RANKS_PER_NODE"


@dataclass(frozen=True)
class Nodes:
    """The nodes a communicator runs on, as one rank knows them.

    Nodes are numbered in the order of their lowest rank. ``members`` are the ranks on this
    rank's node, lowest first (a ``range`` where they follow each other); ``smallest`` and
    ``largest`` count the ranks of the smallest and of the largest node. ``of_rank`` (every
    rank's node) is rank 0's, which grouped the names, or every rank's when asked for.
    """

    index: int
    members: Sequence[int]
    count: int
    smallest: int
    largest: int
    of_rank: tuple[int, ...] | None = None


def share_nodes(names: Sequence[Hashable]) -> list[Nodes]:
    """Rank 0's answers: from every rank's node name, what each rank is told (without
    ``of_rank``). Linear in the ranks."""
    first: dict[Hashable, int] = {}
    of_rank = tuple(first.setdefault(name, len(first)) for name in names)
    members: list[list[int]] = [[] for _ in first]
    for rank, node in enumerate(of_rank):
        members[node].append(rank)
    sizes = [len(m) for m in members]
    smallest, largest = min(sizes), max(sizes)
    told = [
        Nodes(node, _compact(m), len(members), smallest, largest) for node, m in enumerate(members)
    ]
    return [told[node] for node in of_rank]


def told_message(nodes: Nodes) -> tuple[int, Sequence[int], int, int, int]:
    """What rank 0 sends a rank of what it is told: plain values (a pickled class would name
    its module, in slots of 64 bytes at a million ranks)."""
    return nodes.index, nodes.members, nodes.count, nodes.smallest, nodes.largest


def _compact(ranks: list[int]) -> Sequence[int]:
    """``ranks`` as a ``range`` when they follow each other (a few bytes whatever the count)."""
    if ranks[-1] - ranks[0] == len(ranks) - 1:
        return range(ranks[0], ranks[-1] + 1)
    return tuple(ranks)


def locate_nodes(comm: MPI.Comm, every_rank: bool = False) -> Nodes:
    """Collective: this rank's node, its ranks, and how many nodes there are.

    A node is a processor name (``MPI_Get_processor_name``, the host name with MPICH and Open
    MPI), where splitting by shared memory (``MPI_COMM_TYPE_SHARED``) costs milliseconds per
    file. Rank 0 gathers the names and tells each rank its own node (:func:`share_nodes`):
    one ``root_decides`` (a star round; a gather and a scatter where the rounds are MPI's), and
    no rank but rank 0 receives more than its node's ranks.
    ``every_rank``: every rank also learns every rank's node (``of_rank``, one broadcast of
    O(ranks) more). ``H5SUBFILE_RANKS_PER_NODE=n`` fakes nodes of n consecutive ranks (for tests
    and for launchers that hide the topology); a bad value on some ranks, or different values,
    raise the same error everywhere instead of hanging.
    """
    faked = os.environ.get(RANKS_PER_NODE_ENV, "").strip()
    error = None
    per_node = 0
    if faked:
        try:
            per_node = int(faked)
            if per_node < 1:
                raise ValueError
        except ValueError:
            error = PlanError(f"{RANKS_PER_NODE_ENV}={faked!r}: expected a positive integer")
    whole: list[tuple[int, ...]] = []  # rank 0's

    def decide(said: list[tuple[str, int]]) -> list[tuple]:
        sizes = sorted({size for _, size in said})
        if len(sizes) > 1:
            raise PlanError(
                f"{RANKS_PER_NODE_ENV} differs between ranks ({', '.join(map(str, sizes))}; "
                "unset counts as 0): set it alike on every rank"
            )
        names = (
            [rank // per_node for rank in range(len(said))] if per_node else [n for n, _ in said]
        )
        told = share_nodes(names)
        whole.append(tuple(n.index for n in told))
        return [told_message(n) for n in told]

    index, members, count, smallest, largest = root_decides(
        comm, (MPI.Get_processor_name(), per_node), error, decide
    )
    of_rank = whole[0] if whole else None
    if every_rank:
        of_rank = bcast(comm, of_rank)
    return Nodes(index, members, count, smallest, largest, of_rank)

"""Rank 0's answers when it groups the ranks by node (``mpi/nodes.share_nodes``): each rank is
told its own node only, in a message of constant size where a node's ranks follow each other,
and of its node's ranks otherwise."""

from __future__ import annotations

from h5subfile.mpi.nodes import Nodes, share_nodes, told_message
from h5subfile.mpi.slots import pickled


def sent_bytes(nodes: Nodes) -> int:
    """The bytes of one rank's answer as ``root_decides`` sends it."""
    return int(pickled((True, told_message(nodes))).size)


def test_a_million_ranks_on_10000_nodes_are_each_told_their_node_in_constant_bytes() -> None:
    ranks, per_node = 1_000_000, 100
    told = share_nodes([f"nid{rank // per_node:06d}" for rank in range(ranks)])
    assert len(told) == ranks
    for rank in (0, 1, 99, 100, 123_456, ranks - 1):
        node = rank // per_node
        assert told[rank] == Nodes(
            node, range(node * per_node, (node + 1) * per_node), 10_000, per_node, per_node
        )
    largest = max(sent_bytes(told[rank]) for rank in range(0, ranks, 997))
    small = share_nodes([f"nid{rank // per_node:06d}" for rank in range(10_000)])
    assert largest <= 80  # whatever the rank count: 1,000,000 ranks ...
    assert largest - max(sent_bytes(n) for n in small) <= 8  # ... or 10,000 (wider integers)


def test_nodes_are_numbered_by_their_lowest_rank_and_told_their_ranks_when_scattered() -> None:
    names = ["b", "a", "b", "c", "a", "b", "b"]  # round-robin-like placement, uneven nodes
    told = share_nodes(names)
    assert [n.index for n in told] == [0, 1, 0, 2, 1, 0, 0]
    assert told[0].members == (0, 2, 5, 6) and told[4].members == (1, 4)
    assert told[3].members == range(3, 4)
    assert {(n.count, n.smallest, n.largest) for n in told} == {(3, 1, 4)}
    assert all(n.of_rank is None for n in told)  # rank 0 keeps every rank's node itself
    # Scattered ranks cost their node's size, not the job's.
    wide = share_nodes([rank % 1000 for rank in range(100_000)])
    assert wide[5].members == tuple(range(5, 100_000, 1000))
    assert sent_bytes(wide[5]) < 8 * 100 + 64

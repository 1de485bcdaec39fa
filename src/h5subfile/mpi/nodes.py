"""Which node each rank runs on."""

from __future__ import annotations

import os

from mpi4py import MPI

from ..errors import PlanError
from .collective import agree

RANKS_PER_NODE_ENV = "H5SUBFILE_RANKS_PER_NODE"


def node_of_ranks(comm: MPI.Comm) -> tuple[int, ...]:
    """Collective: a node id per rank (the lowest rank of ``comm`` on that node).

    ``H5SUBFILE_RANKS_PER_NODE=n`` fakes nodes of n consecutive ranks (for tests and for
    launchers that hide the topology). The same collectives run either way, so a bad value on
    some ranks raises the same error everywhere instead of hanging.
    """
    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        node = shared.allreduce(comm.rank, op=MPI.MIN)
    finally:
        shared.Free()
    faked = os.environ.get(RANKS_PER_NODE_ENV, "").strip()
    error = None
    if faked:
        try:
            per_node = int(faked)
            if per_node < 1:
                raise ValueError
            node = (comm.rank // per_node) * per_node
        except ValueError:
            error = PlanError(f"{RANKS_PER_NODE_ENV}={faked!r}: expected a positive integer")
    agree(comm, error)
    return tuple(comm.allgather(node))

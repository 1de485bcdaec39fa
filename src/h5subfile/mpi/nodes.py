"""Which node each rank runs on."""

from __future__ import annotations

import os

from mpi4py import MPI

from ..errors import PlanError
from .collective import agree, allgather

RANKS_PER_NODE_ENV = "H5SUBFILE_RANKS_PER_NODE"


def node_of_ranks(comm: MPI.Comm) -> tuple[int, ...]:
    """Collective: a node id per rank (the lowest rank of ``comm`` on that node).

    A node is a processor name (``MPI_Get_processor_name``, the host name with MPICH and Open
    MPI): one allgather of short strings, where splitting by shared memory
    (``MPI_COMM_TYPE_SHARED``) costs 5-30 ms per file on a laptop.
    ``H5SUBFILE_RANKS_PER_NODE=n`` fakes nodes of n consecutive ranks (for tests and for
    launchers that hide the topology). The same collectives run either way, so a bad value on
    some ranks raises the same error everywhere instead of hanging.
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
    agree(comm, error)
    if per_node:
        return tuple((rank // per_node) * per_node for rank in range(comm.size))
    first: dict[str, int] = {}
    names: list[str] = allgather(comm, MPI.Get_processor_name())
    return tuple(first.setdefault(name, rank) for rank, name in enumerate(names))

"""Which node each rank runs on."""

from __future__ import annotations

import os

from mpi4py import MPI

from ..errors import PlanError
from .collective import allgather
from .failures import Failure, describe, rebuild

RANKS_PER_NODE_ENV = "H5SUBFILE_RANKS_PER_NODE"


def node_of_ranks(comm: MPI.Comm) -> tuple[int, ...]:
    """Collective: a node id per rank (the lowest rank of ``comm`` on that node).

    A node is a processor name (``MPI_Get_processor_name``, the host name with MPICH and Open
    MPI): one allgather of short strings, where splitting by shared memory
    (``MPI_COMM_TYPE_SHARED``) costs 5-30 ms per file on a laptop.
    ``H5SUBFILE_RANKS_PER_NODE=n`` fakes nodes of n consecutive ranks (for tests and for
    launchers that hide the topology). One round either way, so a bad value on some ranks, or
    different values, raise the same error everywhere instead of hanging.
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
            error = describe(
                PlanError(f"{RANKS_PER_NODE_ENV}={faked!r}: expected a positive integer")
            )
    # One round: every rank's processor name, its error and its faked node size.
    said: list[tuple[str, Failure | None, int]] = allgather(
        comm, (MPI.Get_processor_name(), error, per_node)
    )
    failures = [(rank, failure) for rank, (_, failure, _) in enumerate(said) if failure]
    if failures:
        raise rebuild(failures, comm.size)
    sizes = sorted({size for _, _, size in said})
    if len(sizes) > 1:  # every rank sees the same answers: the same error on every rank
        differ = PlanError(
            f"{RANKS_PER_NODE_ENV} differs between ranks ({', '.join(map(str, sizes))}; unset "
            "counts as 0): set it alike on every rank"
        )
        differ.collective = True
        raise differ
    if per_node:
        return tuple((rank // per_node) * per_node for rank in range(comm.size))
    first: dict[str, int] = {}
    return tuple(first.setdefault(name, rank) for rank, (name, _, _) in enumerate(said))

"""Messages from rank 0 that no rank waits for when they are sent: rank 0 announces something to
every other rank, one point-to-point message each, and goes on; a rank takes the announcements
in the order they were sent when it needs them, waiting (as in a round, with its timeout) only
for those rank 0 has not sent yet. They travel on the communicator's private duplicate (the
channel of :mod:`.rounds`), after its first round.

Rank 0's sends complete as the ranks take them, and :mod:`.rounds` drops completed sends at
each round: whoever announces bounds how many go out between two rounds.
"""

from __future__ import annotations

import pickle
from typing import Any

from mpi4py import MPI

from .calls import Call
from .rounds import ANNOUNCE_TAG, channel_of, wait_for


def announce(comm: MPI.Comm, message: Any, ring: bool = False) -> None:
    """Rank 0: send ``message`` (pickled once) to every other rank, without waiting; with
    ``ring``, on a node where the rounds are stars, ring each rank's doorbell, which it may be
    asleep on waiting for it (a rank that is not waiting for it finds it when it looks)."""
    channel = channel_of(comm)
    channel.settle()  # its first round is over: the duplicate exists
    assert channel.status is not None
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    for rank in range(1, comm.size):
        channel.sends.append(channel.status.Isend([data, MPI.BYTE], dest=rank, tag=ANNOUNCE_TAG))
        if ring and channel.star:
            channel.ring(rank)


class _Announcement:
    """One announcement, received once it has come (what :func:`.rounds.wait_for` polls)."""

    def __init__(self, status: MPI.Comm) -> None:
        self.status = status
        self.message: Any = None

    def Test(self) -> bool:  # noqa: N802 - MPI.Request's name, which the polling calls
        probe = MPI.Status()
        matched = self.status.Improbe(0, ANNOUNCE_TAG, probe)
        if matched is None:
            return False
        data = bytearray(probe.Get_count(MPI.BYTE))
        matched.Recv([data, MPI.BYTE])
        self.message = pickle.loads(data)
        return True


def next_announcement(comm: MPI.Comm, call: Call | None = None) -> Any:
    """A rank other than 0: rank 0's next announcement, waiting for it if it has not come
    (CollectiveTimeoutError after the collective timeout, ``call`` naming what waited)."""
    pending = _Announcement(_status(comm))
    wait_for(comm, pending, call)
    return pending.message


def arrived_announcement(comm: MPI.Comm) -> tuple[bool, Any]:
    """A rank other than 0: (True, rank 0's next announcement) if it has come, else
    (False, None); without waiting."""
    pending = _Announcement(_status(comm))
    return (True, pending.message) if pending.Test() else (False, None)


def _status(comm: MPI.Comm) -> MPI.Comm:
    channel = channel_of(comm)
    channel.settle()
    assert channel.status is not None
    return channel.status

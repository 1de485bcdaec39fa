"""One round through one rank, the centre, in point-to-point messages: each other rank sends its
part up to the centre, which answers each rank down, and rings the doorbell (:mod:`.doorbell`)
of every rank it has answered (docs/DESIGN-NOTES.md, "Star rounds and doorbells").

MPI's non-blocking collectives pass messages through intermediate ranks (binomial trees,
recursive doubling), so a waiting rank must wake often to relay them, and with more ranks than
cores those wake-ups take most of the CPU from the ranks being waited for (docs/BENCHMARKS-HISTORY.md,
*Metadata at scale*, run *star rounds and doorbells*). Here no rank relays anything: a rank
that only sends is done once its message is out, a rank that waits for an answer waits for
one message and sleeps on its bell until it comes, and the centre is woken by the ring of each
part that arrives. The centre does O(P) sends and receives per round, which is what one
node's ranks can afford (:mod:`.rounds` uses it only when every rank of the communicator shares
one oversubscribed node).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
from mpi4py import MPI

#: The tag of a star round's messages on a communicator's private duplicate (the rounds of
#: :mod:`.rounds` use 1 for timeout notices and 2 for tree broadcasts).
TAG = 3

#: The element-wise reductions a star round computes on the centre, by MPI operation.
REDUCTIONS: tuple[tuple[MPI.Op, np.ufunc], ...] = (
    (MPI.MAX, np.maximum),
    (MPI.MIN, np.minimum),
    (MPI.SUM, np.add),
)


def reduction(op: MPI.Op) -> np.ufunc:
    """The numpy function of ``op`` (MAX, MIN or SUM)."""
    for known, function in REDUCTIONS:
        if known == op:
            return function
    raise ValueError(f"no star reduction for {op!r}")


class Star:
    """One star round, as one request (its :meth:`Test` moves it on). ``comm`` is a private
    duplicate (no message of the application can match); every rank passes the same shape of
    round:

    - up phase (``up`` on the other ranks, ``rows`` on the centre): each other rank's ``up``
      lands in ``rows[rank]``; the centre then calls ``combine``;
    - down phase (``answer`` on the other ranks, ``answers`` on the centre): the centre sends
      ``answers(rank)`` into each other rank's ``answer``.

    ``ring(rank)`` rings a rank's bell; it is called once the message to that rank is sent.
    ``worked``: the seconds the centre spent in ``combine`` and ``answers`` (work, not waiting).
    """

    def __init__(
        self,
        comm: MPI.Comm,
        centre: int,
        ring: Callable[[int], None],
        *,
        up: np.ndarray | None = None,
        rows: Sequence[np.ndarray] | None = None,
        combine: Callable[[], None] | None = None,
        answers: Callable[[int], np.ndarray] | None = None,
        answer: np.ndarray | None = None,
    ) -> None:
        self._comm, self._centre, self._ring = comm, centre, ring
        self._unrung: list[tuple[MPI.Request, int]] = []
        self._receives: list[MPI.Request] = []
        self._combine, self._answers = combine, answers
        self._answered = comm.rank != centre
        self.worked = 0.0
        if comm.rank == centre:
            if rows is not None:
                self._receives = [
                    comm.Irecv(rows[rank], source=rank, tag=TAG)
                    for rank in range(comm.size)
                    if rank != centre
                ]
        else:
            if up is not None:
                self._send(up, centre)
            if answer is not None:
                self._receives = [comm.Irecv(answer, source=centre, tag=TAG)]

    def _send(self, data: np.ndarray, rank: int) -> None:
        self._unrung.append((self._comm.Isend(data, dest=rank, tag=TAG), rank))

    @property
    def sending(self) -> bool:
        """Whether a message of this rank's is still queued: MPI sends it only while this rank
        calls into MPI, and no ring will wake the rank to do so."""
        return bool(self._unrung)

    def _ring_sent(self) -> bool:
        """Ring the ranks whose messages have gone; whether every message has."""
        waiting = []
        for request, rank in self._unrung:
            if request.Test():
                self._ring(rank)
            else:
                waiting.append((request, rank))
        self._unrung = waiting
        return not waiting

    def _received(self) -> bool:
        """Take the messages that have come, testing again as long as one more completes (an
        MPI progress call may move only some of the messages waiting); whether all have."""
        while self._receives:
            done = MPI.Request.Testsome(self._receives)
            if not done:  # None: every request was already complete
                return done is None
            self._receives = [request for request in self._receives if request]
        return True

    def Test(self) -> bool:  # noqa: N802 - the name of MPI.Request's method, which polled calls
        received = self._received()
        if not self._answered:  # the centre: answer once every part is in
            if not received:
                return False
            self._answered = True
            began = time.monotonic()
            if self._combine is not None:
                self._combine()
            if self._answers is not None:
                for rank in range(self._comm.size):
                    if rank != self._centre:
                        self._send(self._answers(rank), rank)
            self.worked = time.monotonic() - began
        return self._ring_sent() and received

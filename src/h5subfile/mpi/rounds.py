"""One polled round: a non-blocking collective operation started on every rank and polled to
completion, with a timeout (docs/DESIGN-NOTES.md, "Polled rounds" and "Timeouts").

MPI's blocking collectives spin; with more ranks than cores a spinning rank takes the CPU from
the ranks still working. A waiting rank here tests its request, spinning briefly, then yielding
the CPU (for long when the node has a core per rank), then sleeping with pauses that grow with
the time already waited; on a node with more ranks than cores it sleeps at once
(:func:`yield_for`). After ``H5SUBFILE_COLLECTIVE_TIMEOUT`` seconds it gives up: it tells the
other ranks where it waited (on a duplicate of the communicator) and raises
CollectiveTimeoutError naming the ranks that never arrived; a rank arriving later finds the
notices and raises too. :class:`Call` names the collective call a round belongs to.
:func:`broadcast` is one round of a broadcast, large buffers going down a binomial tree of
point-to-point messages (:class:`TreeBroadcast`) instead of MPI's broadcast. On a communicator
whose ranks all share one node with more ranks than cores, the rounds of small messages
(:func:`allreduce`, :func:`gather_rows`, :func:`scatter_rows`, :func:`allgather_rows`, small
broadcasts, :func:`barrier`) are star rounds (:mod:`.star`), whose waiting ranks sleep on their
doorbells (:mod:`.doorbell`) instead of waking to relay MPI's trees.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from mpi4py import MPI

from .. import errors
from .calls import Call, by_value, files_text, ranks_text
from .doorbell import ADDRESS_FIELDS, MANY, OVERSUBSCRIBED, Doorbell, own_bell
from .star import Star, reduction

TIMEOUT_VARIABLE = "H5SUBFILE_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT = 600.0  # seconds; 0 (or less): wait for ever
#: Polling: spin on MPI_Test this long, then sleep between tests, doubling from FIRST_SLEEP to
#: LAST_SLEEP (seconds; docs/BENCHMARKS.md, *Cost of a collective call*).
SPIN = 50e-6
YIELD_FOR = 2e-3  # then yield the CPU between tests (sched_yield) until this, then sleep
#: ... or until this when the node has a core for each of its ranks (:func:`yield_for`): no
#: rank waits for the CPU, so a waiting rank may keep its core, as MPI's own waits do, and
#: answers at once when the rank it waits for has worked a few milliseconds (opening files).
YIELD_FOR_UNDERSUBSCRIBED = 50e-3
#: ... or not at all when the node has more ranks than cores: a yielding rank stays runnable,
#: so every waiting rank takes a share of the cores from the ranks it waits for
#: (docs/BENCHMARKS-HISTORY.md, *Metadata at scale*, run *after sleeping at once when oversubscribed*).
YIELD_FOR_OVERSUBSCRIBED = 0.0
#: What MPI launchers say of the ranks on this node (MPICH's Hydra, Open MPI, Slurm).
LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")
FIRST_SLEEP = 20e-6
LAST_SLEEP = 1e-3
#: A rank that has waited t seconds sleeps up to PATIENCE * t between tests (at most
#: LONGEST_SLEEP): with more ranks than cores, ranks waking every millisecond to test take most
#: of the CPU from the rank they wait for; since each wake-up also probes (see :func:`_wait`),
#: 0.05 wakes often enough to relay a tree collective promptly (0.1 made the VPIC write's
#: metadata longer).
PATIENCE = 0.05
LONGEST_SLEEP = 0.05
#: A *patient* round's pauses grow to this instead of LAST_SLEEP: the others wait for one rank's
#: work of unknown length (rank 0 scanning a master before a read, ``root_first``), so waking
#: every millisecond only takes the CPU from it (with more ranks than cores, an open for reading
#: was about a tenth shorter than with LAST_SLEEP, and no shorter with 2 or 10 ms).
PATIENT_SLEEP = 5e-3
#: ... doubling from this, not FIRST_SLEEP: such work takes milliseconds at least, and the
#: shorter first pauses were a quarter of the waiting ranks' wake-ups, all for nothing.
PATIENT_FIRST_SLEEP = 1e-3
#: ``H5SUBFILE_DOORBELLS=0`` keeps MPI's non-blocking collectives for every round (the
#: baseline of docs/BENCHMARKS.md, *Opening for reading at scale*); otherwise, on a
#: communicator whose ranks all share one node with more ranks than cores, rounds of small
#: messages are star rounds (:mod:`.star`), and their waiting ranks sleep on their doorbells
#: (:mod:`.doorbell`): a ring wakes them, so the pauses of a rung round are a fallback only. A
#: rank whose own messages of the round have all gone waits for the ring of the one it receives
#: and sleeps LONGEST_SLEEP at once: pauses doubling from 1 ms wake each waiting rank several
#: times a round for nothing, and take the CPU from the ranks at work (docs/BENCHMARKS-HISTORY.md,
#: *Metadata at scale*, run *sleeping until rung*). A rank with a message still queued (the
#: centre's answers, when MPI could not send them at once) needs MPI's progress to send it,
#: which no ring brings: its pauses double from RUNG_FIRST_SLEEP.
DOORBELLS_VARIABLE = "H5SUBFILE_DOORBELLS"
RUNG_FIRST_SLEEP = 1e-3
AFTER_RING = 50e-6  # after a ring, pauses double again from this
CHECK_EVERY = 0.01  # seconds between looks for other ranks' timeout notices while waiting
GRACE = 1.0  # seconds a rank that gives up waits to hear where the others are
_NOTICE = 1  # the tag of timeout notices on a communicator's status duplicate
_TREE = 2  # the tag of tree broadcasts (:class:`TreeBroadcast`) on the same duplicate
#: the tag of rank 0's announcements on the same duplicate (mpi/announce.py; star rounds use 3)
ANNOUNCE_TAG = 4
#: Broadcasts of more bytes than this go down a binomial tree of point-to-point messages
#: (:func:`broadcast`); MPICH broadcasts them by scatter and allgather, in steps that each
#: wait for a sleeping rank (docs/BENCHMARKS.md, *Opening for reading at scale*). Smaller ones
#: are MPI's, a binomial tree already.
TREE_BYTES = 8192


def ranks_on_node() -> int | None:
    """The number of ranks the launcher started on this node, or None when it does not say."""
    for name in LOCAL_SIZE_VARIABLES:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return None


def cores() -> int:
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_YIELD_FOR: float | None = None


def yield_for() -> float:
    """How long a waiting rank yields the CPU between tests before it starts to sleep:
    :data:`YIELD_FOR_UNDERSUBSCRIBED` when the launcher says the node has no more ranks than
    this process has cores, :data:`YIELD_FOR_OVERSUBSCRIBED` when it says there are more,
    :data:`YIELD_FOR` when it does not say (decided once per process; local)."""
    global _YIELD_FOR
    if _YIELD_FOR is None:
        _YIELD_FOR = yield_for_node(ranks_on_node(), cores())
    return _YIELD_FOR


def yield_for_node(local: int | None, available: int) -> float:
    """:func:`yield_for` for ``local`` ranks on a node (None: unknown) and ``available`` cores."""
    if local is None:
        return YIELD_FOR
    return YIELD_FOR_UNDERSUBSCRIBED if local <= available else YIELD_FOR_OVERSUBSCRIBED


def collective_timeout() -> float | None:
    """``H5SUBFILE_COLLECTIVE_TIMEOUT`` in seconds (default 600), or None (0: no timeout)."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        seconds = DEFAULT_TIMEOUT  # not worth failing one rank over: ranks share it anyway
    return seconds if seconds > 0 else None


@dataclass(frozen=True)
class _Notice:
    """What a rank that gives up waiting tells the others: where it waited."""

    round: int
    rank: int
    call: str
    file: str
    waited: float


#: Rank 0's word, with its round, that every rank arrived and its work for all (the commit)
#: began: ranks expecting it (:func:`patient_for_root`) wait for its answer without a timeout.
_WORKING = "rank 0 at work for all"


@dataclass
class _Channel:
    """Per communicator (cached on it as an MPI attribute): the number of agreement rounds
    so far (the same on every rank) and a duplicate of it for timeout notices."""

    rounds: int = 0
    status: MPI.Comm | None = None
    dup: tuple[MPI.Comm, MPI.Request] | None = None  # the duplicate until its Idup completes
    #: every rank's doorbell address (doorbell.ADDRESS_FIELDS each), until its Iallgather completes
    exchange: tuple[MPI.Request, np.ndarray, np.ndarray] | None = None
    addresses: np.ndarray | None = None
    bell: Doorbell | None = None
    star: bool = False  # rounds of small messages go through a star (decided on every rank alike)
    notices: dict[int, dict[int, _Notice]] = field(default_factory=dict)  # by round, by rank
    #: inside :func:`patient_for_root`: the rounds before the call (-1 outside), and whether
    #: rank 0 said, in a round of that call, that it is at work (:data:`_WORKING`)
    expecting: int = -1
    working: bool = False
    sends: list[MPI.Request] = field(default_factory=list)
    given_up: list[Any] = field(default_factory=list)  # requests (and buffers) left pending
    waited: float = 0.0  # seconds this rank spent polling rounds that were not yet complete
    waits: int = 0  # how many rounds it had to wait for

    def progress(self) -> None:
        """Finish the duplicate once every rank has made it; receive notices (local)."""
        if self.dup is not None and self.dup[1].Test():
            self.status, self.dup = self.dup[0], None
        if self.status is None:
            return
        probe = MPI.Status()
        # A message that came while this rank was not in MPI shows at the second probe.
        while self.status.Iprobe(MPI.ANY_SOURCE, _NOTICE, probe) or self.status.Iprobe(
            MPI.ANY_SOURCE, _NOTICE, probe
        ):
            notice = self.status.recv(source=probe.Get_source(), tag=_NOTICE)
            if not isinstance(notice, _Notice):  # (_WORKING, round): of an earlier call, stale
                self.working = self.working or 0 <= self.expecting < notice[1]
            elif notice.round >= self.rounds:  # older ones are stale: that round is over
                self.notices.setdefault(notice.round, {})[notice.rank] = notice
        self.sends = [s for s in self.sends if not s.Test()]

    def settle(self) -> None:
        """After the communicator's first round, which every rank has reached: finish the
        duplicate and the exchange of doorbell addresses posted before it (they complete), and
        decide from the addresses, the same on every rank, whether rounds go through a star:
        when every rank has a bell, on one host, flagged as oversubscribed."""
        # Every rank posted both before the first round, which every rank has now reached.
        if self.dup is not None:
            self.dup[1].Wait()  # left pending, MPI would report it at exit
            self.status, self.dup = self.dup[0], None
        if self.exchange is not None:
            request, _, every = self.exchange
            request.Wait()
            self.exchange, self.addresses = None, every
            hosts, flags = every[:, 0], every[:, 3]
            self.star = (
                len(every) > 1
                and bool(np.all(hosts == hosts[0]))
                and bool(np.all(flags & OVERSUBSCRIBED))  # set only beside a bell
            )

    def ring(self, rank: int) -> None:
        """Ring ``rank``'s doorbell (a star round's message to it has gone)."""
        if self.bell is not None and self.addresses is not None:
            self.bell.ring(self.addresses[rank])


_KEYVAL: int | None = None


def channel_of(comm: MPI.Comm) -> _Channel:
    """This communicator's channel; made (with a non-blocking duplicate) on its first round."""
    global _KEYVAL
    if _KEYVAL is None:
        _KEYVAL = MPI.Comm.Create_keyval()
    channel = comm.Get_attr(_KEYVAL)
    if channel is None:
        channel = _Channel(dup=comm.Idup())
        channel.bell = own_bell() if comm.size > 1 and doorbells_allowed() else None
        mine = np.zeros(ADDRESS_FIELDS, dtype=np.uint64)
        if channel.bell is not None:
            local = ranks_on_node()
            crowded = local is not None and local > cores()
            mine = channel.bell.address(OVERSUBSCRIBED if crowded else 0)
        every = np.empty((comm.size, ADDRESS_FIELDS), dtype=np.uint64)
        channel.exchange = (comm.Iallgather(mine, every), mine, every)
        comm.Set_attr(_KEYVAL, channel)
    assert isinstance(channel, _Channel)
    return channel


def doorbells_allowed() -> bool:
    """Whether ``H5SUBFILE_DOORBELLS`` allows star rounds and doorbells (default: yes)."""
    return os.environ.get(DOORBELLS_VARIABLE, "1").strip().lower() not in ("0", "no", "off")


def waited(comm: MPI.Comm) -> tuple[float, int]:
    """Seconds this rank has spent waiting in the polled rounds on ``comm`` (for other ranks
    to arrive), and in how many rounds: totals since the communicator's first round."""
    channel = None if _KEYVAL is None else comm.Get_attr(_KEYVAL)
    return (channel.waited, channel.waits) if isinstance(channel, _Channel) else (0.0, 0)


def allreduce(
    comm: MPI.Comm,
    sent: np.ndarray,
    op: MPI.Op = MPI.MAX,
    call: Call | None = None,
    patient: bool = False,
) -> np.ndarray:
    """Collective: ``sent`` reduced element-wise over the ranks by ``op`` (the maximum by
    default), by a non-blocking allreduce polled with short sleeps (longer ones when
    ``patient``, :data:`PATIENT_SLEEP`); CollectiveTimeoutError after the timeout."""
    got = np.empty_like(sent)
    if channel_of(comm).star:
        rows = np.empty((comm.size, *sent.shape), dtype=sent.dtype) if comm.rank == 0 else None

        def combine() -> None:
            assert rows is not None
            rows[0] = sent
            reduction(op).reduce(rows, axis=0, out=got)

        _star(
            comm,
            0,
            (sent, got, rows),
            call,
            patient,
            up=sent,
            rows=rows,
            combine=combine,
            answers=lambda _: got,
            answer=got,
        )
    else:
        polled(comm, lambda: comm.Iallreduce(sent, got, op=op), (sent, got), call, patient)
    return got


def allgather_array(comm: MPI.Comm, sent: np.ndarray) -> np.ndarray:
    """Collective: every rank's ``sent`` (the same shape and dtype on every rank), stacked in
    rank order, by a non-blocking allgather polled with short sleeps: numbers, a few bytes per
    rank, where :func:`~h5subfile.mpi.collective.allgather` would move a slot per rank."""
    got = np.empty((comm.size, *sent.shape), dtype=sent.dtype)
    allgather_rows(comm, sent, got)
    return got


def allgather_rows(comm: MPI.Comm, sent: np.ndarray, got: np.ndarray) -> None:
    """Collective, one polled round: every rank's ``sent`` into row ``rank`` of ``got`` (every
    rank's ``sent`` of one size, ``got`` of ``comm.size`` such rows, C-contiguous)."""
    if channel_of(comm).star:
        rows = got.reshape(comm.size, -1)
        if comm.rank == 0:
            rows[0] = sent.reshape(-1)
        _star(comm, 0, (sent, got), up=sent, rows=rows, answers=lambda _: got, answer=got)
    else:
        polled(comm, lambda: comm.Iallgather(sent, got), (sent, got))


def gather_rows(comm: MPI.Comm, sent: np.ndarray, got: np.ndarray | None, root: int = 0) -> None:
    """Collective, one polled round: every rank's ``sent`` into row ``rank`` of ``got`` on
    ``root`` (``comm.size`` rows of ``sent``'s size, C-contiguous; None elsewhere)."""
    if channel_of(comm).star:
        rows = None if got is None else got.reshape(comm.size, -1)
        if rows is not None:
            rows[root] = sent.reshape(-1)
        _star(comm, root, (sent, got), up=sent, rows=rows)
    else:
        spec = None if got is None else [got, sent.nbytes, MPI.BYTE]
        polled(comm, lambda: comm.Igather(sent, spec, root=root), (sent, spec))


def scatter_rows(comm: MPI.Comm, parts: np.ndarray | None, got: np.ndarray, root: int = 0) -> None:
    """Collective, one polled round: row r of ``parts`` (given on ``root``, ``comm.size`` rows
    of ``got``'s size, C-contiguous) into rank r's ``got``."""
    if channel_of(comm).star:
        if parts is not None:
            rows = parts.reshape(comm.size, -1)
            got.reshape(-1)[:] = rows[root]
            _star(comm, root, (parts, got), answers=lambda rank: rows[rank])
        else:
            _star(comm, root, got, answer=got)
    else:
        spec = None if parts is None else [parts, got.nbytes, MPI.BYTE]
        polled(comm, lambda: comm.Iscatter(spec, got, root=root), (spec, got))


def ask_rows(
    comm: MPI.Comm,
    sent: np.ndarray,
    got: np.ndarray,
    answer: Callable[[np.ndarray], np.ndarray] | None,
    same_for_all: bool = False,
    root: int = 0,
    call: Call | None = None,
    patient: bool = False,
) -> None:
    """Collective: every rank's ``sent`` (one size on every rank) to ``root``, whose ``answer``
    (given on ``root`` only) takes them stacked in rank order and returns the rows to send
    back: row r into rank r's ``got``, or with ``same_for_all`` (passed alike on every rank)
    its one row into every rank's. One star round where the rounds are stars: the other ranks
    sleep on their bells while ``root`` answers, as they would between a gather and a
    scatter, with a round fewer to wake for; there ``answer`` may also return one row for
    every rank whatever ``same_for_all`` says. Otherwise a gather, then a scatter (or a
    broadcast). ``call`` and ``patient``: as for :func:`polled`, in a star round."""
    rows = None
    if comm.rank == root:
        assert answer is not None
        rows = np.empty((comm.size, *sent.shape), dtype=sent.dtype)
        rows[root] = sent
    if channel_of(comm).star:
        answered: list[np.ndarray] = []

        def row(rank: int) -> np.ndarray:
            replies = answered[0]
            return replies[0 if len(replies) == 1 else rank]

        def combine() -> None:
            assert answer is not None and rows is not None
            answered.append(answer(rows))
            got[...] = row(root)

        if comm.rank == root:
            kept = (sent, got, rows)
            _star(comm, root, kept, call, patient, up=sent, rows=rows, combine=combine, answers=row)
        else:
            _star(comm, root, (sent, got), call, patient, up=sent, answer=got)
        return
    gather_rows(comm, sent, rows, root)
    replies = None if answer is None or rows is None else answer(rows)
    if same_for_all:
        if replies is not None:
            got[...] = replies[0]
        broadcast(comm, got, root)
    else:
        scatter_rows(comm, replies, got, root)


def barrier(comm: MPI.Comm) -> None:
    """Collective, one polled round: return once every rank has arrived."""
    if channel_of(comm).star:
        nothing = np.empty(0, dtype=np.uint8)
        rows = [nothing] * comm.size if comm.rank == 0 else None
        _star(comm, 0, nothing, up=nothing, rows=rows, answers=lambda _: nothing, answer=nothing)
    else:
        polled(comm, comm.Ibarrier, None)


def _star(
    comm: MPI.Comm,
    centre: int,
    buffers: Any,
    call: Call | None = None,
    patient: bool = False,
    **parts: Any,
) -> None:
    """One polled star round (:class:`~h5subfile.mpi.star.Star`) on the communicator's
    private duplicate, its waiting ranks woken by their doorbells (``patient`` changes
    nothing then)."""
    channel = channel_of(comm)
    assert channel.status is not None  # star rounds begin after the first round
    start = lambda: Star(channel.status, centre, channel.ring, **parts)  # noqa: E731
    polled(comm, start, buffers, call, patient, rung=True)


def tree_links(size: int, rank: int, root: int) -> tuple[int | None, list[int]]:
    """``rank``'s parent (None for ``root``) and children, largest subtree first, in the
    binomial tree rooted at ``root`` over ``size`` ranks (relative rank v's parent is v less
    its lowest set bit; its children are v + 2**k for each 2**k below that bit)."""
    me = (rank - root) % size
    lowest = me & -me if me else 1 << max(size - 1, 0).bit_length()
    steps = [1 << k for k in range(lowest.bit_length() - 1)]
    children = [(me + step + root) % size for step in reversed(steps) if me + step < size]
    return (None if me == 0 else (me - lowest + root) % size), children


class TreeBroadcast:
    """A broadcast down a binomial tree of point-to-point messages, as one request
    (:func:`tree_links`): a rank receives the whole buffer from its parent, then sends it to
    its children. Each rank waits for one message, so a rank that sleeps delays its own
    subtree once, where MPI's broadcast of a large buffer (scatter, then allgather) has
    rounds in which every rank must take part. ``comm`` is a private duplicate (the
    channel's), so no message of the application can match."""

    def __init__(self, comm: MPI.Comm, buffer: np.ndarray, root: int) -> None:
        parent, self._children = tree_links(comm.size, comm.rank, root)
        self._comm, self._buffer = comm, buffer
        self._sends: list[MPI.Request] | None = None
        self._receive: MPI.Request | None = None
        if parent is None:
            self._send()
        else:
            self._receive = comm.Irecv(buffer, source=parent, tag=_TREE)

    def _send(self) -> None:
        self._sends = [self._comm.Isend(self._buffer, dest=c, tag=_TREE) for c in self._children]

    def Test(self) -> bool:  # noqa: N802 - the name of MPI.Request's method, which polled calls
        if self._sends is None:
            assert self._receive is not None
            if not self._receive.Test():
                return False
            self._send()
        assert self._sends is not None
        return bool(MPI.Request.Testall(self._sends))


def broadcast(comm: MPI.Comm, buffer: np.ndarray, root: int = 0) -> None:
    """Collective, one polled round: ``root``'s ``buffer`` into every rank's (of the same size
    on every rank). More than :data:`TREE_BYTES` go down a binomial tree
    (:class:`TreeBroadcast`) once the communicator's private duplicate exists (after its first
    round: the same on every rank), fewer by MPI's broadcast."""
    channel = channel_of(comm)
    status = channel.status
    if channel.star and buffer.nbytes <= TREE_BYTES:
        if comm.rank == root:
            _star(comm, root, buffer, answers=lambda _: buffer)
        else:
            _star(comm, root, buffer, answer=buffer)
    elif status is None or buffer.nbytes <= TREE_BYTES:
        polled(comm, lambda: comm.Ibcast(buffer, root=root), buffer)
    else:
        polled(comm, lambda: TreeBroadcast(status, buffer, root), buffer)


class Pending(Protocol):
    """What a round polls: an MPI request, or a :class:`TreeBroadcast`."""

    def Test(self) -> bool: ...  # noqa: N802 - MPI.Request's name


def polled(
    comm: MPI.Comm,
    start: Callable[[], Pending],
    buffers: Any,
    call: Call | None = None,
    patient: bool = False,
    rung: bool = False,
) -> None:
    """One round: start a non-blocking collective (after the communicator's channel exists:
    every rank posts the same operations in the same order) and poll it to completion,
    sleeping between tests (pauses from :data:`PATIENT_FIRST_SLEEP` up to :data:`PATIENT_SLEEP`
    when ``patient``: the round waits for one rank's long work); CollectiveTimeoutError after the
    timeout, or when the others gave up waiting for this rank. ``buffers`` stay referenced
    until the request completes."""
    channel = channel_of(comm)
    channel.rounds += 1
    request = start()
    if rung:
        # A star round whose centre has given up waiting never completes (an MPI collective
        # does once the last rank arrives): a rank arriving after the others gave up hears
        # their notices now.
        channel.progress()
        late = channel.notices.pop(channel.rounds, None)
        if late:
            channel.given_up.append((request, buffers))
            raise _arrived_late(comm, late, call)
    if not request.Test():
        began = time.monotonic()
        worked = getattr(request, "worked", 0.0)  # a star centre's answering is not waiting
        try:
            if rung:
                sending = getattr(request, "sending", True)  # a Star's; unknown: assume so
                pauses = (RUNG_FIRST_SLEEP if sending else LONGEST_SLEEP, LONGEST_SLEEP)
            elif patient:
                pauses = (PATIENT_FIRST_SLEEP, PATIENT_SLEEP)
            else:
                pauses = (FIRST_SLEEP, LAST_SLEEP)
            _wait(comm, channel, request, buffers, call, *pauses, channel.bell if rung else None)
        finally:
            worked = getattr(request, "worked", 0.0) - worked
            channel.waited += time.monotonic() - began - worked
            channel.waits += 1
    channel.settle()
    channel.progress()  # one probe: did the others give up waiting for this rank?
    late = channel.notices.pop(channel.rounds, None)
    if late:  # they have left this call: going on would wait for them in its next steps
        raise _arrived_late(comm, late, call)


def wait_for(comm: MPI.Comm, request: Pending, call: Call | None = None) -> None:
    """Poll ``request`` (a message from one rank, not a round: the count of rounds is left as
    it is) as a round's rank waits, on its doorbell where the rounds are stars, until it
    completes or the timeout passes (CollectiveTimeoutError)."""
    channel = channel_of(comm)
    if not request.Test():
        bell = channel.bell if channel.star else None
        _wait(comm, channel, request, None, call, FIRST_SLEEP, LAST_SLEEP, bell)


def _wait(
    comm: MPI.Comm,
    channel: _Channel,
    request: Pending,
    buffers: Any,
    call: Call | None,
    first_sleep: float = FIRST_SLEEP,
    last_sleep: float = LAST_SLEEP,
    bell: Doorbell | None = None,
) -> None:
    """Poll ``request`` (spin briefly, yield the CPU between tests for :func:`yield_for`, then
    sleep, the pause doubling from ``first_sleep`` up to ``last_sleep``, then growing with the
    time waited) until it completes, the timeout passes or another rank says it gave up
    waiting. With a ``bell`` (a star round's) the rank sleeps on it: a ring ends the pause,
    and the rank tests once more for each ring before it sleeps again, from
    :data:`AFTER_RING`.

    After each sleep the rank first probes its channel (:meth:`_Channel.progress`): MPI's
    progress then moves every message that arrived while it slept, which a test of this
    request alone does not always do (without the probe, rounds with more ranks than cores
    took longer)."""
    timeout = collective_timeout()
    yielding = yield_for()
    started = time.monotonic()
    checked = started
    # A rung round's rank tested its request as it entered the round (polled): it sleeps on
    # its bell at once (a ring since then is queued and ends the pause at once).
    pause, shortest = (0.0 if bell is None else first_sleep), first_sleep
    while True:
        now = time.monotonic()
        slept = now - started >= yielding
        if slept:
            rings = 0 if bell is None else bell.wait(pause)
            if rings:
                # Each ring is a message sent to this rank, and MPI may move only one message
                # per call (a part of the next round queued before one of this round's among
                # them): test once for each, twice over, before sleeping again, and if it is
                # still not there, sleep briefly.
                tests = 2 * (comm.size if rings >= MANY else rings)
                for _ in range(tests):
                    if request.Test():
                        return
                pause = shortest = AFTER_RING
            else:
                if bell is None:
                    time.sleep(pause)
                longest = min(max(last_sleep, (now - started) * PATIENCE), LONGEST_SLEEP)
                pause = min(max(2 * pause, shortest), longest)
            now = time.monotonic()
        elif now - started >= SPIN:
            os.sched_yield()  # runnable ranks (oversubscribed) go first; otherwise no delay
        if slept or now - checked >= CHECK_EVERY:
            checked = now
            channel.progress()
            if channel.notices.get(channel.rounds):
                break
        if request.Test():
            return
        if timeout is not None and now - started >= timeout:
            if channel.working:
                started = now  # every rank arrived, and rank 0 is at work for them all
                continue
            break
    channel.given_up.append((request, buffers))  # never completes here; keep its buffers
    raise _give_up(comm, channel, call, time.monotonic() - started)


@contextlib.contextmanager
def patient_for_root(comm: MPI.Comm) -> Iterator[None]:
    """Every rank, around a call whose answer may wait for rank 0's long work for all (the
    close, committing the master): once rank 0 says so, it waits without a timeout. Local."""
    channel = channel_of(comm)
    channel.expecting, channel.working = channel.rounds, False
    try:
        yield
    finally:
        channel.expecting, channel.working = -1, False


def working_for_all(comm: MPI.Comm) -> None:
    """Rank 0, deciding a round all have arrived at, inside :func:`patient_for_root`: tell the
    others to wait for its answer however long it takes (:data:`_WORKING`); local."""
    channel = channel_of(comm)
    if comm.rank != 0 or comm.size == 1 or channel.status is None:
        return
    said = (_WORKING, channel.rounds)
    for rank in range(1, comm.size):
        channel.sends.append(channel.status.isend(said, dest=rank, tag=_NOTICE))


def _give_up(
    comm: MPI.Comm, channel: _Channel, call: Call | None, waited: float
) -> errors.CollectiveTimeoutError:
    """Tell the others where this rank waited, hear where they wait, name the ranks that
    never arrived (the same message on every waiting rank)."""
    timeout = collective_timeout()
    limit = f"{timeout:g} s" if timeout is not None else "no time limit"
    where = "" if call is None else call.describe()
    mine = _Notice(channel.rounds, comm.rank, where, "" if call is None else call.file, waited)
    channel.progress()
    if channel.status is None:  # the first round on this communicator: no way to ask
        exc = errors.CollectiveTimeoutError(
            f"collective call {where or 'step'}{files_text([mine.file])} timed out after "
            f"{waited:.0f} s ({TIMEOUT_VARIABLE}: {limit}); it is the first collective call "
            "on this communicator, so which ranks never arrived is unknown"
        )
        exc.collective = False
        return exc
    for rank in range(comm.size):
        if rank != comm.rank:
            channel.sends.append(channel.status.isend(mine, dest=rank, tag=_NOTICE))
    heard = channel.notices.setdefault(channel.rounds, {})
    deadline = time.monotonic() + GRACE
    while len(heard) < comm.size - 1 and time.monotonic() < deadline:
        time.sleep(1e-3)
        channel.progress()
    heard = channel.notices.pop(channel.rounds, {})
    heard[comm.rank] = mine
    missing = [r for r in range(comm.size) if r not in heard]
    waiting = by_value([heard[r].call if r in heard else None for r in range(comm.size)])
    said = "; ".join(
        f"{ranks_text(ranks)} wait{'s' if len(ranks) == 1 else ''} in {call or 'a step inside a call'}"
        for call, ranks in waiting
        if call is not None
    )
    gone = f"{ranks_text(missing)} never arrived" if missing else "every rank is waiting"
    return errors.CollectiveTimeoutError(
        f"collective call timed out ({TIMEOUT_VARIABLE}: {limit}){files_text([mine.file])}: "
        f"{gone}; {said}. The communicator's collective calls are now out of step: end the job"
    )


def _arrived_late(
    comm: MPI.Comm, notices: dict[int, _Notice], call: Call | None
) -> errors.CollectiveTimeoutError:
    """The error of a rank that arrived after the others had given up waiting for it."""
    where = "a step inside a call" if call is None else call.describe()
    by_call: dict[str, list[int]] = {}
    for rank in sorted(notices):
        by_call.setdefault(notices[rank].call or "a step inside a call", []).append(rank)
    waited = "; ".join(f"{ranks_text(ranks)} in {c}" for c, ranks in by_call.items())
    seconds = max(n.waited for n in notices.values())
    return errors.CollectiveTimeoutError(
        f"rank {comm.rank} arrived at {where}{files_text([call.file if call else ''])} after "
        f"{ranks_text(sorted(notices))} had given up waiting for it for {seconds:.0f} s "
        f"({TIMEOUT_VARIABLE}; {waited}). The communicator's collective calls are now out of "
        "step: end the job"
    )

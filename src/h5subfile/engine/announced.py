"""Creating datasets without a round, where rank 0 leads every source (one group: one node with
the default ``subfiles="node"``, or ``subfiles=1``) and the layout is learned from the writes
(``create_dataset(name, shape, dtype)`` without data, blocks, chunks or ``maxshape``).

A creation round exists to tell each rank where its bytes go. Here no rank waits for that when
it creates the dataset. Every rank checks the call against its own catalogue (the same answer on
every rank: an error is raised at the call and marked agreed, as for groups, engine/structure.py)
and puts the dataset in it; the ledger records the call, which the next collective call compares.
Rank 0 creates and publishes the dataset at once, as rank 0 of a creation round does
(:func:`.create.publish`), and announces to each other rank what it learns of it (its
view), without waiting (:mod:`..mpi.announce`). A rank takes the announcements when it first
needs a new dataset's storage (its layout: a write, a read; a deletion; the next collective
call): by then rank 0, having made the same calls, has sent them, or will without waiting for
anyone. A failure of rank 0's (a full disk) is announced in place of the views; every rank
raises it when it touches the datasets and at the next collective call, as a failure of rank 0's
write of the master in a metadata call (``Writing.kept``).

At most :data:`LIMIT` creations in a row go without a round: the next takes one, which bounds
the messages rank 0 has in flight to LIMIT x (P - 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CollectiveMismatchError, H5SubfileError, ObjectExistsError, as_error
from ..layout.catalog import PENDING, NodeInfo
from ..mpi.announce import announce, arrived_announcement, next_announcement
from ..mpi.calls import Call
from ..mpi.failures import Failure, describe, rebuild
from . import structure
from .create import create_sources, learn_sources, plan_on, publish
from .creation_plan import rank_view
from .ledger import Entry
from .messages import CONTIGUOUS, DatasetRequest, RequestKind
from .session import Session

#: Creations without a round between two rounds, at most.
LIMIT = 256

#: What rank 0 announces, with the write session's id (a message of an abandoned session is
#: dropped): each dataset's view of one creation call for the rank, or the failure; or neither,
#: with the number of the collective call rank 0 is entering after creations without a round.
Announcement = tuple[str, int, dict[str, Any] | None, Failure | None]

#: What a rank's node keeps of its own call until the announcement comes (the rest is rank 0's).
_OWN = ("attrs", "track_order", "order")


@dataclass
class Announced:
    """A rank's creations without a round in write session ``session``: how many since its
    last round (the same on every rank), and on ranks other than 0 the paths of each creation
    whose announcement it has not taken yet, oldest first (``taking``: being taken now), and
    the announcements received before they were needed (``arrived``)."""

    session: Session
    since_round: int = 0
    waiting: list[tuple[str, ...]] = field(default_factory=list)
    taking: bool = False
    arrived: list[Announcement] = field(default_factory=list)

    def take(self) -> None:
        """Take every announcement not taken yet (ranks other than 0; local, waiting for those
        rank 0 has not sent yet)."""
        if self.waiting and not self.taking:
            self.taking = True
            try:
                take(self.session)
            finally:
                self.taking = False

    def before_round(self) -> None:
        """Entering collective call number ``session.calls``, before its round: rank 0 says so
        (a rank waiting for a creation rank 0 never made stops waiting; a rank that has entered
        the call too skips it), the others take every announcement; the count starts again."""
        if self.session.rank == 0:
            _announce(self.session, None, None, self.session.calls)
        else:
            self.take()
            self._receive_arrived()
        self.since_round = 0

    def finish(self) -> None:
        """After the agreement round of the close (or a commit), which every rank entered:
        receive rank 0's word of it, and drop it and any before it, so that no message is left
        unreceived when the session ends (some MPI libraries warn of them at exit)."""
        session = self.session
        if session.rank == 0:
            return
        self.take()  # none left in step: the round compared the calls
        closing = session.calls - 1  # the close's number
        while True:
            _, number, views, failure = _next(session, ())
            if views is None and failure is None and number >= closing:
                return

    def _receive_arrived(self) -> None:
        """Receive what has come, dropping rank 0's words of calls this rank has entered too,
        so that they never pile up in MPI's queue (where every later receive would search
        past them)."""
        session = self.session
        self.arrived = [m for m in self.arrived if not _entered(session, m)]
        while True:
            came, message = arrived_announcement(session.comm)
            if not came:
                return
            if not _entered(session, message):
                self.arrived.append(message)


def eligible(
    session: Session, requests: Sequence[DatasetRequest] | None, error: BaseException | None
) -> bool:
    """Whether this creation goes without a round: from the call and the session only, so the
    same on every rank that makes the same call (a rank that differs meets the others' next
    round, which raises CollectiveMismatchError)."""
    writing = session.writing
    if writing is None or session.closed or requests is None or error is not None:
        return False
    if writing.grouping.ngroups != 1:
        return False
    announced = writing.announced
    if announced is not None and announced.since_round >= LIMIT:
        return False
    return all(
        r.kind is RequestKind.EXPLICIT
        and not r.declared
        and r.storage == CONTIGUOUS
        and not r.maxshape
        and not r.data_digest  # data every rank passes: compared, then written, in rounds
        and r.shape is not None
        for r in requests
    )


def create_datasets(session: Session, requests: Sequence[DatasetRequest]) -> list[str]:
    """Collective without a round (see the module): create the requested datasets; every rank
    returns their paths, or raises the same error."""
    writing = session.require_writable("create_dataset")
    _check(session, requests)
    if writing.announced is None:
        writing.announced = Announced(session)
    writing.announced.since_round += 1
    for request in requests:
        session.ledger.record(Entry(_described(request)))
    paths = [r.path for r in requests]
    if session.rank == 0:
        _create_on_root(session, requests)
    else:
        for request in requests:
            _provisional(session, request).__dict__[PENDING] = writing.announced.take
        writing.announced.waiting.append(tuple(paths))
    return paths


def _described(request: DatasetRequest) -> str:
    """The call as the ledger compares it (everything :attr:`DatasetRequest.signature` holds
    that such a creation can vary in) and messages show it."""
    dtype = request.dtype.str if request.dtype.fields is None else repr(request.dtype.descr)
    fill = "" if request.fill is None else f" fillvalue 0x{request.fill.hex()}"
    return f"create_dataset {request.path} {request.shape} {dtype}{fill}"


def _check(session: Session, requests: Sequence[DatasetRequest]) -> None:
    """Every rank: what rank 0's planning checks of names, against this rank's catalogue."""
    seen: set[str] = set()
    try:
        for request in requests:
            path = request.path
            if path in seen:
                raise ObjectExistsError(f"dataset {path} is named twice in one call")
            seen.add(path)
            existing = session.catalog.nodes.get(path)
            if existing is not None and not existing.unfinished:
                raise ObjectExistsError(f"{path} already exists in {session.path}")
            session.catalog.missing_groups(path)
    except H5SubfileError as exc:
        raise structure.agreed(exc) from None


def _provisional(session: Session, request: DatasetRequest) -> NodeInfo:
    """The dataset in this rank's catalogue, as far as the call says (its groups too); its
    layout comes with rank 0's announcement."""
    catalog = session.catalog
    for group in catalog.missing_groups(request.path)[:-1]:
        catalog.nodes[group] = NodeInfo("group")
    assert request.shape is not None
    node = NodeInfo("dataset", shape=request.shape, dtype=request.dtype, fill=request.fill)
    del node.__dict__["layout"]  # asked for, it is taken from the announcement
    catalog.nodes[request.path] = node
    return node


def _create_on_root(session: Session, requests: Sequence[DatasetRequest]) -> None:
    """Rank 0: plan, create and publish the datasets as rank 0 of a creation round does, learn
    them, and announce the other ranks' view; a failure is kept and announced instead."""
    try:
        creation = plan_on(session, [list(requests)] * session.comm.size)
        assert set(creation.tasks) <= {0}  # one group: rank 0 leads every source
        offsets, error = create_sources(session, creation.tasks.get(0, ()))
        if error is not None:
            raise error
        nodes = publish(session, creation, [offsets])
    except Exception as exc:  # noqa: BLE001 - raised by every rank at the next collective call
        error = _kept(session, exc, requests)
        _announce(session, None, describe(error))
        return
    for path, (info, held) in rank_view(nodes, creation, 0).items():
        for group in session.catalog.missing_groups(path)[:-1]:
            session.catalog.nodes[group] = NodeInfo("group")
        session.catalog.nodes[path] = info
        learn_sources(session, path, info, held)
    if session.comm.size > 1:
        # Learned, in one group: every other rank's view is the same (rank_view).
        assert all(d.learned for d in creation.datasets)
        _announce(session, rank_view(nodes, creation, 1), None)


def _announce(
    session: Session, views: dict[str, Any] | None, failure: Failure | None, call: int = -1
) -> None:
    writing = session.writing
    assert writing is not None
    if session.comm.size > 1:
        announce(session.comm, (writing.session_id, call, views, failure))


def _kept(session: Session, exc: BaseException, requests: Sequence[DatasetRequest]) -> Exception:
    """A failure of rank 0's creation: kept for the next collective call, and the datasets
    left in the catalogue (as on the other ranks) raising it when their storage is asked for."""
    writing = session.writing
    assert writing is not None
    error = as_error(exc)
    error.args = (f"{error} (creating {', '.join(r.path for r in requests)})",)
    if writing.kept is None:
        writing.kept = error
    for request in requests:
        _failed(_provisional(session, request), error)
    return error


def _failed(node: NodeInfo, error: BaseException) -> None:
    def raise_it() -> None:
        raise error

    node.__dict__[PENDING] = raise_it


def take(session: Session) -> None:
    """A rank other than 0: take every announcement it has not taken (waiting for those not
    sent yet), each filling in its datasets' nodes and where this rank writes them."""
    writing = session.writing
    if writing is None or writing.announced is None:
        return
    waiting = writing.announced.waiting
    while waiting:
        paths = waiting[0]
        message = _next(session, paths)
        _, _, views, failure = message
        if failure is not None:
            _fail(session, paths, rebuild([(0, failure)], 1))  # as rank 0 raises it
        elif _entered(session, message):
            continue
        elif views is None or not set(paths) <= set(views):
            # Rank 0 made other calls: none of this rank's creations will be announced.
            every = tuple(path for made in waiting for path in made)
            _fail(session, every, _out_of_step(session, paths, views))
            waiting.clear()
            return
        else:
            for path in paths:
                node = _still_pending(session, path)
                if node is not None:
                    info, held = views[path]
                    _fill(node, info)
                    learn_sources(session, path, node, held)
        del waiting[0]


def _still_pending(session: Session, path: str) -> NodeInfo | None:
    """The node of ``path`` waiting for its announcement; None if deleted since (a deletion
    takes the announcements first, so only where a rank's calls went astray)."""
    node = session.catalog.nodes.get(path)
    return node if node is not None and PENDING in node.__dict__ else None


def _fail(session: Session, paths: Sequence[str], error: BaseException) -> None:
    """The datasets ``paths`` raise ``error`` when their storage is asked for, and every rank
    at the next collective call."""
    writing = session.writing
    assert writing is not None
    if writing.kept is None:
        writing.kept = error
    for path in paths:
        node = _still_pending(session, path)
        if node is not None:
            _failed(node, error)


def _out_of_step(
    session: Session, paths: tuple[str, ...], views: dict[str, Any] | None
) -> CollectiveMismatchError:
    made = "entered a collective call" if views is None else f"created {', '.join(views)}"
    error = CollectiveMismatchError(
        f"collective calls out of step on {session.path}: rank {session.rank} created "
        f"{', '.join(paths)} where rank 0 {made}; every rank must make the same calls"
    )
    error.out_of_step = True
    return error


def _entered(session: Session, message: Announcement) -> bool:
    """Whether ``message`` is rank 0's word of a collective call this rank has entered too
    (nothing to act on), or belongs to another (abandoned) write session."""
    writing = session.writing
    assert writing is not None
    own, call, views, failure = message
    if own != writing.session_id:
        return True
    return views is None and failure is None and call < session.calls


def _next(session: Session, paths: tuple[str, ...]) -> Announcement:
    """Rank 0's next announcement of this write session (those of an abandoned one dropped):
    the first received before it was needed, or the next to come."""
    writing = session.writing
    assert writing is not None and isinstance(writing.announced, Announced)
    arrived = writing.announced.arrived
    call = Call("create_dataset", -1, ", ".join(paths), file=session.path)
    while True:
        message: Announcement = arrived.pop(0) if arrived else next_announcement(session.comm, call)
        if message[0] == writing.session_id:
            return message


def _fill(node: NodeInfo, info: NodeInfo) -> None:
    """``node`` (this rank's, which the rank may have changed since: attributes, their order)
    takes everything else of ``info``, rank 0's view, its layout included."""
    del node.__dict__[PENDING]
    for name, value in vars(info).items():
        if name not in _OWN:
            node.__dict__[name] = value

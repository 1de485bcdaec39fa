"""Creating datasets without a round, where rank 0 leads every source (one group: one node with
the default ``subfiles="node"``, or ``subfiles=1``) and the layout is learned from the writes
(``create_dataset(name, shape, dtype)`` without data, blocks, chunks or ``maxshape``).

A creation round exists to tell each rank where its bytes go. Here no rank waits for that when
it creates the dataset. Every rank checks the call against its own catalogue (the same answer on
every rank: an error is raised at the call and marked agreed, as for groups, engine/structure.py)
and puts the dataset in it; the ledger records the call, which the next collective call compares.
Rank 0 creates and publishes the dataset at once, as rank 0 of a creation round does
(:func:`.create.publish`), and announces to each other rank the byte offsets of its sources,
without waiting (:mod:`..mpi.announce`). Each rank plans the call as rank 0 does (the planning
is pure, and its inputs are the same on every rank: the call, the catalogue, the plan and the
grouping, one group), so the offsets are all it needs to make the same view of the datasets as
rank 0's (:func:`.creation_plan.published_nodes`): a few bytes per dataset, not a pickled
layout. A rank takes the announcements when it first needs a new dataset's storage (its layout:
a write, a read; a deletion; the next collective call): by then rank 0, having made the same
calls, has sent them, or will without waiting for anyone.

In every write session with one group, rank 0 also announces each collective call it enters (its
number): a rank waiting for a creation rank 0 never made stops waiting, and the ranks drop those
words at their own next call. Messages carry their write session's id: files open together on
one communicator share its channel, so a message of another open file is kept for it, and one of
a file no longer open is dropped.

A failure of rank 0's to create a dataset (a full disk) is announced in place of the views; a
rank that touches the dataset raises it, and every rank at the next collective call (after the
close, which publishes the file without that dataset), which forgets it on every rank.

At most :data:`LIMIT` creations in a row go without a round: the next takes one, which bounds
the messages rank 0 has in flight to LIMIT x (P - 1).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CollectiveMismatchError, H5SubfileError, ObjectExistsError, as_error
from ..layout.catalog import PENDING, NodeInfo
from ..mpi.announce import announce, arrived_announcement, next_announcement
from ..mpi.calls import Call
from ..mpi.failures import Failure, describe, rebuild
from . import structure
from .create import SourceOffsets, create_sources, learn_sources, plan_alike, plan_on, publish
from .creation_plan import CreationPlan, published_nodes, rank_view
from .ledger import Entry
from .messages import CONTIGUOUS, DatasetRequest, RequestKind
from .session import Session

#: Creations without a round between two rounds, at most.
LIMIT = 256

#: What rank 0 announces, with the write session's id: one creation call (its paths, each
#: dataset's call as the ledger describes it, the offsets of its sources:
#: :data:`.create.SourceOffsets`), or the failure; or neither, with the number of the
#: collective call rank 0 is entering.
Created = tuple[tuple[str, ...], tuple[str, ...], SourceOffsets]
Announcement = tuple[str, int, Created | None, Failure | None]


@dataclass(frozen=True)
class Waiting:
    """A creation call on a rank other than 0 whose announcement it has not taken: the paths,
    each dataset's call as described to the ledger (shape, type, fill value: rank 0's must be
    the same before this rank writes at the offsets rank 0 chose), and the rank's own plan of
    it (None where planning failed: rank 0's failed alike)."""

    paths: tuple[str, ...]
    calls: tuple[str, ...]
    creation: CreationPlan | None


#: What a rank's node keeps of its own call until the announcement comes (the rest is rank 0's).
_OWN = ("attrs", "track_order", "order")

#: This process's write sessions with one group, by session id: where a message of each goes.
_OPEN: weakref.WeakValueDictionary[str, Announced] = weakref.WeakValueDictionary()


@dataclass
class Announced:
    """A rank's creations without a round in write session ``session``: how many since its
    last round (the same on every rank); on ranks other than 0, the paths of each creation
    whose announcement it has not taken yet, oldest first (``taking``: being taken now), and
    the messages received before they were needed (``arrived``), and the groups each pending
    creation made (``groups_made``). ``failed``: the creations rank 0 failed to make (paths,
    with the groups made for them), and their error, which the next collective call raises."""

    session: Session
    since_round: int = 0
    waiting: list[Waiting] = field(default_factory=list)
    taking: bool = False
    arrived: list[Announcement] = field(default_factory=list)
    groups_made: dict[str, tuple[str, ...]] = field(default_factory=dict)
    failed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    failure: H5SubfileError | None = None

    def take(self) -> None:
        """Take every announcement not taken yet (ranks other than 0; local, waiting for those
        rank 0 has not sent yet)."""
        if self.waiting and not self.taking:
            self.taking = True
            try:
                take(self.session)
            finally:
                self.taking = False

    def before_round(self) -> H5SubfileError | None:
        """Entering collective call number ``session.calls``, before its round: rank 0 says so;
        the others take every announcement and drop the words of calls they have entered too.
        Returns the failure of creations since the last call (their datasets forgotten), which
        the call raises on every rank; the count starts again."""
        if self.session.rank == 0:
            _announce(self.session, None, None, self.session.calls)
        else:
            self.take()
            self._drop_entered()
        self.since_round = 0
        return self.forget_failed()

    def finish(self) -> None:
        """After the agreement round of the close (or a commit), which every rank entered:
        receive rank 0's word of it, and any before it, so that no message is left unreceived
        when the session ends (some MPI libraries warn of them at exit)."""
        session = self.session
        if session.rank != 0:
            self.take()  # none is left in step: the round compared the calls
            closing = session.calls - 1  # the close's number
            call = Call("close", closing, file=session.path)
            while not any(_word_of(session, m, closing) for m in self.arrived):
                message = next_announcement(session.comm, call)
                if _word_of(session, message, closing):
                    break
                _deliver(session, message)
            self.arrived.clear()
        _OPEN.pop(_session_id(session), None)

    def forget_failed(self) -> H5SubfileError | None:
        """Forget, on this rank, the datasets rank 0 failed to create (and the groups made for
        them alone); their error, once."""
        failure, self.failure = self.failure, None
        for path, groups in self.failed.items():
            structure.forget_dataset(self.session, path)
            for group in reversed(groups):
                if not self.session.catalog.children(group):
                    self.session.catalog.nodes.pop(group, None)
        self.failed.clear()
        return failure

    def _drop_entered(self) -> None:
        """Receive what has come, dropping rank 0's words of calls this rank has entered too,
        so that they never pile up in MPI's queue (where every later receive would search
        past them)."""
        session = self.session
        self.arrived = [m for m in self.arrived if not _entered(session, m)]
        while True:
            came, message = arrived_announcement(session.comm)
            if not came:
                return
            _deliver(session, message)


def attach(session: Session) -> None:
    """Right after a write session with one group opens (or continues after a commit), on every
    rank: its datasets may be created without a round from now on."""
    writing = session.writing
    if writing is None or writing.grouping.ngroups != 1:
        return
    announced = Announced(session)
    writing.announced = announced
    _OPEN[writing.session_id] = announced


def _session_id(session: Session) -> str:
    """The id of the write session open in ``session``, which its messages carry."""
    writing = session.writing
    assert writing is not None
    return writing.session_id


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
    if announced is None or announced.since_round >= LIMIT:
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
    announced = writing.announced
    assert isinstance(announced, Announced)  # eligible() said so
    announced.since_round += 1
    calls = tuple(_described(request) for request in requests)
    for call in calls:
        session.ledger.record(Entry(call))
    paths = [r.path for r in requests]
    if session.rank == 0:
        _create_on_root(session, requests, calls)
        return paths
    try:
        creation: CreationPlan | None = plan_alike(session, list(requests))
    except Exception:  # noqa: BLE001 - rank 0's planning fails alike, and announces it
        creation = None
    for request in requests:
        node, groups = _provisional(session, request)
        node.__dict__[PENDING] = announced.take
        announced.groups_made[request.path] = groups
    announced.waiting.append(Waiting(tuple(paths), calls, creation))
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
            session.catalog.missing_groups(path)
            existing = session.catalog.nodes.get(path)
            if existing is not None and not existing.unfinished:
                raise ObjectExistsError(f"{path} already exists in {session.path}")
    except H5SubfileError as exc:
        raise structure.agreed(exc) from None


def _provisional(session: Session, request: DatasetRequest) -> tuple[NodeInfo, tuple[str, ...]]:
    """The dataset in this rank's catalogue, as far as the call says, and the groups made for
    it; its layout comes with rank 0's announcement."""
    catalog = session.catalog
    groups = tuple(catalog.missing_groups(request.path)[:-1])
    for group in groups:
        catalog.nodes[group] = NodeInfo("group")
    assert request.shape is not None
    node = NodeInfo("dataset", shape=request.shape, dtype=request.dtype, fill=request.fill)
    del node.__dict__["layout"]  # asked for, it is taken from the announcement
    catalog.nodes[request.path] = node
    return node, groups


def _create_on_root(
    session: Session, requests: Sequence[DatasetRequest], calls: tuple[str, ...]
) -> None:
    """Rank 0: plan, create and publish the datasets as rank 0 of a creation round does, learn
    them, and announce the offsets of their sources; a failure is announced instead."""
    try:
        creation = plan_on(session, [list(requests)] * session.comm.size)
        assert set(creation.tasks) <= {0}  # one group: rank 0 leads every source
        offsets, error = create_sources(session, creation.tasks.get(0, ()))
        if error is not None:
            raise error
        nodes = publish(session, creation, [offsets])
    except Exception as exc:  # noqa: BLE001 - raised by every rank at the next collective call
        error = as_error(exc)
        error.args = (f"{error} (creating {', '.join(r.path for r in requests)})",)
        made = {r.path: _provisional(session, r) for r in requests}
        _fail(session, {path: groups for path, (_, groups) in made.items()}, error)
        _announce(session, None, describe(error))
        return
    # Learned, in one group: every rank makes rank 0's view from the offsets (rank_view)
    assert all(d.learned for d in creation.datasets)
    _announce(session, (tuple(r.path for r in requests), calls, offsets), None, ring=True)
    views = rank_view(nodes, creation, 0)
    for path, (info, held) in views.items():
        for group in session.catalog.missing_groups(path)[:-1]:
            session.catalog.nodes[group] = NodeInfo("group")
        session.catalog.nodes[path] = info
        learn_sources(session, path, info, held)


def _announce(
    session: Session,
    created: Created | None,
    failure: Failure | None,
    call: int = -1,
    ring: bool = False,
) -> None:
    """Rank 0: announce a creation (its paths and offsets), its failure, or the call it enters
    (``call``); ``ring``: wake the ranks, which may be waiting for it."""
    if session.comm.size > 1:
        announce(session.comm, (_session_id(session), call, created, failure), ring)


def take(session: Session) -> None:
    """A rank other than 0: take every announcement it has not taken (waiting for those not
    sent yet), each filling in its datasets' nodes and where this rank writes them."""
    writing = session.writing
    assert writing is not None and isinstance(writing.announced, Announced)
    announced = writing.announced
    waiting = announced.waiting
    while waiting:
        paths = waiting[0].paths
        message = _next(session, paths)
        _, _, created, failure = message
        made = {path: announced.groups_made.pop(path, ()) for path in paths}
        if failure is not None:
            _fail(session, made, rebuild([(0, failure)], 1))  # as rank 0 raises it
        elif _entered(session, message):
            announced.groups_made.update(made)
            continue
        elif (views := _views(session, waiting[0], created)) is None:
            # Rank 0 made other calls (or planned this one otherwise): none of this rank's
            # creations will be announced as it expects, and it writes none at rank 0's
            # offsets. The next round compares the calls (the ledger), failing on every rank.
            error = _out_of_step(session, waiting[0], created)
            for pending in waiting:
                for path in pending.paths:
                    node = _still_pending(session, path)
                    if node is not None:
                        _failed(node, error)
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


def _fail(session: Session, made: dict[str, tuple[str, ...]], error: H5SubfileError) -> None:
    """Rank 0 failed to create the datasets ``made`` (with the groups made for them): they
    raise ``error`` when their storage is asked for, and the next collective call raises it
    on every rank and forgets them."""
    writing = session.writing
    assert writing is not None and isinstance(writing.announced, Announced)
    announced = writing.announced
    if announced.failure is None:
        announced.failure = error
    for path, groups in made.items():
        node = session.catalog.nodes.get(path)
        if node is not None:
            _failed(node, error)
            announced.failed[path] = groups


def _failed(node: NodeInfo, error: BaseException) -> None:
    def raise_it() -> None:
        raise error

    node.__dict__[PENDING] = raise_it


def _still_pending(session: Session, path: str) -> NodeInfo | None:
    """The node of ``path`` waiting for its announcement; None if deleted since (a deletion
    takes the announcements first, so only where a rank's calls went astray)."""
    node = session.catalog.nodes.get(path)
    return node if node is not None and PENDING in node.__dict__ else None


def _views(session: Session, mine: Waiting, created: Created | None) -> dict[str, Any] | None:
    """This rank's views of the datasets of its creation call ``mine`` from rank 0's
    announcement ``created`` (its own plan, rank 0's offsets), or None where rank 0 made
    another call, or the same one with other arguments."""
    if created is None or mine.creation is None or created[:2] != (mine.paths, mine.calls):
        return None
    writing = session.writing
    assert writing is not None
    try:
        nodes = published_nodes(mine.creation, writing.number, created[2])
    except KeyError:  # an offset rank 0 did not send: it planned otherwise
        return None
    return rank_view(nodes, mine.creation, session.rank)


def _out_of_step(
    session: Session, mine: Waiting, created: Created | None
) -> CollectiveMismatchError:
    shown, made = ", ".join(mine.paths), "entered a collective call"
    if created is not None and created[0] == mine.paths:  # the same names, other arguments
        shown, made = "; ".join(mine.calls), f"made {'; '.join(created[1])}"
    elif created is not None:
        made = f"created {', '.join(created[0])}"
    error = CollectiveMismatchError(
        f"collective calls out of step on {session.path}: rank {session.rank} created "
        f"{shown} where rank 0 {made}; every rank must make the same calls"
    )
    error.out_of_step = True
    return error


def _word_of(session: Session, message: Announcement, call: int) -> bool:
    """Whether ``message`` is rank 0's word of collective call number ``call`` (or later) of
    this write session."""
    own, number, created, failure = message
    return own == _session_id(session) and created is None and failure is None and number >= call


def _entered(session: Session, message: Announcement) -> bool:
    """Whether ``message`` is rank 0's word of a collective call this rank has entered too."""
    _, call, created, failure = message
    return created is None and failure is None and call < session.calls


def _deliver(session: Session, message: Announcement) -> None:
    """A message received for the write session it names: this one's, another open file's on
    the same communicator (kept for it), or none open here any more (dropped); a word of a call
    already entered is dropped at once."""
    own = _OPEN.get(message[0])
    if own is not None and not own.session.closed and not _entered(own.session, message):
        own.arrived.append(message)


def _next(session: Session, paths: tuple[str, ...]) -> Announcement:
    """Rank 0's next announcement of this write session: the first received before it was
    needed, or the next to come (those of other write sessions delivered to them)."""
    writing = session.writing
    assert writing is not None and isinstance(writing.announced, Announced)
    arrived = writing.announced.arrived
    call = Call("create_dataset", session.calls, ", ".join(paths), file=session.path)
    while not arrived:
        _deliver(session, next_announcement(session.comm, call))
    return arrived.pop(0)


def _fill(node: NodeInfo, info: NodeInfo) -> None:
    """``node`` (this rank's, which the rank may have changed since: attributes, their order)
    takes everything else of ``info``, rank 0's view, its layout included."""
    del node.__dict__[PENDING]
    for name, value in vars(info).items():
        if name not in _OWN:
            node.__dict__[name] = value

"""An open file on one rank: what every rank holds, and what group leaders and rank 0 add.

- :class:`Session` (every rank, any mode): path, mode, communicator, plan, the catalogue of
  groups and datasets (identical on every rank), the reader, I/O counters.
- :class:`Writing` (every rank of a write session): grouping, session number, where this
  rank writes each dataset it created, what it has written.
- :class:`LeaderRole` (the leader of each group, in a write session): the subfile it creates
  and the chunked datasets it fills.
- :class:`RootRole` (rank 0, in a write session): the master.

:func:`open_session` builds them (collective).

:meth:`Session.enter` is the agreement round that starts every collective call on the file
(:func:`~h5subfile.mpi.collective.agree_asking`). A rank without an error of its own brings the
one its background writes met (``async_writes``), so that every rank raises it at the same
call (docs/DESIGN-NOTES.md, "Write-behind").
"""

from __future__ import annotations

import functools
import os
import uuid
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import h5py
from mpi4py import MPI

from .._version import __version__
from ..errors import (
    CollectiveMismatchError,
    CollectiveTimeoutError,
    FileModeError,
    H5SubfileError,
    ObjectNotFoundError,
    PlanError,
    timed_out_publication,
)
from ..io import claim as claims
from ..io.boxes import BoxReader
from ..io.filters import Compressors
from ..io.h5 import open_shared_read
from ..io.image import MetadataImage
from ..io.master import MasterWriter
from ..io.master_read import open_for_reading, read_record, read_sessions
from ..io.pool import FilePool
from ..io.posix import IOStats
from ..io.subfile import SubfileWriter
from ..layout.catalog import PENDING, Catalog, NodeInfo
from ..layout.grouping import NODE_RULE, RankGrouping, plan_groups
from ..layout.integrity import BlockStream, FedSum, PieceSum, identity
from ..layout.names import SourcePaths, subfile_relpath
from ..layout.record import DatasetLayout, FileRecord
from ..layout.regions import Remaining
from ..layout.sharing import broadcast_limit
from ..mpi.collective import Call, Question, agree, agree_asking, root_first, root_only, waited
from ..mpi.nodes import Nodes, locate_nodes
from ..plan import READ_FIELDS, Plan
from ..profiler.counters import Profile
from . import autoplan
from .learned_state import Book, LearnedTarget
from .ledger import Ledger, keep_root_values
from .messages import WriteTarget
from .profiling import new_profile, start_profile


class Announcements(Protocol):
    """Datasets created without a round not yet taken by this rank (engine/announced.py)."""

    since_round: int
    waiting: list[Any]  # the creation calls whose announcement is not taken yet
    taking: bool

    def take(self) -> None: ...
    def before_round(self) -> H5SubfileError | None: ...
    def forget_failed(self) -> H5SubfileError | None: ...
    def finish(self) -> None: ...


MODES = ("r", "r+", "w", "w-", "x", "a")


@dataclass
class RootRole:
    """Rank 0 in a write session: it alone changes the master."""

    master: MasterWriter
    existing: frozenset[str] = frozenset()  # the groups and datasets before this session
    #: every rank's pieces of the datasets whose layout is learned (engine/learned.py)
    book: Book | None = None
    #: what the close reported once it committed the master ("" when nothing was wrong)
    reported: str = ""


@dataclass
class LeaderRole:
    """A group's leader in a write session: it creates its subfile's datasets."""

    relpath: str  # the subfile, relative to the master's folder (as recorded)
    alignment: int | None
    identity: bytes = b""  # written into the subfile (layout.integrity.identity)
    subfile: SubfileWriter | None = None  # created with the first source dataset
    chunk_sinks: dict[str, h5py.Dataset] = field(default_factory=dict)  # chunked, by name
    #: the chunks written so far, (sink, chunk corner): a chunk is written once
    chunks_written: set[tuple[str, tuple[int, ...]]] = field(default_factory=set)
    profile: Profile | None = None  # where HDF5's I/O on the subfile is counted

    def open_subfile(self, paths: SourcePaths) -> SubfileWriter:
        """The subfile, created on first use (inside a step whose errors are agreed)."""
        if self.subfile is None:
            path = paths.resolve(self.relpath)
            self.subfile = SubfileWriter(path, self.identity, self.alignment, self.profile)
        return self.subfile


@dataclass
class Writing:
    """Every rank's part of a write session."""

    grouping: RankGrouping  # this rank's view (the whole on rank 0)
    number: int  # the session's number in the file's record
    session_id: str  # the session's unique id (record, subfile names and identities)
    pool: FilePool  # the files this rank writes bytes to
    root: RootRole | None = None
    leader: LeaderRole | None = None
    targets: dict[str, WriteTarget | None] = field(default_factory=dict)
    #: datasets created in this session without declared blocks: where this rank writes them
    #: and what it wrote (engine/learned.py); read through :attr:`learned`
    _learned: dict[str, LearnedTarget] = field(default_factory=dict)
    #: chunks of the sources of compressed datasets whose layout is learned that collective
    #: writes have taken, by (dataset, segment's corner, group): the same on every rank
    #: (engine/chunks.plan_learned)
    chunks_taken: dict[tuple[str, tuple[int, ...], int], set[tuple[int, ...]]] = field(
        default_factory=dict
    )
    #: What this rank has still to write of each dataset's block (absent once it is written;
    #: see layout/regions.py).
    unwritten: dict[str, Remaining] = field(default_factory=dict)
    #: The first error agreed by every rank in a write or a dataset creation of this session
    #: ("DataShapeError: ..."): then close publishes no dataset left incomplete.
    failure: str | None = None
    #: The error this rank's part of a collective write met where the call ends without a
    #: round of its own (engine/transfer.py, ``_put``): every rank raises it at the next
    #: collective call (at the latest the close), as errors of writes behind are raised.
    kept: BaseException | None = None
    compressors: Compressors = field(default_factory=Compressors)
    group_comm: MPI.Comm | None = None
    image: MetadataImage | None = None  # the metadata ``.id`` serves (engine/dims.py)
    announced: Announcements | None = None  # datasets created without a round (engine/announced.py)
    #: checksums of this rank's whole blocks, by dataset and block start (engine.integrity)
    sums: dict[str, dict[tuple[int, ...], PieceSum | FedSum]] = field(default_factory=dict)
    #: whether the session's datasets get checksums (the plan's ``checksums``)
    checksums: bool = True
    #: the blocks this rank wrote piecewise, by dataset: hashed as written while the pieces
    #: come in order, else from the file at close (engine/integrity.py)
    streams: dict[str, BlockStream] = field(default_factory=dict)
    #: checksums of the chunks this rank compressed: by dataset, by chunk start, with the
    #: start of the chunk's extent
    chunk_sums: dict[str, dict[tuple[int, ...], tuple[tuple[int, ...], PieceSum]]] = field(
        default_factory=dict
    )

    @property
    def learned(self) -> dict[str, LearnedTarget]:
        """:attr:`_learned`, once every announcement of a dataset created without a round has
        been taken (engine/announced.py): the same datasets on every rank."""
        if self.announced is not None and self.announced.waiting and not self.announced.taking:
            self.announced.take()
        return self._learned

    def note_failure(self, error: BaseException) -> None:
        """Remember the first error agreed by every rank (the same on every rank)."""
        if self.failure is None and getattr(error, "collective", False):
            self.failure = f"{type(error).__name__}: {error}"


#: Every session of this process (the files open together: calls on several files out of step
#: abandon each of them, see :meth:`Session.enter`).
_SESSIONS: weakref.WeakSet[Session] = weakref.WeakSet()


class Session:
    """Everything one open file holds on one rank (shared by its Group/Dataset facades)."""

    def __init__(
        self,
        path: str,
        mode: str,
        comm: MPI.Comm,
        plan: Plan,
        catalog: Catalog,
        data_path: str | None = None,
    ):
        """``data_path``: where the master's bytes are while this session writes it (its
        ``.partial`` copy, or the master itself)."""
        self.path = os.path.abspath(path)
        self.mode = mode
        self.comm = comm
        self.plan = plan
        self.catalog = catalog
        self.stats = IOStats()
        self.writing: Writing | None = None
        self.reader = self.open_reader(self.path if data_path is None else data_path)
        self.verify = False  # reads check the checksums of the pieces they touch
        self.collective_depth = 0
        self.closed = False
        #: plan="auto": which tuning profile gave the plan, or that none matched ("" otherwise)
        self.plan_source = ""
        self.calls = 0  # collective calls made on this file so far (the same on every rank)
        #: metadata calls made since the last collective call, compared at the next one
        self.ledger = Ledger()
        #: where this session's profile goes (None: not profiled), and rank 0's wall-clock
        #: time of the open (engine/profiling.py)
        self.profile_folder: str | None = None
        self.profile_started = 0.0
        #: this rank's waiting in collective rounds when the profile started (seconds, rounds)
        self.profile_waited: tuple[float, int] = (0.0, 0)
        _SESSIONS.add(self)

    def open_reader(self, data_path: str) -> BoxReader:
        """This rank's reader of the file (the master's bytes in ``data_path``), expecting the
        identities and sizes of the subfiles the catalogue's record lists."""
        reader = BoxReader(self.path, data_path, self.stats, self.plan.transfer_size)
        reader.h5py_opener = lambda: open_shared_read(data_path)
        reader.expect(self.catalog.record)
        self.reader = reader
        return reader

    def fetch_withheld(self) -> None:
        """Read mode: how this rank gets a layout rank 0 did not broadcast when something other
        than a collective read asks for it (layout/sharing.py): it reads the record from the
        master itself, refused unless it is the record rank 0 checked."""
        for path, info in self.catalog.nodes.items():
            if info.withheld:
                info.fetch_with(functools.partial(self._fetch_layout, path, info.record_sha))

    def _fetch_layout(self, path: str, sha: str) -> DatasetLayout:
        master = self.reader.master()
        where = f"{self.path}:{path}"
        layout = DatasetLayout.from_json(read_record(master, path, sha), where)
        self.complete_record()
        return layout

    def complete_record(self) -> None:
        """Read mode: every subfile's identity on this rank (read from the master, checked
        against what rank 0 read) when rank 0 broadcast only some of them."""
        if not self.catalog.record_withheld:
            return
        record = read_sessions(self.reader.master(), self.catalog.session_shas)
        self.reader.expect_more(record)
        self.catalog.record, self.catalog.record_withheld = record, False

    def add_identities(self, record: FileRecord) -> None:
        """Read mode: identities of some subfiles, sent with the extents of a collective read."""
        if self.catalog.record_withheld:
            self.reader.expect_more(record)

    @property
    def writable(self) -> bool:
        return self.mode != "r"

    @property
    def rank(self) -> int:
        return int(self.comm.rank)

    def node(self, path: str) -> NodeInfo:
        info = self.catalog.nodes.get(path)
        if info is None:
            raise ObjectNotFoundError(f"no object {path!r} in {self.path}")
        return info

    def require_open(self) -> None:
        if self.closed:
            raise FileModeError(f"{self.path} is closed")

    def take_announced(self, path: str = "") -> None:
        """Take rank 0's announcements of datasets created without a round, before looking up
        where this rank writes them (engine/announced.py); raise the failure of ``path``'s."""
        announced = None if self.writing is None else self.writing.announced
        if announced is not None and announced.waiting:
            announced.take()
        node = self.catalog.nodes.get(path)
        if node is not None and PENDING in node.__dict__:
            _ = node.layout  # a failed creation's raises its error

    def require_writable(self, what: str) -> Writing:
        """This rank's write session, or FileModeError naming ``what`` was refused."""
        if self.closed:
            raise FileModeError(f"{what}: {self.path} is closed")
        if self.writing is None:
            raise FileModeError(f"{what}: {self.path} is open read-only (mode 'r')")
        return self.writing

    def group_comm(self) -> MPI.Comm:
        """The ranks of this rank's subfile (its leader is rank 0); made on first use
        (collective over the file's communicator)."""
        writing = self.require_writable("group communicator")
        if writing.group_comm is None:
            group = writing.grouping.group
            writing.group_comm = self.comm.Split(group, self.rank)
        return writing.group_comm

    def enter(
        self,
        name: str,
        error: BaseException | None = None,
        detail: str = "",
        args: str | None = None,
        background: bool = True,
        question: Question | None = None,
    ) -> Any:
        """Collective: the agreement round that starts every collective call on this file.

        Every rank must be in the same call (``name`` and its number on this file; ``args``
        too when given), else every rank raises CollectiveMismatchError naming the ranks and
        their calls; an ``error`` on any rank is raised on every rank. When the ranks are out
        of step (or some never arrive: CollectiveTimeoutError) the session is abandoned; a
        timeout's message then says what became of the file (:meth:`say_what_was_published`).
        Without an ``error`` of its own, a rank brings the error its background writes met
        (``async_writes``; not waited for, and kept: every later call raises it too), which
        fails the session (``background=False``: the close, which waits and reports them).
        A ``question`` for rank 0 (the call's next step: :func:`collective.agree_asking`)
        rides with the agreement where the rounds are stars; returns its answer, or None.
        """
        profile, behind = self.stats.profile, None
        try:
            if self.writing is not None and self.writing.announced is not None:
                # datasets created without a round: taken, and a failure to create them raised
                error = self.writing.announced.before_round() or error
            structure, values = self.ledger.digests()
            earlier = self.ledger.described() if structure else ()
            call = Call(name, self.calls, detail, args, self.path, structure, values, earlier)
            self.calls += 1
            if self.writing is not None:
                self.writing.pool.flush_combined()  # small writes combined: before any round
            if background and error is None and self.writing is not None:
                error = behind = self.writing.pool.error() or self.writing.kept
            try:
                if profile is None:
                    _, answered, values_differ = agree_asking(self.comm, error, call, question)
                else:
                    with profile.phases.timed("agree"):
                        _, answered, values_differ = agree_asking(self.comm, error, call, question)
            finally:
                made = self.ledger.take()  # compared: the next call starts a new ledger
            if values_differ:
                keep_root_values(self.comm, self.catalog, made, self.path)
            return answered()
        except CollectiveTimeoutError as exc:
            self.abandon()
            self.say_what_was_published(exc, name)
            raise
        except CollectiveMismatchError as exc:
            if exc.out_of_step:
                self.abandon()
            self.abandon_others(exc.files)
            raise
        except H5SubfileError as exc:
            if behind is not None and self.writing is not None:
                self.writing.note_failure(exc)
            raise

    def say_what_was_published(self, error: CollectiveTimeoutError, name: str) -> None:
        """Local, in a write session whose call ``name`` timed out: set ``error.published``
        and end its message with what this rank knows of the file (:func:`publication`).
        Rank 0 knows whether it committed the master; another rank knows that nothing was
        published unless the call commits the master (close, commit) and its part of it had
        gone to rank 0, which commits once every rank's part is in (``error.asked``)."""
        writing = self.writing
        if writing is None:
            return
        reported = ""
        if writing.root is not None:
            error.published = writing.root.master.published
            reported = writing.root.reported
        elif name not in ("close", "commit") or not error.asked:
            error.published = False
        state = timed_out_publication(self.path, name, error.published, reported, error.agreed)
        error.args = (f"{error}. {state}.",)

    def wait_writes(self) -> BaseException | None:
        """Local: wait until this rank's background writes (``async_writes``) are done, before
        anything reads what they write; the first error they met, or None."""
        return None if self.writing is None else self.writing.pool.wait()

    def abandon_others(self, files: tuple[str, ...]) -> None:
        """Abandon this rank's other sessions on ``files`` (sharing this communicator): their
        calls were out of step with this one's on other ranks, so none of them can be
        published as every rank wrote it."""
        for other in list(_SESSIONS):
            if other is not self and not other.closed and other.path in files:
                if other.comm == self.comm:  # the same handle: the same rounds
                    other.abandon()

    def abandon(self) -> None:
        """Close this rank's handles without publishing anything (no communication): after
        an error on this rank only, or an agreed one; the old file stays as it was."""
        self.closed = True
        writing = self.writing
        closers: list[Callable[[], None]] = [self.reader.close]
        if writing is not None:
            writing.group_comm = None  # not freed: freeing is collective, others are elsewhere
            # The write-behind thread first (its queued writes dropped): nothing it still
            # writes can reach a file once closed.
            closers = [writing.pool.abandon, self.reader.close, self.release]
            if writing.leader is not None and writing.leader.subfile is not None:
                closers.append(writing.leader.subfile.close)
            if writing.root is not None:
                closers.append(writing.root.master.abandon)
        for closer in closers:
            try:
                closer()
            except Exception:  # noqa: BLE001 - best effort on an already failing path
                pass

    def release(self) -> None:
        """Free this session's compressors and group communicator (local)."""
        writing = self.writing
        if writing is None:
            return
        writing.compressors.close()
        if writing.leader is not None:
            writing.leader.chunk_sinks.clear()
        if writing.group_comm is not None:
            writing.group_comm.Free()
            writing.group_comm = None


def parse_plan(mode: str, fields: dict[str, Any]) -> Plan:
    """The plan of a session opened in ``mode`` from ``File``'s keyword arguments (local)."""
    if mode not in MODES:
        raise FileModeError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    if mode != "r":
        return Plan.parse(**fields)
    ignored = sorted(k for k, v in fields.items() if v is not None and k not in READ_FIELDS)
    if ignored:
        raise PlanError(
            f"{', '.join(ignored)}: only apply when writing (mode 'r' "
            f"takes {', '.join(READ_FIELDS)})"
        )
    return Plan.parse(**fields).read_only()


def open_session(
    path: str,
    mode: str,
    comm: MPI.Comm,
    fields: dict[str, Any],
    profile: str | None = None,
    choice: str | None = None,
    track_order: bool = False,
) -> Session:
    """Collective: open ``path`` in ``mode`` on every rank of ``comm``.

    Every rank checks its plan; the call's agreement round then checks that every rank's
    (path, mode, plan, profile folder, plan choice) is the same, before any mode-specific
    collective. For reading, rank 0 scans the master before that round, while the other
    ranks arrive, and broadcasts the catalogue in the next (:func:`root_first`: two rounds
    whatever its size). ``profile``: the folder of this session's profile
    (engine/profiling.py), None when not profiled. ``choice="auto"``: the plan fields not
    given come from the matching tuning profile (engine/autoplan.py). ``track_order``: a
    master created now keeps its root group's creation order (h5py's ``track_order``).
    """
    plan, error, profiled = None, None, None
    path = os.path.abspath(path)
    try:
        autoplan.check_choice(choice)
        plan = parse_plan(mode, fields)
        profiled = new_profile(int(comm.rank)) if profile else None  # agreed just below
    except H5SubfileError as exc:
        error = exc
    # Compared by hash in the round (a rank whose plan failed raises its error instead).
    signature = "" if plan is None else repr((mode, plan.to_dict(), profile, f"plan={choice}"))
    signature += " track_order" if track_order else ""
    call = Call("File", 0, f"(mode {mode!r})", args=f"{path} {signature}", file=path)
    whole: list[Catalog] = []  # rank 0's, when reading: every layout and identity

    def scan() -> Catalog:
        whole.append(open_for_reading(path, profiled))
        return whole[0].for_readers(broadcast_limit())

    catalog = None
    if mode == "r":  # reading changes nothing: a scan the round refuses is just dropped
        catalog = root_first(comm, scan, error, call)
    else:
        agree(comm, error, call)
    assert plan is not None
    source = ""
    located = None  # the ranks' nodes, once located (plan="auto" needs their number)
    if choice == autoplan.AUTO:
        located = locate_nodes(comm)
        merged, source = autoplan.resolve(comm, path, mode, fields, located)
        plan = parse_plan(mode, merged)  # the same inputs on every rank: the same outcome
    started = start_profile(comm, profiled)
    if catalog is not None:
        session = Session(path, mode, comm, plan, whole[0] if whole else catalog)
        session.fetch_withheld()
    else:
        session = _begin_writing(path, mode, comm, plan, profiled, source, located, track_order)
    session.plan_source = source
    session.stats.profile = profiled  # before any RawFile opens (they open on first use)
    session.profile_folder, session.profile_started = profile, started
    if profiled is not None:
        session.profile_waited = waited(comm)
    session.calls = 1  # opening was call #0
    return session


def _begin_writing(
    path: str,
    mode: str,
    comm: MPI.Comm,
    plan: Plan,
    profile: Profile | None = None,
    source: str = "",
    located: Nodes | None = None,
    track_order: bool = False,
) -> Session:
    """Collective: the grouping, then rank 0 opens the master."""
    grouping = group_ranks(comm, plan, located)
    opened = _open_master(
        path, mode, comm, plan, grouping, profile, source, track_order=track_order
    )
    session = Session(path, mode, comm, plan, opened.catalog, opened.data_path)
    _attach_writing(session, grouping, opened, profile)
    return session


def group_ranks(comm: MPI.Comm, plan: Plan, located: Nodes | None = None) -> RankGrouping:
    """Collective: this rank's view of the plan's grouping, the whole on rank 0.

    Every rank plans the same grouping from the same inputs (the plan agreed at open, the size
    of the communicator), so it succeeds or raises the same error on every rank without a round
    of its own; except by node, where rank 0 groups the ranks' processor names and tells each
    rank its own node only (every rank's node too when the plan has aggregators: the two-phase
    plan reads every subfile's ranks on every rank, and gathers every rank's runs anyway).
    ``located``: the nodes as located already (``plan="auto"``), on every rank or on none;
    used unless every rank needs every rank's node.
    """
    nodes = None
    if plan.grouping == "node":
        every_rank = plan.aggregators is not None  # the plan is agreed: the same on every rank
        nodes = located if located is not None and not every_rank else None
        if nodes is None:
            nodes = locate_nodes(comm, every_rank=every_rank)
        if nodes.of_rank is None:  # not rank 0: its node, the others counted
            return RankGrouping(
                rank=comm.rank,
                group=nodes.index,
                members=tuple(nodes.members),  # a range on the wire, a tuple as on rank 0
                ngroups=nodes.count,
                size=comm.size,
                smallest=nodes.smallest,
                largest=nodes.largest,
                rule=NODE_RULE,
            )
    try:
        whole = plan_groups(comm.size, plan, None if nodes is None else nodes.of_rank)
    except H5SubfileError as exc:
        exc.collective = True  # the same on every rank (rank 0 alone plans "node" without
        raise  # aggregators, where nothing can fail)
    return RankGrouping.of(whole, comm.rank)


@dataclass
class _Opened:
    """What opening the master for a write session tells every rank (rank 0 adds its writer)."""

    catalog: Catalog
    number: int
    session_id: str
    data_path: str
    master: MasterWriter | None = None


def _open_master(
    path: str,
    mode: str,
    comm: MPI.Comm,
    plan: Plan,
    grouping: RankGrouping,
    profile: Profile | None,
    source: str,
    claim: claims.Claim | None = None,
    known: Catalog | None = None,
    track_order: bool = False,
) -> _Opened:
    """Collective: rank 0 claims the file (or renews the ``claim`` it holds) and opens the
    master for a new write session; every rank learns the catalogue and the session.
    ``known``: rank 0's catalogue of the master it just committed (not scanned again)."""
    info: dict[str, Any] = {
        "ranks": comm.size,
        "plan": plan.to_dict(),
        "grouping": grouping.describe(),
        "subfiles": [],
        "version": __version__,
    }
    if source:  # plan="auto": which tuning profile gave the plan, or that none matched
        info["extra"] = {"plan_source": source}
    masters: list[MasterWriter] = []  # rank 0's, kept for its RootRole

    def begin() -> tuple[Catalog, int, str, str]:
        # The claim comes first: nothing of the file is touched by a second writer.
        held = claim
        try:
            if held is None:
                held = claims.take(path, uuid.uuid4().hex, mode, profile)
            else:
                held.renew(uuid.uuid4().hex)
            master = MasterWriter(
                path, mode, info, held, plan.alignment, profile, known, track_order
            )
        except BaseException:
            if held is not None:
                held.release()
            raise
        masters.append(master)
        return master.catalog, master.session.id, master.session.uuid, master.data_path

    catalog, number, session_id, data_path = root_only(comm, begin)
    return _Opened(catalog, number, session_id, data_path, masters[0] if masters else None)


def _attach_writing(
    session: Session, grouping: RankGrouping, opened: _Opened, profile: Profile | None
) -> None:
    """Every rank's part of the write session just opened (rank 0's master, leaders' subfiles)."""
    plan = session.plan
    behind = plan.async_buffer_bytes if plan.async_writes else None
    session.stats.write_behind = behind is not None
    pool = FilePool(
        True, session.stats, plan.transfer_size, write_behind=behind, combine=plan.buffer_bytes
    )
    pool.choose_ways(plan.async_zero_copy, plan.async_always)
    writing = Writing(grouping, opened.number, opened.session_id, pool)
    writing.checksums = plan.checksums
    if opened.master is not None:
        writing.root = RootRole(opened.master, frozenset(opened.catalog.nodes))
    if grouping.is_leader:
        relpath = subfile_relpath(session.path, opened.number, opened.session_id, grouping.group)
        writing.leader = LeaderRole(
            relpath, plan.alignment, identity(opened.session_id, relpath), profile=profile
        )
    session.writing = writing
    if writing.root is not None:  # rank 0 reads the master through its own handle
        master_h5 = writing.root.master.h5
        session.reader.h5py_opener = lambda: master_h5
        session.reader.writer_files[opened.data_path] = master_h5


def continue_writing(session: Session, claim: claims.Claim | None) -> None:
    """Collective, once a commit has published the master (``File.commit``): the same open
    file goes on in a new write session, appending (rank 0 hands it the ``claim`` it held,
    so no other writer comes in between). The plan, grouping, counters, profile and the
    number of collective calls carry over; the facades the user holds stay valid."""
    writing = session.writing
    assert writing is not None
    profile = session.stats.profile
    source = session.plan_source
    known = session.catalog if claim is not None else None
    opened = _open_master(
        session.path,
        "a",
        session.comm,
        session.plan,
        writing.grouping,
        profile,
        source,
        claim,
        known,
    )
    session.catalog = opened.catalog
    session.open_reader(opened.data_path)
    session.closed = False
    _attach_writing(session, writing.grouping, opened, profile)


def warn_problems(session: Session, stacklevel: int) -> None:
    """Collective: rank 0 warns once of what is wrong with the file (RuntimeWarning).

    Where warnings are errors (``python -W error``, pytest's ``filterwarnings``), rank 0's
    warning becomes an exception that every rank raises, after abandoning the session,
    instead of rank 0 alone leaving the others waiting in their next collective call.
    """
    error = None
    if session.rank == 0:
        try:
            for problem in session.catalog.problems:
                warnings.warn(f"{session.path}: {problem}", RuntimeWarning, stacklevel=stacklevel)
        except Warning as exc:
            error = exc
    try:
        agree(session.comm, error)
    except H5SubfileError:
        session.abandon()
        raise

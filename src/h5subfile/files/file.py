"""``File``: an open h5subfile file (collective open and close, flush, commit, verify), the
root group of its objects, like ``h5py.File`` with the ``mpio`` driver.

h5py's ``File`` keywords are accepted (``driver="mpio"``, ``comm``), accepted and not used
(caches, MPI hints, ``libver``...), or refused with ``UnsupportedError`` (``swmr=True``,
``userblock_size``): README, *Coming from parallel h5py*. ``track_order`` is h5py's.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import h5py
from mpi4py import MPI

from ..engine import announced, commit, transfer
from ..engine import verify as verification
from ..engine.profiling import profile_folder
from ..engine.session import Session, open_session, warn_problems
from ..errors import H5SubfileError, UnsupportedError
from ..io.h5 import LIBVER_NAMES, META_BLOCK_SIZE
from ..io.posix import IOStats
from ..layout.grouping import RankGrouping
from ..plan import Plan
from .group import Group
from .node import Node

#: h5py.File's keywords that tune HDF5's caches, file locking and space allocation, or pass
#: MPI-IO hints: accepted and not used (they change neither what is stored nor what is read;
#: README, *Coming from parallel h5py*).
IGNORED = frozenset(
    {
        "libver",
        "info",
        "locking",
        "rdcc_nslots",
        "rdcc_nbytes",
        "rdcc_w0",
        "meta_block_size",
        "fs_strategy",
        "fs_persist",
        "fs_threshold",
        "fs_page_size",
        "page_buf_size",
        "min_meta_keep",
        "min_raw_keep",
        "alignment_threshold",
    }
)
#: h5py.File's keywords h5subfile refuses, with why.
REFUSED = {
    "userblock_size": "h5subfile writes no user block (its masters start with the superblock)",
    "swmr": "single-writer/multiple-reader mode is HDF5's; follow a file being written with "
    "h5subfile.follow() (File.commit publishes each step)",
}


def h5py_options(driver: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without h5py.File's own keywords: ``driver`` must be None or ``"mpio"`` (the
    parallel driver h5subfile stands in for); ``alignment_interval`` is the plan's
    ``alignment``; the keywords of :data:`IGNORED` are dropped; those of :data:`REFUSED` (set
    to anything but their default) raise UnsupportedError saying why."""
    if driver not in (None, "mpio"):
        raise UnsupportedError(
            f"driver={driver!r}: h5subfile writes and reads through its own parallel I/O, in "
            "place of h5py's 'mpio' driver; open a file with another driver with h5py itself"
        )
    fields = dict(fields)
    interval = fields.pop("alignment_interval", None)
    if interval not in (None, 1) and fields.get("alignment") is None:
        fields["alignment"] = interval
    for name in IGNORED & set(fields):
        del fields[name]
    for name, why in REFUSED.items():
        if fields.pop(name, None) not in (None, False, 0):
            raise UnsupportedError(f"{name}: {why}")
    return fields


class File(Group):
    """An h5subfile file: ``File(path, mode, comm=None, **plan)``.

    Collective: every rank of ``comm`` (default ``MPI.COMM_WORLD``) opens it with the same
    arguments. Modes as in h5py: ``"r"`` read, ``"r+"`` append to an existing file, ``"w"``
    create or truncate, ``"w-"``/``"x"`` create (fail if it exists), ``"a"`` append or create.
    The plan (``subfiles``, ``ranks_per_subfile``, ``fsync``, ``compression``, ``shuffle``,
    ``chunk_size``, ``aggregators``, ``buffer_size``, ``alignment``, ``transfer_size``,
    ``async_writes``, ``async_buffer_size``: see :class:`~h5subfile.plan.Plan`; each also read
    from its ``H5SUBFILE_*`` environment variable) applies to what this session writes; for reading, ``aggregators``,
    ``buffer_size`` and ``transfer_size`` apply. The file can be read and appended to with
    any number of ranks. ``verify=True`` makes every read check the checksums of the stored
    pieces it touches (see :meth:`Dataset.read`). ``profile=DIR`` (or ``H5SUBFILE_PROFILE=DIR``
    in the environment) profiles the session: Darshan-style counters of every read and write,
    written by rank 0 at close to ``DIR/<file name>.write.json`` (``.read.json``) and ``.txt``;
    the close of a profiled read-only file is then collective too (docs/PROFILING.md).
    ``plan="auto"`` fills the plan fields not given from the tuning profile that matches the
    folder's file system, its mount and the job's size (``h5subfile tune``, docs/TUNING.md),
    records which profile (or that none matched) in the file, and says it in ``plan_source``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str = "r",
        comm: MPI.Comm | None = None,
        subfiles: int | str | None = None,
        ranks_per_subfile: int | None = None,
        fsync: bool | None = None,
        verify: bool = False,
        profile: str | os.PathLike[str] | None = None,
        plan: str | None = None,
        driver: str | None = None,
        track_order: bool | None = None,
        **plan_fields: Any,
    ):
        comm = MPI.COMM_WORLD if comm is None else comm
        plan_fields = h5py_options(driver, plan_fields)
        fields = dict(plan_fields, subfiles=subfiles, ranks_per_subfile=ranks_per_subfile)
        folder = profile_folder(profile)
        if track_order is None:
            track_order = h5py.get_config().track_order  # h5py's default, as h5py.File has it
        session = open_session(
            os.fspath(path),
            mode,
            comm,
            dict(fields, fsync=fsync),
            folder,
            choice=plan,
            track_order=bool(track_order),
        )
        session.verify = bool(verify)
        announced.attach(session)
        self._driver = "mpio" if driver == "mpio" else "h5subfile"
        super().__init__(session, "/")
        if session.catalog.problems:  # the same on every rank
            warn_problems(session, stacklevel=3)

    @classmethod
    def _from_session(cls, session: Session) -> File:
        obj = cls.__new__(cls)
        obj._driver = "h5subfile"
        Group.__init__(obj, session, "/")
        return obj

    _h5py_kind = "File"

    @property
    def libver(self) -> tuple[str, str]:
        """The HDF5 format versions h5subfile writes its masters and subfiles with (h5py's
        ``libver``)."""
        return LIBVER_NAMES

    @property
    def userblock_size(self) -> int:
        """0: h5subfile's masters have no user block."""
        return 0

    @property
    def swmr_mode(self) -> bool:
        """False: SWMR is HDF5's (``h5subfile.follow`` reads a file as it is written)."""
        return False

    @property
    def meta_block_size(self) -> int:
        """The metadata block size h5subfile gives its masters, in bytes."""
        return META_BLOCK_SIZE

    @property
    def in_memory(self) -> bool:
        """False: an h5subfile file is on disk."""
        return False

    @property
    def driver(self) -> str:
        """``"mpio"`` when opened with ``driver="mpio"`` (h5py's name), else ``"h5subfile"``."""
        return self._driver

    @property
    def atomic(self) -> bool:
        """MPI-IO's atomic mode (h5py's ``File.atomic``): always False. Every rank reads what
        any rank wrote once a collective ``flush()`` (or a collective read) has passed, which
        is what non-atomic MPI-IO promises after a sync; setting it True raises, since
        h5subfile cannot show one rank's independent writes to another without a collective
        call."""
        return False

    @atomic.setter
    def atomic(self, value: bool) -> None:
        if value:
            raise UnsupportedError(
                "File.atomic = True: h5subfile has no atomic mode (a rank's independent "
                "writes reach the other ranks at the next collective flush() or collective "
                "read); call f.flush() where your program relies on seeing other ranks' writes"
            )

    # properties ----------------------------------------------------------------------------
    @property
    def filename(self) -> str:
        return self._session.path

    @property
    def plan_source(self) -> str:
        """With ``plan="auto"``: the tuning profile the plan came from, or that none matched."""
        return self._session.plan_source

    @property
    def mode(self) -> str:
        """h5py's: ``"r+"`` for a file open for writing, whatever mode opened it (``"w"``,
        ``"a"``, ``"x"``...), ``"r"`` for one open read-only; ValueError once it is closed."""
        if self._session.closed:
            raise ValueError(f"{self._session.path} is closed: it has no mode (as in h5py)")
        return "r" if self._session.writing is None else "r+"

    @property
    def comm(self) -> MPI.Comm:
        return self._session.comm

    @property
    def plan(self) -> Plan | None:
        """The plan of the current write session (when reading, the reading fields)."""
        return self._session.plan

    @property
    def grouping(self) -> RankGrouping | None:
        """This rank's view of who writes which subfile (``RankGrouping``); None when reading."""
        writing = self._session.writing
        return None if writing is None else writing.grouping

    @property
    def stats(self) -> IOStats:
        """This rank's data I/O counters (bytes, calls, seconds in positioned reads/writes)."""
        return self._session.stats

    @property
    def problems(self) -> list[str]:
        """What is wrong with the file (unfinished sessions, missing subfiles...), per the scan."""
        return list(self._session.catalog.problems)

    @property
    def sessions(self) -> list[dict[str, Any]]:
        """The write sessions recorded in the file (plan, ranks, grouping, times)."""
        return [dataclasses.asdict(s) for s in self._session.catalog.record.sessions]

    def verify(self, progress: Any = None) -> dict[str, Any]:
        """Collective: check every stored byte against its checksum and every recorded
        subfile's identity and size, the work split over the ranks; every rank returns the
        report (``bad``: each damaged piece or subfile; ``no_checksums``: datasets written
        without them; ``read_through_hdf5``: datasets another program added, read whole by
        HDF5 with its own checks; ``problems``: the open-time scan's; ``clean``).
        ``progress(done, total)`` is called with this rank's bytes."""
        self._session.require_open()
        return verification.verify(self._session, progress)

    def record_extra(self, key: str, value: Any) -> None:
        """Collective (write modes): keep ``value`` (anything JSON holds, the same on every
        rank) under ``key`` in this write session's ``extra`` facts, which the master records
        at the commit and :attr:`sessions` and ``h5subfile info`` show (docs/FORMAT.md, *Root
        attribute*): where the data came from, say. ``repack`` records its source there
        (``"repack"``); ``"plan_source"`` and ``"steps"`` are h5subfile's own and refused."""
        commit.record_extra(self._session, key, value)

    def __repr__(self) -> str:
        status = "closed" if self._session.closed else f"mode {self.mode!r}"
        return f"<h5subfile.File {self._session.path!r} ({status})>"

    # flushing, committing and closing ----------------------------------------------------
    def flush(self) -> None:
        """Collective (in write modes; nothing to do when reading): return once every rank's
        writes are done, i.e. handed to the operating system (the plan's ``fsync`` makes them
        durable at close).

        With ``async_writes`` this is the wait: each rank waits for its background writes,
        then the ranks agree, so every rank raises the first error any rank's background
        writes met (and the session fails, see :meth:`close`); after it, any rank's reads
        see every rank's bytes. Without it, writes are done when they return, and flush is
        one agreement round.
        """
        transfer.flush(self._session)

    def commit(self) -> None:
        """Collective (write modes): publish everything written so far, atomically, and go on
        writing in the same open file.

        Readers opening the file from now on see it as it stands, and followers
        (:func:`h5subfile.follow`) yield the top-level groups it completed (the *steps*); a
        writer killed later leaves it readable as committed. Call it once a step is written,
        or open the file with ``commit_every_step=True`` to commit whenever a new top-level
        group starts. The datasets already published are read, not written, afterwards. Raises
        what :meth:`close` raises (and the file is then closed).
        """
        commit.commit(self._session)

    def close(self) -> None:
        """Collective (in write modes): finish the session and publish the master.

        Raises IncompleteFileError (after publishing) when some rank did not write all of a
        block it declared, naming dataset, rank and missing region; the datasets concerned then
        refuse to be read. After an error agreed by every rank in a write or dataset creation of
        this session, those datasets (and groups of this session left empty) are not published
        at all (docs/FORMAT.md, *Commit*). With ``async_writes`` it first waits for the
        background writes; if they met an error on any rank, the datasets they did not store
        are left out too, and every rank raises that error (its class and errno; the message
        names what was left out).
        """
        commit.close(self._session)

    def __enter__(self) -> File:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        """Collective: close the file; after an exception of this rank's own, close it only if
        every rank left the block with the same one, else leave it.

        A rank leaving after an exception of its own makes one agreement round naming it.
        Where every rank is there with the same exception (its class and message: a
        ``sys.exit(0)`` on every rank, say), the file is closed as h5py closes it, keeping
        what was written completely (as after any error agreed by every rank). Otherwise the
        other ranks meet it in their next collective call on the file, where every rank
        raises (CollectiveMismatchError naming this rank and its exception; this rank keeps
        its own exception) and abandons the session: nothing of it is published, files
        closed before stay as they were. No rank waits for ever.
        """
        session = self._session
        if exc is None or getattr(exc, "collective", False):
            # Every rank is here (no error, or one agreed on all ranks): publish what was written.
            commit.close(session, exc)
            return
        if session.closed or (session.writing is None and session.stats.profile is None):
            session.abandon()  # reading: closing is local, nobody waits for this rank
            return
        left = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        try:
            # the same call and arguments on every rank: every rank left with this exception
            session.enter("File.__exit__", detail=f"on rank {session.rank} after {left}", args=left)
        except H5SubfileError as agreed:
            if sys.version_info >= (3, 11):
                exc.add_note(f"every rank of the file left it: {agreed}")
            session.abandon()
            return
        except BaseException:
            session.abandon()  # interrupted in the round itself: nothing is published
            raise
        commit.close(session, exc)


Node.file_of = File._from_session

"""Public objects: File, Group, Dataset, AttributeManager (h5py-like), thin facades over the
engine (:mod:`h5subfile.engine`).

Every structural call (open, close, create_group, create_dataset, write_dataset(s), attribute
changes, Dataset.write) is collective: every rank of the file's communicator calls it with the
same arguments (a block or local data may differ per rank). A facade parses its arguments
into the engine's messages and hands them to the engine, which checks them on every rank
together and raises the same exception on every rank. Reads are independent: any rank reads
any selection at any time, without communication.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import sys
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from .engine import commit, create, structure, transfer
from .engine import read as reads
from .engine import verify as verification
from .engine.messages import WHOLE_BLOCK, DatasetRequest, WriteRequest
from .engine.profiling import profile_folder
from .engine.session import Session, open_session, warn_problems
from .errors import (
    H5SubfileError,
    ObjectExistsError,
    ObjectNotFoundError,
)
from .io.filters import FilterSpec
from .io.posix import IOStats
from .layout.blocks import Block
from .layout.catalog import NodeInfo
from .layout.grouping import RankGrouping
from .layout.record import DatasetLayout
from .plan import Plan

__all__ = ["AttributeManager", "Dataset", "File", "Group"]


def _join(base: str, name: str) -> str:
    """The absolute path of ``name`` relative to group ``base``."""
    if not isinstance(name, str) or not name.strip("/"):
        raise ObjectNotFoundError(f"invalid object name {name!r}")
    path = posixpath.normpath(name if name.startswith("/") else posixpath.join(base, name))
    return "/" + path.lstrip("/")


def _valid_paths(base: str, names: Iterable[Any]) -> list[str]:
    """The absolute paths of the valid ``names`` (an invalid one fails the call itself, in its
    agreement round, the same on every rank)."""
    paths = []
    for name in names:
        try:
            paths.append(_join(base, name))
        except ObjectNotFoundError:
            pass
    return paths


class AttributeManager(MutableMapping[str, Any]):
    """``obj.attrs``: attributes of a group or dataset. Setting and deleting are collective."""

    def __init__(self, session: Session, path: str):
        self._session = session
        self._path = path

    def _values(self) -> dict[str, Any]:
        return self._session.node(self._path).attrs

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values()[name]
        except KeyError:
            raise ObjectNotFoundError(f"no attribute {name!r} on {self._path}") from None

    def __setitem__(self, name: str, value: Any) -> None:
        """Collective: set attribute ``name`` (every rank passes the same value)."""
        structure.set_attr(self._session, self._path, name, value)

    def update(self, other: Any = (), /, **values: Any) -> None:
        """Collective: set several attributes (a mapping or (name, value) pairs, then the
        keywords) in one call, two rounds of coordination whatever their number, where
        setting them one by one takes two rounds each. Every rank passes the same names and
        values in the same order."""
        items = dict(other)
        items.update(values)
        structure.set_attrs(self._session, self._path, items)

    def __delitem__(self, name: str) -> None:
        """Collective: delete attribute ``name``."""
        structure.delete_attr(self._session, self._path, name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._values()))

    def __len__(self) -> int:
        return len(self._values())

    def __repr__(self) -> str:
        return f"<Attributes of {self._path}: {sorted(self._values())}>"


class _Object:
    def __init__(self, session: Session, path: str):
        self._session = session
        self._path = path

    @property
    def name(self) -> str:
        return self._path

    @property
    def attrs(self) -> AttributeManager:
        return AttributeManager(self._session, self._path)

    @property
    def file(self) -> File:
        return File._from_session(self._session)

    @property
    def parent(self) -> Group:
        return Group(self._session, posixpath.dirname(self._path) or "/")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Object)
            and other._session is self._session
            and other._path == self._path
        )

    def __hash__(self) -> int:
        return hash((id(self._session), self._path))


class Group(_Object):
    """A group: a container of groups and datasets, like ``h5py.Group``."""

    # navigation (local) ----------------------------------------------------------------------
    def __getitem__(self, name: str) -> Group | Dataset:
        self._session.require_open()
        path = _join(self._path, name)
        info = self._session.node(path)
        return Group(self._session, path) if info.kind == "group" else Dataset(self._session, path)

    def get(self, name: str, default: Any = None) -> Group | Dataset | Any:
        try:
            return self[name]
        except ObjectNotFoundError:
            return default

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return _join(self._path, name) in self._session.catalog.nodes
        except ObjectNotFoundError:
            return False

    def keys(self) -> list[str]:
        return self._session.catalog.children(self._path)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def values(self) -> list[Group | Dataset]:
        return [self[k] for k in self.keys()]

    def items(self) -> list[tuple[str, Group | Dataset]]:
        return [(k, self[k]) for k in self.keys()]

    def visit(self, fn: Any) -> Any:
        """Call ``fn(relative_name)`` for every object below this group (h5py's visit)."""
        prefix = self._path.rstrip("/") + "/"
        for path in sorted(self._session.catalog.nodes):
            if path.startswith(prefix) and path != self._path:
                result = fn(path[len(prefix) :])
                if result is not None:
                    return result
        return None

    def __repr__(self) -> str:
        if self._session.closed:
            return f"<Closed h5subfile.Group {self._path!r}>"
        return f"<h5subfile.Group {self._path!r} ({len(self)} members)>"

    # structure (collective) ------------------------------------------------------------------
    def create_group(self, name: str) -> Group:
        """Collective: create a group (and missing intermediate groups)."""
        path = _join(self._path, name)
        commit.step_boundary(self._session, [path])
        structure.create_group(self._session, path)
        return Group(self._session, path)

    def require_group(self, name: str) -> Group:
        """Collective: the group ``name``, created if missing."""
        path = _join(self._path, name)
        info = self._session.catalog.nodes.get(path)
        if info is not None:
            if info.kind != "group":
                raise ObjectExistsError(f"{path} exists and is a dataset, not a group")
            return Group(self._session, path)
        return self.create_group(name)

    def create_dataset(
        self,
        name: str,
        shape: Sequence[int] | int,
        dtype: Any = "f4",
        *,
        block: Sequence[slice] | None = None,
        start: Sequence[int] | None = None,
        count: Sequence[int] | None = None,
        chunks: bool | Sequence[int] | None = None,
        compression: Any = None,
        compression_opts: Any = None,
        shuffle: bool | None = None,
        fletcher32: bool | None = None,
    ) -> Dataset:
        """Collective: create a dataset of ``shape`` and ``dtype``; each rank declares its block.

        ``block`` (a tuple of slices) or ``start`` + ``count`` give the region this rank will write
        with :meth:`Dataset.write`; a rank that writes nothing passes neither. Blocks must lie in
        ``shape`` and must not overlap (checked on all ranks together). A scalar (``shape=()``)
        is written by rank 0: the other ranks' blocks and values are ignored.

        Storage, as in h5py: ``chunks`` (True: the plan picks, aligned to the ranks' blocks when
        it can; or a shape), ``compression`` ("gzip", "lzf", "zstd", "lz4", "blosc", "blosc2",
        "bitshuffle", "name:level", an hdf5plugin filter object or a filter id),
        ``compression_opts``, ``shuffle``, ``fletcher32``. Without them the plan's default
        compression applies (none unless set). Chunks are compressed by the ranks that hold the
        data and written whole (direct chunk writes).
        """
        spec = dict(
            shape=shape,
            dtype=dtype,
            block=block,
            start=start,
            count=count,
            chunks=chunks,
            compression=compression,
            compression_opts=compression_opts,
            shuffle=shuffle,
            fletcher32=fletcher32,
        )
        return self.create_datasets({name: spec})[0]

    def create_datasets(self, specs: Mapping[str, Mapping[str, Any]]) -> list[Dataset]:
        """Collective: create many datasets with one round of coordination.

        ``specs`` maps names to the keyword arguments of :meth:`create_dataset` (``shape``,
        ``dtype``, and this rank's ``block`` or ``start`` + ``count``).
        """
        session = self._session
        session.require_writable("create_datasets")
        requests: list[DatasetRequest] | None = None
        error = None
        try:
            requests = [
                create.shape_request(session, _join(self._path, name), **spec)
                for name, spec in specs.items()
            ]
        except (H5SubfileError, ValueError, TypeError) as exc:
            error = exc
        commit.step_boundary(session, _valid_paths(self._path, specs))
        paths = create.create_datasets(session, requests, error).paths
        return [Dataset(session, p) for p in paths]

    def write_dataset(
        self, name: str, data: Any, start: Sequence[int] | None = None, **storage: Any
    ) -> Dataset:
        """Collective: create a dataset from every rank's local array and write it.

        Without ``start``, rank r's array goes at the exclusive prefix sum of the ranks' lengths
        along axis 0 (the VPIC pattern; uneven and empty lengths allowed; the other axes must
        agree). With ``start``, the array is an N-D block with its corner at ``start``; the
        dataset's shape is the end of the union of the blocks. A 0-d array makes a scalar
        dataset holding rank 0's value. ``storage``: ``chunks``,
        ``compression``, ``compression_opts``, ``shuffle``, ``fletcher32`` as in
        :meth:`create_dataset`.
        """
        corners = None if start is None else {name: start}
        return self.write_datasets({name: data}, start=corners, **storage)[0]

    def write_datasets(
        self,
        datasets: Mapping[str, Any],
        start: Mapping[str, Sequence[int]] | Sequence[int] | None = None,
        chunks: bool | Sequence[int] | None = None,
        compression: Any = None,
        compression_opts: Any = None,
        shuffle: bool | None = None,
        fletcher32: bool | None = None,
    ) -> list[Dataset]:
        """Collective: create and write many datasets with one round of coordination.

        Like HDF5's H5Dwrite_multi: ``datasets`` maps names to this rank's local arrays (every
        rank passes the same names in the same order). ``start`` is None (prefix sum along axis
        0), one corner for all datasets, or a mapping name -> corner. The storage arguments
        (as in :meth:`create_dataset`) apply to every dataset. A rank's pieces that are
        neighbours on disk go out in one vectored write.
        """
        session = self._session
        session.require_writable("write_datasets")
        storage_args = dict(
            chunks=chunks,
            compression=compression,
            compression_opts=compression_opts,
            shuffle=shuffle,
            fletcher32=fletcher32,
        )
        requests: list[DatasetRequest] | None = None
        arrays: list[np.ndarray] = []
        error = None
        try:
            requests = []
            for name, data in datasets.items():
                array = np.asarray(data, order="C")  # a 0-d array stays 0-d: a scalar dataset
                corner = start.get(name) if isinstance(start, Mapping) else start
                storage = create.parse_storage(session.plan, array.ndim, **storage_args)
                path = _join(self._path, name)
                requests.append(create.data_request(session, path, array, corner, storage))
                arrays.append(array)
        except (H5SubfileError, ValueError, TypeError) as exc:
            requests, error = None, exc
        commit.step_boundary(session, _valid_paths(self._path, datasets))
        created = create.create_datasets(session, requests, error, writes=True)
        writes = [WriteRequest(p, a) for p, a in zip(created.paths, arrays)]
        try:
            transfer.put(
                session, writes, entered=True, failed=created.error, skip=not created.learnt
            )
        except H5SubfileError as exc:
            create.settle(session, created, exc)
            raise
        return [Dataset(session, p) for p in created.paths]


class Dataset(_Object):
    """A dataset, like ``h5py.Dataset``. Reading is independent; writing is collective."""

    def _info(self) -> NodeInfo:
        self._session.require_open()
        return self._session.node(self._path)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._info().shape

    @property
    def dtype(self) -> np.dtype:
        dtype = self._info().dtype
        assert dtype is not None
        return dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def layout(self) -> DatasetLayout | None:
        """Where the data is stored (extents: file, dataset, box, byte offset), if read directly."""
        return self._info().layout

    @property
    def storage(self) -> str:
        """A short description of the storage (virtual over subfiles, contiguous, ...)."""
        return self._info().storage

    @property
    def problem(self) -> str | None:
        """Why reading this dataset would fail (missing subfile, unfinished session...), or None."""
        problem = self._info().problem
        return None if problem is None else problem[1]

    @property
    def block(self) -> Block | None:
        """This rank's block, for a dataset created in the current write session."""
        writing = self._session.writing
        target = None if writing is None else writing.targets.get(self._path)
        return None if target is None else target.block

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a scalar dataset")
        return self.shape[0]

    def __repr__(self) -> str:
        if self._session.closed:
            return f"<Closed h5subfile.Dataset {self._path!r}>"
        return f"<h5subfile.Dataset {self._path!r}: shape {self.shape}, type {self.dtype.str!r}>"

    @property
    def chunks(self) -> tuple[int, ...] | None:
        """The chunk shape (each extent's chunks are this, clipped to the extent), or None."""
        info = self._info()
        if info.layout is not None and info.layout.chunks:
            return info.layout.chunks
        if info.via_h5py and self.shape:
            chunks: tuple[int, ...] | None = self._session.reader.h5py_dataset(self._path).chunks
            return chunks
        return None

    @property
    def compression(self) -> str | None:
        """The compression filter's name (``"gzip"``, ``"zstd"``...), or None."""
        info = self._info()
        if info.layout is not None and info.layout.chunks:
            return FilterSpec.from_dict(info.layout.filters).name
        if info.via_h5py and self.shape:
            name: str | None = self._session.reader.h5py_dataset(self._path).compression
            return name
        return None

    @property
    def filters(self) -> FilterSpec:
        """Every filter of a dataset written by h5subfile (name, HDF5 id, options, shuffle...)."""
        layout = self._info().layout
        return FilterSpec.from_dict(layout.filters if layout is not None else None)

    @property
    def collective(self) -> _Collective:
        """``with dset.collective: dset[sel] = data`` / ``x = dset[sel]``: the transfers inside
        are collective (as in h5py's mpio driver): every rank calls them, each with its own
        selection, and the plan's aggregators (two-phase I/O) serve them when it has any."""
        return _Collective(self._session)

    # writing -----------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        """Collective: write this rank's block (ranks with an empty block pass None or nothing)."""
        transfer.put(self._session, [WriteRequest(self._path, data, WHOLE_BLOCK)])

    def __setitem__(self, selection: Any, data: Any) -> None:
        """Write part of this rank's block: ``dset[lo:hi, ...] = data``.

        Unlike :meth:`write` this is independent: each rank writes pieces of its own block
        when it likes (in any order, of any size), e.g. as a simulation produces them. The
        selection must be a box (integers and step-1 slices) inside this rank's block. Inside
        ``with dset.collective:`` it is collective instead (every rank calls it).
        """
        request = WriteRequest(self._path, data, selection)
        if self._session.collective_depth > 0:
            transfer.put(self._session, [request])
        else:
            transfer.put_independent(self._session, request)

    # reading -----------------------------------------------------------------------------------
    def __getitem__(self, selection: Any) -> Any:
        if self._session.collective_depth > 0:
            return self.read_collective(selection)
        return self.read(selection)

    def read(self, selection: Any = (), verify: bool | None = None) -> Any:
        """Read a selection (numpy/h5py style) on this rank only; no communication.

        ``verify`` (default: the file's ``verify``) checks the checksum of every stored piece
        the selection touches, reading each piece whole (ChecksumError names the dataset, the
        file, the byte offset and length of a piece that changed). Without it, a subfile's
        identity and size are still checked, but flipped data bytes go unnoticed.
        """
        self._session.require_open()
        return reads.read(self._session, self._path, selection, verify)

    def read_direct(self, dest: np.ndarray, source_sel: Any = ()) -> None:
        """Read ``source_sel`` straight into the array ``dest`` (as h5py's ``read_direct``).

        For a box selection into a C-contiguous ``dest`` of the dataset's dtype the bytes land in
        ``dest`` without an intermediate array.
        """
        self._session.require_open()
        reads.read_into(self._session, self._path, dest, source_sel)

    def read_partition(self) -> np.ndarray:
        """This rank's share along axis 0 (BD-CATS): rank p of P reads
        ``[p*N//P, (p+1)*N//P)``, the last rank also the remainder. Call it on every rank: it
        is collective when the plan has aggregators (two-phase reads) or when the dataset has
        more extents than rank 0 broadcasts at open (each rank is then sent the extents of its
        share); otherwise every rank reads its share itself."""
        self._session.require_open()
        return reads.read_partition(self._session, self._path)

    def read_collective(self, selection: Any = ()) -> Any:
        """Collective read: every rank calls it with its own selection.

        With the plan's ``aggregators`` (``File(path, "r", aggregators=...)``), a few ranks
        per file read large contiguous pieces (at most ``buffer_size`` bytes each) and send
        every rank its bytes (two-phase I/O); otherwise each rank reads its own bytes.
        """
        self._session.require_open()
        return reads.read_collective(self._session, self._path, selection)


class _Collective:
    """The context of ``with dset.collective:`` (nestable; per open file)."""

    def __init__(self, session: Session):
        self._session = session

    def __enter__(self) -> None:
        self._session.collective_depth += 1

    def __exit__(self, *exc: Any) -> None:
        self._session.collective_depth -= 1


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
        **plan_fields: Any,
    ):
        comm = MPI.COMM_WORLD if comm is None else comm
        fields = dict(plan_fields, subfiles=subfiles, ranks_per_subfile=ranks_per_subfile)
        folder = profile_folder(profile)
        session = open_session(
            os.fspath(path), mode, comm, dict(fields, fsync=fsync), folder, choice=plan
        )
        session.verify = bool(verify)
        super().__init__(session, "/")
        if session.catalog.problems:  # the same on every rank
            warn_problems(session, stacklevel=3)

    @classmethod
    def _from_session(cls, session: Session) -> File:
        obj = cls.__new__(cls)
        Group.__init__(obj, session, "/")
        return obj

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
        return self._session.mode

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
        without them; ``problems``: the open-time scan's; ``clean``). ``progress(done, total)``
        is called with this rank's bytes."""
        self._session.require_open()
        return verification.verify(self._session, progress)

    def __repr__(self) -> str:
        status = "closed" if self._session.closed else f"mode {self._session.mode!r}"
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
        """Collective: close the file; after an exception on this rank only, leave it.

        A rank leaving after an exception of its own makes one agreement round carrying it:
        the other ranks meet it in their next collective call on the file, where every rank
        raises (they CollectiveMismatchError naming this rank and its exception; this rank
        keeps its own exception) and abandons the session: nothing of it is published, files
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
        try:
            detail = (
                f"after {type(exc).__name__}: {exc}" if str(exc) else f"after {type(exc).__name__}"
            )
            session.enter("File.__exit__", exc, detail=f"on rank {session.rank} {detail}")
        except H5SubfileError as agreed:
            if sys.version_info >= (3, 11):
                exc.add_note(f"every rank of the file left it: {agreed}")
        finally:
            session.abandon()

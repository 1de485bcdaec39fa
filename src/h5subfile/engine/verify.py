"""Checking a whole file (``h5subfile verify``, collective): every stored piece against its
checksum and every recorded subfile's identity and size, split over the ranks.

Rank 0, which holds every layout, lists the work items and splits them into shares of about
equal bytes; each rank receives its own share with the extents it needs (never the whole
layout), and the findings are gathered on every rank.

Datasets another program added to the master (``h5py.File(master, "r+")``) have no
checksums of h5subfile's: a contiguous one is listed in ``no_checksums``; any other
(compressed, chunked, virtual) is read whole through HDF5, so that HDF5's own checks (a
filter's, Fletcher32's) run on every chunk, and listed in ``read_through_hdf5``: what HDF5
cannot read is a finding, as a bad piece is.
"""

from __future__ import annotations

import heapq
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import (
    ChecksumError,
    FileModeError,
    H5SubfileError,
    MissingFileError,
    NotRegularFileError,
)
from ..io.boxes import identity_problem
from ..io.h5 import read_problem, structure_problem
from ..io.posix import RawFile
from ..layout.catalog import NodeInfo
from ..layout.integrity import PieceSum, SubfileInfo
from ..layout.record import FileRecord, StoredExtent
from ..mpi.collective import allgather, root_decides
from .session import Session

#: Scan problems whose dataset's pieces are still checked (its files are there to read).
_CHECKED_DESPITE = (None, "SubfileMismatchError", "MissingFileError")
#: ``progress(done_bytes, total_bytes)`` of this rank's share.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class _Item:
    """One thing to check: a piece of a dataset, or a recorded subfile."""

    nbytes: int
    dataset: str = ""
    stored: StoredExtent | None = None  # the extent holding the piece
    piece: int = -1
    subfile: str = ""
    session_uuid: str = ""
    info: SubfileInfo | None = None
    through_hdf5: bool = False  # a dataset h5subfile did not write, read whole by HDF5


def _items(session: Session) -> tuple[list[_Item], list[str], list[str]]:
    """Every piece and recorded subfile to check, the datasets without checksums, and those
    read through HDF5 (see the module)."""
    items: list[_Item] = []
    unchecked: list[str] = []
    through_hdf5: list[str] = []
    known: dict[str, bool] = {}

    def present(relpath: str) -> bool:
        """Whether a recorded file exists (an unsafe path is checked, and refused, per piece)."""
        if relpath not in known:
            try:
                known[relpath] = os.path.exists(session.reader.paths.resolve(relpath))
            except H5SubfileError:
                known[relpath] = True
        return known[relpath]

    for path, info in sorted(session.catalog.nodes.items()):
        if info.kind == "dataset" and info.via_h5py and info.problem is None:
            through_hdf5.append(path)
            assert info.dtype is not None
            nbytes = info.dtype.itemsize * math.prod(info.shape)
            items.append(_Item(max(nbytes, 1), path, through_hdf5=True))
            continue
        layout = info.layout
        if info.kind != "dataset" or layout is None or not layout.extents:
            continue
        if not layout.checksum:
            unchecked.append(path)
            continue
        if info.problem is not None and info.problem[0] not in _CHECKED_DESPITE:
            continue  # truncated, unfinished: the scan's problem says so
        itemsize = _itemsize(info)
        missing = info.problem is not None and info.problem[0] == "MissingFileError"
        for extent in layout.extents:
            if missing and not present(extent.file):
                continue  # a missing subfile: the scan's problem and its own item say so
            for j, piece in enumerate(extent.pieces):
                nbytes = _piece_bytes(piece, itemsize)
                items.append(_Item(nbytes, path, extent, j))
    items.extend(_subfile_items(session.catalog.record))
    return items, unchecked, through_hdf5


def _subfile_items(record: FileRecord) -> list[_Item]:
    return [
        _Item(IDENTITY_COST, subfile=relpath, session_uuid=s.uuid, info=SubfileInfo.from_dict(d))
        for s in record.sessions
        if s.uuid
        for relpath, d in sorted(s.subfile_info.items())
    ]


#: The weight of a subfile check when sharing the work (an open, an fstat, a read).
IDENTITY_COST = 1 << 20


def _itemsize(info: NodeInfo) -> int:
    assert info.dtype is not None
    return int(info.dtype.itemsize)


def _piece_bytes(piece: PieceSum, itemsize: int) -> int:
    return piece.elements * itemsize


def shares(items: list[_Item], ranks: int) -> list[list[_Item]]:
    """Every rank's items: largest first, each to the least loaded rank."""
    loads = [(0, r) for r in range(ranks)]  # a heap: (bytes so far, rank)
    split: list[list[_Item]] = [[] for _ in range(ranks)]
    for index in sorted(range(len(items)), key=lambda i: (-items[i].nbytes, i)):
        load, target = heapq.heappop(loads)
        heapq.heappush(loads, (load + items[index].nbytes, target))
        split[target].append(items[index])
    return split


def _check_subfile(session: Session, item: _Item) -> dict[str, Any] | None:
    assert item.info is not None
    try:
        raw = RawFile(session.reader.paths.resolve(item.subfile))
    except (MissingFileError, NotRegularFileError) as exc:
        return {"subfile": item.subfile, "error": type(exc).__name__, "message": str(exc)}
    try:
        problem = identity_problem(raw, item.subfile, item.session_uuid, item.info)
    except OSError as exc:
        problem = f"subfile {item.subfile}: its identity cannot be read: {exc}"
    finally:
        raw.close()
    if problem is not None:
        return {"subfile": item.subfile, "error": "SubfileMismatchError", "message": problem}
    damaged = structure_problem(raw.path)  # what plain h5py reads besides our pieces
    if damaged is None:
        return None
    message = f"subfile {item.subfile}: its HDF5 structure is damaged: {damaged}"
    return {"subfile": item.subfile, "error": "CorruptFileError", "message": message}


def _check_through_hdf5(session: Session, item: _Item) -> dict[str, Any] | None:
    problem = read_problem(session.path, item.dataset)
    if problem is None:
        return None
    message = f"dataset {item.dataset} (not written by h5subfile): {problem}"
    return {
        "dataset": item.dataset,
        "file": "(the master)",
        "error": "CorruptFileError",
        "message": message,
    }


def _check(session: Session, item: _Item) -> dict[str, Any] | None:
    if item.subfile:
        return _check_subfile(session, item)
    if item.through_hdf5:
        return _check_through_hdf5(session, item)
    return _check_piece(session, item)


def _check_piece(session: Session, item: _Item) -> dict[str, Any] | None:
    info = session.catalog.nodes[item.dataset]
    extent = item.stored
    assert extent is not None and info.dtype is not None
    piece = extent.pieces[item.piece]
    found: dict[str, Any] = {
        "dataset": item.dataset,
        "file": extent.file or "(the master)",
        "start": list(piece.start),
        "shape": list(piece.shape),
    }
    if piece.count or piece.rank >= 0:
        found["count"], found["stride"] = list(piece.count), list(piece.stride)
    try:
        if info.layout is not None and info.layout.learned:
            session.reader.check_slab(extent, piece, info.dtype, item.dataset, keep=False)
        else:
            session.reader.check_piece(extent, piece, info.dtype, item.dataset, keep=False)
    except ChecksumError as exc:
        offset, length = getattr(exc, "span", (None, None))
        return dict(found, error="ChecksumError", offset=offset, length=length, message=str(exc))
    except Exception as exc:  # noqa: BLE001 - any failure to read a piece is a finding
        return dict(found, error=type(exc).__name__, message=str(exc))
    return None


def verify(session: Session, progress: Progress | None = None) -> dict[str, Any]:
    """Collective: check this rank's share of the file; every rank returns the whole report."""
    refused = None
    if session.writing is not None:  # the same on every rank, agreed like any other error
        refused = FileModeError(
            f"verify {session.path} after closing it: checksums are recorded when a write "
            "session closes"
        )
    session.enter("verify", refused)  # a rank in another call: CollectiveMismatchError

    def plan(_: list[None]) -> list[tuple[list[_Item], int, int, list[str], list[str]]]:
        items, unchecked, through_hdf5 = _items(session)  # rank 0: every layout
        pieces = sum(1 for i in items if not i.subfile and not i.through_hdf5)
        subfiles = sum(1 for i in items if i.subfile)
        split = shares(items, session.comm.size)
        return [(mine, pieces, subfiles, unchecked, through_hdf5) for mine in split]

    mine, pieces, subfiles, unchecked, through_hdf5 = root_decides(session.comm, None, None, plan)
    total = sum(i.nbytes for i in mine)
    # Pieces are checked by checksum whatever their subfile's identity says: every bad
    # piece is listed (the identities are checked as items of their own).
    reader = session.reader
    reader.check_identities = False
    findings: list[dict[str, Any]] = []
    done, checked = 0, 0
    started = time.perf_counter()
    try:
        for item in mine:
            found = _check(session, item)
            if found is not None:
                findings.append(found)
            done += item.nbytes
            checked += 0 if item.subfile or item.through_hdf5 else item.nbytes
            if progress is not None:
                progress(done, total)
    finally:
        reader.check_identities = True
    gathered = allgather(session.comm, (findings, checked, time.perf_counter() - started))
    bad = [f for rank_findings, _, _ in gathered for f in rank_findings]
    bad.sort(key=lambda f: (f.get("dataset", ""), f.get("subfile", ""), f.get("start", [])))
    return {
        "file": session.path,
        "ranks": session.comm.size,
        "pieces": pieces,
        "subfiles": subfiles,
        "checked_bytes": sum(c for _, c, _ in gathered),
        "seconds": max(s for _, _, s in gathered),
        "no_checksums": unchecked,
        "read_through_hdf5": through_hdf5,
        "problems": list(session.catalog.problems),
        "bad": bad,
        "clean": not bad and not session.catalog.problems,
    }

"""Ending a write session: the collective close that publishes the master (abandoning a
session, without communication, is :meth:`~.session.Session.abandon`)."""

from __future__ import annotations

import dataclasses

from ..errors import IncompleteFileError
from ..mpi.collective import root_decides
from .session import Session


def close(session: Session) -> None:
    """Collective (in write modes): finish the session and publish the master.

    Raises IncompleteFileError (after publishing everything else) when some rank never wrote
    a block it declared. On any other failure every rank abandons the session (the old file
    stays as it was) and raises the same error.
    """
    if session.closed:
        return
    writing = session.writing
    if writing is None:
        session.reader.close()
        session.closed = True
        return
    error = None
    try:
        if session.plan.fsync:
            writing.pool.sync_all()
        writing.pool.close_all()
        session.release()
        if writing.leader is not None and writing.leader.subfile is not None:
            writing.leader.subfile.close(fsync=session.plan.fsync)
    except Exception as exc:  # noqa: BLE001 - agreed below
        error = exc
    try:
        session.enter("close", error)
        message = root_decides(
            session.comm,
            sorted(writing.unwritten),
            None,
            lambda unwritten: commit_on_root(session, unwritten),
            per_rank=False,
        )
    except BaseException:
        session.abandon()
        raise
    session.reader.close()
    session.closed = True
    if message:
        incomplete = IncompleteFileError(message)
        incomplete.collective = True  # the same on every rank
        raise incomplete


def commit_on_root(session: Session, unwritten: list[list[str]]) -> str | None:
    """Rank 0: mark datasets some ranks never wrote, then publish the master. Returns the
    message of the IncompleteFileError every rank raises, if any."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    master = writing.root.master
    missing: dict[str, list[int]] = {}
    for rank, paths in enumerate(unwritten):
        for path in paths:
            missing.setdefault(path, []).append(rank)
    for path in missing:
        info = session.catalog.nodes[path]
        assert info.layout is not None
        info.layout = dataclasses.replace(info.layout, complete=False)
        master.write_layout(path, info.layout)
    subfiles = sorted(
        {
            e.file
            for info in session.catalog.nodes.values()
            if info.layout is not None and info.layout.session == writing.number
            for e in info.layout.extents
            if e.file
        }
    )
    master.commit(subfiles, session.plan.fsync)
    if not missing:
        return None
    described = "; ".join(
        f"{path} (rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r[:8]))}"
        f"{', ...' if len(r) > 8 else ''})"
        for path, r in sorted(missing.items())
    )
    return (
        f"{session.path} was closed but some ranks never wrote the blocks they declared: "
        f"{described}; these datasets are marked incomplete and refuse to be read"
    )

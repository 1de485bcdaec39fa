"""Datasets whose layout is learned from the writes: no rank declared a block, as in h5py's
``mpio`` programs (every rank creates the dataset with its global shape; each writes whatever
hyperslabs it owns, when it likes).

Storage: every group's subfile holds a source of the whole dataset (one per *segment*: the
shape at creation, then what each resize adds), allocated and never filled, so that a rank
writes any box of it at its natural offset without asking anyone; only the bytes written take
room on disk (a sparse file). What a rank wrote becomes its *pieces* (layout/hyperslab.py: a
run of writes that continue each other is one piece, however many writes made it), each one
VDS mapping from the dataset onto its group's source and one checksum, hashed as the bytes
are written.

- engine/learned_state.py: what each rank knows (its pieces, rank 0's :class:`Book` of
  every rank's, what an independent read may use).
- :func:`sync` (collective: ``File.flush``, collective reads): every rank sends rank 0 its
  pieces; rank 0 refuses two ranks' writes of the same element (``OverlapError``) and sends
  every rank every rank's pieces, so that independent reads see them.

- :func:`close_report` and :func:`publish_on_root` (close and commit): each rank's pieces with
  their final checksums go to rank 0, which checks overlaps again, marks a dataset incomplete
  when a write of it failed or overlapped, and maps the virtual dataset piece by piece.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from ..errors import OverlapError
from ..layout.integrity import ALGORITHM
from ..layout.record import DatasetLayout
from ..mpi.collective import Question
from .learned_state import (
    Book,
    Reported,
    final_checksums,
    reported,
)
from .session import Session


def sync(
    session: Session,
    name: str = "flush",
    detail: str = "",
    error: BaseException | None = None,
    args: str | None = None,
) -> None:
    """Collective: the agreement round of call ``name`` carrying every rank's pieces of the
    datasets whose layout is learned (those changed since the last sync) to rank 0, which
    refuses overlaps (OverlapError, raised on every rank) and answers with their layouts,
    every rank's pieces in them: independent reads then see what every rank wrote so far."""
    writing = session.writing
    assert writing is not None
    rank = session.rank
    mine = {
        path: (reported(target, rank), target.failed)
        for path, target in writing.learned.items()
        if target.changed or target.failed
    }

    def decide(gathered: list[dict[str, tuple[list[Reported], str]]]) -> dict[str, DatasetLayout]:
        book = book_of(session)
        touched = sorted({path for part in gathered for path in part})
        for sender, part in enumerate(gathered):
            for path, (pieces, failed) in part.items():
                book.update(path, sender, pieces, failed)
        for path in touched:
            book.check(path)
        return {path: _whole_layout(session, path) for path in touched}

    question = Question(mine, decide, per_rank=False)
    layouts: dict[str, DatasetLayout] = session.enter(
        name, error, detail=detail, args=args, question=question
    )
    for path, layout in layouts.items():
        info = session.catalog.nodes[path]
        session.catalog.nodes[path] = dataclasses.replace(info, layout=layout, local_view=False)
        target = writing.learned.get(path)
        if target is not None:
            target.changed = False


def book_of(session: Session) -> Book:
    """Rank 0's :class:`Book` of this write session (made on first use)."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    if writing.root.book is None:
        writing.root.book = Book()
    book: Book = writing.root.book
    return book


def _whole_layout(session: Session, path: str) -> DatasetLayout:
    """Rank 0: the layout of ``path`` with every rank's pieces reported so far."""
    layout = session.catalog.nodes[path].layout
    assert layout is not None
    return book_of(session).layout(path, layout, kept(session, path))


def kept(session: Session, path: str) -> int:
    """How many of the layout's first extents are an earlier session's (a dataset grown)."""
    writing = session.writing
    target = None if writing is None else writing.learned.get(path)
    return 0 if target is None else target.kept


def learned_info(session: Session, path: str) -> Any:
    """This rank's :class:`LearnedTarget` of ``path`` in the open write session, or None."""
    session.take_announced(path)
    writing = session.writing
    return None if writing is None else writing.learned.get(path)


#: What a rank reports at close of each dataset whose layout is learned: its pieces with their
#: final checksums, why a write of it failed ("" if none did), and which of the checksums were
#: read back from the file rather than taken from the bytes passed (indices in the list).
Closing = dict[str, tuple[list[Reported], str, frozenset[int]]]


def close_report(session: Session) -> Closing:
    """At close, once this rank's writes are done: its pieces of every dataset whose layout is
    learned, each with the checksum of its final bytes."""
    writing = session.writing
    assert writing is not None
    rank = session.rank
    found = {}
    for path, target in writing.learned.items():
        fed = reported(target, rank)  # the checksums of the bytes passed ("" for the others)
        read_back = frozenset(k for k, (_, _, piece) in enumerate(fed) if not piece.checksum)
        if writing.checksums and not read_back:  # every piece fed whole: final already
            found[path] = (fed, target.failed, read_back)
            continue
        if writing.checksums:
            hashed = final_checksums(target, session.stats)
        else:
            hashed = {i: [""] * len(w.slabs()) for i, w in enumerate(target.pieces)}
        found[path] = (reported(target, rank, hashed), target.failed, read_back)
    return found


def publish_on_root(session: Session, gathered: list[Closing]) -> dict[str, tuple[str, str]]:
    """Rank 0, at close: every rank's pieces into the layouts of the datasets whose layout is
    learned, their virtual datasets mapped piece by piece and their records written. Returns
    the datasets that cannot be trusted, each with the error's class and message: some rank's
    write of it failed, or two ranks wrote the same elements (published incomplete)."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    master = writing.root.master
    book = book_of(session)
    problems: dict[str, tuple[str, str]] = {}
    paths = sorted(gathered[0] if gathered else ())
    virtual = any(
        path in master.pending or _layout(session, path).mapped_by_pieces for path in paths
    )
    with master.mapping() if virtual else contextlib.nullcontext():  # set up once for all
        for path in paths:
            _publish_one(session, book, path, gathered, problems)
    return problems


def _layout(session: Session, path: str) -> DatasetLayout:
    layout = session.catalog.nodes[path].layout
    assert layout is not None
    return layout


def _publish_one(
    session: Session,
    book: Book,
    path: str,
    gathered: list[Closing],
    problems: dict[str, tuple[str, str]],
) -> None:
    """:func:`publish_on_root` of one dataset: its problems noted in ``problems``."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    master = writing.root.master
    failed = []
    for rank, part in enumerate(gathered):
        pieces, why, read_back = part[path]
        book.update(path, rank, pieces, why, read_back)
        if why:
            failed.append(f"rank {rank}: {why}")
    if failed:
        problems[path] = (
            "IncompleteFileError",
            f"{path}: a write failed, so what it stored is unknown ({'; '.join(failed[:4])})",
        )
    try:
        book.check(path)
    except OverlapError as exc:
        problems.setdefault(path, ("OverlapError", str(exc)))
    info = session.catalog.nodes[path]
    base = info.layout
    assert base is not None
    layout = book.layout(
        path,
        base,
        kept(session, path),
        checksum=ALGORITHM if writing.checksums else "",
        complete=path not in problems,
    )
    info.layout = layout
    if layout.mapped_by_pieces or path in master.pending:
        master.map_pieces(path, info.shape, layout)
    master.write_layout(path, layout)

"""Consolidation at close: segments of datasets whose layout is learned, written in runs too
fine for readers, rewritten as one strip per subfile (layout/consolidation.py says which and
how they are shared out; docs/FORMAT.md, *Mappings by write pattern*, what readers get).

Between the close's two rounds (engine/commit.py): rank 0 :func:`choose`\\ s from every rank's
pieces; then every rank, collectively, for each segment chosen (:func:`consolidate`):

1. reads back what it wrote there and checks it against the checksums taken as it was
   written (so a byte changed since is never copied into a new checksum);
2. sends each element to the rank whose share holds it (one ``alltoall`` of the runs, one
   ``Alltoallv`` of the bytes);
3. once every rank has its whole share (an ``allreduce``), writes it into its group's source
   at its natural offsets, and hashes it.

A share's elements that the group's own ranks wrote are written again with the same bytes,
and the rest of a source is left as it was, so the pieces as written stay true whatever
happens: a rank whose reading, checking or writing fails reports it, and rank 0 then
publishes that segment as written.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from ..errors import ChecksumError, OverlapError
from ..io.posix import RawFile
from ..layout.blocks import Block
from ..layout.consolidation import (
    range_boxes,
    run_indices,
    shares,
    split_runs,
    worth_consolidating,
)
from ..layout.hyperslab import Slab
from ..layout.integrity import PieceSum, checksum
from ..layout.names import subfile_relpath
from ..layout.runs import box_runs, c_order_run, slab_runs
from . import learned
from .exchange import exchange_bytes
from .learned_state import Reported
from .session import Session

#: A segment chosen: its box (start, shape) and the ranks whose shares it is cut into, in
#: order (each group's ranks together, in the order of the layout's extents).
Segment = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
#: Rank 0's choice: the segments to consolidate, by dataset.
Chosen = dict[str, list[Segment]]
#: What a rank reports of each segment: its source (file and dataset, as recorded) and its
#: new pieces there, or None where it failed.
Rewritten = tuple[tuple[str, str], list[Reported]]
Done = dict[str, dict[Segment, Rewritten | None]]


def choose(session: Session, gathered: list[learned.Closing]) -> Chosen:
    """Rank 0: the segments worth consolidating (:func:`.consolidation.worth_consolidating`)
    among those of this session written completely, once, by ranks whose writes all
    succeeded, each rank's group holding a source of it."""
    chosen: Chosen = {}
    if not gathered:
        return chosen
    size = session.comm.size
    book = learned.book_of(session)
    writing = session.writing
    assert writing is not None
    grouping = writing.grouping
    group_of = {
        subfile_relpath(session.path, writing.number, writing.session_id, g): g
        for g in range(grouping.ngroups)
    }
    for path in sorted(gathered[0]):
        info = session.catalog.nodes[path]
        layout = info.layout
        if layout is None or info.dtype is None or not info.shape:
            continue
        segments = _segments(layout.extents[learned.kept(session, path) :], group_of)
        if not segments:
            continue  # held in the master, or not all in this session's subfiles: as written
        parts = [part[path] for part in gathered]
        if any(why for _, why, _ in parts):
            continue
        for rank, (pieces, why, read_back) in enumerate(parts):
            book.update(path, rank, pieces, why, read_back)
        try:
            book.check(path)
        except OverlapError:
            continue  # published as such
        found, copies = book.listed(path)
        if copies:
            continue
        by_source: dict[tuple[str, str], list[Slab]] = {}
        for _, file, dataset, piece in found:
            by_source.setdefault((file, dataset), []).append(piece.slab)
        whole = Block((0,) * len(info.shape), info.shape)
        for (start, shape), extents in segments.items():
            box = Block(start, shape)
            groups = [group_of[extent.file] for extent in extents]
            order = tuple(r for g in groups for r in grouping.members_of(g))
            sources = [by_source.get((e.file, e.dataset), []) for e in extents]
            if (
                whole.contains(box)
                and sorted(order) == list(range(size))
                and sum(slab.size for slabs in sources for slab in slabs) == box.size
                and worth_consolidating(sources, box, info.dtype.itemsize, size)
            ):
                chosen.setdefault(path, []).append((start, shape, order))
    return chosen


def _segments(
    extents: Any, group_of: dict[str, int]
) -> dict[tuple[tuple[int, ...], tuple[int, ...]], list[Any]]:
    """This session's extents of a dataset by the box they hold, where every extent is a
    whole, unchunked source in one of its subfiles; empty where any is not (then nothing of
    the dataset is rewritten)."""
    segments: dict[tuple[tuple[int, ...], tuple[int, ...]], list[Any]] = {}
    for extent in extents:
        if extent.offset < 0 or extent.chunks:
            return {}
        segments.setdefault((extent.start, extent.shape), []).append(extent)
    return {
        box: found
        for box, found in segments.items()
        if all(extent.file in group_of for extent in found)
    }


def consolidate(session: Session, chosen: Chosen, report: learned.Closing) -> Done:
    """Collective (the same ``chosen`` on every rank): every segment chosen rewritten, in
    order; ``report`` is this rank's pieces as sent in the close's first round."""
    done: Done = {}
    for path, segments in sorted(chosen.items()):
        for segment in segments:
            done.setdefault(path, {})[segment] = _segment(session, path, segment, report[path][0])
    return done


def replaced(report: learned.Closing, done: Done) -> learned.Closing:
    """This rank's first-round report with its pieces of every segment consolidated on every
    rank (``done``, as :func:`merged_done` kept it) replaced by its new ones."""
    result = dict(report)
    for path, segments in done.items():
        pieces, why, read_back = report[path]
        rewritten = [new for new in segments.values() if new is not None]
        gone = {source for source, _ in rewritten}
        kept = [k for k, (file, dataset, _) in enumerate(pieces) if (file, dataset) not in gone]
        renumber = {old: new for new, old in enumerate(kept)}
        result[path] = (
            [pieces[k] for k in kept] + [piece for _, new in rewritten for piece in new],
            why,
            frozenset(renumber[k] for k in read_back if k in renumber),
        )
    return result


def merged_done(all_done: list[Done]) -> list[Done]:
    """Rank 0: each rank's report of the segments every rank rewrote (one some rank failed is
    published as written)."""
    kept: list[Done] = [{} for _ in all_done]
    for path, segments in (all_done[0] if all_done else {}).items():
        for segment in segments:
            found = [done.get(path, {}).get(segment) for done in all_done]
            if all(new is not None for new in found):
                for mine, new in zip(kept, found):
                    mine.setdefault(path, {})[segment] = new
    return kept


def _segment(
    session: Session, path: str, segment: Segment, pieces: list[Reported]
) -> Rewritten | None:
    """One segment: this rank's bytes to the shares' ranks, its share written (collective)."""
    comm, rank = session.comm, session.rank
    start, shape, order = segment
    box = Block(start, shape)
    cut = shares(box, comm.size)
    bounds = [lo for lo, _ in cut] + [cut[-1][1]]
    lo, hi = cut[order.index(rank)]
    writing = session.writing
    assert writing is not None
    error: BaseException | None = None
    meta: list[tuple[np.ndarray, np.ndarray]] = []
    outgoing: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    by_rank: list[tuple[np.ndarray, np.ndarray]] = []
    try:
        target = writing.learned[path]
        k = next(i for i, t in enumerate(target.extents) if t.extent == box)
        stored, where = target.stored[k], target.extents[k]
        itemsize = target.dtype.itemsize
        element = np.dtype((np.void, itemsize))
        mine = [p for f, d, p in pieces if (f, d) == (stored.file, stored.dataset)]
        data, starts, lengths, positions = _read_checked(session, path, where, box, mine)
        share, begin, size, within = split_runs(starts, lengths, bounds)
        # each part's position in what was read: its run's position plus its offset in it
        run_of = np.searchsorted(starts, begin - within)
        taken = positions[run_of] + within
        items = data.view(element)
        by_share = np.argsort(share, kind="stable")
        share, begin, size, taken = (
            share[by_share],
            begin[by_share],
            size[by_share],
            taken[by_share],
        )
        edges = np.searchsorted(share, np.arange(len(cut) + 1))
        for s in range(len(cut)):
            a, b = edges[s], edges[s + 1]
            to = order[s]
            meta.append((begin[a:b] - cut[s][0], size[a:b]))
            if b > a:
                outgoing[to].extend(_gathered(items, taken[a:b], size[a:b]))
        by_rank = [meta[order.index(r)] for r in range(comm.size)]
        out = np.empty((hi - lo) * itemsize, dtype=np.uint8)
    except Exception as exc:  # noqa: BLE001 - reported to rank 0, which keeps the pieces
        error = exc
    # Every rank reaches every collective below: what fails locally is only reported.
    if not comm.allreduce(error is None, op=MPI.LAND):
        return None
    received = comm.alltoall(by_rank)
    incoming = [int(lengths_.sum()) * itemsize for _, lengths_ in received]
    data_in, cursor = exchange_bytes(comm, outgoing, incoming)
    try:
        out_items, in_items = out.view(element), data_in.view(element)
        placed = 0
        for source, (firsts, counts) in enumerate(received):
            n = int(counts.sum())
            at = cursor[source] // itemsize
            _place(out_items, firsts, counts, in_items[at : at + n])
            placed += n
        if placed != hi - lo:  # never expected: the book found every element written once
            return None
        # Written without waiting for the others: a share rewrites its group's elements with
        # the same bytes and fills the rest, so whatever the others do, the pieces as
        # written stay true (rank 0 keeps them unless every rank reports its share).
        return (stored.file, stored.dataset), _write_share(session, where, stored, box, lo, hi, out)
    except Exception:  # noqa: BLE001 - reported to rank 0, which keeps the pieces
        return None


#: Runs at least this many elements long on average are copied one by one (a slice each);
#: shorter ones through one array of every element's index (a copy per element otherwise).
LONG_RUN = 64


def _gathered(items: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """The runs (``starts``, ``lengths``) of ``items``, in order, as byte arrays to send."""
    if int(lengths.sum()) >= LONG_RUN * len(lengths):
        return [items[a : a + n].view(np.uint8) for a, n in zip(starts.tolist(), lengths.tolist())]
    return [items[run_indices(starts, lengths)].view(np.uint8)]


def _place(out: np.ndarray, starts: np.ndarray, lengths: np.ndarray, items: np.ndarray) -> None:
    """``items`` placed, in order, into the runs (``starts``, ``lengths``) of ``out``."""
    if int(lengths.sum()) >= LONG_RUN * len(lengths):
        at = 0
        for a, n in zip(starts.tolist(), lengths.tolist()):
            out[a : a + n] = items[at : at + n]
            at += n
        return
    out[run_indices(starts, lengths)] = items


def _read_checked(
    session: Session, path: str, where: Any, box: Block, mine: list[PieceSum]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """This rank's pieces of the segment read back from its group's source, each checked
    against its checksum: the bytes, and their runs as element ``starts`` in the segment,
    ``lengths`` and ``positions`` in the bytes (sorted by start)."""
    writing = session.writing
    assert writing is not None
    itemsize = writing.learned[path].dtype.itemsize
    offsets: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    ends: list[int] = []
    total = 0
    for piece in mine:
        slab = piece.slab
        run = c_order_run(box, slab.bounds) if slab.is_box else None
        found = None if run is not None else slab_runs(slab, box, box, itemsize)
        if run is not None:  # most pieces of fine writes: one run, found without numpy
            offsets.append(np.array([run[0] * itemsize], dtype=np.int64))
            sizes.append(np.array([run[1] * itemsize], dtype=np.int64))
        elif found is not None:
            first, _, nbytes = found
            offsets.append(first)
            sizes.append(np.full(len(first), nbytes, dtype=np.int64))
        else:
            runs = [r for block in slab.blocks() for r in box_runs(box, block, block, itemsize)]
            offsets.append(np.array([f for f, _, _ in runs], dtype=np.int64))
            sizes.append(np.array([n for _, _, n in runs], dtype=np.int64))
        total += int(sizes[-1].sum())
        ends.append(total)
    offset = np.concatenate(offsets) if offsets else np.empty(0, dtype=np.int64)
    length = np.concatenate(sizes) if sizes else np.empty(0, dtype=np.int64)
    position = np.cumsum(length) - length
    data = np.empty(total, dtype=np.uint8)
    view = data.data
    raw = RawFile(where.file, stats=session.stats)
    try:
        raw.read_pieces(
            [
                (where.offset + f, view[p : p + n])
                for f, p, n in zip(offset.tolist(), position.tolist(), length.tolist())
            ]
        )
    finally:
        raw.close()
    if writing.checksums:
        begin = 0
        for piece, end in zip(mine, ends):
            if piece.checksum and checksum(view[begin:end]) != piece.checksum:
                raise ChecksumError(
                    f"{path}: {piece.slab.describe()}, written by rank {piece.rank}, no longer "
                    f"holds what was written in {where.file}: it changed before the close"
                )
            begin = end
    order = np.argsort(offset, kind="stable")
    return data, offset[order] // itemsize, length[order] // itemsize, position[order] // itemsize


def _write_share(
    session: Session, where: Any, stored: Any, box: Block, lo: int, hi: int, out: np.ndarray
) -> list[Reported]:
    """This rank's share written at its natural offsets in its group's source: its pieces."""
    itemsize = out.nbytes // (hi - lo) if hi > lo else 1
    found: list[Reported] = []
    if hi == lo:
        return found
    raw = RawFile(where.file, writable=True, stats=session.stats)
    try:
        raw.pwrite(out.data, where.offset + lo * itemsize)
        if session.plan.fsync:
            raw.sync()
    finally:
        raw.close()
    writing = session.writing
    assert writing is not None
    at = 0
    for part in range_boxes(box, lo, hi):
        n = part.size * itemsize
        summed = checksum(out.data[at : at + n]) if writing.checksums else ""
        found.append(
            (stored.file, stored.dataset, PieceSum.of_slab(Slab.of_box(part), summed, session.rank))
        )
        at += n
    return found

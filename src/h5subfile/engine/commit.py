"""Ending a write session: the collective close that publishes the master (abandoning a
session, without communication, is :meth:`~.session.Session.abandon`).

What close publishes depends on whether the session *failed*: an error agreed by every rank
is on its way out of the ``with File(...)`` block (``failure``), or was raised earlier by a
write or a dataset creation of this session (``Writing.failure``), even if the caller caught
it.

- Not failed: every dataset is published; one some rank did not completely write is marked
  incomplete (readers refuse it) and close raises IncompleteFileError naming the dataset, the
  ranks and the regions they never wrote.
- Failed: datasets of this session not completely written are unlinked from the master, and
  so are groups created in this session that are empty at close (deepest first); everything
  written completely, and everything earlier sessions closed, is published as usual. With an
  error on its way out close raises nothing of its own (that error ends the block on every
  rank); called after a caught error it raises IncompleteFileError naming what it left out.

Writing behind (``async_writes``), close first waits for this rank's background writes. An
error they met (on any rank, now or earlier) fails the session: each rank reports what its
failed or dropped writes did not store (``io/writebehind.Lost``), rank 0 leaves out every
dataset of the session they touch, and close raises that error on every rank (its class, its
errno; the message says what was left out), unless another error is on its way out.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from ..errors import H5SubfileError, UnsupportedError, as_error, error_class
from ..io.ways import merged
from ..io.writebehind import Lost
from ..layout.catalog import STEPS_KEY, NodeInfo
from ..layout.regions import describe
from ..mpi.collective import Question
from ..mpi.failures import Failure, rebuild
from ..mpi.failures import describe as describe_error
from ..mpi.rounds import patient_for_root, working_for_all
from . import announced, consolidate, integrity, learned, structure
from .dims import changed_through_id
from .profiling import add_measured_phases, finish_profile, phase
from .session import Session, continue_writing

#: What one rank still had to write of one dataset at close: (path, its block, the first
#: boxes missing, how many boxes are missing). Small, whatever the number of writes.
Missing = tuple[str, str, str, int]
#: What a rank writing behind reports at close: the error its background writes met, if any,
#: what they did not store, and the ways its write calls went (``io/ways.py``); None for a
#: rank writing in the foreground without an error kept from a collective write
#: (``Writing.kept``, reported the same way).
Behind = tuple[Failure | None, list[Lost], dict[str, dict[str, int]]] | None
#: The ``extra`` key of a write-behind session's entry: the calls and bytes that went each way
#: (``io/ways.py``: ``direct``, ``copy``, ``zero_copy``), summed over the ranks.
WRITE_BEHIND_KEY = "write_behind"
#: A rank's message to rank 0 at close.
Closing = tuple[integrity.Report, list[Missing], Behind, learned.Closing]
#: Rank 0's answer to a close's round: the message and background errors of the close's
#: error, its class, and the segments to rewrite before the master is committed (then the
#: others are empty: a second round commits).
Answer = tuple[str, list[tuple[int, Failure]], str, "consolidate.Chosen"]


def close(session: Session, failure: BaseException | None = None) -> None:
    """Collective (in write modes, and in profiled sessions): finish the session and publish
    the master.

    ``failure``: the agreed error ending the ``with`` block, if any (see the module's
    docstring). Raises IncompleteFileError, after publishing, when a dataset was left
    incomplete, or the error background writes met (``async_writes``). On any failure of the
    close itself every rank abandons the session (the old file stays as it was) and raises the
    same error. A profiled session's profile is written once the master is published (before
    either error is raised), not after a failed close.
    """
    if session.closed:
        return
    published = _close(session, failure)
    write_profile(session)
    if published is not None:
        raise published


def commit(session: Session) -> None:
    """Collective: publish everything written so far and go on writing (``File.commit``).

    The session closes as :func:`close` closes it (the same checks, checksums and atomic
    commit; the top-level groups holding data become completed *steps* that followers yield,
    :mod:`h5subfile.following`), then the same open file continues in a new write session that
    appends (:func:`.session.continue_writing`); rank 0 keeps the file's claim in between.
    Datasets of the published sessions are read like any other, and are no longer written.
    When the close has an error to raise (IncompleteFileError: something declared was never
    written; or what background writes met), the file is closed, as after :func:`close`, and
    the error raised.
    """
    session.require_writable("commit")
    writing = session.writing
    assert writing is not None
    published = _close(session, None, keep_claim=True)
    if published is not None:  # the file is closed, as close() leaves it
        _release_claim(session)
        write_profile(session)
        raise published
    claim = writing.root.master.claim if writing.root is not None else None
    try:
        continue_writing(session, claim)
        announced.attach(session)
    except BaseException:
        write_profile(session)  # the file is closed (published as committed): as after close
        raise


def step_boundary(session: Session, paths: Iterable[str]) -> None:
    """Collective (the same ``paths`` on every rank): with the plan's ``commit_every_step``,
    commit before a call that starts a new top-level group, when the groups before it hold
    data not yet committed as steps (they are complete: the writer has moved on)."""
    if not session.plan.commit_every_step or session.writing is None or session.closed:
        return
    nodes = session.catalog.nodes
    tops = {"/" + p.strip("/").split("/", 1)[0] for p in paths if p.strip("/")}
    if any(top not in nodes for top in tops) and session.catalog.new_steps():
        commit(session)


#: The ``extra`` keys h5subfile writes itself, which :func:`record_extra` refuses.
OWN_EXTRA = frozenset({"plan_source", STEPS_KEY, WRITE_BEHIND_KEY})


def record_extra(session: Session, key: str, value: Any) -> None:
    """Collective (write modes; the same ``key`` and ``value`` on every rank): keep ``value``
    (anything JSON holds) under ``key`` in the ``extra`` facts of this write session's entry
    in the master, published with the session (docs/FORMAT.md, *Root attribute*)."""
    session.require_writable(f"recording {key!r} in the session's record")
    error, text = None, ""
    try:
        if not isinstance(key, str) or not key or key in OWN_EXTRA:
            raise ValueError(
                f"extra key {key!r}: expected a name of your own (not empty, not one of "
                f"{sorted(OWN_EXTRA)}, which h5subfile writes)"
            )
        text = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:  # not JSON, or not a key to use: agreed next
        error = as_error(exc)
    session.enter("record_extra", error, detail=str(key), args=f"{key!r} = {text}")
    writing = session.writing
    assert writing is not None
    if writing.root is not None:  # rank 0 writes the record at the commit
        writing.root.master.session.extra[key] = json.loads(text)


def _release_claim(session: Session) -> None:
    writing = session.writing
    if writing is not None and writing.root is not None:
        writing.root.master.claim.release()


@phase("commit")
def _close(
    session: Session, failure: BaseException | None, keep_claim: bool = False
) -> H5SubfileError | None:
    """The close; returns the error to raise once the master is published (the same on every
    rank), or None. ``keep_claim``: rank 0 keeps the claim (a commit, the file goes on)."""
    writing = session.writing
    if writing is None:
        session.reader.close()
        session.closed = True
        return None
    error = None
    session.take_announced()  # every dataset created without a round, in this rank's report
    structure.drop_held(session)  # popped objects: the program's handles end here
    creating = writing.announced.forget_failed() if writing.announced is not None else None
    misuse = changed_through_id(session)
    if misuse:
        writing.kept = writing.kept or UnsupportedError(misuse)
    behind = _behind(session, writing.pool.wait() or writing.kept)  # before anything closes
    if writing.image is not None:
        writing.image.close()
    subfile = writing.leader.subfile if writing.leader is not None else None
    try:
        if session.plan.fsync:
            # The leader's subfile is fsynced once, after HDF5 closes it (data and metadata).
            writing.pool.sync_all(later=() if subfile is None else (subfile.path,))
        writing.pool.close_all()
        session.release()
        if subfile is not None:
            subfile.close(fsync=session.plan.fsync)
    except Exception as exc:  # noqa: BLE001 - agreed below
        error = exc
    failed = writing.failure
    if failure is not None:
        failed = f"{type(failure).__name__}: {failure}"
    try:
        message, troubles, kind = _publish(session, error, behind, failed, keep_claim)
        if writing.announced is not None:
            writing.announced.finish()
    except BaseException:
        session.abandon()
        raise
    session.reader.close()
    session.closed = True
    if failure is not None:
        return None
    if troubles:
        return _background_error(troubles, message, session.comm.size)
    if message:
        incomplete = error_class(kind)(message)
        incomplete.collective = True  # the same on every rank
        return incomplete
    return creating  # a dataset rank 0 failed to create since the last call: left out


def _publish(
    session: Session,
    error: BaseException | None,
    behind: Behind,
    failed: str | None,
    keep_claim: bool,
) -> tuple[str, list[tuple[int, Failure]], str]:
    """The close's rounds: every rank's report to rank 0, which records it and commits the
    master; when it chooses segments to consolidate first, every rank rewrites them and a
    second round commits. Returns rank 0's answer (:func:`_record_and_commit`'s)."""
    report, not_made = integrity.close_report(session)
    pieces, not_hashed = _learned_report(session)
    first: list[list[Closing]] = []  # rank 0: what every rank sent in the first round

    def decide(gathered: list[Closing]) -> Answer:
        working_for_all(session.comm)  # every rank is here: none times out while this takes
        chosen = _to_consolidate(session, gathered, failed)
        if chosen:
            first.append(gathered)
            return "", [], "", chosen
        return _record_and_commit(session, gathered, failed, keep_claim) + ({},)

    def decide_again(done: list[consolidate.Done]) -> Answer:
        working_for_all(session.comm)
        gathered = _with_done(first[0], done)
        return _record_and_commit(session, gathered, failed, keep_claim) + ({},)

    # Each rank's checksums, subfile identity and missing regions go to rank 0 with the
    # agreement (in its round where the rounds are stars), and rank 0 records the checksums
    # and identities, then commits the master.
    question = Question(
        (report, missing_regions(session), behind, pieces),
        decide,
        per_rank=False,
        error=not_made or not_hashed,
    )
    name = "commit" if keep_claim else "close"
    with patient_for_root(session.comm):  # the commit's length is the file system's
        message, troubles, kind, chosen = session.enter(
            name, error, background=False, question=question
        )  # background errors: reported by the caller
        if chosen:  # the master is committed once the segments chosen are rewritten
            done = consolidate.consolidate(session, chosen, pieces)
            question = Question(done, decide_again, per_rank=False)
            message, troubles, kind, _ = session.enter(
                name, None, background=False, question=question
            )
    return message, troubles, kind


def _learned_report(session: Session) -> tuple[learned.Closing, BaseException | None]:
    """This rank's pieces of the datasets whose layout is learned (their final checksums), or
    the error that kept it from hashing them (agreed by the close's round)."""
    try:
        return learned.close_report(session), None
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
        return {}, exc


def _behind(session: Session, error: BaseException | None) -> Behind:
    """This rank's report of its background writes (None when it writes in the foreground)."""
    writing = session.writing
    assert writing is not None
    pool = writing.pool
    lost = pool.lost()
    if pool.queue is None and error is None and not lost:
        return None
    ways = pool.ways.summary() if pool.ways is not None else {}
    return (None if error is None else describe_error(error)), lost, ways


def _background_error(
    troubles: list[tuple[int, Failure]], message: str, size: int
) -> H5SubfileError:
    """The error the ranks' background writes met, the same on every rank; its message says
    what the close left out."""
    error = rebuild(troubles, size)
    if message:
        error.args = (message,)  # it names the error itself, and the datasets left out
    return error


def _to_consolidate(
    session: Session, gathered: list[Closing], failed: str | None
) -> consolidate.Chosen:
    """Rank 0: the segments to rewrite before the commit (engine/consolidate.py); none in a
    session that failed or whose background writes met an error."""
    if failed is not None or any(b and (b[0] or b[1]) for _, _, b, _ in gathered):
        return {}
    try:
        return consolidate.choose(session, [pieces for _, _, _, pieces in gathered])
    except Exception:  # noqa: BLE001 - never expected; the datasets are published as written
        return {}


def _with_done(gathered: list[Closing], done: list[consolidate.Done]) -> list[Closing]:
    """Rank 0: the first round's reports, with the segments every rank rewrote replaced."""
    kept = consolidate.merged_done(done)
    return [
        (report, missing, behind, consolidate.replaced(pieces, mine))
        for (report, missing, behind, pieces), mine in zip(gathered, kept)
    ]


def _record_and_commit(
    session: Session, gathered: list[Closing], failed: str | None, keep_claim: bool
) -> tuple[str, list[tuple[int, Failure]], str]:
    """Rank 0: the checksums and subfile identities into the master, then the commit.
    Returns the message of the close's error, the ranks' background errors and the class of
    the close's error (OverlapError when two ranks' writes overlapping are all it reports)."""
    integrity.record(session, [report for report, _, _, _ in gathered])
    problems = learned.publish_on_root(session, [pieces for _, _, _, pieces in gathered])
    troubles = [(rank, b[0]) for rank, (_, _, b, _) in enumerate(gathered) if b and b[0]]
    lost = {rank: b[1] for rank, (_, _, b, _) in enumerate(gathered) if b and b[1]}
    ways = merged([b[2] for _, _, b, _ in gathered if b])
    assert session.writing is not None and session.writing.root is not None
    if ways:  # how the write calls went, writing behind (shown by info)
        session.writing.root.master.session.extra[WRITE_BEHIND_KEY] = ways
    if troubles and failed is None:
        error = rebuild(troubles, session.comm.size)
        failed = f"{type(error).__name__}: {error}"
    if lost and failed is None:  # never expected: nothing is lost without an error
        failed = "background writes were not stored"
    gaps = [missing for _, missing, _, _ in gathered]
    lost_paths = lost_datasets(session, lost)
    message = commit_on_root(session, gaps, failed, lost_paths, keep_claim, problems)
    session.writing.root.reported = message  # said if the others gave up meanwhile
    overlaps_only = (
        bool(problems)
        and all(kind == "OverlapError" for kind, _ in problems.values())
        and not any(gaps)
        and not lost_paths
    )
    return message, troubles, "OverlapError" if overlaps_only else "IncompleteFileError"


def lost_datasets(session: Session, lost: dict[int, list[Lost]]) -> dict[str, list[int]]:
    """Rank 0: the datasets of this session whose bytes some rank's background writes did not
    store (failed or dropped), with those ranks."""
    writing = session.writing
    assert writing is not None
    found: dict[str, list[int]] = {}
    if not lost:
        return found
    for path, info in session.catalog.nodes.items():
        for rank, entries in sorted(lost.items()):
            if _touched(session, info, entries, writing.number):
                found.setdefault(path, []).append(rank)
    return found


def _touched(session: Session, info: NodeInfo, entries: list[Lost], number: int) -> bool:
    """Whether any of ``entries`` held bytes of the dataset ``info`` written by session
    ``number``."""
    layout = info.layout
    if layout is None or layout.session != number or info.dtype is None:
        return False
    for extent in layout.extents:
        file = session.reader.paths.resolve(extent.file)
        start = extent.offset
        end = start + extent.nbytes(info.dtype.itemsize)
        for entry in entries:
            if entry.file != file:
                continue
            if entry.dataset:
                if entry.dataset == extent.dataset:
                    return True
            elif not entry.ranges:
                return True  # anything the session wrote in the file
            elif not extent.chunks and any(a < end and start < b for a, b in entry.ranges):
                return True
    return False


def missing_regions(session: Session) -> list[Missing]:
    """What this rank has still to write, per dataset (sent to rank 0 at close)."""
    writing = session.writing
    assert writing is not None
    missing = []
    for path, remaining in sorted(writing.unwritten.items()):
        boxes = remaining.boxes
        target = writing.targets[path]
        assert target is not None
        missing.append((path, str(target.block), describe(boxes), len(boxes)))
    return missing


def describe_missing(by_path: dict[str, list[tuple[int, Missing]]]) -> str:
    """``/a (ranks 0, 1); /b (rank 2). Never written: /a: rank 0 [5:10] of its block
    [0:10], ...``: the datasets, then the regions (a few ranks per dataset)."""
    summary = "; ".join(
        f"{path} (rank{'s' if len(r) > 1 else ''} {', '.join(str(k) for k, _ in r[:8])}"
        f"{', ...' if len(r) > 8 else ''})"
        for path, r in sorted(by_path.items())
    )
    details = []
    for path, ranks in sorted(by_path.items()):
        parts = [
            f"rank {rank} {boxes} of its block {block}" for rank, (_, block, boxes, _) in ranks[:4]
        ]
        if len(ranks) > 4:
            parts.append(f"{len(ranks) - 4} more rank(s)")
        details.append(f"{path}: {', '.join(parts)}")
    return f"{summary}. Never written: {'; '.join(details)}"


def commit_on_root(
    session: Session,
    gathered: list[list[Missing]],
    failed: str | None,
    lost: dict[str, list[int]] | None = None,
    keep_claim: bool = False,
    problems: dict[str, tuple[str, str]] | None = None,
) -> str:
    """Rank 0: leave out or mark what was not completely written, then publish the master.
    ``lost``: datasets whose background writes were not stored, with the ranks (left out;
    ``failed`` is then set). ``problems``: datasets whose layout is learned that cannot be
    trusted (published incomplete already; left out when the session failed), with the
    error's class and message. Returns the message of the close's error, or "" when nothing
    was missing."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    master = writing.root.master
    lost = lost or {}
    problems = problems or {}
    by_path: dict[str, list[tuple[int, Missing]]] = {}
    for rank, entries in enumerate(gathered):
        for entry in entries:
            by_path.setdefault(entry[0], []).append((rank, entry))
    if failed is None:
        for path in by_path:
            info = session.catalog.nodes[path]
            assert info.layout is not None
            info.layout = dataclasses.replace(info.layout, complete=False)
            master.write_layout(path, info.layout)
    else:
        gone = {*by_path, *lost, *problems}
        for path in [*sorted(gone), *_empty_new_groups(session, gone)]:
            master.unlink(path)
            del session.catalog.nodes[path]
    steps = session.catalog.new_steps(writing.root.existing)
    master.commit(_session_subfiles(session), session.plan.fsync, steps, keep_claim)
    if not by_path and not lost and not problems:
        return ""
    untrusted = "; ".join(message for _, message in (problems[p] for p in sorted(problems)))
    if failed is None:
        found = []
        if by_path:
            found.append(
                f"some ranks never wrote the blocks they declared: {describe_missing(by_path)}"
            )
        if problems:
            found.append(untrusted)
        return (
            f"{session.path} was closed but {'. '.join(found)}. These datasets are marked "
            "incomplete and refuse to be read"
        )
    left_out = [describe_missing(by_path)] if by_path else []
    if problems:
        left_out.append(untrusted)
    if lost:
        left_out.append(f"not stored by background writes: {_describe_lost(lost)}")
    return (
        f"{session.path} was closed after an error in this session ({failed}); datasets it "
        f"did not completely write were not published: {'. '.join(left_out)}"
    )


def _session_subfiles(session: Session) -> list[str]:
    """The subfiles holding data of this session's datasets (relative paths, sorted)."""
    writing = session.writing
    assert writing is not None
    return sorted(
        {
            e.file
            for info in session.catalog.nodes.values()
            if info.layout is not None and info.layout.session == writing.number
            for e in info.layout.extents
            if e.file
        }
    )


def _describe_lost(lost: dict[str, list[int]]) -> str:
    """``/a (ranks 0, 1), /b (rank 1)``: a few ranks per dataset."""
    return ", ".join(
        f"{path} (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:8]))}"
        f"{', ...' if len(ranks) > 8 else ''})"
        for path, ranks in sorted(lost.items())
    )


def _empty_new_groups(session: Session, removed: set[str]) -> list[str]:
    """Groups created in this session that are empty once ``removed`` is gone, deepest first
    (a group holding only such groups is empty too)."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    existing = writing.root.existing
    nodes = session.catalog.nodes
    new_groups = [p for p, n in nodes.items() if n.kind == "group" and p not in existing]
    gone = set(removed)
    empty = []
    for path in sorted(new_groups, key=lambda p: p.count("/"), reverse=True):
        prefix = path.rstrip("/") + "/"
        members = [p for p in nodes if p.startswith(prefix) and p not in gone]
        if not members:
            empty.append(path)
            gone.add(path)
    return empty


def write_profile(session: Session) -> None:
    """Collective in a profiled session (even a read-only one, whose close is otherwise local):
    the ranks' profiles to rank 0, which writes them (engine/profiling.py). Nothing otherwise."""
    profile = session.stats.profile
    if profile is None or session.profile_folder is None:
        return
    session.stats.profile = None  # a second close finds nothing to write
    if session.writing is None:  # a read-only close is otherwise local: agree on it here
        session.enter("close")
    add_measured_phases(profile, session.stats, session.comm, session.profile_waited)
    ways = session.writing.pool.ways if session.writing is not None else None
    for way, (calls, seconds) in (ways.totals if ways is not None else {}).items():
        profile.phases.add(way, seconds, calls)  # how the write calls went, writing behind
    finish_profile(
        session.comm,
        profile,
        session.profile_folder,
        session.path,
        session.mode,
        session.profile_started,
    )

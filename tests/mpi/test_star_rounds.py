"""Star rounds and doorbells (mpi/star.py, mpi/doorbell.py): on a communicator whose ranks share
one node with more ranks than cores, rounds of small messages go through rank 0 (or the root)
and waiting ranks sleep on their doorbells; the values are those of MPI's collectives, the
choice is the same on every rank, and a rank without a bell turns it off for every rank."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from mpi4py import MPI
from ranks import DoneAtTest

from h5subfile.mpi import collective, rounds, star


@pytest.fixture
def crowded(comm: MPI.Comm, monkeypatch: pytest.MonkeyPatch) -> Iterator[MPI.Comm]:
    """A new communicator whose ranks say the node runs more ranks than cores."""
    monkeypatch.setenv("MPI_LOCALNRANKS", str(4 * rounds.cores()))
    fresh = comm.Dup()
    yield fresh
    fresh.Free()


def _every_round(comm: MPI.Comm, step: int) -> None:
    """Each kind of round once, its results checked against what they must be."""
    rank, size = comm.rank, comm.size
    sent = np.array([rank + step, -rank, 7 * rank + 1], dtype=np.int64)
    ranks = np.arange(size)
    for op, expected in [
        (MPI.MAX, [size - 1 + step, 0, 7 * (size - 1) + 1]),
        (MPI.MIN, [step, -(size - 1), 1]),
        (MPI.SUM, [ranks.sum() + size * step, -ranks.sum(), 7 * ranks.sum() + size]),
    ]:
        assert rounds.allreduce(comm, sent, op).tolist() == expected
    rows = rounds.allgather_array(comm, np.array([rank, step], dtype=np.int32))
    assert rows.tolist() == [[r, step] for r in range(size)]
    for root in {0, size - 1}:
        mine = np.full(40, rank * 3 + step, dtype=np.uint8)
        got = np.empty((size, 40), dtype=np.uint8) if rank == root else None
        rounds.gather_rows(comm, mine, got, root)
        if got is not None:
            assert got.tolist() == [[r * 3 + step] * 40 for r in range(size)]
        parts = np.arange(size * 8, dtype=np.int64).reshape(size, 8) + step
        answer = np.empty(8, dtype=np.int64)
        rounds.scatter_rows(comm, parts if rank == root else None, answer, root)
        assert answer.tolist() == (np.arange(8) + 8 * rank + step).tolist()
        for same in (False, True):  # a question to the root, and its answer (one or each)
            asked = np.full(5, rank + step, dtype=np.int64)
            told = np.empty(3, dtype=np.int64)

            def answer(rows: np.ndarray, same: bool = same) -> np.ndarray:
                assert rows[:, 0].tolist() == [r + step for r in range(size)]
                totals = rows.sum(axis=1)
                return totals[:1, None].repeat(3, 1) if same else totals[:, None].repeat(3, 1)

            rounds.ask_rows(comm, asked, told, answer if rank == root else None, same, root)
            assert told.tolist() == [5 * ((0 if same else rank) + step)] * 3
        buffer = np.arange(100, dtype=np.float64) * step if rank == root else np.zeros(100)
        rounds.broadcast(comm, buffer, root)
        assert buffer.tolist() == (np.arange(100) * step).tolist()
    rounds.barrier(comm)
    # rank 0's protocols on top of them, parts larger than a slot included
    assert collective.allgather(comm, ("r", rank)) == [("r", r) for r in range(size)]
    big = bytes(range(256)) * 40 * (rank + 1)  # more than a 4 KiB slot: a second round
    assert collective.gather(comm, big) == (
        [bytes(range(256)) * 40 * (r + 1) for r in range(size)] if rank == 0 else None
    )
    assert collective.bcast(comm, {"step": step} if rank == 0 else None) == {"step": step}


def test_star_rounds_give_what_mpis_collectives_give(crowded: MPI.Comm) -> None:
    rounds.barrier(crowded)  # the first round: MPI's, and it settles the choice
    channel = rounds.channel_of(crowded)
    assert channel.star == (crowded.size > 1)
    for step in range(3):
        _every_round(crowded, step)


def _stays_mpis(comm: MPI.Comm, step: int) -> None:
    """On a new communicator: its rounds are MPI's on every rank, with the right values."""
    fresh = comm.Dup()
    try:
        rounds.barrier(fresh)
        assert not rounds.channel_of(fresh).star
        _every_round(fresh, step)
    finally:
        fresh.Free()


def test_rounds_stay_mpis_when_the_node_has_a_core_per_rank(
    comm: MPI.Comm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MPI_LOCALNRANKS", "1")
    _stays_mpis(comm, 1)


def test_one_rank_without_doorbells_turns_star_rounds_off_on_every_rank(
    comm: MPI.Comm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """H5SUBFILE_DOORBELLS=0 on rank 0 only: its address says so, every rank decides alike."""
    monkeypatch.setenv("MPI_LOCALNRANKS", str(4 * rounds.cores()))
    if comm.rank == 0:
        monkeypatch.setenv(rounds.DOORBELLS_VARIABLE, "0")
    _stays_mpis(comm, 2)


def test_star_rounds_survive_parts_of_the_next_round_arriving_first(crowded: MPI.Comm) -> None:
    """The pattern of a write: a gather, then the others go straight on into an allreduce
    while rank 0 works, so rank 0's queue holds next-round parts among this round's; every
    round still completes with the right values (a lost wake-up would only be slow: the
    harness's timeout ends a hang)."""
    rounds.barrier(crowded)
    size, rank = crowded.size, crowded.rank
    for step in range(20):
        got = np.empty((size, 64), dtype=np.uint8) if rank == 0 else None
        rounds.gather_rows(crowded, np.full(64, rank + step, dtype=np.uint8), got, 0)
        if rank == 0:
            assert got is not None and got[:, 0].tolist() == [r + step for r in range(size)]
            time.sleep(0.002 * (step % 3))
        elif step % 2:
            time.sleep(0.001 * rank)
        total = rounds.allreduce(crowded, np.array([rank, step]), MPI.SUM)
        assert total.tolist() == [size * (size - 1) // 2, size * step]


def test_star_reductions_are_those_of_mpi() -> None:
    """Pure: the operations a star round computes on its centre."""
    rows = np.array([[1, -5], [3, 2], [-2, 9]])
    assert star.reduction(MPI.MAX).reduce(rows, axis=0).tolist() == [3, 9]
    assert star.reduction(MPI.MIN).reduce(rows, axis=0).tolist() == [-2, -5]
    assert star.reduction(MPI.SUM).reduce(rows, axis=0).tolist() == [2, 6]
    with pytest.raises(ValueError, match="no star reduction"):
        star.reduction(MPI.PROD)


def _recorded_waits(
    channel: rounds._Channel, monkeypatch: pytest.MonkeyPatch, rings: dict[int, int]
) -> list[float]:
    """The pauses a rung round asks its bell for, recorded instead of slept; the n-th wait
    hears ``rings[n]`` rings."""
    monkeypatch.setattr(rounds, "_YIELD_FOR", 0.0)  # sleep at once, as when oversubscribed
    monkeypatch.setattr(rounds.time, "sleep", lambda _: pytest.fail("slept on the clock"))
    waits: list[float] = []

    def wait(seconds: float) -> int:
        waits.append(seconds)
        return rings.get(len(waits), 0)

    assert channel.bell is not None
    monkeypatch.setattr(channel.bell, "wait", wait)
    return waits


def test_a_rung_round_sleeps_on_its_bell_and_tests_again_for_each_ring(
    crowded: MPI.Comm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local (the waits recorded, not slept): a star round whose rank still has a message
    queued pauses from RUNG_FIRST_SLEEP, doubling up to LONGEST_SLEEP, on the bell, never on
    the clock; after a wait that heard rings the rank tests once more for each, twice over,
    then pauses from AFTER_RING."""
    rounds.barrier(crowded)
    channel = rounds.channel_of(crowded)
    if channel.bell is None:
        pytest.skip("no doorbell here")
    waits = _recorded_waits(channel, monkeypatch, {12: 3})  # the 12th wait hears 3 rings
    request = DoneAtTest(12 + 2 * 3 + 4)
    request.sending = True
    rounds.polled(crowded, lambda: request, None, rung=True)
    assert waits[:7] == [1e-3, 2e-3, 4e-3, 8e-3, 16e-3, 32e-3, rounds.LONGEST_SLEEP]
    assert waits[7:11] == [rounds.LONGEST_SLEEP] * 4
    assert waits[12:14] == [rounds.AFTER_RING, 2 * rounds.AFTER_RING]
    assert request.left == 0
    assert rounds.RUNG_FIRST_SLEEP == 1e-3


def test_a_rung_round_with_nothing_left_to_send_sleeps_until_it_is_rung(
    crowded: MPI.Comm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local: a rank whose messages have all gone waits only for a ring, so its fallback
    pause is LONGEST_SLEEP from the first; after a ring it pauses from AFTER_RING (the
    message rung for may not have been moved yet). A real star round's rank has nothing left
    to send once the round is over."""
    rounds.barrier(crowded)
    channel = rounds.channel_of(crowded)
    if channel.bell is None:
        pytest.skip("no doorbell here")
    waits = _recorded_waits(channel, monkeypatch, {4: 1})
    request = DoneAtTest(4 + 2 + 3)
    request.sending = False
    rounds.polled(crowded, lambda: request, None, rung=True)
    assert waits[:4] == [rounds.LONGEST_SLEEP] * 4
    assert waits[4:6] == [rounds.AFTER_RING, 2 * rounds.AFTER_RING]
    assert request.left == 0
    monkeypatch.undo()
    assert channel.status is not None
    nothing = np.empty(0, dtype=np.uint8)
    made: list[star.Star] = []

    def start() -> star.Star:
        rows = [nothing] * crowded.size if crowded.rank == 0 else None
        made.append(
            star.Star(
                channel.status,
                0,
                channel.ring,
                up=nothing,
                rows=rows,
                answers=lambda _: nothing,
                answer=nothing,
            )
        )
        return made[-1]

    rounds.polled(crowded, start, nothing, rung=True)
    assert not made[0].sending


def test_the_centre_answering_a_question_is_work_not_waiting(crowded: MPI.Comm) -> None:
    """Rank 0 answers within the star round (rounds.ask_rows) while the others sleep: the
    others count that time as waiting, rank 0 does not (rounds.waited feeds the kernels'
    waiting time and the profile's)."""
    rounds.barrier(crowded)
    if crowded.size < 2:
        pytest.skip("a star needs two ranks")
    before, _ = rounds.waited(crowded)

    def answer(rows: np.ndarray) -> np.ndarray:
        time.sleep(0.3)
        return rows * 2

    got = np.empty(1, dtype=np.int64)
    mine = np.array([crowded.rank + 1], dtype=np.int64)
    rounds.ask_rows(crowded, mine, got, answer if crowded.rank == 0 else None)
    assert got.tolist() == [2 * (crowded.rank + 1)]
    spent = rounds.waited(crowded)[0] - before
    assert spent < 0.15 if crowded.rank == 0 else spent >= 0.25, spent

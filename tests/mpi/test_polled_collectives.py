"""The polled object collectives of rank 0's protocols (mpi/collective.py): every rank gets
exactly what was sent, whatever the sizes (empty, small, several MiB, different per rank) and
the root; a value or an answer that cannot be sent is the same error on every rank, never a
hang (``H5SUBFILE_COLLECTIVE_TIMEOUT`` is short here, so a regression shows as a timeout); and
how many rounds they take (a question to rank 0 and its answer in one star round, or one
round each way, when the bytes fit a slot; one agreement per ``write_datasets``)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import plain_h5py, raises_on_every_rank, same_on_every_rank

from h5subfile.errors import (
    CollectiveMismatchError,
    MissingFileError,
    ObjectExistsError,
    PlanError,
    RankFailedError,
)
from h5subfile.mpi import collective, rounds, slots


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(collective.TIMEOUT_VARIABLE, "20")
    yield


def _value(rank: int, size: int) -> dict[str, object]:
    """A different value per rank: rank 1's is 3 MiB of bytes, the others' small or empty."""
    payload = np.arange(size, dtype="i8") * (rank + 1)
    return {"rank": rank, "payload": payload, "text": "é" * rank, "none": None}


def _equal(a: dict[str, object], b: dict[str, object]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a
    )


def _sizes(comm: MPI.Comm) -> list[int]:
    return [(3 << 20) // 8 if r == 1 else r * 5 for r in range(comm.size)]


@pytest.mark.parametrize("root", [0, -1])
def test_gather_and_bcast_move_every_value_exactly(comm: MPI.Comm, root: int) -> None:
    root %= comm.size
    sizes = _sizes(comm)
    gathered = collective.gather(comm, _value(comm.rank, sizes[comm.rank]), root=root)
    if comm.rank == root:
        assert gathered is not None and len(gathered) == comm.size
        assert all(_equal(g, _value(r, sizes[r])) for r, g in enumerate(gathered))
    else:
        assert gathered is None
    sent = _value(root, sizes[root]) if comm.rank == root else None
    got = collective.bcast(comm, sent, root=root)
    assert _equal(got, _value(root, sizes[root]))


def test_allgather_moves_every_value_exactly(comm: MPI.Comm) -> None:
    sizes = _sizes(comm)
    got = collective.allgather(comm, _value(comm.rank, sizes[comm.rank]))
    assert len(got) == comm.size
    assert all(_equal(g, _value(r, sizes[r])) for r, g in enumerate(got))


def test_root_decides_scatters_one_answer_per_rank(comm: MPI.Comm) -> None:
    def decide(gathered: list[int]) -> list[np.ndarray]:
        assert gathered == [10 * r for r in range(comm.size)]
        return [np.full(r * 1000, r, dtype="i4") for r in range(comm.size)]

    got = collective.root_decides(comm, 10 * comm.rank, None, decide)
    assert np.array_equal(got, np.full(comm.rank * 1000, comm.rank, dtype="i4"))


def test_a_value_that_cannot_be_sent_is_the_same_error_on_every_rank(comm: MPI.Comm) -> None:
    local = (lambda: None) if comm.rank == 1 else comm.rank  # a lambda cannot be pickled
    with raises_on_every_rank(comm, RankFailedError, "[rank 1]", "pickle"):
        collective.root_decides(comm, local, None, lambda gathered: gathered)


def test_an_answer_that_cannot_be_sent_is_the_same_error_on_every_rank(comm: MPI.Comm) -> None:
    with raises_on_every_rank(comm, RankFailedError, "pickle"):
        collective.root_decides(comm, None, None, lambda _: lambda: None, per_rank=False)
    with raises_on_every_rank(comm, RankFailedError, "pickle"):
        collective.root_only(comm, lambda: lambda: None)


def _rounds(comm: MPI.Comm) -> int:
    return collective.channel_of(comm).rounds


def _asking(comm: MPI.Comm) -> int:
    """The rounds of a question to rank 0 and its answer (rounds.ask_rows): one where the
    rounds are stars (rank 0 answers within the round), a gather and a scatter otherwise."""
    return 1 if collective.channel_of(comm).star else 2


@pytest.mark.parametrize("per_rank", [True, False])
def test_messages_that_fit_a_slot_take_one_round_each_way(comm: MPI.Comm, per_rank: bool) -> None:
    total = sum(range(comm.size))
    before = _rounds(comm)
    got = collective.root_decides(
        comm, comm.rank, None, lambda g: [sum(g)] * comm.size if per_rank else sum(g), per_rank
    )
    assert got == total and _rounds(comm) - before == _asking(comm)
    before = _rounds(comm)
    assert collective.allgather(comm, comm.rank) == list(range(comm.size))
    assert collective.bcast(comm, "x" * 100 if comm.rank == 0 else None) == "x" * 100
    assert _rounds(comm) - before == 2


def test_messages_larger_than_a_slot_arrive_whole_in_more_rounds(comm: MPI.Comm) -> None:
    """The last rank's value and its answer overflow their slots: rank 0 asks every rank to
    send again (its answer says so), one round brings the exact bytes, then rank 0 answers in
    two rounds; small values stay on one round each."""
    if comm.size < 2:
        pytest.skip("the last rank must not be rank 0, whose own bytes never travel")
    width = slots.slot_bytes(comm.size)
    big = np.arange(width, dtype="i8")  # 8 bytes per element: 8 slots' worth

    def decide(gathered: list[object]) -> list[object]:
        assert np.array_equal(gathered[-1], big)  # type: ignore[arg-type]
        assert gathered[:-1] == list(range(comm.size - 1))
        return [big * 2] + list(range(1, comm.size - 1)) + [big * 3]

    last = comm.rank == comm.size - 1
    local = big if last else comm.rank
    before = _rounds(comm)
    got = collective.root_decides(comm, local, None, decide)
    if comm.rank == 0:
        assert np.array_equal(got, big * 2)
    elif last:
        assert np.array_equal(got, big * 3)
    else:
        assert got == comm.rank
    assert _rounds(comm) - before == _asking(comm) + 3
    before = _rounds(comm)
    gathered = collective.allgather(comm, local)
    assert np.array_equal(gathered[-1], big) and gathered[:-1] == list(range(comm.size - 1))
    assert np.array_equal(collective.bcast(comm, big if comm.rank == 0 else None), big)
    assert _rounds(comm) - before == 4


def test_rank_0s_own_large_value_and_answer_cost_no_second_round(comm: MPI.Comm) -> None:
    """Rank 0's own value and answer never travel: however large (its view of new datasets
    holds every extent), a root_decides whose other messages fit their slots takes the rounds
    of one question and answer, and rank 0 gets its own bytes back exactly."""
    width = slots.slot_bytes(comm.size)
    big = np.arange(width, dtype="i8")
    seen: list[object] = []

    def decide(gathered: list[object]) -> list[object]:
        seen.extend(gathered)
        return [big * 2] + list(range(1, comm.size))

    before = _rounds(comm)
    got = collective.root_decides(comm, big if comm.rank == 0 else comm.rank, None, decide)
    assert _rounds(comm) - before == _asking(comm)
    if comm.rank == 0:
        assert np.array_equal(got, big * 2)
        assert np.array_equal(seen[0], big) and seen[1:] == list(range(1, comm.size))
    else:
        assert got == comm.rank


def test_the_slot_shrinks_with_the_ranks_so_rank_0_holds_at_most_4_mib() -> None:
    assert slots.slot_bytes(1) == slots.slot_bytes(1024) == 4096
    assert slots.slot_bytes(2048) == 2048
    assert slots.slot_bytes(10**4) == 416
    assert slots.slot_bytes(10**6) == 64
    assert all(slots.slot_bytes(p) * p <= max(4 << 20, 64 * p) for p in (3, 777, 5000))


def test_write_datasets_is_one_agreement_round_whatever_the_datasets(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """Creating and writing many datasets is one call agreement (the creation's): the write
    that follows in the same call takes none of its own; the data arrive bit for bit."""
    import h5subfile as hs

    path = shared_tmp / "rounds.h5"
    arrays = {n: {f"d{i}": np.arange(3 + comm.rank) + 100 * i for i in range(n)} for n in (1, 16)}
    with hs.File(path, "w", comm=comm) as f:
        for n, data in arrays.items():
            group = f.create_group(f"g{n}")
            before = f._session.calls
            group.write_datasets(data)
            assert f._session.calls - before == 1
        before = f._session.calls  # a missing group is made in the same call
        f.write_datasets({"new/deeper/x": np.arange(2) + comm.rank})
        assert f._session.calls - before == 1
    with hs.File(path, "r", comm=comm) as f:
        assert isinstance(f["new/deeper"], hs.Group)
        assert np.array_equal(
            f["new/deeper/x"][...],
            np.repeat(np.arange(2)[None], comm.size, 0).ravel()
            + np.repeat(np.arange(comm.size), 2),
        )
        for n, data in arrays.items():
            for name in data:
                whole = np.concatenate(
                    [np.arange(3 + r) + 100 * int(name[1:]) for r in range(comm.size)]
                )
                assert np.array_equal(f[f"g{n}/{name}"][...], whole)


def test_root_first_sends_roots_result_in_one_round_after_the_agreement(comm: MPI.Comm) -> None:
    """Rank 0 works before the agreement round, which carries the size of its answer: two
    rounds in all, however large the answer (a root_only of it takes two of its own)."""
    big = np.arange(slots.slot_bytes(comm.size), dtype="i8")  # 8 slots' worth
    ran: list[int] = []

    def work() -> np.ndarray:
        ran.append(comm.rank)
        return big * 3

    before = _rounds(comm)
    got = collective.root_first(comm, work, None, collective.Call("first", 0))
    assert np.array_equal(got, big * 3) and _rounds(comm) - before == 2
    assert ran == ([0] if comm.rank == 0 else [])


def test_root_first_raises_roots_error_or_the_rounds_on_every_rank(comm: MPI.Comm) -> None:
    def fails() -> int:
        raise MissingFileError("nothing here")

    with raises_on_every_rank(comm, MissingFileError, "nothing here"):
        collective.root_first(comm, fails, None, collective.Call("first", 1))
    # An error on another rank: rank 0's work is thrown away and the error raised everywhere.
    mine = PlanError("bad argument") if comm.rank == comm.size - 1 else None
    with raises_on_every_rank(comm, PlanError, "bad argument"):
        collective.root_first(comm, lambda: 1, mine, collective.Call("first", 2))
    # Different arguments: a mismatch, whatever rank 0 found.
    call = collective.Call("first", 3, args=f"arg{comm.rank % 2}")
    with raises_on_every_rank(comm, CollectiveMismatchError, "different"):
        collective.root_first(comm, lambda: 1, None, call)


def test_creating_groups_and_setting_attributes_take_no_round_opening_two(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """Metadata calls make no round: each rank checks and applies them on its own (an error is
    the same on every rank, at the call), and the next collective call compares them. Rank 0
    reads a catalogue before the agreement round of an opening, and sends it in one round
    after it, whatever its size."""
    import h5subfile as hs

    path = shared_tmp / "two-rounds.h5"
    with hs.File(path, "w", comm=comm, subfiles="rank") as f:
        before = _rounds(comm)
        f.create_group("g")
        f.attrs["a"] = np.arange(5)
        del f.attrs["a"]
        f.attrs.update({"b": 1, "c": "text"}, d=np.arange(3))
        with raises_on_every_rank(comm, ObjectExistsError, "/g already exists"):
            f.create_group("g")
        assert _rounds(comm) - before == 0
        f["g"].write_datasets({f"d{i}": np.arange(3000) for i in range(30)})  # a large catalogue
    before = _rounds(comm)
    with hs.File(path, "r", comm=comm) as f:
        assert _rounds(comm) - before == 2
        assert np.array_equal(f["g/d29"][:3000], np.arange(3000))
        assert sorted(f.attrs) == ["b", "c", "d"] and f.attrs["c"] == "text"


def test_attributes_read_back_by_plain_h5py_and_different_values_keep_rank_0s(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """``attrs.update`` sets many attributes; every rank holds the values rank 0 stored; a
    value HDF5 cannot store is the same error on every rank, and the attributes set before it
    stay, the same on every rank. Different values on different ranks (a time stamp) keep
    rank 0's on every rank and in the file, with one warning naming them, on rank 0, at the
    next collective call; different names or types are a mismatch there."""
    import h5subfile as hs
    from h5subfile.errors import RankTypeError

    path = shared_tmp / "attrs-update.h5"
    with hs.File(path, "w", comm=comm) as f:
        f.attrs.update([("n", 7), ("v", np.arange(4.0))], s="text")
        assert f.attrs["n"] == 7 and f.attrs["s"] == "text"
        assert np.array_equal(f.attrs["v"], np.arange(4.0))
        with raises_on_every_rank(
            comm, RankTypeError, "no native HDF5 equivalent", "setting attribute 'bad' of /"
        ):
            f.attrs.update({"kept": 1, "bad": {"no": "dicts"}, "never": 2})
        assert same_on_every_rank(comm, sorted(f.attrs)) == ["kept", "n", "s", "v"]
        f.attrs.update({"m": comm.rank, "when": f"rank {comm.rank} at {time.time()}"})
        assert f.attrs["m"] == comm.rank  # this rank's own, until the next collective call
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f.flush()
        said = [str(w.message) for w in caught if issubclass(w.category, hs.DifferentValuesWarning)]
        if comm.rank == 0 and comm.size > 1:
            assert len(said) == 1 and "/.attrs['m'], /.attrs['when']" in said[0], said
        else:
            assert not said, said
        assert f.attrs["m"] == 0 and same_on_every_rank(comm, f.attrs["when"])
        stamp = f.attrs["when"]
    code = (
        "import sys, h5py; a = h5py.File(sys.argv[1])['/'].attrs; "
        "print(sorted(a), int(a['n']), a['s'], a['v'].tolist(), int(a['kept']), int(a['m']), "
        "a['when'])"
    )
    out = plain_h5py(comm, code, str(path))
    # plus the record h5subfile keeps in the master (docs/FORMAT.md)
    want = (
        f"['h5subfile', 'kept', 'm', 'n', 's', 'v', 'when'] 7 text [0.0, 1.0, 2.0, 3.0] 1 0 {stamp}"
    )
    assert out == want, out


def test_barrier_returns_on_every_rank_after_the_last_one_arrives(comm: MPI.Comm) -> None:
    """The ranks share the node's monotonic clock: no rank leaves before the last arrival.
    One polled round (so it sleeps while waiting, and times out instead of hanging)."""
    time.sleep(0.05 * comm.rank)
    arrived = time.monotonic()
    before = collective.waited(comm)[1]
    collective.barrier(comm)
    left = time.monotonic()
    arrivals = comm.allgather(arrived)
    assert left >= max(arrivals)
    if comm.rank == 0 and comm.size > 1:  # rank 0 arrives first: it waited in one round
        assert collective.waited(comm)[1] == before + 1


class _NoBlockingBarrier(MPI.Intracomm):
    """A communicator whose blocking barrier and reductions fail the test: with more ranks
    than cores, MPI's blocking collectives spin, so ranks leave them far apart (the kernels'
    timed steps would count the spread), and ranks that finished first spin in them while the
    last ones still do timed work."""

    def Barrier(self) -> None:  # noqa: N802 - mpi4py's name
        raise AssertionError("a kernel used MPI's blocking barrier")

    def _blocking(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("a kernel used one of MPI's blocking collectives")

    allreduce = Allreduce = allgather = Allgather = _blocking


def test_the_kernels_and_repack_wait_for_other_ranks_in_polled_rounds(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    import h5py

    import h5subfile as hs
    from h5subfile.kernels.bdcats import Pattern, run_bdcats
    from h5subfile.kernels.vpic import run_vpic
    from h5subfile.repack import repack

    strict = _NoBlockingBarrier(comm.Dup())
    try:
        path = str(shared_tmp / "kernel.h5")
        written = run_vpic(path, 256, 2, comm=strict, subfiles="rank")
        read = run_bdcats(path, Pattern(), comm=strict, verify=True)
        assert written.total_bytes == read.total_bytes > 0
        plain = str(shared_tmp / "plain.h5")
        repack(path, plain, comm=strict, subfiles=1)
        if comm.rank == 0:
            with h5py.File(plain, "r") as f, hs.File(path, "r", comm=MPI.COMM_SELF) as g:
                assert np.array_equal(f["Timestep_1/px"][...], g["Timestep_1/px"][...])
    finally:
        strict.Free()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 64, 100, 1000])
def test_the_broadcast_tree_reaches_every_rank_once_within_log2_steps(size: int) -> None:
    """Pure: whatever the root, every other rank has one parent, which lists it as a child;
    walking up from any rank reaches the root in at most ceil(log2(size)) steps."""
    depth_limit = max(size - 1, 0).bit_length()
    for root in {0, size - 1, size // 2, 1 % size}:
        links = [rounds.tree_links(size, rank, root) for rank in range(size)]
        assert links[root][0] is None
        for rank, (_, children) in enumerate(links):
            assert all(links[child][0] == rank for child in children)
            assert len(set(children)) == len(children)
            steps, at = 0, rank
            while at != root:
                parent_of = links[at][0]
                assert parent_of is not None
                at, steps = parent_of, steps + 1
            assert steps <= depth_limit
        assert sum(len(children) for _, children in links) == size - 1


@pytest.mark.parametrize("root", [0, -1, 1])
def test_large_broadcasts_go_down_the_tree_and_arrive_whole(
    comm: MPI.Comm, root: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above TREE_BYTES (on a communicator that has had its first round) a broadcast is one
    round down the binomial tree, in bcast, root_only and root_first alike; the bytes arrive
    exactly, for any root and any size. Smaller ones stay MPI's."""
    root %= comm.size
    trees: list[int] = []

    class Counted(rounds.TreeBroadcast):
        def __init__(self, *args: object, **kwargs: object) -> None:
            trees.append(comm.rank)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rounds, "TreeBroadcast", Counted)
    collective.barrier(comm)  # the communicator's first round, if it is one
    for count in [rounds.TREE_BYTES // 8 + 1, 100_003, (3 << 20) // 8]:
        value = np.arange(count, dtype="i8") * (root + 7)
        got = collective.bcast(comm, value if comm.rank == root else None, root=root)
        assert np.array_equal(got, value)
    assert len(trees) == 3
    assert np.array_equal(collective.root_only(comm, lambda: value * 2), value * 2)
    call = collective.Call("tree", 0)
    assert np.array_equal(collective.root_first(comm, lambda: value * 3, None, call), value * 3)
    assert len(trees) == 5
    assert collective.bcast(comm, "small" if comm.rank == root else None, root=root) == "small"
    assert len(trees) == 5


def test_tree_broadcasts_never_take_the_applications_messages(comm: MPI.Comm) -> None:
    """The tree's messages travel on the communicator's private duplicate: a receive the
    application has posted for any source and any tag on the same communicator is left for
    the application's own message."""
    collective.barrier(comm)
    wanted = np.zeros(4, dtype="i8")
    pending = comm.Irecv(wanted, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    big = np.arange((1 << 20) // 8, dtype="i8")
    got = collective.bcast(comm, big if comm.rank == 0 else None)
    assert np.array_equal(got, big)
    assert not pending.Test()
    collective.barrier(comm)  # no rank sends its own message before every rank has looked
    comm.Send(np.full(4, comm.rank, dtype="i8"), dest=(comm.rank + 1) % comm.size, tag=5)
    pending.Wait()
    assert np.array_equal(wanted, np.full(4, (comm.rank - 1) % comm.size))

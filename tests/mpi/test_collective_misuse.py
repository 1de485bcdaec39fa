"""Collective misuse ends in an error on every rank, never a hang: a rank that skips or
reorders a collective call, leaves the file after an exception of its own, or arrives too late.

Run on 2-3 ranks; rank 1 misbehaves. ``H5SUBFILE_COLLECTIVE_TIMEOUT`` is 4 s here, so
a regression shows as a CollectiveTimeoutError (or the job's test timeout), not a hung suite.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import DoneAtTest, raises_on_every_rank, same_on_every_rank

import h5subfile as hs
from h5subfile import errors
from h5subfile.mpi import collective, rounds

TIMEOUT = 4.0  # seconds: H5SUBFILE_COLLECTIVE_TIMEOUT in this module (beyond any step here)

pytestmark = pytest.mark.skipif(MPI.COMM_WORLD.size < 2, reason="needs 2 ranks or more")


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(collective.TIMEOUT_VARIABLE, f"{TIMEOUT:g}")
    yield


def _others(comm: MPI.Comm) -> str:
    """How messages name every rank but 1."""
    others = [r for r in range(comm.size) if r != 1]
    return f"rank {others[0]}" if len(others) == 1 else "ranks " + ", ".join(map(str, others))


@pytest.fixture
def earlier(comm: MPI.Comm, shared_tmp: Path) -> Path:
    """A file with a dataset closed before the misuse (it must stay intact)."""
    path = shared_tmp / "misuse.h5"
    with hs.File(path, "w", comm=comm) as f:
        f.write_dataset("before", np.arange(3, dtype="i8") + 10 * comm.rank)
    return path


def _check_intact(comm: MPI.Comm, path: Path, *absent: str) -> None:
    """The data closed before is read back bit for bit; nothing of the misused session is (its
    unfinished copy of the master is reported, once, by rank 0)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*an unfinished write session left", RuntimeWarning)
        f = hs.File(path, "r", comm=comm)
    with f:
        want = np.concatenate([np.arange(3, dtype="i8") + 10 * r for r in range(comm.size)])
        assert np.array_equal(f["before"][...], want)
        for name in absent:
            assert name not in f
        assert not {"a", "b"} & set(f.attrs), "an attribute of the misused session was kept"


def _block(f: hs.File, name: str = "x") -> hs.Dataset:
    rank, size = f.comm.rank, f.comm.size
    return f.create_dataset(name, (2 * size,), "i4", start=(2 * rank,), count=(2,))


MISUSES: dict[str, tuple[Callable[[hs.File], None], list[str]]] = {
    # name: (what every rank does inside `with File(path, "a")`, fragments of the message)
    "skipped_create_dataset": (
        lambda f: None if f.comm.rank == 1 else _block(f),
        ["out of step", "create_dataset /x (call #1)", "[rank 1] close (call #1)"],
    ),
    "skipped_learned_create_dataset": (  # created without a round: compared as metadata calls
        lambda f: None if f.comm.rank == 1 else f.create_dataset("y", (4,), "i4"),
        ["[ranks 0, 2] create_dataset /y (4,) <i4, then close (call #1)", "[rank 1] no metadata"],
    ),
    "extra_learned_create_dataset": (  # rank 0 made none: the close's round finds it at once
        lambda f: f.create_dataset("y", (4,), "i4") if f.comm.rank == 1 else None,
        ["[rank 1] create_dataset /y (4,) <i4, then close (call #1)", "no metadata call"],
    ),
    "skipped_write": (
        lambda f: _block(f).write(np.ones(2, "i4")) if f.comm.rank != 1 else _block(f),
        ["write /x (call #2)", "[rank 1] close (call #2)"],
    ),
    "skipped_create_group": (  # metadata calls are compared at the next collective call
        lambda f: None if f.comm.rank == 1 else f.create_group("g"),
        ["[ranks 0, 2] create_group /g, then close (call #1)", "[rank 1] no metadata call, then"],
    ),
    "different_attribute_names": (
        lambda f: f.attrs.__setitem__("a" if f.comm.rank == 1 else "b", 1),
        ["[ranks 0, 2] attrs set /.attrs['b']", "[rank 1] attrs set /.attrs['a']"],
    ),
    "different_attribute_types": (
        lambda f: f.attrs.__setitem__("a", "text" if f.comm.rank == 1 else 1),
        ["<i8", "string_info(encoding='utf-8'", "then close (call #1)"],
    ),
    "metadata_differs_after_calls_alike": (
        lambda f: (f.create_group("g"), f.create_group("h" if f.comm.rank == 1 else "k")),
        ["1 metadata call(s) alike, then create_group /k", "[rank 1] 1 metadata call(s) alike"],
    ),
    "skipped_commit": (
        lambda f: None if f.comm.rank == 1 else f.commit(),
        ["commit (call #1)", "[rank 1] close (call #1)"],
    ),
    "reordered_calls": (
        lambda f: (
            (f.create_group("g"), _block(f))
            if f.comm.rank == 1
            else (_block(f), f.create_group("g"))
        ),
        ["no metadata call, then create_dataset /x (call #1)", "[rank 1] create_group /g, then"],
    ),
}


@pytest.mark.parametrize("name", list(MISUSES))
def test_misuse_raises_the_same_error_on_every_rank(
    comm: MPI.Comm, earlier: Path, name: str
) -> None:
    misuse, fragments = MISUSES[name]
    fragments = [f.replace("[ranks 0, 2]", f"[{_others(comm)}]") for f in fragments]
    with raises_on_every_rank(comm, hs.CollectiveMismatchError, *fragments):
        with hs.File(earlier, "a", comm=comm) as f:
            misuse(f)
    _check_intact(comm, earlier, "x", "g", "h", "k")


def test_a_dataset_created_otherwise_on_one_rank_is_never_written_there(
    comm: MPI.Comm, earlier: Path
) -> None:
    """The same name, another shape on rank 1, created without a round: rank 1 does not write
    at the offsets rank 0 chose for its smaller dataset (it did, before rank 0's announcement
    carried the calls), but raises at its write, naming both calls; every rank then raises
    CollectiveMismatchError, and nothing of the session is kept."""
    raised: BaseException | None = None
    try:
        with hs.File(earlier, "a", comm=comm) as f:
            shape = (8,) if comm.rank == 1 else (4,)
            f.create_dataset("y", shape, "i4")[0:1] = np.ones(1, "i4")
    except hs.CollectiveMismatchError as exc:
        raised = exc
    assert raised is not None
    if comm.rank == 1:
        assert "rank 1 created create_dataset /y (8,) <i4 where rank 0 made create_dataset /y " in (
            str(raised)
        ), str(raised)
    else:
        assert "[rank 1] create_dataset /y (8,) <i4, then File.__exit__ on rank 1" in str(raised)
    _check_intact(comm, earlier, "x", "y")


def test_a_dataset_rank_0_never_created_ends_every_rank(comm: MPI.Comm, earlier: Path) -> None:
    """A rank writing a dataset created without a round that rank 0 never made does not wait
    for it: rank 0 entering its next collective call tells it, and every rank raises."""
    raised: BaseException | None = None
    try:
        with hs.File(earlier, "a", comm=comm) as f:
            f.create_dataset("y", (4,), "i4")
            if comm.rank == 1:
                f.create_dataset("z", (4,), "i4")[0:1] = 1
    except Exception as exc:  # noqa: BLE001 - checked below
        raised = exc
    assert isinstance(raised, hs.CollectiveMismatchError), repr(raised)
    if comm.rank == 1:
        assert "rank 1 created /z where rank 0 entered a collective call" in str(raised)
    _check_intact(comm, earlier, "y", "z")


def test_a_user_exception_on_one_rank_ends_every_rank(comm: MPI.Comm, earlier: Path) -> None:
    raised: BaseException | None = None
    try:
        with hs.File(earlier, "a", comm=comm) as f:
            d = _block(f)
            if comm.rank == 1:
                raise ValueError("boom on rank 1")
            d.write(np.ones(2, "i4"))
    except Exception as exc:  # noqa: BLE001 - compared below
        raised = exc
    if comm.rank == 1:
        assert type(raised) is ValueError and str(raised) == "boom on rank 1"
        assert "every rank of the file left it" in "".join(getattr(raised, "__notes__", []))
        message = None
    else:
        assert isinstance(raised, hs.CollectiveMismatchError), repr(raised)
        message = str(raised)
        for fragment in (
            f"[{_others(comm)}] write /x (call #2)",
            "[rank 1] File.__exit__ on rank 1 after ValueError: boom on rank 1 (call #2)",
        ):
            assert fragment in message
    messages = comm.allgather(message)
    assert all(m == messages[0] for m in messages if m is not None and comm.rank != 1)
    _check_intact(comm, earlier, "x")


def test_reading_calls_out_of_order_are_refused_on_every_rank(
    comm: MPI.Comm, earlier: Path
) -> None:
    """verify and a collective read are agreed like the writing calls: a rank doing them in
    another order meets the others' call and every rank says so."""
    with hs.File(earlier, "r", comm=comm) as f:
        d = f["before"]
        first, then = (
            (d.read_collective, f.verify) if comm.rank == 1 else (f.verify, d.read_collective)
        )
        with raises_on_every_rank(
            comm,
            hs.CollectiveMismatchError,
            "verify (call #1)",
            "[rank 1] read_collective /before (call #1)",
        ):
            first()
            then()


def test_a_user_exception_in_a_profiled_read_ends_every_rank(
    comm: MPI.Comm, earlier: Path, shared_tmp: Path
) -> None:
    """A profiled read-only file closes collectively (the profiles are gathered), so a rank
    leaving it after an exception of its own is met there, not waited for."""
    raised: BaseException | None = None
    try:
        with hs.File(earlier, "r", comm=comm, profile=str(shared_tmp / "profiles")) as f:
            f["before"][...]
            if comm.rank == 1:
                raise ValueError("boom while reading")
    except Exception as exc:  # noqa: BLE001 - compared below
        raised = exc
    if comm.rank == 1:
        assert type(raised) is ValueError
    else:
        assert isinstance(raised, hs.CollectiveMismatchError), repr(raised)
        assert "[rank 1] File.__exit__ on rank 1 after ValueError: boom while reading" in str(
            raised
        )


def test_an_exception_on_every_rank_leaves_the_file_untouched(
    comm: MPI.Comm, earlier: Path
) -> None:
    with pytest.raises(KeyError, match="boom"):
        with hs.File(earlier, "a", comm=comm) as f:
            _block(f)
            raise KeyError(f"boom on rank {comm.rank}")
    _check_intact(comm, earlier, "x")


@pytest.mark.parametrize("leaving", [SystemExit(0), SystemExit(3), ValueError("stop here")])
def test_the_same_exception_on_every_rank_closes_as_h5py_does(
    comm: MPI.Comm, shared_tmp: Path, leaving: BaseException
) -> None:
    """Every rank leaving the block with the same exception (``sys.exit`` in a program, say)
    closes the file as h5py's ``__exit__`` does: what was written completely is published
    (it was abandoned: a first session's file did not exist), what was not is left out, and
    the exception goes on."""
    path = shared_tmp / "left.h5"
    with pytest.raises(type(leaving)):
        with hs.File(path, "w", comm=comm) as f:
            _block(f, "whole").write(np.full(2, comm.rank, "i4"))
            _block(f, "half")[2 * comm.rank] = 7  # each rank writes half of its block
            raise leaving
    with hs.File(path, "r", comm=comm) as f:
        assert f["whole"][...].tolist() == [r for r in range(comm.size) for _ in range(2)]
        assert "half" not in f


def test_writes_of_different_datasets_are_refused(comm: MPI.Comm, shared_tmp: Path) -> None:
    with raises_on_every_rank(comm, hs.IncompleteFileError, "/a", "/b"):
        with hs.File(shared_tmp / "args.h5", "w", comm=comm) as f:
            a, b = _block(f, "a"), _block(f, "b")
            with raises_on_every_rank(
                comm, hs.CollectiveMismatchError, "different arguments", "[rank 1] /b"
            ):
                (b if comm.rank == 1 else a).write(np.ones(2, "i4"))
            # still in step: the session goes on, and closes saying what was not written


def test_a_rank_that_never_arrives_is_named(comm: MPI.Comm, shared_tmp: Path) -> None:
    sub = comm.Dup()  # its collective calls are out of step after a timeout
    raised: BaseException | None = None
    try:
        with hs.File(shared_tmp / "late.h5", "w", comm=sub) as f:
            d = _block(f)
            if comm.rank == 1:
                time.sleep(TIMEOUT + collective.GRACE + 2.0)
            d.write(np.ones(2, "i4"))
    except Exception as exc:  # noqa: BLE001 - compared below
        raised = exc
    assert isinstance(raised, hs.CollectiveTimeoutError), repr(raised)
    assert isinstance(raised, TimeoutError)
    message = str(raised)
    if comm.rank == 1:
        assert "rank 1 arrived at write /x (call #2)" in message
        assert f"after {_others(comm)} had given up waiting for it" in message
    else:
        assert f"rank 1 never arrived; {_others(comm)} wait" in message
        assert "write /x (call #2)" in message
        assert f"{collective.TIMEOUT_VARIABLE}: {TIMEOUT:g} s" in message
    waiting = comm.allgather(message if comm.rank != 1 else None)
    assert len({m for m in waiting if m is not None}) == 1, waiting
    assert raised.published is False  # every rank knows: rank 0 publishes only at close
    assert message.endswith(
        f"Nothing of this write session was published: {shared_tmp / 'late.h5'} is as it was "
        "before the session (or its last commit)."
    )


@pytest.mark.parametrize("call", ["close", "commit"])
def test_a_commit_slower_than_the_timeout_is_waited_for(
    comm: MPI.Comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """Rank 0's rename of the master outlasts the others' patience, once every rank has
    entered the close: a slow disk is not a rank that never arrived. Every rank waits for rank
    0's answer and closes without an error (they all raised CollectiveTimeoutError before,
    though the master was committed); the file reads back bit for bit and verifies. Rank 0
    said it was at work (mpi/rounds.py, ``working_for_all``)."""
    timeout = 2.0
    monkeypatch.setenv(collective.TIMEOUT_VARIABLE, f"{timeout:g}")
    path = shared_tmp / "slow.h5"
    if comm.rank == 0:
        rename = os.replace

        def slow_rename(source: str, target: str) -> None:
            if os.fspath(target) == str(path):  # the master's commit, nothing else
                time.sleep(timeout + collective.GRACE + 1.5)
            rename(source, target)

        monkeypatch.setattr(os, "replace", slow_rename)
    began = time.monotonic()
    with hs.File(path, "w", comm=comm) as f:
        _block(f).write(np.arange(2, dtype="i4") + 10 * comm.rank)
        if call == "commit":
            f.commit()
            f.attrs["after"] = 1  # the file goes on after its commit
    assert time.monotonic() - began > timeout  # it did outlast the timeout
    same_on_every_rank(comm, "closed", "the close's outcome")
    with hs.File(path, "r", comm=comm) as f:
        want = np.concatenate([np.arange(2, dtype="i4") + 10 * r for r in range(comm.size)])
        assert np.array_equal(f["x"][...], want)
        assert f.verify()["clean"]
    assert not os.path.exists(f"{path}.partial")


def test_a_rank_that_never_reaches_the_close_still_times_out(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """Only rank 0's word that every rank arrived makes the others wait without a limit: a
    rank that never reaches the close is named by the timeout, as before."""
    path = shared_tmp / "absent.h5"
    sub = comm.Dup()  # its collective calls are out of step after a timeout
    f = hs.File(path, "w", comm=sub)
    _block(f).write(np.arange(2, dtype="i4"))
    if comm.rank == 1:
        time.sleep(TIMEOUT + collective.GRACE + 2)  # arrives after the others gave up
    with pytest.raises(hs.CollectiveTimeoutError) as raised:
        f.close()
    if comm.rank != 1:
        assert "rank 1 never arrived" in str(raised.value), str(raised.value)
    comm.Barrier()


def test_collective_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(collective.TIMEOUT_VARIABLE, "0")
    assert collective.collective_timeout() is None
    monkeypatch.setenv(collective.TIMEOUT_VARIABLE, "2.5")
    assert collective.collective_timeout() == 2.5
    monkeypatch.setenv(collective.TIMEOUT_VARIABLE, "soon")
    assert collective.collective_timeout() == collective.DEFAULT_TIMEOUT
    monkeypatch.delenv(collective.TIMEOUT_VARIABLE)
    assert collective.collective_timeout() == collective.DEFAULT_TIMEOUT == 600


def test_waiting_ranks_yield_only_when_the_node_is_not_oversubscribed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert rounds.yield_for_node(4, 4) == rounds.YIELD_FOR_UNDERSUBSCRIBED == 50e-3
    assert rounds.yield_for_node(5, 4) == rounds.YIELD_FOR_OVERSUBSCRIBED == 0.0
    assert rounds.yield_for_node(None, 4) == rounds.YIELD_FOR == 2e-3
    for name in rounds.LOCAL_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert rounds.ranks_on_node() is None
    monkeypatch.setenv("MPI_LOCALNRANKS", "x")  # unreadable: the next variable says
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")
    assert rounds.ranks_on_node() == 3
    monkeypatch.setenv("MPI_LOCALNRANKS", "7")
    assert rounds.ranks_on_node() == 7


@pytest.mark.parametrize("patient", [False, True])
def test_a_patient_round_pauses_up_to_the_longer_sleep(
    comm: MPI.Comm, monkeypatch: pytest.MonkeyPatch, patient: bool
) -> None:
    """Pauses double from FIRST_SLEEP up to LAST_SLEEP, or from PATIENT_FIRST_SLEEP up to
    PATIENT_SLEEP in a round that waits for one rank's long work (the sleeps recorded, not
    slept: the time waited stays far below what would lengthen them further)."""
    monkeypatch.setattr(rounds, "_YIELD_FOR", 0.0)  # sleep at once, as when oversubscribed
    pauses: list[float] = []
    monkeypatch.setattr(rounds.time, "sleep", pauses.append)
    rounds.polled(comm, lambda: DoneAtTest(40), None, patient=patient)
    first = rounds.PATIENT_FIRST_SLEEP if patient else rounds.FIRST_SLEEP
    assert pauses[0] == 0.0 and pauses[1] == first
    assert all(b == min(2 * a, max(pauses)) for a, b in zip(pauses[1:], pauses[2:]))
    assert max(pauses) == (rounds.PATIENT_SLEEP if patient else rounds.LAST_SLEEP)
    assert (
        rounds.PATIENT_SLEEP > rounds.LAST_SLEEP and rounds.PATIENT_FIRST_SLEEP > rounds.FIRST_SLEEP
    )


def test_only_the_agreement_before_roots_result_is_patient(
    comm: MPI.Comm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """root_first's agreement round waits for root's work (a scan before a read): patient;
    the broadcast of its result and the rounds of other calls are not."""
    seen: list[bool] = []
    real = rounds.polled

    def spy(
        comm: MPI.Comm,
        start: Callable[[], rounds.Pending],
        buffers: object,
        call: rounds.Call | None = None,
        patient: bool = False,
        rung: bool = False,
    ) -> None:
        seen.append(patient)
        real(comm, start, buffers, call, patient, rung)

    monkeypatch.setattr(rounds, "polled", spy)
    got = collective.root_first(
        comm, lambda: np.arange(5000), None, rounds.Call("test", 0, args="x")
    )
    assert np.array_equal(got, np.arange(5000))
    assert seen[0] is True and not any(seen[1:]), seen
    seen.clear()
    collective.agree(comm, None, rounds.Call("test", 1))
    assert seen == [False]


def test_call_hash_is_the_same_in_every_process(comm: MPI.Comm) -> None:
    h = collective.call_hash("write /x\0" + "7")
    same_on_every_rank(comm, h, "call hash")
    assert 0 < h < 2**62
    assert h != collective.call_hash("write /x\0" + "8")


def test_out_of_step_message_is_pure() -> None:
    arrival = collective._Arrival
    error = collective.out_of_step(
        [
            arrival("write /x (call #2)", "/f.h5", None, None, False),
            arrival("close (call #2)", "/f.h5", None, None, False),
            arrival("write /x (call #2)", "/f.h5", None, ("DataShapeError", "bad"), False),
        ]
    )
    assert str(error).startswith(
        "collective calls out of step on /f.h5: [rank 0] write /x (call #2); [rank 1] close "
        "(call #2); [rank 2] write /x (call #2), failing with DataShapeError: bad."
    )
    assert error.collective and error.out_of_step


def test_what_a_rank_says_of_the_file_after_a_timeout_is_pure() -> None:
    said = errors.timed_out_publication
    assert said("/f.h5", "close", True, "", False) == (
        "The master was committed before the timeout: /f.h5 is complete and verifies "
        "(h5subfile verify /f.h5); the file needs nothing more"
    )
    assert said("/f.h5", "commit", True, "/f.h5 was closed but /x is incomplete", True) == (
        "The master was committed before the timeout, and its commit reported: /f.h5 was "
        "closed but /x is incomplete"
    )
    assert said("/f.h5", "write", False, "", True).startswith(
        "Nothing of this write session was published: /f.h5 is as it was"
    )
    agreed, asked = said("/f.h5", "close", None, "", True), said("/f.h5", "close", None, "", False)
    assert "gave up while rank 0 was committing it (every rank had entered the close)" in agreed
    assert "gave up before rank 0 answered the close (" in asked
    assert all("h5subfile verify /f.h5 checks the file" in s for s in (agreed, asked))


# Files open together on one communicator share its rounds: each file's calls must be made on
# every rank at the same time. name: what a rank does to one file of those open together.
FILE_CALLS: dict[str, Callable[[hs.File], object]] = {
    "close": lambda f: f.close(),
    "commit": lambda f: f.commit(),
    "write": lambda f: f["x"].write(np.full(2, f.comm.rank, "i4")),
    "create_dataset": lambda f: _block(f, "y"),
    "flush": lambda f: f.flush(),
}
#: Metadata calls make no round of their own: in any order over the files, each file gets them.
METADATA_CALLS: dict[str, Callable[[hs.File], object]] = {
    "create_group": lambda f: f.create_group("g"),
    "attrs": lambda f: f.attrs.__setitem__("a", 1),
}


def _open_together(comm: MPI.Comm, folder: Path, count: int) -> list[hs.File]:
    """``count`` files opened on ``comm`` in the same order on every rank, each with a block
    dataset ``x`` declared (not written)."""
    files = [hs.File(folder / f"{'abc'[i]}.h5", "w", comm=comm, subfiles=2) for i in range(count)]
    for f in files:
        _block(f)
    return files


def _rotated(files: list[hs.File], rank: int) -> list[hs.File]:
    """The files in this rank's order: rank r starts with file r (wrapping round)."""
    first = rank % len(files)
    return files[first:] + files[:first]


@pytest.mark.parametrize("call", list(FILE_CALLS))
def test_calls_on_two_files_in_a_different_order_are_refused(
    comm: MPI.Comm, shared_tmp: Path, call: str
) -> None:
    files = _open_together(comm, shared_tmp, 2)
    mine = _rotated(files, comm.rank)
    named = [str(shared_tmp / "a.h5"), str(shared_tmp / "b.h5")]
    with raises_on_every_rank(
        comm, hs.CollectiveMismatchError, "out of step on " + ", ".join(named), *named
    ) as raised:
        for f in mine:
            FILE_CALLS[call](f)
    assert f"] {call}" in str(raised.value)
    assert raised.value.files == tuple(named)
    for f in files:  # each was abandoned on every rank: closing again is local
        f.close()
    comm.Barrier()
    for name in named:  # nothing published: neither master exists
        assert not Path(name).exists(), name


@pytest.mark.parametrize("call", list(METADATA_CALLS))
def test_metadata_calls_on_two_files_in_any_order_reach_both(
    comm: MPI.Comm, shared_tmp: Path, call: str
) -> None:
    files = _open_together(comm, shared_tmp, 2)
    for f in _rotated(files, comm.rank):
        METADATA_CALLS[call](f)
    for f in files:
        f["x"].write(np.full(2, comm.rank, "i4"))
        f.close()
    comm.Barrier()
    for name in ("a.h5", "b.h5"):
        with hs.File(shared_tmp / name, "r", comm=comm) as back:
            assert ("g" in back) if call == "create_group" else back.attrs["a"] == 1


def test_three_files_in_rotated_orders_end_every_file_named(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """Rank r closes file r first: the files the ranks met on are abandoned on every rank; a
    file no rank was in at the time (c, on 2 ranks) closes normally, in step."""
    files = _open_together(comm, shared_tmp, 3)
    for f in files:
        f["x"].write(np.full(2, comm.rank, "i4"))
    met = [str(shared_tmp / f"{'abc'[r % 3]}.h5") for r in range(comm.size)]
    with raises_on_every_rank(comm, hs.CollectiveMismatchError, *sorted(set(met))):
        for f in _rotated(files, comm.rank):
            f.close()
    for f in files:
        f.close()  # abandoned: local; the file none met: collective, in step
    comm.Barrier()
    for i in range(len(files)):
        path = shared_tmp / f"{'abc'[i]}.h5"
        if str(path) in met:
            assert not path.exists()
        else:
            with hs.File(path, "r", comm=comm) as back:
                want = np.repeat(np.arange(comm.size, dtype="i4"), 2)
                assert np.array_equal(back["x"][...], want)


def _steps_of_file(rng: np.random.Generator, index: int) -> list[tuple[str, int]]:
    """One file's collective steps in its own order (the same on every rank), close last:
    (what, k) where k numbers the datasets."""
    steps = [("group", 0), ("attrs", 0), ("flush", 0), ("dataset", 0), ("dataset", 1)]
    if rng.random() < 0.5:
        steps.append(("commit", 0))
    order = rng.permutation(len(steps))
    return [steps[i] for i in order] + [("close", 0)]


def _merged(rng: np.random.Generator, per_file: list[list[tuple[str, int]]]) -> list[tuple]:
    """A random interleaving of the files' steps, each file's own order kept."""
    left = [list(steps) for steps in per_file]
    merged = []
    while any(left):
        i = int(rng.choice([i for i, steps in enumerate(left) if steps]))
        merged.append((i, *left[i].pop(0)))
    return merged


def _values(comm: MPI.Comm, file: int, k: int) -> np.ndarray:
    return np.full(2, 1000 * file + 10 * k + comm.rank, "i4")


def _run_step(comm: MPI.Comm, f: hs.File, file: int, what: str, k: int) -> None:
    if what == "group":
        f.create_group("g")
    elif what == "attrs":
        f.attrs["step"] = file
    elif what == "flush":
        f.flush()
    elif what == "commit":
        f.commit()
    elif what == "dataset":  # two calls on the same file, one step of the interleaving
        _block(f, f"y{k}").write(_values(comm, file, k))
    else:
        f.close()


@pytest.mark.parametrize("seed", range(12))
def test_random_interleavings_on_several_files_end_in_correct_files_or_one_error(
    comm: MPI.Comm, shared_tmp: Path, seed: int
) -> None:
    """Fuzz: two or three files open together; every rank interleaves the files' calls at
    random (in half the seeds the same way on every rank). Ranks in step write correct files;
    ranks out of step all raise the same CollectiveMismatchError at the first collective call
    where they differ (metadata calls: at the next collective call on their file), and no file
    they were in is published beyond what it committed."""
    shared = np.random.default_rng(seed)
    count = 2 + seed % 2
    per_file = [_steps_of_file(shared, i) for i in range(count)]
    same = seed % 4 < 2
    rng = shared if same else np.random.default_rng([seed, comm.rank])
    merged = _merged(rng, per_file)
    orders = comm.allgather(merged)
    diverges = next((n for n in range(len(merged)) if len({str(o[n]) for o in orders}) > 1), None)
    folder = shared_tmp / f"fuzz{seed}"
    if comm.rank == 0:
        folder.mkdir()
    comm.Barrier()
    files = [hs.File(folder / f"{i}.h5", "w", comm=comm, subfiles=2) for i in range(count)]
    raised = None
    done = [0] * count  # steps each file has made on this rank
    for file, what, k in merged:
        try:
            _run_step(comm, files[file], file, what, k)
        except hs.CollectiveMismatchError as exc:
            raised = f"{type(exc).__name__}: {exc}"
            break
        done[file] += 1
    outcomes = comm.allgather(raised)
    assert all(o == outcomes[0] for o in outcomes), outcomes
    # Metadata calls (group, attrs) make no round: orders differing only in them are not an
    # error, and their files come out right.
    assert raised is None or diverges is not None, (raised, diverges)
    for f in files:  # abandoned ones locally, the others together
        try:
            f.close()
        except hs.CollectiveMismatchError:  # left mid-way: its metadata calls differ
            assert raised is not None
    comm.Barrier()
    for i in range(count):
        path = folder / f"{i}.h5"
        if raised is None:
            assert path.exists()
        if not path.exists():
            continue
        with hs.File(path, "r", comm=comm) as back:
            for k in (0, 1):
                if f"y{k}" in back:
                    want = np.concatenate(
                        [np.full(2, 1000 * i + 10 * k + r, "i4") for r in range(comm.size)]
                    )
                    assert np.array_equal(back[f"y{k}"][...], want), (i, k)
                elif raised is None:
                    raise AssertionError(f"file {i} lacks y{k}")

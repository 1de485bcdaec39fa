"""File per process, ``write_datasets`` makes each rank's view of the new datasets without an
answer from rank 0 (engine/creation_plan.py, ``own_views``): one round fewer, and a failure of rank 0's
publishing, or of a rank's source creation, is raised by the write's closing round instead,
the same on every rank, leaving every rank's catalogue the same and nothing of the call in the
file."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import plain_h5py, raises_on_every_rank, same_on_every_rank

import h5subfile as hs
from h5subfile import errors
from h5subfile.io import h5 as h5_io
from h5subfile.io import master as master_io
from h5subfile.mpi import collective


def _rounds(comm: MPI.Comm) -> int:
    return collective.channel_of(comm).rounds


def _step(comm: MPI.Comm, step: int) -> dict[str, np.ndarray]:
    """A VPIC-like step: eight arrays per rank, rank r holding r + 2 rows."""
    rows = comm.rank + 2
    return {f"T{step}/f{i}": np.arange(rows, dtype="f4") + 1000 * i + comm.rank for i in range(8)}


def _whole(comm: MPI.Comm, name: str) -> np.ndarray:
    i = int(name.rsplit("f", 1)[1])
    return np.concatenate([np.arange(r + 2, dtype="f4") + 1000 * i + r for r in range(comm.size)])


@pytest.mark.parametrize("subfiles", ["rank", 1])
def test_file_per_process_creation_needs_no_answer(
    comm: MPI.Comm, shared_tmp: Path, subfiles: object
) -> None:
    """Creating and writing a step is 5 rounds with file per process (no answer after the
    sources are created), 4 when all ranks share rank 0's file (rank 0 makes the sources while
    it plans, and answers with the views); where the rounds are stars, 3 and 2 (the requests
    ride with the agreement, which rank 0 answers). The data read back bit for bit with plain
    h5py."""
    path = shared_tmp / f"own-{subfiles}.h5"
    with hs.File(path, "w", comm=comm, subfiles=subfiles) as f:
        f.write_datasets(_step(comm, 0))  # the first call also opens the subfile
        before = _rounds(comm)
        f.write_datasets(_step(comm, 1))
        taken = _rounds(comm) - before
        shapes = same_on_every_rank(comm, {n: f[f"T1/{n}"].shape for n in f["T1"]})
    own = comm.size == 1 or subfiles == "rank"
    star = collective.channel_of(comm).star
    assert taken == ((3 if own else 2) if star else (5 if own else 4))
    assert shapes == {f"f{i}": (sum(r + 2 for r in range(comm.size)),) for i in range(8)}
    code = (
        "import sys, h5py, numpy as np\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    for s in (0, 1):\n"
        "        for i in range(8):\n"
        "            print(f'T{s}/f{i}', f[f'T{s}/f{i}'][()].tobytes().hex())\n"
    )
    for line in plain_h5py(comm, code, str(path)).splitlines():
        name, data = line.split()
        assert bytes.fromhex(data) == _whole(comm, name).tobytes(), name


def _fail_on(monkeypatch: pytest.MonkeyPatch, cls: type, method: str, rank: int, name: str):  # type: ignore[no-untyped-def]
    """Make ``cls.method`` raise ENOSPC on ``rank`` for objects named ``.../name``."""
    real = getattr(cls, method)

    def failing(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if MPI.COMM_WORLD.rank == rank and str(path).endswith(name):
            raise OSError(errno.ENOSPC, f"No space left on device (injected: {path})")
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(cls, method, failing)


@pytest.mark.parametrize("where", ["publish on rank 0", "source creation on the last rank", "both"])
def test_failed_creation_is_raised_everywhere_and_leaves_nothing(
    comm: MPI.Comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Rank 0 failing to publish the call's datasets, or a rank failing to create its source,
    raises the same error on every rank; no rank keeps the call's datasets or the group made
    for them; the file goes on (a later call writes) and closes with what was written."""
    if comm.size < 2:
        pytest.skip("file per process with one rank: no other rank to tell")
    if where != "source creation on the last rank":
        _fail_on(monkeypatch, master_io.MasterWriter, "publish_dataset", 0, "/T1/f5")
    if where != "publish on rank 0":
        _fail_on(monkeypatch, h5_io.SourceFile, "create", comm.size - 1, "/T1/f3")
    path = shared_tmp / f"own-fail-{where.split()[0]}.h5"
    with hs.File(path, "w", comm=comm, subfiles="rank") as f:
        f.write_datasets(_step(comm, 0))
        failing = 0 if where == "publish on rank 0" else comm.size - 1
        with raises_on_every_rank(
            comm, errors.RankIOError, f"[rank {failing}]", "No space left on device"
        ):
            f.write_datasets(_step(comm, 1))
        same_on_every_rank(comm, sorted(f.keys()), "top-level names")
        assert "T1" not in f and "T1/f0" not in f
        f.write_datasets(_step(comm, 2))
        assert same_on_every_rank(comm, sorted(f.keys())) == ["T0", "T2"]
    listing = plain_h5py(
        comm,
        "import sys, h5py\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    f.visit(print)\n"
        "    print(f['T2/f7'][()].tobytes().hex())\n",
        str(path),
    ).splitlines()
    assert not [name for name in listing if name.startswith("T1")]
    assert "T0/f7" in listing and "T2/f0" in listing
    assert bytes.fromhex(listing[-1]) == _whole(comm, "T2/f7").tobytes()


def test_failed_write_after_publishing_keeps_the_datasets_everywhere(
    comm: MPI.Comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails once rank 0 has published is a failed write as with any plan: every
    rank raises, every rank still knows the datasets, and the close leaves out the one not
    completely written (raising IncompleteFileError, the error having been caught)."""
    from h5subfile.engine import transfer

    real = transfer.write_direct

    def failing(session, writes, hashing):  # type: ignore[no-untyped-def]
        if comm.rank == comm.size - 1 and any(w.path == "/T1/f2" for w in writes):
            return OSError(errno.EIO, "Input/output error (injected)")
        return real(session, writes, hashing)

    monkeypatch.setitem(transfer.TRANSFERS, transfer.Transfer.DIRECT, failing)
    path = shared_tmp / "own-write-fail.h5"
    with raises_on_every_rank(comm, errors.IncompleteFileError, "/T1"):
        with hs.File(path, "w", comm=comm, subfiles="rank") as f:
            f.write_datasets(_step(comm, 0))
            with raises_on_every_rank(comm, errors.RankIOError, "Input/output error"):
                f.write_datasets(_step(comm, 1))
            assert same_on_every_rank(comm, sorted(f["T1"].keys())) == [f"f{i}" for i in range(8)]
    names = plain_h5py(
        comm, "import sys, h5py\nh5py.File(sys.argv[1], 'r').visit(print)\n", str(path)
    ).splitlines()
    assert "T0/f7" in names and "T1/f2" not in names


@pytest.mark.parametrize("subfiles", [1, "rank"])
def test_learned_datasets_of_one_group_are_created_without_a_round(
    comm: MPI.Comm, shared_tmp: Path, subfiles: object
) -> None:
    """``create_dataset(name, shape, dtype)`` takes no round where rank 0 leads every source
    (one group): rank 0 creates it and announces each rank's view, which a rank takes when it
    writes. With several groups it keeps its rounds. Every value reads back with plain h5py:
    slabs of every rank, a dataset only rank 0 writes, one no rank writes (its fill value), one
    deleted before any rank wrote it and made again."""
    path = shared_tmp / f"no-round-{subfiles}.h5"
    rank, size, n = comm.rank, comm.size, 6
    with hs.File(path, "w", comm=comm, subfiles=subfiles) as f:
        f.write_dataset("first", np.arange(2, dtype="i4"))  # the first call opens the subfile
        before = _rounds(comm)
        g = f.create_group("g")
        for i in range(4):
            d = g.create_dataset(f"d{i}", (n * size,), "f8")
            d.attrs["i"] = i
            d[rank * n : (rank + 1) * n] = np.arange(n) + 100 * i + 10 * rank
        only = f.create_dataset("only0", (3,), "i2", fillvalue=-1)
        if rank == 0:
            only[1:] = [5, 6]
        f.create_dataset("never", (5,), "u1", fillvalue=7)
        f.create_dataset("again", (2,), "i8")
        del f["again"]
        again = f.create_dataset("again", (4,), "i8")
        if rank == size - 1:
            again[...] = [1, 2, 3, 4]
        taken = _rounds(comm) - before
    one_group = subfiles == 1 or size == 1
    assert (taken == 0) == one_group, taken
    code = (
        "import sys, h5py\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    for name in ('g/d0', 'g/d1', 'g/d2', 'g/d3', 'only0', 'never', 'again'):\n"
        "        print(name, f[name].dtype.str, f[name][()].tobytes().hex())\n"
        "    print('attrs', [int(f[f'g/d{i}'].attrs['i']) for i in range(4)])\n"
    )
    lines = plain_h5py(comm, code, str(path)).splitlines()
    got = {
        line.split()[0]: (line.split()[1], bytes.fromhex(line.split()[2])) for line in lines[:-1]
    }
    slabs = [np.arange(n, dtype="f8") + 10 * r for r in range(size)]
    for i in range(4):
        assert got[f"g/d{i}"] == ("<f8", (np.concatenate(slabs) + 100 * i).tobytes())
    assert got["only0"] == ("<i2", np.array([-1, 5, 6], "i2").tobytes())
    assert got["never"] == ("|u1", bytes([7] * 5))
    assert got["again"] == ("<i8", np.arange(1, 5, dtype="i8").tobytes())
    assert lines[-1] == "attrs [0, 1, 2, 3]"


def test_a_failed_creation_without_a_round_is_raised_everywhere(
    comm: MPI.Comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 failing to create a dataset it creates without a round (a full disk): no rank
    raises at the call; a rank writing it raises rank 0's error there, and every rank at the
    next collective call, which forgets it (and the group made for it) on every rank. The
    session goes on: the close publishes what was written, without it; a failure just before
    the close is raised by every rank once the file is published."""
    _fail_on(monkeypatch, master_io.MasterWriter, "publish_dataset", 0, "/bad")
    rank, size = comm.rank, comm.size
    path = shared_tmp / "no-round-fail.h5"
    with hs.File(path, "w", comm=comm, subfiles=1) as f:
        f.create_dataset("good", (size,), "i4")[rank] = rank
        bad = f.create_dataset("made/for/bad", (size,), "i4")  # no error here, on any rank
        assert "made/for/bad" in f
        with pytest.raises(errors.RankIOError, match="No space left on device"):
            bad[rank] = rank
        with raises_on_every_rank(
            comm, errors.RankIOError, "No space left on device", "creating /made/for/bad"
        ):
            f.flush()
        assert same_on_every_rank(comm, sorted(f.keys())) == ["good"]  # "made" forgotten too
        f.create_dataset("later", (size,), "i4")[rank] = 10 + rank
        f.flush()  # nothing left to raise
        f.create_dataset("last/bad", (size,), "i4")
        with raises_on_every_rank(comm, errors.RankIOError, "creating /last/bad"):
            f.close()
    listing = plain_h5py(
        comm,
        "import sys, h5py\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    print(sorted(f), f['good'][()].tolist(), f['later'][()].tolist())\n",
        str(path),
    )
    assert listing == f"['good', 'later'] {list(range(size))} {[10 + r for r in range(size)]}"


def test_two_files_on_one_communicator_keep_their_announcements(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """Two files open together share their communicator's channel: each file's announcements
    reach it whatever the order in which the ranks take them, and the files close in either
    order with every value."""
    rank, size = comm.rank, comm.size
    fa = hs.File(shared_tmp / "two-a.h5", "w", comm=comm, subfiles=1)
    fb = hs.File(shared_tmp / "two-b.h5", "w", comm=comm, subfiles=1)
    a = fa.create_dataset("x", (size,), "i4")
    b = fb.create_dataset("y", (size,), "i4")
    fb.flush()  # b's call: a's announcement must wait for a
    with b.collective:
        b[rank] = 100 + rank
    with a.collective:
        a[rank] = rank
    fa.create_dataset("z", (size,), "i4")[rank] = 200 + rank
    fb.close()
    fa.close()
    code = (
        "import sys, h5py\n"
        "for name in sys.argv[1:]:\n"
        "    with h5py.File(name, 'r') as f:\n"
        "        print(sorted((k, f[k][()].tolist()) for k in f))\n"
    )
    got = plain_h5py(comm, code, str(shared_tmp / "two-a.h5"), str(shared_tmp / "two-b.h5"))
    want_a = [("x", list(range(size))), ("z", [200 + r for r in range(size)])]
    assert got.splitlines() == [str(want_a), str([("y", [100 + r for r in range(size)])])]


def test_rank_0s_words_of_collective_calls_do_not_pile_up(comm: MPI.Comm, shared_tmp: Path) -> None:
    """After a creation without a round, rank 0 announces every collective call it enters; a
    rank drops those of calls it has entered too at its own next call, so after many calls
    at most the last one's word waits, received or not."""
    from h5subfile.mpi.announce import arrived_announcement

    with hs.File(shared_tmp / "words.h5", "w", comm=comm, subfiles=1) as f:
        f.create_dataset("a", (comm.size,), "i4")[comm.rank] = comm.rank
        for _ in range(50):
            f.flush()
        session = f._session
        if comm.rank != 0:
            waiting = len(session.writing.announced.arrived)
            while arrived_announcement(session.comm)[0]:
                waiting += 1
            assert waiting <= 1, waiting
        comm.Barrier()

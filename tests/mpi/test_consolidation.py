"""Datasets written in fine interleaved runs (round-robin rows, ``d[rank::size]``, index lists,
masks, strided columns, a grown dataset's segments) are rewritten at close as one strip per
subfile (docs/FORMAT.md, *Mappings by write pattern*): counted and read back bit for bit by
plain h5py in a separate process, verified, read by h5subfile with every piece checked. A
rank whose rewrite fails, or whose bytes changed before the close, leaves the dataset as
written: its data right, or its change reported, never hidden under a new checksum."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ranks import plain_h5py, raises_on_every_rank

import h5subfile as hs
from h5subfile.engine import consolidate

SUBFILES = 2

#: Every dataset: its mappings, whether each is one box, the pieces of its layout record, and
#: its values (hex).
SURVEY = """
import sys, json, h5py
out = {}
with h5py.File(sys.argv[1], "r") as f:
    record = json.loads(f.attrs["h5subfile"])
    for name in f:
        d = f[name]
        maps = d.virtual_sources() if d.is_virtual else []
        boxes = all(
            all(c == 1 for c in m.vspace.get_regular_hyperslab()[2])
            for m in maps
            if m.vspace.is_regular_hyperslab()
        ) and all(m.vspace.is_regular_hyperslab() for m in maps)
        layout = json.loads(d.attrs["h5subfile.layout"]) if "h5subfile.layout" in d.attrs else {}
        pieces = sum(len(e.get("pieces", ())) for e in layout.get("extents", ()))
        out[name] = [len(maps), boxes, pieces, d[...].tobytes().hex()]
print(json.dumps(out))
"""


def patterns(n: int) -> dict[str, np.ndarray]:
    """What each dataset holds once written (every element says where it is)."""
    return {
        "rows": np.arange(16 * n * 5, dtype="i4").reshape(16 * n, 5),
        "elements": np.arange(300 * n, dtype="f8"),
        "listed": np.arange(1000, dtype="i8") * 3,
        "masked": np.arange(40 * 7, dtype="f4").reshape(40, 7),
        "columns": np.arange(6 * 10 * n, dtype="u2").reshape(6, 10 * n),
        "cube": np.arange(8 * n * 3 * 4, dtype="i2").reshape(8 * n, 3, 4),
        "grown": np.arange(16 * n * 2, dtype="f8").reshape(16 * n, 2),
    }


def owner(n: int, size: int) -> np.ndarray:
    """Which rank writes each of ``size`` elements, at random (seeded: alike on every rank)."""
    return np.random.default_rng(7).integers(0, n, size)


def write(f: hs.File, rank: int, n: int) -> None:
    """Every pattern, as rank ``rank`` of ``n`` writes it."""
    want = patterns(n)
    f.create_dataset("rows", want["rows"].shape, "i4")[rank::n] = want["rows"][rank::n]
    f.create_dataset("elements", (300 * n,), "f8")[rank::n] = want["elements"][rank::n]
    listed = f.create_dataset("listed", (1000,), "i8")
    mine = np.flatnonzero(owner(n, 1000) == rank)
    if mine.size:
        listed[mine] = want["listed"][mine]
    masked = f.create_dataset("masked", (40, 7), "f4")
    rows = owner(n, 40) == rank
    if rows.any():
        masked[rows] = want["masked"][rows]
    f.create_dataset("columns", (6, 10 * n), "u2")[:, rank::n] = want["columns"][:, rank::n]
    f.create_dataset("cube", (8 * n, 3, 4), "i2")[rank::n] = want["cube"][rank::n]
    grown = f.create_dataset("grown", (0, 2), "f8", maxshape=(None, 2))
    for step in range(2):
        grown.resize(8 * n * (step + 1), axis=0)
        rows_now = slice(8 * n * step + rank, 8 * n * (step + 1), n)
        grown[rows_now] = want["grown"][rows_now]


def survey(comm, path: Path) -> dict[str, list[Any]]:
    return json.loads(plain_h5py(comm, SURVEY, str(path)))


@pytest.mark.parametrize(
    "plan",
    [
        {},
        {"checksums": False},
        {"async_writes": True, "async_always": True},
        {"async_writes": True, "async_zero_copy": True, "async_always": True},
    ],
    ids=["checksums", "no-checksums", "behind", "behind-zero-copy"],
)
def test_interleaved_writes_become_one_strip_per_subfile(comm, shared_tmp, plan) -> None:
    n = comm.size
    path = shared_tmp / "interleaved.h5"
    with hs.File(path, "w", subfiles=SUBFILES, **plan) as f:
        write(f, comm.rank, n)
    found = survey(comm, path)
    for name, want in patterns(n).items():
        count, boxes, pieces, values = found[name]
        segments = 2 if name == "grown" else 1
        assert values == want.tobytes().hex(), name
        assert (count, boxes) == (SUBFILES * segments, True), name
        assert pieces <= n * segments * 3, name  # each rank's share: at most 3 boxes
    with hs.File(path, "r", verify=True) as f:
        assert not f.problems
        for name, want in patterns(n).items():
            np.testing.assert_array_equal(f[name][...], want, err_msg=name)
            np.testing.assert_array_equal(f[name][1::3], want[1::3], err_msg=name)


def test_patterns_cheap_as_written_stay_as_written(comm, shared_tmp) -> None:
    """Slabs and row strips, each one run per rank: nothing is moved (a piece per rank)."""
    n = comm.size
    path = shared_tmp / "as_written.h5"
    with hs.File(path, "w", subfiles=SUBFILES) as f:
        f.create_dataset("slabs", (100 * n,), "f8")[100 * comm.rank : 100 * comm.rank + 100] = 1.0
        strip = slice(10 * comm.rank, 10 * comm.rank + 10)
        f.create_dataset("strips", (10 * n, 1000), "u1")[strip] = 7
    found = survey(comm, path)
    assert found["slabs"][2] == n and found["strips"][2] == n


@pytest.mark.parametrize(
    ("step", "error"),
    [("_write_share", OSError(28, "No space left on device")), ("_place", MemoryError())],
    ids=["writing-its-share", "between-the-exchanges"],
)
def test_a_failure_on_one_rank_leaves_the_dataset_as_written(
    comm, shared_tmp, monkeypatch, step, error
) -> None:
    """A rank that cannot write its share (a full disk), or place what it received (out of
    memory, say), reports it: no rank is left waiting, every rank finishes the close, and
    the dataset is published as written."""
    if comm.rank == comm.size - 1:

        def fails(*args: Any) -> None:
            raise error

        monkeypatch.setattr(consolidate, step, fails)
    n = comm.size
    path = shared_tmp / f"failed{step}.h5"
    with hs.File(path, "w", subfiles=SUBFILES) as f:
        f.create_dataset("elements", (300 * n,), "f8")[comm.rank :: n] = patterns(n)["elements"][
            comm.rank :: n
        ]
    _, _, pieces, values = survey(comm, path)["elements"]
    assert values == patterns(n)["elements"].tobytes().hex()
    assert pieces == n  # the pieces as written: one strided piece per rank
    with hs.File(path, "r", verify=True) as f:
        assert not f.problems
        np.testing.assert_array_equal(f["elements"][...], patterns(n)["elements"])


def test_bytes_changed_before_the_close_are_never_rewritten_under_a_new_checksum(
    comm, shared_tmp
) -> None:
    n = comm.size
    path = shared_tmp / "changed.h5"
    with hs.File(path, "w", subfiles=SUBFILES) as f:
        d = f.create_dataset("elements", (300 * n,), "f8")
        d[comm.rank :: n] = patterns(n)["elements"][comm.rank :: n]
        if comm.rank == 0:  # another program changes an element rank 0 wrote (its first)
            writing = f._session.writing
            assert writing is not None
            source = writing.learned["/elements"].extents[0]
            fd = os.open(source.file, os.O_WRONLY)
            try:
                os.pwrite(fd, np.float64(-1.0).tobytes(), source.offset)
            finally:
                os.close(fd)
        comm.Barrier()
    _, _, pieces, _ = survey(comm, path)["elements"]
    assert pieces == n  # left as written: rank 0's piece keeps the checksum of what it passed
    with hs.File(path, "r") as f, raises_on_every_rank(comm, hs.ChecksumError, "elements"):
        f["elements"].read(verify=True)


def test_a_commit_rewrites_and_the_session_goes_on(comm, shared_tmp) -> None:
    n = comm.size
    path = shared_tmp / "committed.h5"
    want = patterns(n)["elements"]
    with hs.File(path, "w", subfiles=SUBFILES) as f:
        f.create_dataset("first", (300 * n,), "f8")[comm.rank :: n] = want[comm.rank :: n]
        f.commit()
        f.create_dataset("second", (300 * n,), "f8")[comm.rank :: n] = -want[comm.rank :: n]
    found = survey(comm, path)
    assert found["first"][:2] == [SUBFILES, True] and found["second"][:2] == [SUBFILES, True]
    assert found["first"][3] == want.tobytes().hex()
    assert found["second"][3] == (-want).tobytes().hex()
    with hs.File(path, "r", verify=True) as f:
        assert not f.problems


OPEN_AND_READ = """
import sys, time, json, h5py, numpy as np
began = time.perf_counter()
with h5py.File(sys.argv[1], "r") as f:
    names = list(f)
    x = f["owned"][...]
took = time.perf_counter() - began
with h5py.File(sys.argv[1], "r") as f:
    count = len(f["owned"].virtual_sources())
print(json.dumps([took, count, bool(np.array_equal(x, np.arange(len(x), dtype="f8")))]))
"""


def test_elements_owned_at_random_open_at_once(comm, shared_tmp) -> None:
    """250,000 elements, each written by a rank drawn at random (one index list per rank):
    about as many runs as elements, one strip per subfile after the close; plain h5py opens,
    lists and reads the file within a second (it took minutes with a mapping per run)."""
    size = 250_000
    path = shared_tmp / "owned.h5"
    mine = np.flatnonzero(owner(comm.size, size) == comm.rank)
    with hs.File(path, "w", subfiles=SUBFILES) as f:
        f.create_dataset("owned", (size,), "f8")[mine] = mine.astype("f8")
    took, count, right = json.loads(plain_h5py(comm, OPEN_AND_READ, str(path)))
    assert right and count == SUBFILES
    assert took < 1.0

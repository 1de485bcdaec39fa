"""Subfile identities, sizes and checksums: a subfile from another run, swapped subfiles, a
same-size overwrite are refused by default reads naming the subfile; a flipped data byte is
caught by verifying reads and by File.verify, naming the subfile and the byte offset (2 and 3
ranks in the suite). The ``h5subfile verify`` command is tested in tests/test_verify.py."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from ranks import on_root, plain_h5py, raises_on_every_rank, same_on_every_rank

import h5subfile as hs

N = 300  # values per rank


def write_run(comm, path: Path, offset: float = 0.0, subfiles: int = 2, **storage) -> Path:
    """One dataset /x of N float64 values per rank in 2 subfiles (``offset`` added)."""
    values = np.arange(comm.rank * N, (comm.rank + 1) * N) + offset
    with hs.File(path, "w", subfiles=subfiles) as f:
        f.write_dataset("x", values, **storage)
    return path


def expected(comm) -> np.ndarray:
    return np.arange(comm.size * N, dtype="f8")


def subfile_of(comm, master: Path, group: int) -> Path:
    """Collective: the subfile of ``group``, found by rank 0 (so no rank looks while rank 0
    changes the folder: a rank still globbing would miss a subfile being renamed)."""
    return on_root(comm, lambda: next(master.with_suffix(".subfiles").glob(f"s0-*-{group:05d}.h5")))


def opened(path: Path, **kwargs) -> hs.File:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return hs.File(path, "r", **kwargs)


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ 0x10]))


def test_clean_file_verifies_and_reads_bit_for_bit(comm, shared_tmp: Path) -> None:
    path = write_run(comm, shared_tmp / "run.h5")
    with opened(path, verify=True) as f:
        np.testing.assert_array_equal(f["x"][...], expected(comm))
        report = same_on_every_rank(comm, f.verify(), "report")
    assert report["clean"] and not report["bad"] and report["pieces"] == comm.size
    assert report["subfiles"] == 2 and report["checked_bytes"] == comm.size * N * 8
    with h5py.File(path, "r") as plain:  # the identity dataset does not disturb plain readers
        np.testing.assert_array_equal(plain["x"][...], expected(comm))


def test_subfile_of_another_run_is_refused(comm, shared_tmp: Path) -> None:
    on_root(comm, lambda: [(shared_tmp / d).mkdir() for d in "ab"])
    path = write_run(comm, shared_tmp / "a" / "run.h5")
    other = write_run(comm, shared_tmp / "b" / "run.h5", offset=0.5)  # same shape and sizes
    victim, source = subfile_of(comm, path, 1), subfile_of(comm, other, 1)
    on_root(comm, lambda: shutil.copyfile(source, victim))
    with opened(path) as f:
        with raises_on_every_rank(comm, hs.SubfileMismatchError, victim.name, "another run"):
            f["x"][...]
        np.testing.assert_array_equal(f["x"][:N], expected(comm)[:N])  # subfile 0 is fine
        report = f.verify()
    assert not report["clean"]
    assert any(b.get("subfile", "").endswith(victim.name) for b in report["bad"]), report


def test_swapped_subfiles_are_refused(comm, shared_tmp: Path) -> None:
    path = write_run(comm, shared_tmp / "run.h5", subfiles=comm.size)  # subfiles of one size
    first, second = subfile_of(comm, path, 0), subfile_of(comm, path, 1)

    def swap() -> None:
        spare = first.with_suffix(".tmp")
        os.rename(first, spare)
        os.rename(second, first)
        os.rename(spare, second)

    on_root(comm, swap)
    with opened(path) as f:
        with raises_on_every_rank(comm, hs.SubfileMismatchError, first.name, second.name):
            f["x"][:N]


def test_same_size_overwrite_is_refused(comm, shared_tmp: Path) -> None:
    path = write_run(comm, shared_tmp / "run.h5")
    victim = subfile_of(comm, path, 0)
    size = on_root(comm, lambda: victim.stat().st_size)
    on_root(comm, lambda: victim.write_bytes(np.random.default_rng(1).bytes(size)))
    with opened(path) as f:
        with raises_on_every_rank(comm, hs.SubfileMismatchError, victim.name, "overwritten"):
            f["x"][...]


def test_longer_subfile_is_reported_when_opening(comm, shared_tmp: Path) -> None:
    path = write_run(comm, shared_tmp / "run.h5")
    victim = subfile_of(comm, path, 1)

    def extend() -> None:
        with open(victim, "ab") as handle:
            handle.write(b"\0" * 10)

    on_root(comm, extend)
    with opened(path) as f:
        assert any(victim.name in p and "recorded" in p for p in f.problems), f.problems
        with raises_on_every_rank(comm, hs.SubfileMismatchError, victim.name):
            f["x"][...]


def _stored_at(path: Path, dataset: str, extent: int) -> tuple[Path, int, int]:
    """The file, byte offset and first element of an extent of a dataset."""
    with h5py.File(path, "r") as f:
        record = json.loads(f[dataset].attrs["h5subfile.layout"])
    found = record["extents"][extent]
    return path.parent / found["file"], found["offset"], found["start"][0]


def test_flipped_data_byte_is_caught_by_verifying_reads(comm, shared_tmp: Path) -> None:
    path = write_run(comm, shared_tmp / "run.h5")
    subfile, offset, start = on_root(comm, lambda: _stored_at(path, "/x", 1))
    on_root(comm, lambda: flip_byte(subfile, offset + 8 * 7 + 3))
    with opened(path) as f:
        data = f["x"][...]  # default reads do not check checksums
        assert (data != expected(comm)).sum() == 1
        with raises_on_every_rank(comm, hs.ChecksumError, subfile.name, f"offset {offset},"):
            f["x"].read(slice(start + 7, start + 8), verify=True)
        np.testing.assert_array_equal(f["x"].read(slice(0, N), verify=True), expected(comm)[:N])
        report = same_on_every_rank(comm, f.verify(), "report")
    (bad,) = report["bad"]
    assert bad["file"].endswith(subfile.name) and bad["offset"] == offset
    assert bad["length"] == N * 8 and not report["clean"]
    with opened(path, verify=True) as f:
        with raises_on_every_rank(comm, hs.ChecksumError, subfile.name):
            f["x"][start:]


@pytest.mark.parametrize("subfiles", ["node", "rank"])
def test_large_blocks_hashed_as_they_are_written_verify(
    comm, shared_tmp: Path, subfiles: str
) -> None:
    """Blocks of several HASH_SLICE slices are hashed slice by slice as they are written (the
    default plan's one shared file and file per process; collectively and by ``dset[box] =``):
    their recorded checksums are the blocks' own, verify finds them clean, and a byte flipped
    in a later slice is caught."""
    from h5subfile.io.posix import HASH_SLICE
    from h5subfile.layout.integrity import checksum

    count = (2 * HASH_SLICE + 4096) // 8 + 3  # two whole slices and a partial one, per rank
    mine = np.arange(comm.rank * count, (comm.rank + 1) * count, dtype="f8")
    path = shared_tmp / f"sliced-{subfiles}.h5"
    with hs.File(path, "w", subfiles=subfiles, async_writes=False, aggregators=None) as f:
        f.write_datasets({"a": mine, "b": -mine})
        d = f.create_dataset(
            "c", (count * comm.size,), "f8", start=(count * comm.rank,), count=(count,)
        )
        d[count * comm.rank : count * (comm.rank + 1)] = mine * 2
    whole = np.arange(comm.size * count, dtype="f8")
    with opened(path, verify=True) as f:
        for name, values in (("a", whole), ("b", -whole), ("c", whole * 2)):
            np.testing.assert_array_equal(f[name][...], values)
        report = same_on_every_rank(comm, f.verify(), "report")
    assert report["clean"] and report["pieces"] == 3 * comm.size
    last = (comm.size - 1) * count
    stored, offset, recorded = on_root(comm, lambda: _piece_at(path, "/a", last))
    assert recorded == checksum(np.arange(last, last + count, dtype="f8"))
    on_root(comm, lambda: flip_byte(stored, offset + 2 * HASH_SLICE + 5))
    with opened(path) as f:
        report = same_on_every_rank(comm, f.verify(), "report")
    (bad,) = report["bad"]
    assert bad["offset"] == offset and bad["length"] == count * 8


def _piece_at(path: Path, dataset: str, start: int) -> tuple[Path, int, str]:
    """The file, byte offset and recorded checksum of the piece of a 1-D dataset whose first
    element is ``start`` (a rank's block: its own extent, or a piece of its group's)."""
    with h5py.File(path, "r") as f:
        record = json.loads(f[dataset].attrs["h5subfile.layout"])
        itemsize = f[dataset].dtype.itemsize
    for extent in record["extents"]:
        for piece in extent["pieces"]:
            if piece["start"] == [start]:
                at = extent["offset"] + (start - extent["start"][0]) * itemsize
                held = path.parent / extent["file"] if extent["file"] else path  # "": the master
                return held, at, piece["checksum"]
    raise LookupError(f"no piece of {dataset} starts at {start}")


def test_partial_writes_end_with_the_checksum_of_the_final_bytes(comm, shared_tmp: Path) -> None:
    path = shared_tmp / "partial.h5"
    rows = 40
    lo = comm.rank * rows
    with hs.File(path, "w", subfiles=2) as f:
        d = f.create_dataset("grid", (comm.size * rows, 6), "i4", start=(lo, 0), count=(rows, 6))
        d[lo : lo + 25] = np.full((25, 6), 1, "i4")
        d[lo + 10 : lo + rows] = np.full((30, 6), 2, "i4")  # overlaps the first
        d[lo + 5 : lo + 6, 2:4] = np.full((1, 2), 3, "i4")  # repeated, inside
        t = f.create_dataset("t", (comm.size * rows,), "f4", start=(lo,), count=(rows,))
        t.write(np.zeros(rows, "f4"))  # whole block first, then a piece of it again
        t[lo + 1 : lo + 3] = np.array([5, 6], "f4")
    want = np.full((rows, 6), 2, "i4")
    want[:10] = 1
    want[5, 2:4] = 3
    with opened(path, verify=True) as f:
        np.testing.assert_array_equal(f["grid"][...], np.concatenate([want] * comm.size))
        assert f["t"][lo + 1 : lo + 4].tolist() == [5, 6, 0]
        report = f.verify()
    assert report["clean"], report["bad"]
    assert report["pieces"] == 2 * comm.size


def test_one_group_file_pieces_are_rank_blocks(comm, shared_tmp: Path) -> None:
    path = shared_tmp / "master.h5"
    with hs.File(path, "w", subfiles=1) as f:  # data in the master; 2-D tiles, not contiguous
        block = np.full((4, 3), comm.rank, "u2")
        f.write_dataset("tiles", block, start=(0, 3 * comm.rank))
    with opened(path, verify=True) as f:
        assert f["tiles"][...].tolist() == [list(np.repeat(range(comm.size), 3))] * 4
        assert f.verify()["clean"]


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_chunks_are_verified(comm, shared_tmp: Path, compression: str) -> None:
    path = write_run(comm, shared_tmp / "chunked.h5", chunks=(64,), compression=compression)

    def damage() -> tuple[Path, int]:
        subfile, _, _ = _stored_at(path, "/x", 0)
        with h5py.File(subfile, "r") as h5:
            info = h5["x"].id.get_chunk_info_by_coord((64,))
        flip_byte(subfile, info.byte_offset + info.size // 2)
        return subfile, info.byte_offset

    with opened(path, verify=True) as f:
        np.testing.assert_array_equal(f["x"][...], expected(comm))
        assert f.verify()["clean"]
    subfile, at = on_root(comm, damage)
    with opened(path) as f:
        report = same_on_every_rank(comm, f.verify(), "report")
        (bad,) = report["bad"]
        assert bad["offset"] == at and bad["file"].endswith(subfile.name)
        np.testing.assert_array_equal(f["x"].read(slice(N, None), verify=True), expected(comm)[N:])
        with raises_on_every_rank(comm, hs.ChecksumError, subfile.name, f"offset {at},"):
            f["x"].read(slice(0, 200), verify=True)


def test_files_are_open_before_the_hashing_starts(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank opens the files it writes directly before its hashing thread starts, so that
    opening them does not wait for a core behind the hashing (ranks as busy as cores):
    collective writes (``write_datasets``) and independent ones (``dset[box] = x``)."""
    from h5subfile.engine import integrity
    from h5subfile.io import posix

    events: list[tuple[str, str]] = []
    opening, starting = posix.RawFile.__init__, integrity.start_hashing

    def open_file(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        events.append(("open", os.path.basename(path)))
        opening(self, path, *args, **kwargs)

    def start(writes, *args, **kwargs):  # type: ignore[no-untyped-def]
        events.extend(("hash", os.path.basename(w.target.file)) for w in writes)
        return starting(writes, *args, **kwargs)

    def opened_first() -> None:
        hashed = [name for kind, name in events if kind == "hash"]
        assert hashed and len(set(hashed)) == 1  # file per process: one subfile, its own
        first_hash = events.index(("hash", hashed[0]))
        assert ("open", hashed[0]) in events[:first_hash], events
        events.clear()

    monkeypatch.setattr(posix.RawFile, "__init__", open_file)
    monkeypatch.setattr(integrity, "start_hashing", start)
    plan = dict(subfiles="rank", async_writes=False, aggregators=None)
    together, alone = shared_tmp / "order.h5", shared_tmp / "order-independent.h5"
    with hs.File(together, "w", **plan) as f:
        f.write_datasets({"a": np.arange(N) + comm.rank, "b": np.ones(N) * comm.rank})
    opened_first()
    with hs.File(alone, "w", **plan) as f:
        d = f.create_dataset("c", (N * comm.size,), "f8", start=(N * comm.rank,), count=(N,))
        d[N * comm.rank : N * (comm.rank + 1)] = np.full(N, comm.rank, "f8")
    opened_first()
    ranks = np.repeat(np.arange(comm.size), N)
    with opened(together) as f:
        np.testing.assert_array_equal(f["a"][...], np.tile(np.arange(N), comm.size) + ranks)
        np.testing.assert_array_equal(f["b"][...], ranks.astype("f8"))
    with opened(alone) as f:
        np.testing.assert_array_equal(f["c"][...], ranks.astype("f8"))


PLAIN_READ = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    print(np.asarray(f["x"][...]).tobytes().hex())
"""


@pytest.mark.parametrize(
    "case",
    [
        dict(subfiles=2),
        dict(subfiles=1),
        dict(subfiles=2, fillvalue=-1.0),
        dict(subfiles=2, maxshape=(None,)),
        dict(subfiles=2, async_writes=True, async_always=True),
        dict(subfiles=1, async_writes=True, async_always=True),
    ],
    ids=["2-subfiles", "one-group", "fill-value", "resizable", "write-behind", "one-group-behind"],
)
def test_no_checksums_keeps_what_was_written(comm, shared_tmp: Path, case) -> None:
    """The plan's ``checksums=False`` leaves out the checksums, never the data: a dataset
    without blocks, written by hyperslab, reads back bit for bit through h5subfile and plain
    h5py (it read zeros, or the fill value, before)."""
    path = shared_tmp / "nosums.h5"
    case = dict(case)
    create = {k: case.pop(k) for k in ("fillvalue", "maxshape") if k in case}
    values = np.arange(comm.rank * 100, (comm.rank + 1) * 100, dtype="f8") + 0.5
    with hs.File(path, "w", checksums=False, **case) as f:
        d = f.create_dataset("x", (comm.size * 100,), "f8", **create)
        d[comm.rank * 100 : (comm.rank + 1) * 100] = values
    want = np.arange(comm.size * 100, dtype="f8") + 0.5
    with opened(path) as f:
        np.testing.assert_array_equal(f["x"][...], want)
        report = same_on_every_rank(comm, f.verify(), "report")
        assert report["clean"] and report["no_checksums"], report
    assert plain_h5py(comm, PLAIN_READ, str(path)) == want.tobytes().hex()

"""repack on every rank of a job (1 and 2 ranks in the suite): datasets of every shape (N-D,
uneven, scalar, empty, compound, big-endian) copied bit for bit with slabs so small that rows
are cut, through aggregators, and compressed; a failure on one rank ends every rank with the
same error and leaves nothing at the target; refusals are the same on every rank."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from common import COMPOUND, expected, same
from ranks import on_root, raises_on_every_rank

import h5subfile as hs
from h5subfile.repack import repack


@pytest.fixture(scope="module")
def source(comm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file of this job's ranks, file per process: uneven prefix blocks, N-D, scalar..."""
    path = Path(on_root(comm, lambda: str(tmp_path_factory.mktemp("repack") / "src.h5")))
    rank = comm.rank
    rows = 1 + rank  # uneven
    first = sum(1 + r for r in range(rank))
    with hs.File(path, "w", comm=comm, subfiles="rank") as f:
        f.attrs["run"] = "repack"
        group = f.create_group("a/b")
        group.attrs["n"] = np.int32(3)
        total = sum(1 + r for r in range(comm.size))
        cube = expected("/a/b/cube", (total, 4, 3), np.dtype("f8"))[first : first + rows]
        written = group.write_datasets(
            {
                "cube": cube,
                "big_endian": expected("/a/b/big_endian", (total,), np.dtype(">i8"))[
                    first : first + rows
                ],
                "compound": expected("/a/b/compound", (total, 2), COMPOUND)[first : first + rows],
            }
        )
        written[0].attrs["units"] = "m"
        f.write_dataset("scalar", np.float32(1.5))
        f.create_dataset("empty", (0, 4), "u1")
    return path


def check_copy(comm, source: Path, target: Path) -> None:
    """Every rank reads both files whole: same objects, bytes and attributes."""
    with hs.File(source, "r", comm=comm) as a, hs.File(target, "r", comm=comm) as b:
        names: list[str] = []
        a.visit(names.append)
        copied: list[str] = []
        b.visit(copied.append)
        assert names == copied
        assert dict(a.attrs) == dict(b.attrs)
        for name in names:
            left, right = a[name], b[name]
            assert {k: str(v) for k, v in left.attrs.items()} == {
                k: str(v) for k, v in right.attrs.items()
            }, name
            if isinstance(left, hs.Dataset):
                assert isinstance(right, hs.Dataset)
                assert same(left[()], right[()]), name


PLANS = {
    "conventional, 48-byte slabs": (dict(subfiles=1), 48),  # rows of the cube cut in two
    "file per process, aggregators": (dict(subfiles="rank", aggregators=1), 100),
    "gzip, whole shares": (dict(subfiles=1, compression="gzip"), 100),
}


@pytest.mark.parametrize("plan", PLANS, ids=list(PLANS))
def test_copies_bit_for_bit(comm, source: Path, shared_tmp: Path, plan: str) -> None:
    fields, slab = PLANS[plan]
    target = shared_tmp / "out.h5"
    summary = repack(source, target, comm, slab_size=slab, **fields)
    assert summary.datasets == 5 and summary.groups == 2 and summary.attributes == 3
    check_copy(comm, source, target)
    with hs.File(target, "r", comm=comm) as f:
        cube = f["a/b/cube"]
        assert cube.compression == fields.get("compression")
        assert ("virtual" in cube.storage) == (summary.subfiles > 1), cube.storage
    assert sorted(os.listdir(shared_tmp)) == ["out.h5"] + (
        ["out.subfiles"] if summary.subfiles > 1 else []
    )


@pytest.mark.parametrize("slab", [1 << 20, 48], ids=["batched", "slabs"])
def test_failure_on_one_rank_leaves_nothing(
    comm, source: Path, shared_tmp: Path, slab: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h5subfile.io.boxes import BoxReader

    real_read = BoxReader.read_direct
    last = comm.size - 1

    def read(self: BoxReader, layout, dtype, box, out=None, verify=False, name="", fill=None):
        if comm.rank == last and name == "/a/b/compound":
            raise OSError(5, "simulated read failure")
        return real_read(self, layout, dtype, box, out, verify, name, fill)

    monkeypatch.setattr(BoxReader, "read_direct", read)
    target = shared_tmp / "out.h5"
    where = f"[rank {last}] " if comm.size > 1 else ""
    with raises_on_every_rank(comm, hs.RankIOError, f"{where}OSError: [Errno 5] simulated"):
        repack(source, target, comm, slab_size=slab, subfiles="rank")
    assert on_root(comm, lambda: os.listdir(shared_tmp)) == []


def test_refusals_are_the_same_on_every_rank(comm, source: Path, shared_tmp: Path) -> None:
    with raises_on_every_rank(comm, hs.SameFileError, "onto itself"):
        repack(source, source, comm)
    with raises_on_every_rank(comm, hs.RankValueError, "slab_size=0"):
        repack(source, shared_tmp / "out.h5", comm, slab_size=0)
    on_root(comm, lambda: (shared_tmp / "out.subfiles").mkdir())
    with raises_on_every_rank(comm, hs.FileExistsH5SubfileError, "out.subfiles exists"):
        repack(source, shared_tmp / "out.h5", comm)
    assert on_root(comm, lambda: os.listdir(shared_tmp)) == ["out.subfiles"]


def test_links_are_copied_or_skipped(comm, shared_tmp: Path) -> None:
    """Soft, external and further hard links are made again in the copy, as they were (plain
    h5py follows them there); ``skip_links`` leaves them out and lists them."""

    def write() -> str:
        import h5py

        path = shared_tmp / "links.h5"
        with h5py.File(path, "w") as f:
            f["g/a"] = np.arange(5)
            f["soft"] = h5py.SoftLink("/g/a")
            f["hard"] = f["g/a"]
            f["ext"] = h5py.ExternalLink("elsewhere.h5", "/x")
        return str(path)

    source = Path(on_root(comm, write))
    target = shared_tmp / "out.h5"
    summary = repack(source, target, comm)
    assert summary.skipped_links == []

    def read() -> list:
        import h5py

        with h5py.File(target) as f:
            links = {n: type(f.get(n, getlink=True)).__name__ for n in f}
            same = f["hard"].id == f["g/a"].id
            return [links, f["soft"][()].tolist(), f["hard"][()].tolist(), same]

    assert on_root(comm, read) == [
        {"g": "HardLink", "soft": "SoftLink", "hard": "HardLink", "ext": "ExternalLink"},
        list(range(5)),
        list(range(5)),
        True,
    ]
    summary = repack(source, target, comm, skip_links=True, force=True)
    assert summary.skipped_links == [
        "/ext (external link to elsewhere.h5:/x)",
        "/hard (hard link to /g/a)",
        "/soft (soft link to /g/a)",
    ]
    with hs.File(target, "r", comm=comm) as f:
        assert list(f) == ["g"] and f["g/a"][...].tolist() == list(range(5))


def test_reference_attributes_are_refused_by_name(comm, shared_tmp: Path) -> None:
    """An HDF5 reference cannot be copied as what it is (h5subfile writes no references):
    refused, naming the attribute and its target, with nothing left behind."""

    def write() -> str:
        import h5py

        path = shared_tmp / "refs.h5"
        with h5py.File(path, "w") as f:
            x = f.create_dataset("x", data=np.arange(4))
            x.attrs["me"] = x.ref
        return str(path)

    source = Path(on_root(comm, write))
    with raises_on_every_rank(
        comm, hs.UnsupportedDtypeError, "attribute 'me' of /x: HDF5 object reference to /x"
    ):
        repack(source, shared_tmp / "out.h5", comm)
    assert on_root(comm, lambda: os.listdir(shared_tmp)) == ["refs.h5"]


def test_dimension_scales_are_made_again(comm, shared_tmp: Path) -> None:
    """A file with dimension scales (as netCDF-4 writes them) repacked: the copy has the same
    scales, attachments and labels, as plain h5py sees them."""

    def write() -> str:
        import h5py

        path = shared_tmp / "scaled.h5"
        with h5py.File(path, "w") as f:
            x = f.create_dataset("x", data=np.arange(4.0))
            x.make_scale("x axis")
            v = f.create_dataset("g/v", data=np.ones((4, 2)))
            v.dims[0].attach_scale(x)
            v.dims[1].label = "pair"
        return str(path)

    source = Path(on_root(comm, write))
    target = shared_tmp / "scaled_copy.h5"
    repack(source, target, comm, subfiles=min(2, comm.size))

    def seen() -> list:
        import h5py

        with h5py.File(target) as f:
            v = f["g/v"]
            return [
                [s.name for s in v.dims[0].values()],
                v.dims[0].keys(),
                v.dims[1].label,
                h5py.h5ds.is_scale(f["x"].id),
                v[...].tolist(),
            ]

    assert on_root(comm, seen) == [["/x"], ["x axis"], "pair", True, [[1.0, 1.0]] * 4]


def damaged_copy(comm, source: Path, folder: Path) -> Path:
    """Collective: a copy of ``source`` in ``folder`` (made on rank 0) with one byte of the
    last stored extent of /a/b/cube flipped."""

    def damage() -> str:
        import json
        import shutil

        import h5py

        copy = folder / source.name
        shutil.copy(source, copy)
        subfiles = source.with_suffix(".subfiles")
        if subfiles.exists():
            shutil.copytree(subfiles, copy.with_suffix(".subfiles"))
        with h5py.File(copy, "r") as f:
            extent = json.loads(f["a/b/cube"].attrs["h5subfile.layout"])["extents"][-1]
        with open(folder / extent["file"] if extent["file"] else copy, "r+b") as stored:
            stored.seek(extent["offset"] + 3)
            byte = stored.read(1)[0]
            stored.seek(extent["offset"] + 3)
            stored.write(bytes([byte ^ 1]))
        return str(copy)

    return Path(on_root(comm, damage))


def test_damaged_source_is_refused_on_every_rank_unless_not_verified(
    comm, source: Path, shared_tmp: Path
) -> None:
    """A flipped byte: every rank raises DamagedFileError carrying verify's report, and
    nothing is written; verify=False copies it, and the target's record says so."""
    copy = damaged_copy(comm, source, shared_tmp)
    before = on_root(comm, lambda: sorted(os.listdir(shared_tmp)))
    target = shared_tmp / "out.h5"
    with raises_on_every_rank(comm, hs.DamagedFileError, "fails verification (1 bad piece") as e:
        repack(copy, target, comm, subfiles=1)
    bad = e.value.report["bad"]
    assert [(b["dataset"], b["error"]) for b in bad] == [("/a/b/cube", "ChecksumError")]
    assert comm.allgather(e.value.report) == [e.value.report] * comm.size
    assert on_root(comm, lambda: sorted(os.listdir(shared_tmp))) == before
    summary = repack(copy, target, comm, verify=False, subfiles=1)
    assert summary.verification is None
    with hs.File(target, "r", comm=comm) as f:
        assert f.sessions[-1]["extra"]["repack"] == {"source": str(copy), "verified": False}
        assert f.verify()["clean"]  # the flipped byte, under the copy's own checksums


def test_record_extra_keeps_facts_and_refuses_its_own_keys(comm, shared_tmp: Path) -> None:
    path = shared_tmp / "facts.h5"
    with hs.File(path, "w", comm=comm) as f:
        f.record_extra("origin", {"run": 7, "tags": ["a"]})
        with raises_on_every_rank(comm, hs.RankValueError, "extra key 'steps'"):
            f.record_extra("steps", [])
        with raises_on_every_rank(comm, hs.RankTypeError, "is not JSON serializable"):
            f.record_extra("when", object())
    with hs.File(path, "r", comm=comm) as f:
        assert f.sessions[-1]["extra"]["origin"] == {"run": 7, "tags": ["a"]}
        with raises_on_every_rank(comm, hs.FileModeError, "read-only"):
            f.record_extra("origin", 1)

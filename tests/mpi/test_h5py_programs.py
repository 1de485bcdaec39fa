"""Parallel h5py programs (tests/programs/h5py_mpio.py) with ``h5py.File(..., driver="mpio")``
replaced by ``h5subfile.File``, the one line a user changes: every dataset is created with its
global shape and no declared block, and each rank writes whatever it owns. Each file is read
back here with this job's rank count and by plain h5py in a separate process, bit for bit
against numpy, and verified; two ranks writing one element, and independent reads of what
other ranks wrote before a flush, are refused on every rank. Any rank count (1-4 in the suite).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from ranks import on_root, plain_h5py, raises_on_every_rank

import h5subfile as hs

PROGRAMS_FILE = Path(__file__).resolve().parents[1] / "programs" / "h5py_mpio.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("h5py_mpio", PROGRAMS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROGRAMS = _load()
NAMES = [program.__name__ for program in PROGRAMS.PROGRAMS]


def with_h5subfile(plan: dict[str, Any]) -> SimpleNamespace:
    """The ``h5py`` a program sees once its one line is changed: ``h5subfile.File``."""
    return SimpleNamespace(File=lambda *args, **kwds: hs.File(*args, **plan, **kwds))


GROUPINGS = {"one file": {"subfiles": 1}, "two": {"subfiles": 2}, "rank": {"subfiles": "rank"}}


@pytest.fixture(scope="module", params=list(GROUPINGS))
def written(
    request: pytest.FixtureRequest, comm, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """Every program run by this job, with h5subfile and one grouping, into a new folder."""
    name = request.param
    if name == "two" and comm.size < 2:
        pytest.skip("two subfiles need two ranks")
    folder = Path(on_root(comm, lambda: str(tmp_path_factory.mktemp(name.replace(" ", "_")))))
    real = PROGRAMS.h5py
    PROGRAMS.h5py = with_h5subfile(GROUPINGS[name])
    try:
        for program in PROGRAMS.PROGRAMS:
            program(str(folder / f"{program.__name__}.h5"), comm)
    finally:
        PROGRAMS.h5py = real
    return folder, name


@pytest.mark.parametrize("program", NAMES)
def test_h5subfile_reads_back_what_numpy_computes(comm, written, program: str) -> None:
    folder, _ = written
    want = PROGRAMS.expected(comm.size)[program]
    with hs.File(folder / f"{program}.h5", "r") as f:
        assert not f.problems
        datasets = sorted(k for k in f.keys() if isinstance(f[k], hs.Dataset))
        assert datasets == sorted(want)
        for key, expected in want.items():
            got = np.asarray(f[key][()])
            assert got.dtype == expected.dtype and got.shape == expected.shape, key
            assert got.tobytes() == expected.tobytes(), (program, key, got, expected)
        report = f.verify()
        assert report["clean"] and not report["no_checksums"], report


def test_plain_h5py_reads_every_file_bit_for_bit(comm, written) -> None:
    folder, _ = written
    out = on_root(
        comm,
        lambda: subprocess.run(
            [sys.executable, str(PROGRAMS_FILE), "--check", str(folder), str(comm.size)],
            capture_output=True,
            text=True,
        ),
    )
    assert out.returncode == 0, out.stderr
    assert f"checked {len(NAMES)} files" in out.stdout


def test_files_hold_what_is_recorded(comm, written) -> None:
    folder, grouping = written
    with hs.File(folder / "round_robin.h5", "r") as f:
        layout = f["rows"].layout
        assert layout is not None and layout.learned
        pieces = [p for e in layout.extents for p in e.pieces]
        # rank r's rows r, r + P, ... are one strided piece, one VDS mapping
        assert sorted(p.rank for p in pieces) == list(range(comm.size))
        assert all(
            p.count[0] == len(range(p.rank, 4 * comm.size + 1, comm.size))
            for p in pieces
            if p.count
        )
        assert f["dset"].attrs["Units"] == "Images per second"
        if grouping != "one file" and comm.size > 1:
            assert "virtual" in f["rows"].storage


def test_two_ranks_writing_one_element_are_refused_on_every_rank(comm, shared_tmp) -> None:
    if comm.size < 2:
        pytest.skip("two ranks")
    for when in ("flush", "close"):
        f = hs.File(shared_tmp / f"{when}.h5", "w", subfiles=2)
        d = f.create_dataset("x", (4 * comm.size, 3), "i4")
        d[4 * comm.rank : 4 * comm.rank + 4] = comm.rank
        d[0, 1] = comm.rank  # every rank writes element [0, 1]
        fragments = ("overlaps rank 0 region", "in dataset /x", "(both hold [0:1, 1:2])")
        if when == "flush":
            with raises_on_every_rank(comm, hs.OverlapError, *fragments):
                f.flush()
            with raises_on_every_rank(comm, hs.OverlapError, "after an error in this session"):
                f.close()
        else:
            with raises_on_every_rank(comm, hs.OverlapError, *fragments):
                f.close()
            with warnings.catch_warnings():  # rank 0 warns that /x cannot be trusted
                warnings.filterwarnings("ignore", ".*cannot be trusted", RuntimeWarning)
                done = hs.File(shared_tmp / f"{when}.h5", "r")
            assert any("/x cannot be trusted" in p for p in done.problems)
            with done, pytest.raises(hs.IncompleteFileError, match="two ranks wrote"):
                done["x"][...]  # kept, refused when read


@pytest.mark.parametrize("subfiles", [1, 2])
def test_ranks_writing_the_same_values_to_the_same_elements(comm, shared_tmp, subfiles) -> None:
    """Every rank writing a coordinate variable whole, or the same row, with the same values
    (as real models do): no choice is left undefined, so the file keeps one copy, read by every
    rank after a flush and by plain h5py; different values there stay refused."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"same{subfiles}.h5"
    with hs.File(path, "w", subfiles=min(subfiles, size)) as f:
        lat = f.create_dataset("lat", (5,), "f8")
        t = f.create_dataset("t", (2 * size, 3), "i4")
        lat[...] = np.linspace(-2.0, 2.0, 5)  # every rank, the same values
        t[2 * rank : 2 * rank + 2] = rank
        row = f.create_dataset("row", (2, 3), "i4", fillvalue=-1)
        row[1, :] = [7, 8, 9]  # every rank, the same row
        f.flush()
        assert lat[...].tolist() == np.linspace(-2.0, 2.0, 5).tolist()
        assert row[1].tolist() == [7, 8, 9]  # row 0, never written, is read after the close
    listing = plain_h5py(
        comm,
        "import sys, h5py, json; f = h5py.File(sys.argv[1]);"
        "print(json.dumps([f['lat'][...].tolist(), f['t'][...].tolist(), f['row'][1].tolist()]))",
        str(path),
    )
    rows = [[r] * 3 for r in range(size) for _ in range(2)]
    assert json.loads(listing) == [np.linspace(-2.0, 2.0, 5).tolist(), rows, [7, 8, 9]]
    if size < 2:
        return
    f = hs.File(shared_tmp / "differ.h5", "w")
    d = f.create_dataset("c", (3,), "f8")
    d[...] = [1.0, 2.0, 3.0 + rank]  # the same elements, different values
    with raises_on_every_rank(comm, hs.OverlapError, "overlaps rank 0 region"):
        f.close()
    # Written over in parts, the pieces' checksums come from the file at close: the same for
    # every rank of a subfile, whatever each wrote, so they prove nothing
    f = hs.File(shared_tmp / "mixed.h5", "w", subfiles=1)
    d = f.create_dataset("m", (10,), "f8")
    d[0:10] = np.full(10, rank, "f8")
    d[0:5] = np.full(5, 10 + rank, "f8")
    with raises_on_every_rank(comm, hs.OverlapError, "overlaps rank 0 region"):
        f.close()


@pytest.mark.parametrize("subfiles", [1, 2])
def test_a_later_session_grows_a_dataset(comm, shared_tmp, subfiles) -> None:
    """A time series grown by later sessions, as models append an output step to the file
    they reopen: the new rows go to the new session's subfiles, what earlier sessions wrote
    stays; writing their elements again with the same values changes nothing, with other
    values (or shrinking below them) is refused on every rank; plain h5py and verify agree."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"series{subfiles}.h5"
    with hs.File(path, "w", subfiles=min(subfiles, size)) as f:
        t = f.create_dataset("t", (1, size), "f8", maxshape=(None, size), fillvalue=-1.0)
        t[0, rank] = rank
        f.create_dataset("axis", (size,), "i4")[rank] = rank
    for step in range(1, 4):
        with hs.File(path, "a", subfiles=min(subfiles, size)) as f:
            t = f["t"]
            t.resize(step + 1, axis=0)
            t[step, rank] = 10 * step + rank
            f["axis"][rank] = rank  # the same value again: nothing to write
            if step == 1:
                with pytest.raises(hs.FileModeError, match="not those it holds"):
                    f["axis"][rank] = rank + 1
                with pytest.raises(hs.FileModeError, match="an earlier write session wrote"):
                    t[0:2, rank] = [5, 6]
                with raises_on_every_rank(comm, hs.UnsupportedError, "an earlier session"):
                    t.resize(0, axis=0)
    want = [[10.0 * step + r for r in range(size)] for step in range(4)]
    want[0] = [float(r) for r in range(size)]
    with hs.File(path, "r") as f:
        assert f["t"][...].tolist() == want and f["t"].maxshape == (None, size)
        assert f.verify()["clean"]
    listing = plain_h5py(
        comm,
        "import sys, h5py, json; print(json.dumps(h5py.File(sys.argv[1])['t'][...].tolist()))",
        str(path),
    )
    assert json.loads(listing) == want


def test_writing_over_what_another_rank_wrote_before_a_flush_is_refused_at_once(
    comm, shared_tmp
) -> None:
    if comm.size < 2:
        pytest.skip("two ranks")
    f = hs.File(shared_tmp / "known.h5", "w", subfiles="rank")
    d = f.create_dataset("x", (6,), "i4", fillvalue=-9)
    if comm.rank == 0:
        d[0:4] = 1
    f.flush()  # rank 1 knows rank 0's [0:4] from here on
    if comm.rank == 0:
        d[4:6] = 5  # not known to rank 1
    if comm.rank == 1:
        d[2:4] = 2
        with pytest.raises(hs.OverlapError, match=r"rank 1 region \[2:4\] overlaps rank 0"):
            d[0:6]  # neither a guess at [4:6] nor two values for [2:4]
    with raises_on_every_rank(comm, hs.OverlapError, "region [2:4] overlaps rank 0 region"):
        f.flush()
    with raises_on_every_rank(comm, hs.OverlapError, "after an error in this session"):
        f.close()


def test_a_chunk_written_again_is_refused_before_anything_is_written(comm, shared_tmp) -> None:
    rank, last = comm.rank, comm.size - 1
    with hs.File(shared_tmp / "again.h5", "w", subfiles="rank") as f:
        d = f.create_dataset(
            "x", (4 * comm.size,), "i4", chunks=(4,), compression="gzip", fillvalue=-7
        )
        with d.collective:
            d[4 * rank : 4 * rank + 2] = [rank, rank]
        with raises_on_every_rank(comm, hs.UnsupportedError, "Nothing of this call was written"):
            with d.collective:  # the last rank's chunk again; the others write elsewhere
                if rank == last:
                    d[4 * rank + 2 : 4 * rank + 4] = [9, 9]
                else:
                    d[4 * rank + 4] = 8  # the next rank's chunk, in this rank's own subfile
        with d.collective:
            whole = d[...]
    want = np.full(4 * comm.size, -7, "i4")
    for r in range(comm.size):
        want[4 * r : 4 * r + 2] = r
    assert whole.tolist() == want.tolist()  # the refused call stored nothing
    with hs.File(shared_tmp / "again.h5", "r") as f:
        assert f["x"][...].tolist() == want.tolist() and f.verify()["clean"]


def test_reads_of_other_ranks_data_wait_for_a_flush(comm, shared_tmp) -> None:
    with hs.File(shared_tmp / "r.h5", "w", subfiles="rank") as f:
        d = f.create_dataset("x", (comm.size, 2), "f8", fillvalue=np.nan)
        d[comm.rank] = [comm.rank, -comm.rank]
        assert np.array_equal(d[comm.rank], [comm.rank, -comm.rank])  # its own, at once
        other = (comm.rank + 1) % comm.size
        if comm.size > 1:
            with pytest.raises(hs.FileModeError, match="File.flush"):
                d[other]
        f.flush()
        assert np.array_equal(d[other], [other, -other])
        with d.collective:  # a collective read shares what every rank wrote since, too
            d[comm.rank] = [comm.rank + 0.5, 0]
            whole = d[...]
        assert np.array_equal(whole[:, 0], np.arange(comm.size) + 0.5)
        grown = f.create_dataset("y", (comm.size + 1,), "f8", fillvalue=-1.0)
        grown[comm.rank] = comm.rank
        with grown.collective:
            assert np.array_equal(grown[...], [*range(comm.size), -1.0])  # never written: fill


def test_bad_selections_and_data_are_refused_with_their_cause(comm, shared_tmp) -> None:
    with hs.File(shared_tmp / "bad.h5", "w") as f:
        d = f.create_dataset("x", (6, 4), "i4")
        with pytest.raises(hs.DataShapeError, match=r"shape \(3,\) does not match"):
            d[0:2, :] = np.arange(3)
        with pytest.raises(hs.DataShapeError, match="without losing information"):
            d[0] = np.arange(4.5, 8.5)  # floats into integers: h5py would truncate
        with pytest.raises(hs.SelectionError, match="must increase"):
            d[[2, 1], :] = 0
        with pytest.raises(hs.FileModeError, match="d\\[selection\\] = data"):
            d.write(np.zeros((6, 4), "i4"))
        with raises_on_every_rank(comm, hs.PlanError, "beyond its maxshape"):
            g = f.create_dataset("g", (2,), "i4", maxshape=(3,))
            g.resize(4, axis=0)
        with raises_on_every_rank(comm, hs.UnsupportedError, "only a dataset created"):
            d.resize((7, 4))
        with pytest.raises(hs.UnsupportedError, match="atomic mode"):
            f.atomic = True
    with pytest.raises(hs.UnsupportedError, match="driver='core'"):
        hs.File(shared_tmp / "core.h5", "w", driver="core")


def test_a_rank_in_another_call_than_a_collective_write_stops_every_rank(comm, shared_tmp) -> None:
    if comm.size < 2:
        pytest.skip("two ranks")
    f = hs.File(shared_tmp / "m.h5", "w", subfiles=2)
    d = f.create_dataset("x", (comm.size,), "i4")
    with raises_on_every_rank(comm, hs.CollectiveMismatchError, "out of step"):
        if comm.rank == 0:
            f.flush()
        else:
            with d.collective:
                d[comm.rank] = 1
    assert on_root(comm, lambda: os.path.exists(shared_tmp / "m.h5")) is False  # abandoned


def test_an_error_of_a_collective_write_is_raised_by_every_rank_at_the_next_call(
    comm, shared_tmp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h5subfile.io.posix import RawFile

    last = comm.size - 1
    f = hs.File(shared_tmp / "k.h5", "w", subfiles="rank")
    d = f.create_dataset("x", (comm.size, 2), "i4")
    kept = f.create_dataset("y", (comm.size,), "i4")
    kept[comm.rank] = comm.rank  # written before: published whatever follows
    f.flush()  # small writes are combined: the flush writes them
    if comm.rank == last:

        def full(self, pieces, owned=False):
            raise OSError(28, "No space left on device (simulated)")

        monkeypatch.setattr(RawFile, "write_pieces", full)
    with d.collective:  # returns on every rank: the call has no closing round
        d[comm.rank] = [comm.rank, comm.rank]  # small: combined, written by the next call
    where = f"[rank {last}] " if comm.size > 1 else ""
    with raises_on_every_rank(comm, hs.RankIOError, f"{where}OSError: [Errno 28]"):
        f.flush()
    monkeypatch.undo()
    if comm.rank == last:  # what the failed write stored is unknown: never read as written
        with pytest.raises(hs.RankIOError, match="No space left"):
            d[comm.rank]
    with raises_on_every_rank(comm, hs.RankIOError, "No space left"):
        f.close()  # the session failed: /x, which a write of failed, is left out
    with hs.File(shared_tmp / "k.h5", "r") as done:
        assert "x" not in done and done["y"][...].tolist() == list(range(comm.size))


def test_h5pys_surface_for_parallel_programs(comm, shared_tmp) -> None:
    rank, size = comm.rank, comm.size
    with hs.File(shared_tmp / "s.h5", "w", driver="mpio", comm=comm, libver="latest") as f:
        assert f.driver == "mpio" and f.atomic is False
        f.atomic = False
        f["table"] = np.arange(6.0).reshape(2, 3)  # every rank the same array
        if size > 1:
            with raises_on_every_rank(comm, hs.CollectiveMismatchError, "different arguments"):
                f.create_dataset("differs", data=np.full(3, rank))
        with raises_on_every_rank(comm, hs.DataShapeError, "without losing information"):
            f.create_dataset("truncated", data=np.arange(4.0) + 0.7, dtype="i4")
        f.create_dataset("whole", data=np.arange(4.0), dtype="i4")  # whole numbers: nothing lost
        mine = f.create_dataset("mine", (size,), "i4")
        mine[rank] = np.float64(rank)  # as HDF5 converts them
        assert mine[rank] == rank
        with raises_on_every_rank(comm, hs.RankValueError, "Shape tuple is incompatible"):
            f.create_dataset("short", (4,), data=np.arange(3))
        grid = f.create_dataset("grid", (2, 3), "i2", data=np.arange(6))  # fills the shape
        assert grid[...].tolist() == [[0, 1, 2], [3, 4, 5]] and grid.dtype == "i2"
        d = f.require_dataset("r", (size, 4), "f8")
        assert f.require_dataset("r", (size, 4), "f4").name == "/r"  # f4 converts to f8
        with pytest.raises(TypeError, match="shapes do not match"):
            f.require_dataset("r", (size, 5), "f8")
        with pytest.raises(TypeError, match="exactly"):
            f.require_dataset("r", (size, 4), "f4", exact=True)
        source = np.arange(8.0).reshape(2, 4) + 10 * rank
        d.write_direct(source, np.s_[1, :], np.s_[rank, :])
        d.attrs["units"] = "m"
        f["/"].attrs["run"] = 3
        f.flush()
        mine = np.zeros((3, 4))
        d.read_direct(mine, np.s_[rank, :], np.s_[2, :])
        assert mine[2].tolist() == source[1].tolist() and not mine[:2].any()
        assert np.asarray(d).shape == (size, 4) and d.len() == size
        del f["grid"]  # collective, as in h5py
        assert "grid" not in f
        f["grid"] = np.arange(6, dtype="i2").reshape(2, 3)  # the name is free again
    with hs.File(shared_tmp / "s.h5", "r") as f:
        assert f["table"][...].tolist() == [[0, 1, 2], [3, 4, 5]]
        assert f["r"][:, 0].tolist() == [4.0 + 10 * r for r in range(size)]
        assert f["r"].attrs["units"] == "m" and f.attrs["run"] == 3
        assert "differs" not in f  # the failed creations published nothing
        assert "truncated" not in f and "short" not in f
        assert f["whole"][...].tolist() == [0, 1, 2, 3]
        assert f["mine"][...].tolist() == list(range(size))
        assert f["grid"][...].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_resizing_along_any_axis_and_back(comm, shared_tmp) -> None:
    rank, size = comm.rank, comm.size
    with hs.File(shared_tmp / "grow.h5", "w", subfiles="rank") as f:
        d = f.create_dataset("g", (2, size), "i4", maxshape=(None, None), fillvalue=-1)
        d[:, rank] = [rank, rank]
        d.resize(2 * size, axis=1)  # wider: the new columns read as the fill value
        d[0, size + rank] = 10 + rank
        d.resize((1, 2 * size))  # shorter: row 1 is gone
        d.resize((3, 2 * size))  # longer again: rows 1 and 2 never written since
        d[2, rank] = 20 + rank
        with d.collective:
            whole = d[...]
        assert d.shape == (3, 2 * size) and d.maxshape == (None, None)
    want = np.full((3, 2 * size), -1, "i4")
    want[0, :size] = range(size)
    want[0, size:] = [10 + r for r in range(size)]
    want[2, :size] = [20 + r for r in range(size)]
    assert whole.tolist() == want.tolist()
    with hs.File(shared_tmp / "grow.h5", "r") as f:
        assert f["g"][...].tolist() == want.tolist() and f.verify()["clean"]
    out = on_root(
        comm,
        lambda: (
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import h5py, sys; f = h5py.File(sys.argv[1]); "
                    "print(f['g'][...].tolist(), f['g'].maxshape)",
                    str(shared_tmp / "grow.h5"),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        ),
    )
    assert out.strip() == f"{want.tolist()} (None, None)"

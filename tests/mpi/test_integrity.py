"""What a session publishes is what was written, and errors keep their cause (1, 2 and 3 ranks in
the suite):

- completeness is by region: writing part of a block twice does not count as writing it all;
- an error agreed on every rank ends the ``with`` block as itself, also through close();
- a failed session publishes nothing whose data was not written, and earlier data stays intact;
- failures of the operating system keep their built-in class (PermissionError) and errno;
- scalar (0-d) datasets work with any rank count, and plain h5py reads them.
"""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from ranks import on_root, plain_h5py, raises_on_every_rank, same_on_every_rank

import h5subfile as hs


def _all_objects(path: Path) -> list[str]:
    """Every group and dataset in the master, read with plain h5py (rank 0, broadcast)."""
    names: list[str] = []
    with h5py.File(path, "r") as f:
        f.visit(names.append)
    return sorted(names)


def test_the_same_half_twice_is_incomplete_naming_rank_and_region(comm, shared_tmp) -> None:
    rank, last = comm.rank, comm.size - 1
    path = shared_tmp / "twice.h5"
    with raises_on_every_rank(
        comm,
        hs.IncompleteFileError,
        f"/grid (rank {last})",
        f"rank {last} [{10 * last + 5}:{10 * last + 10}, 0:3] of its block "
        f"[{10 * last}:{10 * last + 10}, 0:3]",
    ):
        with hs.File(path, "w", subfiles=min(2, comm.size)) as f:
            d = f.create_dataset(
                "grid", (10 * comm.size, 3), "i4", start=(10 * rank, 0), count=(10, 3)
            )
            first = np.full((5, 3), rank, "i4")
            d[10 * rank : 10 * rank + 5, :] = first
            if rank == last:
                d[10 * rank : 10 * rank + 5, :] = first  # the same half again
            else:
                d[10 * rank + 5 : 10 * rank + 10, :] = first
    with warnings.catch_warnings():  # rank 0 warns that /grid is incomplete
        warnings.simplefilter("ignore", RuntimeWarning)
        g = hs.File(path, "r")
    with g:
        with raises_on_every_rank(comm, hs.IncompleteFileError, "/grid was not completely written"):
            g["grid"][...]


def test_pieces_covering_the_block_in_any_order_are_complete(comm, shared_tmp) -> None:
    rank = comm.rank
    with hs.File(shared_tmp / "pieces.h5", "w") as f:
        d = f.create_dataset("d", (8 * comm.size, 4), "i8", start=(8 * rank, 0), count=(8, 4))
        full = np.arange(8 * comm.size * 4, dtype="i8").reshape(-1, 4)
        mine = slice(8 * rank, 8 * rank + 8)
        d[8 * rank + 2 : 8 * rank + 6, 1:3] = full[mine][2:6, 1:3]  # a hole in the middle first
        d[mine, 0:1] = full[mine, 0:1]
        d[mine, 3:4] = full[mine, 3:4]
        d[mine, 0:2] = full[mine, 0:2]  # overlapping rewrites are fine
        d[8 * rank : 8 * rank + 2, 1:3] = full[mine][0:2, 1:3]
        d[8 * rank + 6 : 8 * rank + 8, 2:3] = full[mine][6:8, 2:3]
        d[8 * rank + 6 : 8 * rank + 8, 1:2] = full[mine][6:8, 1:2]
    with hs.File(shared_tmp / "pieces.h5", "r") as f:
        assert np.array_equal(f["d"][...], full)


def test_a_shape_error_on_one_rank_ends_the_block_as_itself(comm, shared_tmp) -> None:
    last = comm.size - 1
    with raises_on_every_rank(comm, hs.DataShapeError, f"rank {last}", "shape (3,)") as info:
        with hs.File(shared_tmp / "shape.h5", "w", subfiles=min(2, comm.size)) as f:
            d = f.create_dataset("d", (2 * comm.size,), "f4", start=(2 * comm.rank,), count=(2,))
            d.write(np.zeros(3 if comm.rank == last else 2, "f4"))
    assert not isinstance(info.value.__context__, hs.IncompleteFileError)
    names = on_root(comm, lambda: _all_objects(shared_tmp / "shape.h5"))
    assert names == []  # the one dataset was never written: not published


@pytest.mark.parametrize("commit", ["replace", "in-place"])
def test_a_failed_session_publishes_only_what_was_written(
    comm, shared_tmp, commit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if commit == "in-place":
        monkeypatch.setenv("H5SUBFILE_MASTER_COPY_LIMIT", "0")
    rank, size, last = comm.rank, comm.size, comm.size - 1
    path = shared_tmp / "steps.h5"
    subfiles = min(2, size)
    step0 = {"x": np.arange(5, dtype="f8") + 10 * rank, "id": np.full(5, rank, "i4")}
    with hs.File(path, "w", subfiles=subfiles) as f:
        f.create_group("Timestep_0").write_datasets(step0)
        f.attrs["kept"] = 1
    want0 = {
        "x": np.concatenate([np.arange(5, dtype="f8") + 10 * r for r in range(size)]),
        "id": np.repeat(np.arange(size, dtype="i4"), 5),
    }
    with raises_on_every_rank(comm, hs.DataShapeError, f"rank {last}"):
        with hs.File(path, "a", subfiles=subfiles) as f:
            f.create_group("Timestep_1").write_dataset("x", np.ones(4, "f8"))  # complete
            g = f.create_group("Timestep_2/inner")
            g.attrs["units"] = "m"
            g.create_dataset("y", (2 * size,), "f4", start=(2 * rank,), count=(2,))
            f.create_dataset("top", (2 * size,), "i2", start=(2 * rank,), count=(2,))
            f["top"].write(np.zeros(2, "i2"))
            x = f.create_dataset("Timestep_2/z", (2 * size,), "f4", start=(2 * rank,), count=(2,))
            x.write(np.zeros(3 if rank == last else 2, "f4"))  # agreed DataShapeError
    names = on_root(comm, lambda: _all_objects(path))
    assert names == [
        "Timestep_0",
        "Timestep_0/id",
        "Timestep_0/x",
        "Timestep_1",
        "Timestep_1/x",
        "top",
    ], names
    with hs.File(path, "r") as f:
        assert not f.problems, f.problems
        assert f.attrs["kept"] == 1
        for name, values in want0.items():
            got = f[f"Timestep_0/{name}"][...]
            assert got.tobytes() == values.astype(got.dtype).tobytes()  # bit for bit
        assert np.array_equal(f["Timestep_1/x"][...], np.ones(4 * size))
        assert np.array_equal(f["top"][...], np.zeros(2 * size, "i2"))


def test_close_after_a_caught_error_names_what_it_left_out(comm, shared_tmp) -> None:
    rank, last = comm.rank, comm.size - 1
    path = shared_tmp / "caught.h5"
    f = hs.File(path, "w")
    f.write_dataset("fine", np.arange(3, dtype="u2"))
    d = f.create_dataset("refused", (2 * comm.size,), "f8", start=(2 * rank,), count=(2,))
    with raises_on_every_rank(comm, hs.DataShapeError):
        d.write(np.zeros(5 if rank == last else 2))
    with raises_on_every_rank(
        comm, hs.IncompleteFileError, "after an error in this session (DataShapeError", "/refused"
    ):
        f.close()
    assert on_root(comm, lambda: _all_objects(path)) == ["fine"]


def _permission_denied_path(folder: Path) -> str | None:
    """A path this process may not create a file at (rank 0): a read-only folder for users;
    for root, who ignores permissions, a file under /sys (where sysfs refuses new files)."""
    if os.geteuid() != 0:
        locked = folder / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        return str(locked / "f.h5")
    probe = "/sys/h5subfile-permission-probe.h5"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
    except PermissionError:
        return probe
    except OSError:
        return None
    os.remove(probe)
    return None


def test_permission_denied_is_still_a_permission_error(comm, shared_tmp) -> None:
    target = on_root(comm, lambda: _permission_denied_path(shared_tmp))
    if target is None:
        pytest.skip("no path refuses this process here")
    with raises_on_every_rank(comm, hs.PermissionDeniedError, "[Errno", target) as info:
        hs.File(target, "w")
    error = info.value
    assert isinstance(error, PermissionError) and isinstance(error, hs.H5SubfileError)
    assert error.errno in (errno.EACCES, errno.EPERM) and error.strerror
    same_on_every_rank(comm, (error.errno, error.strerror), "errno")


@pytest.mark.parametrize("grouping", [1, "rank"])
def test_scalar_datasets_with_any_rank_count(comm, shared_tmp, grouping) -> None:
    rank = comm.rank
    path = shared_tmp / "scalars.h5"
    compound = np.dtype([("a", "<i4"), ("b", "<f8")])
    with hs.File(path, "w", subfiles=grouping) as f:
        s = f.create_dataset("s", (), "f8")
        assert s.block is None  # no rank declared one: any rank may write it, as in h5py
        s.write(np.float64(np.pi + rank))  # rank 0's value: the other ranks' are ignored
        t = f.write_dataset("g/t", np.int16(-7 - rank))
        assert t.shape == ()
        f.write_dataset("c", np.array((3, 2.5), compound))
        f.write_dataset("v", np.arange(3, dtype="u1") + rank)  # next to them, as ever
    with hs.File(path, "r") as f:
        assert not f.problems
        assert f["s"].shape == () and f["s"][()].tobytes() == np.float64(np.pi).tobytes()
        assert f["g/t"][()].tobytes() == np.int16(-7).tobytes()
        assert f["c"][()].tobytes() == np.array((3, 2.5), compound).tobytes()
        assert f["v"].shape == (3 * comm.size,)
    code = (
        "import h5py, sys\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    print(f['s'].shape, f['s'][()].hex(), f['g/t'][()], f['c'][()]['b'])\n"
    )
    out = plain_h5py(comm, code, str(path)).split()
    assert out == ["()", float(np.pi).hex(), "-7", "2.5"], out

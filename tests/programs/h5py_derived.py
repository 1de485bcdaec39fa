"""Parallel h5py programs that ask h5py whether it is parallel, and that derive their own classes
from h5py.File, h5py.Group and h5py.Dataset, and what numpy says their files must hold.

    mpiexec -n N h5subfile run h5py_derived.py OUT   # unmodified, served by h5subfile

Rank 0 prints a line per program: ``asks: QUESTION=ANSWER ...`` (what h5py says when asked
whether it is parallel, and the class of a file opened without a driver), then ``methods ok``,
``own init ok`` and ``nodes ok`` once each program's checks have passed, or the traceback of a
failed one on stderr (the exit status is then 1; the other programs still run).

The programs: a writer that writes in parallel when h5py says it can, and else gathers the data
on rank 0 and writes it serially (dedalus's fallback), plus a plain h5py file per rank; a File
class with methods and attributes of its own, opened with h5py.File's arguments; a File class
whose constructor takes its own arguments and opens with ``super().__init__(..., driver="mpio")``,
overriding ``create_dataset`` and ``__getitem__``; Group and Dataset classes of a program.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import h5py
import numpy as np

N = 5  # elements per rank


def values(n: int, seed: int) -> np.ndarray:
    """Deterministic content of a dataset (every rank computes the same)."""
    return ((np.arange(n, dtype=np.int64) * 7919 + seed) % 100_003).astype("f8")


def answers() -> dict[str, Any]:
    """Every way a program asks h5py whether it is parallel."""
    from h5py import h5
    from h5py.h5 import get_config

    return {
        "h5py.get_config().mpi": h5py.get_config().mpi,
        "h5py.h5.get_config().mpi": h5py.h5.get_config().mpi,  # dedalus asks this one
        "h5.get_config().mpi": h5.get_config().mpi,
        "get_config().mpi": get_config().mpi,
        "hasattr(h5py.File,'atomic')": hasattr(h5py.File, "atomic"),
        "hasattr(h5py.Dataset,'collective')": hasattr(h5py.Dataset, "collective"),
        "'mpio'in_h5py.registered_drivers()": "mpio" in h5py.registered_drivers(),
    }


def asks(folder: str, comm: Any) -> None:
    said = answers()
    mine = values(N, comm.rank)
    if h5py.h5.get_config().mpi:
        with h5py.File(os.path.join(folder, "asks.h5"), "w", driver="mpio", comm=comm) as f:
            tasks = f.create_group("tasks")
            u = tasks.create_dataset("u", (N * comm.size,), "f8")
            u[N * comm.rank : N * (comm.rank + 1)] = mine
    else:  # the serial fallback: every rank's data to rank 0, which writes alone
        gathered = comm.gather(mine)
        if comm.rank == 0:
            with h5py.File(os.path.join(folder, "asks.h5"), "w") as f:
                f["tasks/u"] = np.concatenate(gathered)
    with h5py.File(os.path.join(folder, f"plain_{comm.rank}.h5"), "w") as f:  # h5py's own
        f["x"] = mine
        said["plain"] = f"{type(f).__module__}.{type(f).__qualname__}"
    if comm.rank == 0:
        print("asks:", " ".join(f"{k}={v}" for k, v in said.items()), flush=True)


class Snapshot(h5py.File):
    """A File with methods and attributes of its own, opened with h5py.File's arguments."""

    kind = "snapshot"

    def write_field(self, name: str, comm: Any, data: np.ndarray) -> h5py.Dataset:
        field = self.create_dataset(name, (len(data) * comm.size,), data.dtype)
        field[len(data) * comm.rank : len(data) * (comm.rank + 1)] = data
        self.written = name
        return field


def methods(folder: str, comm: Any) -> None:
    import h5subfile

    mine = values(N, 10 + comm.rank)
    # "w-": opened once (a second open of the same object would find the file there)
    with Snapshot(os.path.join(folder, "snapshot.h5"), "w-", driver="mpio", comm=comm) as f:
        field = f.write_field("field", comm, mine)
        f.attrs["kind"] = f.kind
        assert isinstance(field, h5py.Dataset) and f.written == "field"
        assert isinstance(f, Snapshot) and isinstance(f, h5py.File) and isinstance(f, h5py.Group)
        assert isinstance(f, h5subfile.File) and type(f).__name__ == "Snapshot"
    with Snapshot(os.path.join(folder, f"snapshot_{comm.rank}.h5"), "w") as f:  # h5py's
        assert isinstance(f, Snapshot) and isinstance(f, h5py.File)
        assert not isinstance(f, h5subfile.File) and isinstance(f, h5py._hl.files.File)
        f.create_dataset("x", data=mine)
        assert f.kind == "snapshot"
    with h5py.File(os.path.join(folder, f"other_{comm.rank}.h5"), "w") as plain:
        assert not isinstance(plain, Snapshot)
    with h5py.File(os.path.join(folder, "other.h5"), "w", driver="mpio", comm=comm) as other:
        assert not isinstance(other, Snapshot) and isinstance(other, h5py.File)
    assert issubclass(Snapshot, h5py.File) and issubclass(Snapshot, h5py.Group)
    assert issubclass(h5py.File, h5py.Group) and not issubclass(h5py.Group, Snapshot)
    if comm.rank == 0:
        print("methods ok", flush=True)


class Checkpoint(h5py.File):
    """A File whose constructor takes its own arguments, and which keeps each step's datasets
    in a group of the step (overriding create_dataset and __getitem__, calling super())."""

    def __init__(self, path: str, comm: Any, step: int) -> None:
        self.step = step
        super().__init__(path, "w", driver="mpio", comm=comm)
        self.attrs["step"] = step

    def create_dataset(self, name: str, *args: Any, **kwds: Any) -> Any:
        return super().create_dataset(f"step_{self.step}/{name}", *args, **kwds)

    def __getitem__(self, name: str) -> Any:
        return super().__getitem__(f"step_{self.step}/{name}")


def own_init(folder: str, comm: Any) -> None:
    import h5subfile

    mine = values(N, 20 + comm.rank)
    with Checkpoint(os.path.join(folder, "checkpoint.h5"), comm, 3) as f:
        assert isinstance(f, Checkpoint) and isinstance(f, h5subfile.File) and f.step == 3
        u = f.create_dataset("u", (N * comm.size,), "f8")
        u[N * comm.rank : N * (comm.rank + 1)] = mine
        f.flush()
        comm.Barrier()
        assert f["u"][N * comm.rank : N * (comm.rank + 1)].tobytes() == mine.tobytes()
        again = type(f)(os.path.join(folder, "checkpoint_4.h5"), comm, 4)  # its class, again
        assert isinstance(again, Checkpoint) and type(again) is type(f)
        again.create_dataset("u", data=np.arange(3.0))
        again.close()
    if comm.rank == 0:
        print("own init ok", flush=True)


class Field(h5py.Dataset):
    """A program's Dataset class."""

    def total(self) -> float:
        return float(np.sum(self[()]))


class Folder(h5py.Group):
    """A program's Group class."""

    def names(self) -> list[str]:
        return sorted(self.keys())


def nodes(folder: str, comm: Any) -> None:
    import h5subfile

    with h5py.File(os.path.join(folder, "nodes.h5"), "w", driver="mpio", comm=comm) as f:
        x = f.create_dataset("g/x", data=np.arange(4.0))
        g = f["g"]
        assert isinstance(x, h5py.Dataset) and isinstance(g, h5py.Group)
        assert not isinstance(x, Field) and not isinstance(g, Folder)
        assert issubclass(Field, h5py.Dataset) and issubclass(Folder, h5py.Group)
        assert issubclass(type(x), h5py.Dataset) and not issubclass(type(x), Field)
        view = Field(x)  # h5subfile's objects have no low-level id: wrapped themselves
        assert isinstance(view, Field) and isinstance(view, h5subfile.Dataset)
        assert view.total() == 6.0 and Folder(g).names() == ["x"]
    with h5py.File(os.path.join(folder, f"plain_nodes_{comm.rank}.h5"), "w") as plain:
        plain["g/x"] = np.arange(5.0)
        field, group = Field(plain["g/x"].id), Folder(plain["g"].id)  # as in h5py
        assert isinstance(field, Field) and isinstance(field, h5py._hl.dataset.Dataset)
        assert field.total() == 10.0 and group.names() == ["x"]
        assert not isinstance(plain["g/x"], Field) and isinstance(plain["g/x"], h5py.Dataset)
    if comm.rank == 0:
        print("nodes ok", flush=True)


def expected(size: int) -> dict[str, dict[str, np.ndarray]]:
    """What numpy says each file holds, by file and dataset, for ``size`` ranks."""
    return {
        "asks": {"tasks/u": np.concatenate([values(N, r) for r in range(size)])},
        **{f"plain_{r}": {"x": values(N, r)} for r in range(size)},
        "snapshot": {"field": np.concatenate([values(N, 10 + r) for r in range(size)])},
        **{f"snapshot_{r}": {"x": values(N, 10 + r)} for r in range(size)},
        "checkpoint": {"step_3/u": np.concatenate([values(N, 20 + r) for r in range(size)])},
        "checkpoint_4": {"step_4/u": np.arange(3.0)},
    }


def main(argv: list[str]) -> None:
    """Each program in turn; one that fails (on every rank alike: they fail where their checks
    do) is reported by rank 0 on stderr, and the others still run."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    failed = []
    for program in (asks, methods, own_init, nodes):
        try:
            program(argv[1], comm)
        except Exception:
            failed.append(program.__name__)
            if comm.rank == 0:
                print(f"{program.__name__} failed:\n{traceback.format_exc()}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv)

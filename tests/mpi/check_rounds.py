"""Read the files of the exclusive-writer tests back and say, per file, whose data they hold.

argv: reader ("h5py": plain h5py, without h5subfile or MPI; "h5subfile": under mpiexec), then
master paths. Prints one JSON line (rank 0): per path, ``{"uuids": [session ids], "groups":
{"job<tag>": [x0 holds expected(tag, 0) bit for bit, x1 ..., x2 ...]}}`` or ``{"error": ...}``.
"""

import json
import sys

import numpy as np

N = 20_000  # as race_writer.py
STEPS = 3


def expected(tag: int, step: int, size: int) -> np.ndarray:
    return tag * 10**9 + step * 10**6 + np.arange(size * N, dtype="i8")


def verdict(tag: int, step: int, data: np.ndarray) -> bool:
    if data.dtype != np.dtype("i8") or data.ndim != 1 or data.size % N:
        return False
    return bool(np.array_equal(data, expected(tag, step, data.size // N)))


def with_h5py(path: str) -> dict:
    import h5py

    with h5py.File(path, "r") as f:
        record = json.loads(f.attrs["h5subfile"])
        groups = {
            name: [verdict(int(name[3:]), s, f[f"{name}/x{s}"][()]) for s in range(STEPS)]
            for name in f
        }
    return {"uuids": [s["uuid"] for s in record["sessions"]], "groups": groups}


def with_h5subfile(path: str) -> dict:
    import h5subfile as hs

    with hs.File(path, "r") as f:
        groups = {
            name: [verdict(int(name[3:]), s, f[f"{name}/x{s}"][...]) for s in range(STEPS)]
            for name in f
        }
        return {"uuids": [s["uuid"] for s in f.sessions], "groups": groups, "problems": f.problems}


def main() -> None:
    read = with_h5py if sys.argv[1] == "h5py" else with_h5subfile
    report = {}
    for path in sys.argv[2:]:
        try:
            report[path] = read(path)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            report[path] = {"error": f"{type(exc).__name__}: {exc}"}
    if sys.argv[1] == "h5py":
        print(json.dumps(report))
        return
    from mpi4py import MPI

    every = MPI.COMM_WORLD.allgather(report)
    assert all(r == every[0] for r in every), every  # every rank reads the same
    if MPI.COMM_WORLD.rank == 0:
        print(json.dumps(report))


main()

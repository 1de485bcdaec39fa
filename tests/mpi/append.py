"""Append a group to existing files with this job's rank count (a restarted job on another node
count): argv = grouping, then files."""

import sys

from common import expected, prefix_length
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
grouping = sys.argv[1]
kwargs = {"subfiles": int(grouping) if grouping.isdigit() else grouping}
for path in sys.argv[2:]:
    with hs.File(path, "a", **kwargs) as f:
        name = f"append{len(f.sessions)}"
        total = sum(prefix_length(r) for r in range(size))
        first = sum(prefix_length(r) for r in range(rank))
        full = expected(f"/{name}/x", (total,), "f8")
        g = f.create_group(name)
        g.attrs["appenders"] = size
        g.write_dataset("x", full[first : first + prefix_length(rank)])
        grid = expected(f"/{name}/grid", (size, 3), "u2")
        g.write_dataset("grid", grid[rank : rank + 1], start=(rank, 0))

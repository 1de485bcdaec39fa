"""Open an MPI-IO file with hints from --hint and IOR_HINT__MPI__ variables; print what the MPI
library reports with MPI_File_get_info."""

import json
import sys

from mpi4py import MPI

from h5subfile.bench.backends import MPIIOBackend
from h5subfile.bench.options import BenchOptions, parse_hints

options = BenchOptions(api="mpiio", test_file=sys.argv[1], hints=parse_hints(sys.argv[2:]))
backend = MPIIOBackend(options, MPI.COMM_WORLD)
backend.open(True, MPI.COMM_WORLD.rank)
hints = backend.effective_hints()
backend.close()
if MPI.COMM_WORLD.rank == 0:
    print(json.dumps(hints))

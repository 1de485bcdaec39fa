"""Open a file and read some datasets on every rank; print each rank's outcomes as JSON.

argv: path, dataset names. Outcome per name: ["ok", sum of values] or [error type, message].
"""

import json
import sys
import warnings

from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
report = {}
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = hs.File(sys.argv[1], "r")
    report["problems"] = f.problems
    for name in sys.argv[2:]:
        try:
            report[name] = ["ok", float(f[name][...].astype("f8").sum())]
        except Exception as exc:  # noqa: BLE001 - reported to the test
            report[name] = [type(exc).__name__, str(exc)]
    f.close()
except Exception as exc:  # noqa: BLE001 - reported to the test
    report["open"] = [type(exc).__name__, str(exc)]
everything = comm.gather(report)
if comm.rank == 0:
    print(json.dumps(everything))

"""Finding the MPI launcher for verbs that start MPI jobs themselves (demo, sweeps).

Importing this module does not import mpi4py (a driver that launches jobs must not itself
initialise MPI).
"""

from __future__ import annotations

import os
import shutil
import sys


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's, or .venv-phdf5's wrapper), else the one
    on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = beside if os.path.exists(beside) else shutil.which("mpiexec")
    if not found:
        raise RuntimeError(
            "no mpiexec found beside this Python or on PATH: install the 'mpich' wheel or an MPI"
        )
    return found

"""The multi-rank tests (pytest modules in tests/mpi), run as the suite's mpiexec jobs, in order.

Each job is one ``mpiexec -n N python -m mpi4py -m pytest ...`` (see ``STAGES`` in conftest.py);
a failure shows rank 0's pytest report, which holds every failing rank's report, and the command
that reruns the job by hand.
"""

from __future__ import annotations

import pytest

from conftest import STAGES, Stages


@pytest.mark.parametrize("name", [stage.name for stage in STAGES])
def test_stage(mpi_stages: Stages, name: str) -> None:
    run = mpi_stages.run(name)
    if not run.ok:
        pytest.fail(run.report(), pytrace=False)

"""The example on the README's first screen runs as written (``mpiexec -n 4 python example.py``)
and plain h5py, in a separate process, reads back what each rank wrote."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import MPIEXEC, ROOT, run_python


def first_example() -> str:
    """The first Python block of the README (its first screen)."""
    text = (ROOT.parent / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text.split("\n## ", 1)[0], re.S)
    assert block, "no Python example on the README's first screen"
    return block.group(1)


def test_the_first_screen_example_runs_and_plain_h5py_reads_it(tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(first_example())
    job = [str(MPIEXEC), "-n", "4", sys.executable, "example.py"]
    done = subprocess.run(job, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    read = run_python(
        "import sys, h5py, numpy as np\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    x = f['x'][...]\n"
        "    assert x.shape == (4, 1000), x.shape\n"
        "    assert all((x[r] == r).all() for r in range(4))\n"
        "    print(int(f.attrs['step']))\n",
        str(tmp_path / "example.h5"),
    )
    assert read.returncode == 0 and read.stdout.strip() == "0", read.stderr

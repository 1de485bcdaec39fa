"""``io/h5.create_virtual_dataset`` reuses one virtual dataspace and one source dataspace per
shape for all its mappings: every mapping must still be its own (HDF5 copies the dataspaces),
as HDF5 reports it and as plain h5py reads it, in this process and in a fresh one."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from conftest import run_python
from h5subfile.io.h5 import create_virtual_dataset, hdf5_facts, whole_sources
from h5subfile.io.objects import Groups
from h5subfile.layout.blocks import Block
from h5subfile.layout.hyperslab import Slab
from h5subfile.layout.validate import Mapping

SHAPE = (10, 7)
#: Boxes of the 10 x 7 dataset, of three different shapes, two of them twice, tiling it.
BOXES = [
    ((0, 0), (4, 7)),
    ((4, 0), (3, 2)),
    ((4, 2), (3, 5)),
    ((7, 0), (3, 2)),
    ((7, 2), (3, 5)),
]


def write_sources(folder: Path) -> np.ndarray:
    """One source file per box, holding the box's values of ``expected``."""
    expected = np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE)
    for k, (start, count) in enumerate(BOXES):
        box = tuple(slice(s, s + c) for s, c in zip(start, count))
        with h5py.File(folder / f"s{k}.h5", "w") as f:
            f["data"] = expected[box]
    return expected


def test_each_mapping_is_its_own(tmp_path: Path) -> None:
    expected = write_sources(tmp_path)
    master = tmp_path / "master.h5"
    sources = [(f"s{k}.h5", "data", start, count) for k, (start, count) in enumerate(BOXES)]
    with h5py.File(master, "w") as f:
        create_virtual_dataset(Groups(f), "/g/v", SHAPE, np.dtype("<i4"), whole_sources(sources))
    with h5py.File(master, "r") as f:
        facts = hdf5_facts(f["/g/v"])
        assert facts.mappings == tuple(
            Mapping(
                file,
                dataset,
                start,
                count,
                True,
                int(np.prod(count)),
                Slab.of_box(Block(start, count)),
                None,  # a source mapped whole: HDF5 keeps no shape for it
            )
            for file, dataset, start, count in sources
        )
        assert np.array_equal(f["/g/v"][...], expected)
    script = (
        "import h5py, json, sys\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    print(json.dumps(f['/g/v'][...].tolist()))\n"
    )
    out = run_python(script, str(master))
    assert out.returncode == 0, out.stderr
    assert np.array_equal(np.array(json.loads(out.stdout), dtype="<i4"), expected)

"""Ways to damage a copy of a subfiled file, shared by the tests of ``verify`` and of
``repack`` (which must refuse what ``verify`` reports): each returns what the report names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py

from conftest import run_python


def copy_file(written: Path, folder: Path) -> Path:
    """A copy of the subfiled file ``written`` (``run.h5`` and its folder) in ``folder``."""
    copy = folder / "run.h5"
    shutil.copy(written, copy)
    shutil.copytree(written.parent / "run.subfiles", folder / "run.subfiles")
    return copy


def flip_byte(path: Path, dataset: str) -> tuple[Path, int]:
    """Flip one byte in the second extent of ``dataset``; its subfile and byte offset."""
    code = (
        "import sys, json, h5py\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    e = json.loads(f[sys.argv[2]].attrs['h5subfile.layout'])['extents'][1]\n"
        "print(e['file'], e['offset'])\n"
    )
    result = run_python(code, str(path), dataset)
    assert result.returncode == 0, result.stderr
    name, offset = result.stdout.split()
    subfile = path.parent / name
    with open(subfile, "r+b") as handle:
        handle.seek(int(offset) + 17)
        byte = handle.read(1)[0]
        handle.seek(int(offset) + 17)
        handle.write(bytes([byte ^ 1]))
    return subfile, int(offset)


def swap_subfiles(copy: Path) -> str:
    """Swap the first two subfiles; the name of the first."""
    a, b = sorted((copy.parent / "run.subfiles").iterdir())
    a.rename(a.with_suffix(".tmp"))
    b.rename(a)
    a.with_suffix(".tmp").rename(b)
    return a.name


def remove_subfile(copy: Path) -> str:
    """Delete the second subfile; its name."""
    victim = sorted((copy.parent / "run.subfiles").iterdir())[1]
    victim.unlink()
    return victim.name


def move_offset(copy: Path) -> str:
    """A hostile record: the second extent of Timestep_0/x points at the subfile's start."""
    with h5py.File(copy, "r+") as f:
        record = json.loads(f["Timestep_0/x"].attrs["h5subfile.layout"])
        record["extents"][1]["offset"] = 0
        f["Timestep_0/x"].attrs["h5subfile.layout"] = json.dumps(record)
    return "/Timestep_0/x"


def damage_header(copy: Path) -> str:
    """A flipped byte in the object header of the subfile's first dataset (not in its data,
    which the checksums cover): plain h5py fails to read that dataset."""
    subfile = sorted((copy.parent / "run.subfiles").iterdir())[0]
    with h5py.File(subfile, "r") as f:
        name = next(n for n in f if n.startswith("Timestep"))
        dataset = f[name][next(iter(f[name]))] if isinstance(f[name], h5py.Group) else f[name]
        address = h5py.h5o.get_info(dataset.id).addr
    with open(subfile, "r+b") as handle:
        handle.seek(address + 20)
        byte = handle.read(1)[0]
        handle.seek(address + 20)
        handle.write(bytes([byte ^ 0xFF]))
    plain = run_python(
        "import sys, h5py\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    for name in [n for n, o in f.items() if isinstance(o, h5py.Group)]:\n"
        "        for key in f[name]:\n"
        "            f[name][key][...]\n",
        str(subfile),
    )
    assert plain.returncode != 0 and "checksum" in plain.stderr, plain.stderr
    return "its HDF5 structure is damaged"

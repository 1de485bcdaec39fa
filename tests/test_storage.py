"""Chunked and compressed subfiles, two-phase aggregation, alignment and transfer size: the files
that tests/mpi/test_storage.py wrote with 4 ranks (and read back with 1-5, stages of
tests/test_mpi.py) are read by plain h5py + hdf5plugin and h5dump, show the alignment on disk and
their plan in info; the aggregator's memory bound; coalesced writes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from conftest import ROOT, Stages, run_cli, run_mpi, run_python

ALIGNMENT = 4096


@pytest.fixture(scope="module")
def stored(mpi_stages: Stages) -> Path:
    """storage_{1,2,rank}.h5, written with 4 ranks by tests/mpi/test_storage.py."""
    return mpi_stages.data_after("write-4") / "storage"


@pytest.fixture(scope="module")
def aggregated(stored: Path) -> dict[str, Path]:
    """Every aggregator count: 1-4 with one subfile of 4 ranks, 1-2 with 2 subfiles of 2 ranks;
    small buffers (several rounds), alignment on. Key: grouping-count."""
    return {p.name.removeprefix("aggregated-"): p for p in sorted(stored.glob("aggregated-*"))}


def test_every_aggregator_count_was_written(aggregated: dict[str, Path]) -> None:
    assert sorted(aggregated) == ["1-1", "1-2", "1-3", "1-4", "2-1", "2-2"]


def test_plain_h5py_with_hdf5plugin_reads_the_masters(
    stored: Path, aggregated: dict[str, Path]
) -> None:
    for folder in [stored, *aggregated.values()]:
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "interop" / "plain_storage_check.py"),
                str(folder),
                str(ROOT / "mpi"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert "plain h5py checked" in result.stdout


@pytest.mark.skipif(shutil.which("h5dump") is None, reason="h5dump (hdf5-tools) not installed")
def test_h5dump_reads_compressed_subfiles_with_the_plugin_path(stored: Path) -> None:
    import hdf5plugin

    result = subprocess.run(
        ["h5dump", "-d", "/one/zstd", "-c", "3", str(stored / "storage_2.h5")],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HDF5_PLUGIN_PATH": hdf5plugin.PLUGIN_PATH},
    )
    assert result.returncode == 0, result.stderr
    assert "(0): 3693, 6332.67, 8972.33" in result.stdout  # expected("/one/zstd", ...)[:3]


def _offsets(path: Path) -> list[tuple[str, int]]:
    """(dataset, byte offset) of every contiguous dataset and every chunk of a file."""
    found: list[tuple[str, int]] = []

    def visit(name: str, obj: object) -> None:
        if not isinstance(obj, h5py.Dataset) or obj.is_virtual or obj.size == 0:
            return
        if obj.chunks is None:
            offset = obj.id.get_offset()
            if offset is not None:
                found.append((name, offset))
            return
        for i in range(obj.id.get_num_chunks()):
            found.append((f"{name}#{i}", obj.id.get_chunk_info(i).byte_offset))

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return found


def test_alignment_is_visible_in_the_files(aggregated: dict[str, Path]) -> None:
    for key in ("1-3", "2-2"):
        files = [*aggregated[key].glob("*.h5"), *aggregated[key].glob("*.subfiles/*.h5")]
        offsets = [o for f in files for o in _offsets(f)]
        assert len(offsets) > 20
        assert all(offset % ALIGNMENT == 0 for _, offset in offsets), offsets


def test_without_alignment_offsets_are_not_all_aligned(stored: Path) -> None:
    offsets = [o for f in (stored / "storage_2.subfiles").glob("*.h5") for o in _offsets(f)]
    assert any(offset % ALIGNMENT for _, offset in offsets)  # so the test above can fail


def test_aggregator_memory_stays_bounded(tmp_path: Path) -> None:
    mib, buffer_size = 192, 4 << 20
    out = run_mpi(2, "peak_memory.py", tmp_path / "big.h5", mib, buffer_size, timeout=300).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ok"] == [True, True]
    # The aggregator (rank 0) writes 2 x 192 MiB; it never holds more than a few buffers.
    assert max(result["growth"]) < 4 * buffer_size + (8 << 20), result
    assert max(result["growth"]) < (mib << 20) // 4, result


def test_info_shows_storage_and_plan(aggregated: dict[str, Path]) -> None:
    out = run_cli(1, "info", str(aggregated["2-2"] / "storage_2.h5")).stdout
    assert "chunks (64,) (straddling rank blocks), gzip level 4" in out, out
    assert "'aggregators': 2" in out and "'alignment': 4096" in out, out


WRITE_MANY = """
import sys, numpy as np, h5subfile as hs
with hs.File(sys.argv[1], 'w', subfiles='rank') as f:
    f.write_datasets({n: np.full(1000, i, 'f4') for i, n in enumerate('abcdefgh')})
    print(f.stats.writes)
"""


def test_a_ranks_neighbouring_pieces_go_out_in_one_write(tmp_path: Path) -> None:
    result = run_python(WRITE_MANY, str(tmp_path / "many.h5"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]  # 8 datasets, adjacent in the subfile: one pwritev

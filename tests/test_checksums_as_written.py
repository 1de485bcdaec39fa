"""Checksums made as the bytes are written: a block written piecewise in C order (rows after
rows, small and large pieces, across hash slices; 64 KiB pieces take the short way of
``engine/transfer.py``, ``_put_next_piece``) is hashed as it goes and never read back; a
block written out of order or written again is hashed from the file at close, and counted
(``f.stats.rehashes``). The recorded checksum is always the checksum of the block's final
bytes, checked here with plain h5py and xxhash in this process, the file written in another.
``checksums=False`` records none: ``verify`` says so and reads still work. ``verify`` is clean
on files ``bench`` wrote with 64 KiB and 16 MiB transfers and with write-behind."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import xxhash

from conftest import run_cli, run_python

ROWS, ROW = 8, 1 << 18  # a block of 8 rows of 256 KiB u8 words: 2 MiB a row, 16 MiB in all

WRITER = """
import json, sys
import numpy as np
import h5subfile as hs
from mpi4py import MPI

path, order, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ROWS, ROW = 8, 1 << 18


def rows(version):
    return np.arange(ROWS * ROW, dtype="u8").reshape(ROWS, ROW) * 3 + version


first, last = rows(0), rows(1)
with hs.File(path, "w", comm=MPI.COMM_SELF, subfiles=1, **options) as f:
    d = f.create_dataset("x", shape=(ROWS, ROW), dtype="u8", start=(0, 0), count=(ROWS, ROW))
    if order == "in_order":  # small pieces of row 0, three rows at once, then single rows
        for lo in range(0, ROW, 8192):
            d[0:1, lo:lo + 8192] = last[0:1, lo:lo + 8192]
        d[1:4] = last[1:4]
        for r in range(4, ROWS):
            d[r:r + 1] = last[r:r + 1]
    elif order == "small_after_whole":  # the whole block, then all of it again in 64 KiB
        d.write(first)
        for r in range(ROWS):
            for lo in range(0, ROW, 8192):
                d[r:r + 1, lo:lo + 8192] = last[r:r + 1, lo:lo + 8192]
    elif order == "small_skipping":  # 64 KiB pieces in order but one, written last
        pieces = [(r, lo) for r in range(ROWS) for lo in range(0, ROW, 8192)]
        for r, lo in pieces[:5] + pieces[6:] + pieces[5:6]:
            d[r:r + 1, lo:lo + 8192] = last[r:r + 1, lo:lo + 8192]
    elif order == "reversed":
        for r in reversed(range(ROWS)):
            d[r:r + 1] = last[r:r + 1]
    elif order == "rewritten":  # in order, then one row again, changed
        for r in range(ROWS):
            d[r:r + 1] = first[r:r + 1]
        d[3:4] = last[3:4]
        for r in range(ROWS):
            if r != 3:
                d[r:r + 1] = last[r:r + 1]
    elif order == "whole_then_rows":  # the whole block, then all of it again in order
        d.write(first)
        for r in range(ROWS):
            d[r:r + 1] = last[r:r + 1]
    elif order == "changed_after":  # each array changed right after it was written
        for r in range(ROWS):
            part = last[r:r + 1].copy()
            d[r:r + 1] = part
            if not options.get("async_zero_copy"):
                part[...] = 0
    stats = f.stats
print(json.dumps({"rehashes": stats.rehashes, "rehash_bytes": stats.rehash_bytes}))
"""


def _write(path: Path, order: str, **options: object) -> dict[str, int]:
    result = run_python(WRITER, str(path), order, json.dumps(options))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _expected() -> np.ndarray:
    return np.arange(ROWS * ROW, dtype="u8").reshape(ROWS, ROW) * 3 + 1


def _recorded(path: Path) -> tuple[str, list[str]]:
    """The layout's checksum algorithm and its pieces' checksums."""
    with h5py.File(path, "r") as f:
        layout = json.loads(f["x"].attrs["h5subfile.layout"])
    return layout["checksum"], [p["checksum"] for e in layout["extents"] for p in e["pieces"]]


@pytest.mark.parametrize(
    ("order", "rehashes", "options"),
    [
        ("in_order", 0, {}),
        ("whole_then_rows", 0, {}),
        ("changed_after", 0, {"async_writes": True, "async_always": True}),
        ("in_order", 0, {"async_writes": True, "async_always": True}),
        # without a copy the pieces are hashed at the call (what was passed), never re-read
        ("in_order", 0, {"async_writes": True, "async_zero_copy": True, "async_always": True}),
        ("changed_after", 0, {"async_writes": True, "async_zero_copy": True, "async_always": True}),
        ("small_after_whole", 0, {}),
        ("small_skipping", 1, {}),
        ("small_skipping", 1, {"async_writes": True, "async_always": True}),
        ("reversed", 1, {}),
        ("rewritten", 1, {}),
        ("rewritten", 1, {"async_writes": True, "async_always": True}),
    ],
)
def test_checksum_is_of_the_final_bytes_read_back_only_out_of_order(
    tmp_path: Path, order: str, rehashes: int, options: dict[str, object]
) -> None:
    path = tmp_path / "x.h5"
    stats = _write(path, order, **options)
    assert stats["rehashes"] == rehashes, stats
    assert stats["rehash_bytes"] == rehashes * ROWS * ROW * 8
    expected = _expected()
    with h5py.File(path, "r") as f:  # plain h5py, in this process
        assert np.array_equal(f["x"][...], expected)
    algorithm, sums = _recorded(path)
    assert algorithm == "xxh3_64" and sums == [xxhash.xxh3_64_hexdigest(expected.tobytes())]
    result = run_cli(1, "verify", path)
    assert result.returncode == 0 and "clean" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("order", ["reversed", "in_order", "small_skipping"])
def test_without_checksums_verify_says_so_and_reads_work(tmp_path: Path, order: str) -> None:
    path = tmp_path / "x.h5"
    assert _write(path, order, checksums=False)["rehashes"] == 0
    assert _recorded(path) == ("", [])
    with h5py.File(path, "r") as f:  # plain h5py, in this process
        assert np.array_equal(f["x"][...], _expected())
    result = run_cli(1, "verify", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no checksums: 1 dataset(s)" in result.stdout and "/x" in result.stdout
    read = run_python(
        "import sys, numpy as np, h5subfile as hs\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    x = f['x'][...]\n"
        "print(int(x[7, -1]), x.shape)\n",
        str(path),
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split()[0] == str(int(_expected()[7, -1]))


@pytest.mark.parametrize(
    "flags",
    [
        ("-t", "64k"),
        ("-t", "16m", "-e"),
        ("-t", "1m", "--async-writes", "--async-always"),
        ("-t", "1m", "--async-writes", "--async-zero-copy", "--async-always"),
    ],
)
def test_verify_is_clean_on_bench_files(tmp_path: Path, flags: tuple[str, ...]) -> None:
    """IOR's transfers, at 2 ranks into one file: each rank's block written in pieces."""
    test_file = tmp_path / "t"
    result = run_cli(
        2,
        "bench",
        "-a",
        "subfile",
        "-b",
        "32m",
        *flags,
        "-w",
        "-k",
        "--subfiles",
        "1",
        "--quiet",
        "-o",
        test_file,
    )
    assert result.returncode == 0, result.stderr
    report = run_cli(2, "verify", test_file, "--json")
    assert report.returncode == 0, report.stdout + report.stderr
    found = json.loads(report.stdout)
    assert found["clean"] and found["pieces"] == 2 and found["no_checksums"] == []
    assert found["checked_bytes"] == 2 * 32 * 2**20


ZERO_COPY_WRITER = """
import sys, numpy as np, h5subfile as hs
from mpi4py import MPI

path, order = sys.argv[1], sys.argv[2]
ROWS, ROW = 8, 1 << 18
plan = dict(async_writes=True, async_always=True, async_zero_copy=True)
passed = np.arange(ROWS * ROW, dtype="u8").reshape(ROWS, ROW) * 3 + 1
with hs.File(path, "w", comm=MPI.COMM_SELF, subfiles=1, **plan) as f:
    d = f.create_dataset("x", shape=(ROWS, ROW), dtype="u8", start=(0, 0), count=(ROWS, ROW))
    arrays = [passed[r:r + 1].copy() for r in range(ROWS)]
    rows = list(reversed(range(ROWS))) if order == "reversed" else [0, 1, 3, 2, 4, 5, 6, 7]
    for r in rows:
        d[r:r + 1] = arrays[r]
        if order == "changed_before_the_break" and r == 1:
            arrays[0][...] = 0  # row 0 may not be written yet: the contract is broken
    for array in arrays:  # the contract broken for every row, before close
        array[...] = 7
"""


@pytest.mark.parametrize(
    "order", ["reversed", "changed_after_the_break", "changed_before_the_break"]
)
def test_zero_copy_pieces_out_of_order_store_what_was_passed_or_verify_says_so(
    tmp_path: Path, order: str
) -> None:
    """Writing behind without a copy, a block whose rows come out of order is hashed from the
    file at close: its rows from the break on are copied (so arrays changed after their call
    do not reach the file), and the rows before the break are compared with their checksum
    from the call once written: a difference (an array changed before it was written) is
    recorded so that verify reports it. Never changed bytes under a clean verify."""
    path = tmp_path / "x.h5"
    written = run_python(ZERO_COPY_WRITER, str(path), order)
    assert written.returncode == 0, written.stderr
    with h5py.File(path, "r") as f:
        stored = f["x"][...]
    result = run_cli(1, "verify", path)
    if np.array_equal(stored, _expected()):
        assert result.returncode == 0 and "clean" in result.stdout, result.stdout
    else:
        assert order == "changed_before_the_break", order  # the copied rows are as passed
        assert result.returncode == 1 and "DAMAGED" in result.stdout, result.stdout
        # row 0 holds the zeros it was changed to; row 1 was written before the break's
        # check returned, and the rows from the break on were copied
        assert np.array_equal(stored[1:], _expected()[1:])


EARLY_CHANGE_WRITER = """
import sys, numpy as np, h5subfile as hs
from mpi4py import MPI

path, change = sys.argv[1], sys.argv[2] == "change"
plan = dict(async_writes=True, async_zero_copy=True, async_always=True)
with hs.File(path, "w", comm=MPI.COMM_SELF, subfiles=1, **plan) as f:
    busy = np.ones(8 << 20, dtype="u8")  # 64 MiB queued first: the thread is busy with it
    small = np.arange(1 << 20, dtype="u8")  # 8 MiB, a whole block: fed as written, sampled
    f.write_datasets({"busy": busy, "small": small})
    if change:
        small[:] = 5  # the contract broken: changed before the queue reached it
"""


@pytest.mark.parametrize("change", ["keep", "change"])
def test_zero_copy_whole_blocks_changed_before_written_are_reported(
    tmp_path: Path, change: str
) -> None:
    """Writing behind from the caller's arrays, a whole block is hashed as it is written and
    compared with a sample taken at the call: an array refilled before the queue wrote it is
    stored as refilled, and recorded so that verify and checked reads report it; an array
    left alone verifies clean."""
    path = tmp_path / "x.h5"
    written = run_python(EARLY_CHANGE_WRITER, str(path), change)
    assert written.returncode == 0, written.stderr
    with h5py.File(path, "r") as f:  # plain h5py
        small = f["small"][...]
        assert np.array_equal(f["busy"][...], np.ones(8 << 20, dtype="u8"))
    result = run_cli(1, "verify", path)
    if change == "keep":
        assert np.array_equal(small, np.arange(1 << 20, dtype="u8"))
        assert result.returncode == 0 and "clean" in result.stdout, result.stdout
        return
    assert np.array_equal(small, np.full(1 << 20, 5, dtype="u8"))
    assert result.returncode == 1 and "DAMAGED" in result.stdout, result.stdout
    assert "/small" in result.stdout and "/busy" not in result.stdout.split("DAMAGED")[1]
    checked = run_python(
        "import sys, h5subfile as hs\n"
        "with hs.File(sys.argv[1], 'r', verify=True) as f:\n"
        "    f['small'][...]\n",
        str(path),
    )
    assert checked.returncode != 0 and "ChecksumError" in checked.stderr, checked.stderr

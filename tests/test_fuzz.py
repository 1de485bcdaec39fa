"""Damaged and hostile masters and layout records: every case is either refused with an
``H5SubfileError`` naming the dataset, or read back bit for bit (tests/layout_fuzz.py).

The cases run in separate processes, many per process: a case that crashes or hangs HDF5 fails
the test naming its seed (``python tests/layout_fuzz.py run FOLDER SEED 1`` replays it) and the
run goes on after it.

Found outside the suite's seeds (about 1 case in 18 000): a flipped bit in the serialized
hyperslab selection of a VDS mapping (bit 5 of byte 65652 of subfiled.h5, inside /a's mapping
block in the master's global heap, which HDF5 does not checksum) makes HDF5 itself crash when
the dataset is opened: a segfault in HDF5 2.0.0 (h5py 3.16's wheel), in h5subfile's scan as in
plain h5py, and an abort in Debian's h5dump 1.10.8. h5subfile cannot check the mapping before
HDF5 decodes it. Replay: ``python tests/layout_fuzz.py run FOLDER 105742 1``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import MPIEXEC

FUZZ = Path(__file__).resolve().parent / "layout_fuzz.py"
CASES = 2000
WORKERS = 2
WORKER_TIMEOUT = 300  # s, for a worker's share of the cases (a hang is killed, named, skipped)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """subfiled.h5 (4 ranks in 2 subfiles), single.h5 (data in the master), ../secret.h5."""
    folder = tmp_path_factory.mktemp("fuzz") / "base"
    folder.mkdir()
    made = subprocess.run(
        [str(MPIEXEC), "-n", "4", sys.executable, str(FUZZ), "make", str(folder)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert made.returncode == 0, made.stderr[-4000:]
    return folder


def run_seeds(folder: Path, first: int, count: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Outcomes of the cases ``first .. first + count - 1``, and the seeds that crashed or hung
    their process (each named, the run resumed after it)."""
    results: list[dict[str, Any]] = []
    broken: list[str] = []
    seed, end = first, first + count
    while seed < end:
        command = [sys.executable, str(FUZZ), "run", str(folder), str(seed), str(end - seed)]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, err = process.communicate(timeout=WORKER_TIMEOUT)
            how = f"status {process.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            how = f"hung (> {WORKER_TIMEOUT} s)"
        done = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        results += done
        seed += len(done)
        if seed < end:
            broken.append(f"seed {seed}: the process {how}; stderr: {err[-1500:]}")
            seed += 1
    return results, broken


def test_fuzzed_masters_are_refused_or_read_correctly(bases: Path) -> None:
    share = CASES // WORKERS
    with ThreadPoolExecutor(WORKERS) as pool:
        runs = list(pool.map(lambda w: run_seeds(bases, w * share, share), range(WORKERS)))
    results = [r for done, _ in runs for r in done]
    broken = [b for _, failed in runs for b in failed]
    bad = [r for r in results if r["outcome"] not in ("ok", "error")]
    assert not broken and not bad, "\n".join(broken + [json.dumps(r) for r in bad])
    assert len(results) == CASES
    # the mutations land: every kind is drawn, and both outcomes occur
    kinds = Counter(r["mutation"].split()[0] for r in results)
    assert {"truncate", "flip", "hostile", "vds", "/:"} <= set(kinds), kinds
    outcomes = Counter(r["outcome"] for r in results)
    assert outcomes["ok"] > 50 and outcomes["error"] > CASES // 2, outcomes
    # flips in the raw data of the master that holds data are caught by its checksums
    caught = [r for r in results if "ChecksumError" in r.get("detail", "")]
    assert len(caught) > 20, Counter(r.get("detail", "")[:40] for r in results)


@pytest.fixture(scope="module")
def named(bases: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(FUZZ), "named", str(bases)], capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


EDITS = [
    "negative offset",
    "offset 0",
    "offset of another dataset",
    "overlapping extents",
    "shifted extent",
    "swapped extents",
    "removed extent",
    "start as a string",
    "vds dtype",
    "vds secret",
]


def test_an_offset_past_the_end_is_damage_unless_the_record_is_intact(
    named: list[dict[str, Any]],
) -> None:
    """A subfile too short for an intact record (digest recomputed) was truncated; for a record
    that fails its digest, or data in the master not where HDF5 has it, the record is damaged."""
    cases = [case for case in named if case["edit"] == "offset past the end"]
    assert len(cases) == 4
    for case in cases:
        if _moved(case):
            continue  # read where HDF5 has it (test_an_edited_offset_in_the_master_...)
        intact = case["digest"] and case["base"] == "subfiled"
        expected = "TruncatedFileError" if intact else "CorruptFileError"
        assert case.get("error") == expected and "/a" in case["message"], case
        assert any("/a" in problem for problem in case["problems"]), case


#: Edits of the offset of data stored in the master.
_OFFSETS = ("offset 0", "offset of another dataset", "offset past the end")


def _moved(case: dict[str, Any]) -> bool:
    """An intact record (digest recomputed) of data in the master whose offset is not HDF5's:
    what a tool that rewrites files (h5repack) leaves, read where HDF5 has the data."""
    return case["edit"] in _OFFSETS and case.get("base") == "single" and bool(case.get("digest"))


def test_an_edited_offset_in_the_master_reads_where_hdf5_has_the_data(
    named: list[dict[str, Any]],
) -> None:
    """For data stored in the master, HDF5's offset is where every reader finds it: a record
    whose offset differs (its digest intact) is read there, its checksums checked on every
    read, so the values are the dataset's own, as the unedited file gives them."""
    cases = [case for case in named if _moved(case)]
    assert len(cases) == len(_OFFSETS)
    (intact,) = [c for c in named if c["edit"] == "none" and c["base"] == "single"]
    assert "read" in intact, intact
    for case in cases:
        assert "error" not in case and not case["problems"], case
        assert case["read"] == intact["read"], case


@pytest.mark.parametrize("edit", EDITS)
def test_each_hostile_edit_is_refused_naming_the_dataset(
    named: list[dict[str, Any]], edit: str
) -> None:
    """With the record's digest left stale, and recomputed (an edit on purpose): the dataset
    raises CorruptFileError naming it, and File.problems / ``h5subfile info`` list it."""
    cases = [case for case in named if case["edit"] == edit and not _moved(case)]
    assert cases
    for case in cases:
        name = case["dataset"]
        assert case.get("error") == "CorruptFileError", case
        assert name in case["message"], case
        assert any(name in problem for problem in case["problems"]), case


def test_files_of_format_2_still_read(named: list[dict[str, Any]]) -> None:
    cases = [case for case in named if case["edit"] == "format 2"]
    assert len(cases) == 2
    for case in cases:
        assert case["same"] and "read" in case and not case["problems"], case


def test_a_vds_redirected_outside_is_read_by_stock_h5py_but_refused(
    named: list[dict[str, Any]],
) -> None:
    (case,) = [case for case in named if case["edit"] == "vds secret"]
    assert case["stock_h5py_reads_secret"]  # what a plain HDF5 reader would return
    assert case["error"] == "CorruptFileError" and "../secret.h5" in case["message"], case


CRASHING = """
import json, os, sys
first, count = int(sys.argv[3]), int(sys.argv[4])
for seed in range(first, first + count):
    if seed == 3:
        os.abort()  # as a segfault in HDF5 would end the process
    print(json.dumps({"seed": seed, "mutation": "x", "outcome": "ok"}), flush=True)
"""


def test_a_crashing_case_is_named_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    monkeypatch.setattr(sys.modules[__name__], "FUZZ", script)
    results, broken = run_seeds(tmp_path, 0, 6)
    assert [r["seed"] for r in results] == [0, 1, 2, 4, 5]
    assert len(broken) == 1 and broken[0].startswith("seed 3: the process status -6"), broken

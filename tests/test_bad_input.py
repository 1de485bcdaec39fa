"""Every bad input raises a clear error, identically on every rank, never hangs, and never loses
data written before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_mpi

EXPECTED = {
    "overlap": ("BlockError", ["rank 1 region [3:7] overlaps rank 0 region [0:4]", "/ov"]),
    "out_of_bounds": ("BlockError", ["rank 2 block [8:12]", "outside the shape (10,)"]),
    "wrong_data_shape": ("DataShapeError", ["[rank 1]", "shape (3,)", "block [2:4]"]),
    "wrong_data_dtype": ("DataShapeError", ["[rank 0]", "float64", "int32"]),
    "mismatched_shape": ("CollectiveMismatchError", ["rank 2", "11"]),
    "mismatched_name": ("CollectiveMismatchError", ["/mn0", "/mn1"]),
    "mismatched_dtype": ("CollectiveMismatchError", ["<f8", "<f4"]),
    "mismatched_trailing_shape": ("CollectiveMismatchError", ["(4,)", "(3,)"]),
    "already_exists": ("ObjectExistsError", ["/good already exists"]),
    "unsupported_dtype": ("UnsupportedDtypeError", ["astype('S<n>')"]),
    "attribute_mismatch": ("CollectiveMismatchError", ["attrs['a']"]),
    "bad_block_form": ("BlockError", ["steps are not supported"]),
    "selection_out_of_range": ("SelectionError", ["out of range"]),
    "bad_mode": ("FileModeError", ["'q'"]),
    "too_many_subfiles": ("PlanError", ["subfiles=99", "3 rank"]),
    "zero_subfiles": ("PlanError", ["subfiles=0"]),
    "subfiles_and_factor": ("PlanError", ["not both"]),
    "mismatched_plan": ("CollectiveMismatchError", ["File"]),
    "alignment_not_power_of_two": ("PlanError", ["alignment=3000", "power of two"]),
    "too_many_aggregators": ("PlanError", ["aggregators=3", "only 1 rank(s)"]),
    "buffer_too_small": ("PlanError", ["buffer_size=100", "at least 4096"]),
    "bad_transfer_size": ("PlanError", ["transfer_size='fast'"]),
    "write_only_field_when_reading": ("PlanError", ["alignment", "only apply when writing"]),
    "unknown_compression": ("PlanError", ["compression='zip'", "unknown filter"]),
    "bad_gzip_level": ("PlanError", ["gzip level 12"]),
    "chunk_larger_than_shape": ("PlanError", ["chunks=(8,)", "larger than the dataset's shape"]),
    "chunked_scalar": ("PlanError", ["scalar dataset cannot be chunked"]),
    "mismatched_compression": ("CollectiveMismatchError", ["gzip", "lzf"]),
    "independent_write_to_chunked": ("SelectionError", ["/iw is chunked", "whole block"]),
    "mismatched_grouping_kind": ("CollectiveMismatchError", ["'node'"]),
    "mismatched_mode": ("CollectiveMismatchError", ["'r'", "'a'"]),
    "create_exclusive_existing": ("FileExistsH5SubfileError", ["excl.h5 exists"]),
    "missing_file": ("MissingFileError", ["nothing-here.h5 does not exist"]),
    "not_hdf5": ("CorruptFileError", ["cannot be opened as HDF5"]),
    "write_read_only": ("FileModeError", ["read-only"]),
    "unwritten_blocks_at_close": ("IncompleteFileError", ["/never (ranks 0, 1, 2)"]),
    "read_unwritten_dataset": ("IncompleteFileError", ["/never was not completely written"]),
    "close_after_refused_writes": ("IncompleteFileError", ["/wd (ranks 0, 1, 2); /ws"]),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[list[str]]]:
    folder = tmp_path_factory.mktemp("bad")
    out = run_mpi(3, "bad_input.py", folder, timeout=180).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_error_is_clear_and_identical_on_every_rank(outcomes: dict, name: str) -> None:
    per_rank = outcomes[name]
    assert len(per_rank) == 3
    assert all(o == per_rank[0] for o in per_rank), per_rank  # same type and message everywhere
    kind, message = per_rank[0]
    want_kind, fragments = EXPECTED[name]
    assert kind == want_kind, (kind, message)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_every_scenario_is_checked(outcomes: dict) -> None:
    assert set(outcomes) == set(EXPECTED)


def test_errors_subclass_builtins() -> None:
    import h5subfile as hs

    assert issubclass(hs.BlockError, ValueError)
    assert issubclass(hs.MissingFileError, FileNotFoundError)
    assert issubclass(hs.TruncatedFileError, OSError)
    assert issubclass(hs.ObjectNotFoundError, KeyError)
    assert issubclass(hs.SelectionError, IndexError)
    assert all(
        issubclass(getattr(hs, n), hs.H5SubfileError)
        for n in hs.__all__
        if n.endswith("Error") and n != "H5SubfileError"
    )


def test_unused_path_is_untouched(tmp_path: Path) -> None:
    assert not (tmp_path / "other.h5").exists()

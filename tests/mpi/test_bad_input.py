"""Every bad input raises a clear error, identically on every rank, never hangs, and never loses
data written before it. Run on 3 ranks: the messages name them."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import on_root, raises_on_every_rank

import h5subfile as hs
from h5subfile import errors

pytestmark = pytest.mark.skipif(
    MPI.COMM_WORLD.size != 3, reason="the expected messages name ranks 0-2: run on 3 ranks"
)

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
    "attribute_mismatch": (
        "CollectiveMismatchError",
        ["[rank 0] attrs set /.attrs['a'] [('', '<i8')]", "[ranks 1, 2] attrs set /.attrs['a']"],
    ),
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
    "bad_ranks_per_node_on_one_rank": ("PlanError", ["[rank 2]", "H5SUBFILE_RANKS_PER_NODE='x'"]),
    "different_ranks_per_node": ("PlanError", ["H5SUBFILE_RANKS_PER_NODE differs", "1, 3"]),
    "plan_error_on_one_rank_with_others_agreeing": ("PlanError", ["[rank 1]", "subfiles=0"]),
    "create_exclusive_existing": ("FileExistsH5SubfileError", ["excl.h5 exists"]),
    "missing_file": ("MissingFileError", ["nothing-here.h5 does not exist"]),
    "not_hdf5": ("CorruptFileError", ["cannot be opened as HDF5"]),
    "write_read_only": ("FileModeError", ["read-only"]),
    "unwritten_blocks_at_close": ("IncompleteFileError", ["/never (ranks 0, 1, 2)"]),
    "read_unwritten_dataset": ("IncompleteFileError", ["/never was not completely written"]),
    "warning_as_error_on_rank_0": (
        "RankFailedError",
        ["[rank 0] RuntimeWarning", "/never was not completely written"],
    ),
    "lossy_collective_write": ("DataShapeError", ["float64", "astype('int32')"]),
    "close_after_refused_writes": ("IncompleteFileError", ["/wd (ranks 0, 1, 2); /ws"]),
    "invalid_name_on_one_rank": ("ObjectNotFoundError", ["[rank 1]", "invalid object name ''"]),
    "negative_follow_timeout_on_one_rank": (
        "PlanError",
        ["[rank 1] timeout=-5: expected a non-negative duration", "(None: wait for ever)"],
    ),
}

SCENARIOS: dict[str, Callable[[Scene], None]] = {}


@dataclass
class Scene:
    """What the scenarios share: one file open for writing, with a dataset written first."""

    comm: MPI.Intracomm = field(repr=False)
    folder: Path
    f: hs.File
    good: hs.Dataset = field(repr=False)  # its repr raises once the file is closed

    @property
    def rank(self) -> int:
        return self.comm.rank


@contextlib.contextmanager
def opened_with_problems(path: str | Path) -> Iterator[hs.File]:
    """Open a file some of whose datasets were never completely written (rank 0 warns)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*was not completely written", RuntimeWarning)
        f = hs.File(path, "r")
    with f:
        yield f


def scenario(fn: Callable[[Scene], None]) -> Callable[[Scene], None]:
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
def overlap(s: Scene) -> None:
    s.f.create_dataset("ov", (10,), "i4", start=(s.rank * 3,), count=(4,))


@scenario
def out_of_bounds(s: Scene) -> None:
    s.f.create_dataset("oob", (10,), "i4", start=(s.rank * 4,), count=(4,))


@scenario
def wrong_data_shape(s: Scene) -> None:
    d = s.f.create_dataset("ws", (6,), "f4", start=(2 * s.rank,), count=(2,))
    d.write(np.zeros(3 if s.rank == 1 else 2, "f4"))


@scenario
def wrong_data_dtype(s: Scene) -> None:
    d = s.f.create_dataset("wd", (6,), "i4", start=(2 * s.rank,), count=(2,))
    d.write(np.zeros(2, "f8" if s.rank == 0 else "i4"))


@scenario
def mismatched_shape(s: Scene) -> None:
    s.f.create_dataset("ms", (10,) if s.rank != 2 else (11,), "f4")


@scenario
def mismatched_name(s: Scene) -> None:
    s.f.create_dataset(f"mn{s.rank % 2}", (10,), "f4")


@scenario
def invalid_name_on_one_rank(s: Scene) -> None:
    s.f.write_datasets({"" if s.rank == 1 else "named": np.zeros(2, "f4")})


@scenario
def mismatched_dtype(s: Scene) -> None:
    s.f.write_dataset("md", np.zeros(2, "f4" if s.rank else "f8"))


@scenario
def mismatched_trailing_shape(s: Scene) -> None:
    s.f.write_dataset("mt", np.zeros((2, 3 if s.rank else 4)))


@scenario
def already_exists(s: Scene) -> None:
    s.f.create_dataset("good", (3,), "f4")


@scenario
def unsupported_dtype(s: Scene) -> None:
    s.f.write_dataset("u", np.array(["text"]))


@scenario
def attribute_mismatch(s: Scene) -> None:
    """Different types: raised at the next collective call, which abandons the session (a file
    of its own, so that the scene's goes on)."""
    with hs.File(s.folder / "attrs.h5", "w") as f:
        f.attrs["a"] = "text" if s.rank else s.rank


@scenario
def bad_block_form(s: Scene) -> None:
    s.f.create_dataset("bb", (10,), "f4", block=(slice(0, 4, 2),))


@scenario
def selection_out_of_range(s: Scene) -> None:
    s.good[100]


@scenario
def bad_mode(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "q")


@scenario
def too_many_subfiles(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", subfiles=99)


@scenario
def zero_subfiles(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", subfiles=0)


@scenario
def subfiles_and_factor(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", subfiles=2, ranks_per_subfile=2)


@scenario
def alignment_not_power_of_two(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", alignment=3000)


@scenario
def too_many_aggregators(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", subfiles=2, aggregators=3)


@scenario
def buffer_too_small(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", aggregators=1, buffer_size=100)


@scenario
def bad_transfer_size(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", transfer_size="fast")


@scenario
def write_only_field_when_reading(s: Scene) -> None:
    hs.File(f"{s.folder}/nothing.h5", "r", alignment=4096)


@scenario
def unknown_compression(s: Scene) -> None:
    s.f.write_dataset("uc", np.zeros(4), compression="zip")


@scenario
def bad_gzip_level(s: Scene) -> None:
    s.f.write_dataset("bg", np.zeros(4), compression="gzip", compression_opts=12)


@scenario
def chunk_larger_than_shape(s: Scene) -> None:
    s.f.create_dataset("cl", (6,), "f4", start=(2 * s.rank,), count=(2,), chunks=(8,))


@scenario
def chunked_scalar(s: Scene) -> None:
    s.f.create_dataset("cs", (), "f4", compression="gzip")


@scenario
def mismatched_compression(s: Scene) -> None:
    s.f.write_dataset("mc", np.zeros(4), compression="gzip" if s.rank else "lzf")


@scenario
def independent_write_to_chunked(s: Scene) -> None:
    d = s.f.create_dataset("iw", (6,), "f4", start=(2 * s.rank,), count=(2,), compression="gzip")
    d[2 * s.rank : 2 * s.rank + 1] = np.zeros(1, "f4")


@scenario
def mismatched_plan(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", subfiles=1 if s.rank else 2)


@scenario
def mismatched_grouping_kind(s: Scene) -> None:
    hs.File(f"{s.folder}/other.h5", "w", subfiles="node" if s.rank == 0 else 2)


@scenario
def mismatched_mode(s: Scene) -> None:
    hs.File(f"{s.folder}/excl.h5", "r" if s.rank == 1 else "a")


@contextlib.contextmanager
def _ranks_per_node(value: str | None) -> Iterator[None]:
    """H5SUBFILE_RANKS_PER_NODE set to ``value`` (None: unset) on this rank, then restored."""
    name = "H5SUBFILE_RANKS_PER_NODE"
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@scenario
def bad_ranks_per_node_on_one_rank(s: Scene) -> None:
    with _ranks_per_node("x" if s.rank == 2 else "1"):
        hs.File(f"{s.folder}/other.h5", "w", subfiles="node")


@scenario
def different_ranks_per_node(s: Scene) -> None:
    with _ranks_per_node("3" if s.rank == 0 else "1"):
        hs.File(f"{s.folder}/other.h5", "w", subfiles="node")


@scenario
def plan_error_on_one_rank_with_others_agreeing(s: Scene) -> None:
    # The failing rank's arguments are not compared: its error is raised, not a mismatch.
    hs.File(f"{s.folder}/other.h5", "w", subfiles=0 if s.rank == 1 else 2)


@scenario
def create_exclusive_existing(s: Scene) -> None:
    g = hs.File(f"{s.folder}/excl.h5", "w")
    g.close()
    hs.File(f"{s.folder}/excl.h5", "w-")


@scenario
def missing_file(s: Scene) -> None:
    hs.File(f"{s.folder}/nothing-here.h5", "r")


@scenario
def not_hdf5(s: Scene) -> None:
    if s.rank == 0:
        with open(f"{s.folder}/text.h5", "w") as out:
            out.write("not HDF5\n" * 100)
    s.comm.Barrier()
    hs.File(f"{s.folder}/text.h5", "r")


@scenario
def write_read_only(s: Scene) -> None:
    with hs.File(f"{s.folder}/excl.h5", "r") as g:
        g.create_group("x")


@scenario
def unwritten_blocks_at_close(s: Scene) -> None:
    with hs.File(f"{s.folder}/unwritten.h5", "w", subfiles="rank") as g:
        g.write_dataset("fine", np.full(3, s.rank, "i2"))
        g.create_dataset("never", (6,), "f4", start=(2 * s.rank,), count=(2,))


@scenario
def read_unwritten_dataset(s: Scene) -> None:
    with opened_with_problems(f"{s.folder}/unwritten.h5") as g:
        assert np.array_equal(g["fine"][...], np.repeat(np.arange(s.comm.size, dtype="i2"), 3))
        g["never"][...]


@scenario
def warning_as_error_on_rank_0(s: Scene) -> None:
    # Only rank 0 warns of a file's problems; where warnings are errors, every rank raises.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        hs.File(f"{s.folder}/unwritten.h5", "r")


@scenario
def lossy_collective_write(s: Scene) -> None:
    d = s.f.create_dataset("lc", (6,), "i4", start=(2 * s.rank,), count=(2,))
    with d.collective:
        d[2 * s.rank : 2 * s.rank + 2] = np.zeros(2, "f8")


@scenario
def negative_follow_timeout_on_one_rank(s: Scene) -> None:
    # follow is collective: a bad argument on one rank is refused on every rank, at once
    hs.follow(f"{s.folder}/unwritten.h5", s.comm, timeout=-5 if s.rank == 1 else 60)


@pytest.fixture(scope="module")
def scene(comm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    folder = Path(on_root(comm, lambda: str(tmp_path_factory.mktemp("bad"))))
    f = hs.File(folder / "bad.h5", "w", subfiles=2)
    good = f.write_dataset("good", np.arange(4, dtype="i8") + 10 * comm.rank)
    yield Scene(comm, folder, f, good)
    with contextlib.suppress(hs.IncompleteFileError):
        f.close()  # collective; does nothing once test_close_after_refused_writes closed it


def test_every_scenario_is_expected() -> None:
    assert set(SCENARIOS) | {"close_after_refused_writes"} == set(EXPECTED)


@pytest.mark.parametrize("name", list(SCENARIOS))  # in order: some use files made by earlier ones
def test_error_is_clear_and_identical_on_every_rank(comm, scene: Scene, name: str) -> None:
    kind, fragments = EXPECTED[name]
    with raises_on_every_rank(comm, getattr(errors, kind), *fragments):
        SCENARIOS[name](scene)


def test_close_after_refused_writes(comm, scene: Scene) -> None:
    # /ws and /wd were created but their writes were refused: close says so, then publishes
    kind, fragments = EXPECTED["close_after_refused_writes"]
    with raises_on_every_rank(comm, getattr(errors, kind), *fragments):
        scene.f.close()


def test_data_written_before_the_errors_is_intact(comm, scene: Scene) -> None:
    with opened_with_problems(scene.folder / "bad.h5") as f:
        want = np.concatenate([np.arange(4, dtype="i8") + 10 * r for r in range(comm.size)])
        assert np.array_equal(f["good"][...], want)
        assert "ov" not in f and "ms" not in f
        assert "ws" not in f and "wd" not in f  # their writes failed: close left them out


def test_refused_opens_leave_no_file(scene: Scene) -> None:
    assert not (scene.folder / "other.h5").exists()

"""Provoke every bad input on 3 ranks; report each rank's (exception type, message) as JSON.

The test checks that each error is raised identically on every rank (no hang), and that data
written before the errors is still readable after the file is closed.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank = comm.rank
folder = sys.argv[1]
path = f"{folder}/bad.h5"
SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


f = hs.File(path, "w", subfiles=2)
good = f.write_dataset("good", np.arange(4, dtype="i8") + 10 * rank)


@scenario
def overlap():
    f.create_dataset("ov", (10,), "i4", start=(rank * 3,), count=(4,))


@scenario
def out_of_bounds():
    f.create_dataset("oob", (10,), "i4", start=(rank * 4,), count=(4,))


@scenario
def wrong_data_shape():
    d = f.create_dataset("ws", (6,), "f4", start=(2 * rank,), count=(2,))
    d.write(np.zeros(3 if rank == 1 else 2, "f4"))


@scenario
def wrong_data_dtype():
    d = f.create_dataset("wd", (6,), "i4", start=(2 * rank,), count=(2,))
    d.write(np.zeros(2, "f8" if rank == 0 else "i4"))


@scenario
def mismatched_shape():
    f.create_dataset("ms", (10,) if rank != 2 else (11,), "f4")


@scenario
def mismatched_name():
    f.create_dataset(f"mn{rank % 2}", (10,), "f4")


@scenario
def mismatched_dtype():
    f.write_dataset("md", np.zeros(2, "f4" if rank else "f8"))


@scenario
def mismatched_trailing_shape():
    f.write_dataset("mt", np.zeros((2, 3 if rank else 4)))


@scenario
def already_exists():
    f.create_dataset("good", (3,), "f4")


@scenario
def unsupported_dtype():
    f.write_dataset("u", np.array(["text"]))


@scenario
def attribute_mismatch():
    f.attrs["a"] = rank


@scenario
def bad_block_form():
    f.create_dataset("bb", (10,), "f4", block=(slice(0, 4, 2),))


@scenario
def selection_out_of_range():
    good[100]


@scenario
def bad_mode():
    hs.File(f"{folder}/other.h5", "q")


@scenario
def too_many_subfiles():
    hs.File(f"{folder}/other.h5", "w", subfiles=99)


@scenario
def zero_subfiles():
    hs.File(f"{folder}/other.h5", "w", subfiles=0)


@scenario
def subfiles_and_factor():
    hs.File(f"{folder}/other.h5", "w", subfiles=2, ranks_per_subfile=2)


@scenario
def alignment_not_power_of_two():
    hs.File(f"{folder}/other.h5", "w", alignment=3000)


@scenario
def too_many_aggregators():
    hs.File(f"{folder}/other.h5", "w", subfiles=2, aggregators=3)


@scenario
def buffer_too_small():
    hs.File(f"{folder}/other.h5", "w", aggregators=1, buffer_size=100)


@scenario
def bad_transfer_size():
    hs.File(f"{folder}/other.h5", "w", transfer_size="fast")


@scenario
def write_only_field_when_reading():
    hs.File(f"{folder}/nothing.h5", "r", alignment=4096)


@scenario
def unknown_compression():
    f.write_dataset("uc", np.zeros(4), compression="zip")


@scenario
def bad_gzip_level():
    f.write_dataset("bg", np.zeros(4), compression="gzip", compression_opts=12)


@scenario
def chunk_larger_than_shape():
    f.create_dataset("cl", (6,), "f4", start=(2 * rank,), count=(2,), chunks=(8,))


@scenario
def chunked_scalar():
    f.create_dataset("cs", (), "f4", compression="gzip")


@scenario
def mismatched_compression():
    f.write_dataset("mc", np.zeros(4), compression="gzip" if rank else "lzf")


@scenario
def independent_write_to_chunked():
    d = f.create_dataset("iw", (6,), "f4", start=(2 * rank,), count=(2,), compression="gzip")
    d[2 * rank : 2 * rank + 1] = np.zeros(1, "f4")


@scenario
def mismatched_plan():
    hs.File(f"{folder}/other.h5", "w", subfiles=1 if rank else 2)


@scenario
def mismatched_grouping_kind():
    hs.File(f"{folder}/other.h5", "w", subfiles="node" if rank == 0 else 2)


@scenario
def mismatched_mode():
    hs.File(f"{folder}/excl.h5", "r" if rank == 1 else "a")


@scenario
def create_exclusive_existing():
    g = hs.File(f"{folder}/excl.h5", "w")
    g.close()
    hs.File(f"{folder}/excl.h5", "w-")


@scenario
def missing_file():
    hs.File(f"{folder}/nothing-here.h5", "r")


@scenario
def not_hdf5():
    if rank == 0:
        with open(f"{folder}/text.h5", "w") as out:
            out.write("not HDF5\n" * 100)
    comm.Barrier()
    hs.File(f"{folder}/text.h5", "r")


@scenario
def write_read_only():
    with hs.File(f"{folder}/excl.h5", "r") as g:
        g.create_group("x")


@scenario
def unwritten_blocks_at_close():
    with hs.File(f"{folder}/unwritten.h5", "w", subfiles="rank") as g:
        g.write_dataset("fine", np.full(3, rank, "i2"))
        g.create_dataset("never", (6,), "f4", start=(2 * rank,), count=(2,))


@scenario
def read_unwritten_dataset():
    with hs.File(f"{folder}/unwritten.h5", "r") as g:
        assert np.array_equal(g["fine"][...], np.repeat(np.arange(comm.size, dtype="i2"), 3))
        g["never"][...]


results = {}
for name, fn in SCENARIOS.items():
    try:
        fn()
        outcome = ["ok", ""]
    except Exception as exc:  # noqa: BLE001 - reported to the test
        outcome = [type(exc).__name__, str(exc)]
    results[name] = comm.gather(outcome)

try:  # /ws and /wd were created but their writes were refused: close says so, then publishes
    f.close()
    outcome = ["ok", ""]
except Exception as exc:  # noqa: BLE001 - reported to the test
    outcome = [type(exc).__name__, str(exc)]
results["close_after_refused_writes"] = comm.gather(outcome)
with hs.File(path, "r") as f:
    want = np.concatenate([np.arange(4, dtype="i8") + 10 * r for r in range(comm.size)])
    assert np.array_equal(f["good"][...], want)
    assert "ov" not in f and "ms" not in f
if rank == 0:
    print(json.dumps(results))

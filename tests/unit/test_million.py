"""A million ranks on paper: rank 0's plan of a VPIC-IO step (grouping, block map, extents, VDS
mappings, layout records, leaders' tasks, every rank's message) for 1,000,000 ranks in 10,000
subfiles, by the engine's own pure planner, within 10 s of CPU and 2 GiB of memory; and
no rank is sent more than its own blocks plus a constant (a leader: plus its tasks).

The million-rank plan runs in a subprocess so that its peak memory (ru_maxrss) is its own. The
10 s bound is on CPU time (process_time), which a loaded machine stretches far less than wall
time; docs/DESIGN-NOTES.md ("Sizes at 10K and 1M ranks") gives the measured numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_helpers import without_format_4_defaults

from h5subfile.bench import sizes
from h5subfile.errors import BlockError
from h5subfile.layout.blockmap import BlockMap, check_block_map
from h5subfile.layout.blocks import Block, check_blocks
from h5subfile.layout.integrity import PieceSum
from h5subfile.layout.record import DatasetLayout, StoredExtent, record_digest
from h5subfile.plan import Plan

#: What a rank that leads no group is sent for one VPIC-IO step (8 datasets), at most.
MESSAGE_BYTES = 1024
#: What a leader is sent in addition per source dataset it creates, at most.
TASK_BYTES = 256

SCRIPT = r"""
import json, resource, sys, time
from h5subfile.bench import sizes
from h5subfile.plan import Plan

ranks, subfiles = int(sys.argv[1]), int(sys.argv[2])
started, wall = time.process_time(), time.perf_counter()
step = sizes.plan_vpic(ranks, Plan(subfiles=subfiles), 1 << 20)
mappings = sizes.vds_mappings(step)
records = [len(r.to_json()) for r in sizes.records(step, pieces=False)]
leaders = step.grouping.leaders
sample = set(leaders[:: max(1, len(leaders) // 500)]) | set(range(ranks - 300, ranks))
sample |= {1, ranks // 2 + 1}
scatter = sizes.scatter_sizes(step, sorted(sample))
cpu, wall = time.process_time() - started, time.perf_counter() - wall
placed = step.creation.placed[0].placement
print(json.dumps({
    "cpu": cpu, "wall": wall, "seconds": step.seconds,
    "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "mappings": mappings, "records": records, "ngroups": step.grouping.ngroups,
    "scatter": [[r, n, len(step.creation.tasks.get(r, ()))] for r, n in scatter.items()],
    "gather": sizes.gather_bytes(step),
    "extent_of_rank": placed.extent_of_rank[:: ranks // 1000].tolist(),
    "last_extent": [list(placed.extents[-1].start), list(placed.extents[-1].shape),
                    len(placed.extents[-1].ranks), placed.extents[-1].ranks[0]],
}))
"""


def plan_in_subprocess(ranks: int, subfiles: int) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ranks), str(subfiles)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def check_messages(scatter: list[list[int]]) -> int:
    """Every sampled rank's message is its own share plus a constant; returns the largest
    message of a rank that leads no group."""
    for rank, nbytes, tasks in scatter:
        assert nbytes <= MESSAGE_BYTES + TASK_BYTES * tasks, (rank, nbytes, tasks)
    return max((n for _, n, tasks in scatter if not tasks), default=0)


@pytest.mark.slow
def test_a_million_ranks_in_10000_subfiles_are_planned_in_seconds() -> None:
    found = plan_in_subprocess(1_000_000, 10_000)
    context = json.dumps({k: v for k, v in found.items() if k in ("cpu", "wall", "seconds")})
    assert found["cpu"] < 10.0, context
    assert found["peak"] < 2 * 2**30, found["peak"]
    assert found["ngroups"] == 10_000
    assert found["mappings"] == [10_000] * 8  # coalesced: one VDS mapping per subfile
    assert found["extent_of_rank"] == [r // 100 for r in range(0, 1_000_000, 1000)]
    assert found["last_extent"] == [[999_900 << 20], [100 << 20], 100, 999_900]
    # The record lists every rank once (informational) and each extent: O(P + extents).
    assert all(n < 10 * 1_000_000 + 200 * 10_000 for n in found["records"]), found["records"]
    largest = check_messages(found["scatter"])
    assert any(tasks == 8 for _, _, tasks in found["scatter"])  # leaders were sampled
    small = plan_in_subprocess(10_000, 100)  # the same 100 ranks per subfile
    assert largest - check_messages(small["scatter"]) <= 8 * 8  # wider integers at most
    assert found["gather"] == small["gather"] < MESSAGE_BYTES


@pytest.mark.parametrize("plan", [Plan(subfiles="rank"), Plan(ranks_per_subfile=16)])
def test_no_rank_of_10000_is_sent_more_than_its_share(plan: Plan) -> None:
    step = sizes.plan_vpic(10_000, plan, 1 << 20)
    ranks = range(10_000) if plan.grouping == "rank" else range(0, 10_000, 7)
    scatter = sizes.scatter_sizes(step, ranks)
    leaders = set(step.grouping.leaders)
    rows = [[r, n, len(step.creation.tasks.get(r, ()))] for r, n in scatter.items()]
    assert all((tasks == 8) == (r in leaders) for r, _, tasks in rows)
    check_messages(rows)
    assert sizes.vds_mappings(step) == [step.grouping.ngroups] * 8


@pytest.mark.parametrize("plan", [Plan(subfiles="rank"), Plan(ranks_per_subfile=16)])
def test_no_reader_of_10000_is_sent_more_than_its_share(plan: Plan) -> None:
    """Reading the step back: the catalogue broadcast at open is the same for 1,000 and 10,000
    writers, and each reader of 10,000 (or of 999) is sent the extents of its own share only."""
    opened = {}
    for ranks in (1_000, 10_000):
        step = sizes.plan_vpic(ranks, plan, 1 << 20)
        layouts = sizes.records(step, pieces=True)
        record = sizes.root_record(step, plan, ranks, 1 << 30)
        opened[ranks] = sizes.read_open_bytes(step, layouts, record)
    assert opened[10_000] - opened[1_000] <= 8 * 64, opened  # wider integers at most
    per_extent = 600 + 16 * 90 if plan.grouping != "rank" else 600  # with its checksums
    for readers in (10_000, 999):
        sent = sizes.read_share_bytes(step, layouts, record, readers, range(0, readers, 13))
        # 8 datasets; a share meets the extents of the writers whose blocks it overlaps.
        extents = -(-10_000 // readers) + 1
        assert max(sent.values()) < 8 * extents * per_extent, max(sent.values())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 6), st.integers(0, 3)),
        min_size=1,
        max_size=8,
    )
)
def test_block_map_checks_are_the_exact_checks(boxes: list[tuple[int, int, int, int]]) -> None:
    """The numpy checks raise exactly when the per-block sweep does, with its message."""
    blocks = [Block((a, c), (b, d)) for a, b, c, d in boxes]
    expected = None
    try:
        check_blocks("/d", (8, 8), blocks)
    except BlockError as exc:
        expected = str(exc)
    try:
        check_block_map("/d", (8, 8), BlockMap.from_blocks(blocks, 2))
    except BlockError as exc:
        assert str(exc) == expected
    else:
        assert expected is None


def test_prefix_block_map_is_the_prefix_sum() -> None:
    blocks = BlockMap.prefix([3, 0, 5], (2,))
    assert blocks.blocks() == [Block((0, 0), (3, 2)), Block((3, 0), (0, 2)), Block((3, 0), (5, 2))]
    assert blocks.nonempty().tolist() == [True, False, True]
    assert np.array_equal(BlockMap.from_blocks(blocks.blocks(), 2).starts, blocks.starts)


def test_record_json_is_asdict_of_the_record() -> None:
    """The record is built without dataclasses.asdict (for speed), with the same content."""
    import dataclasses

    piece = PieceSum((0, 0), (2, 3), "0123456789abcdef")
    extent = StoredExtent("s/a.h5", "/d@1", (0, 0), (2, 3), 4096, (0, 3), (1, 3), (piece,))
    layout = DatasetLayout(
        2, (extent, extent), False, (1, 3), False, {"name": "gzip", "options": [4]}, "<f4", "x"
    )
    whole = without_format_4_defaults(dataclasses.asdict(layout))
    assert json.dumps(layout.to_dict()) == json.dumps(whole)
    assert json.loads(layout.to_json())["digest"] == record_digest(whole)

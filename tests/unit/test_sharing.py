"""What a reading rank is sent (layout/sharing.py): a catalogue whose size does not grow with
the ranks that wrote the file, and only the extents its own selection touches."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from h5subfile.errors import FileModeError
from h5subfile.layout.blocks import Block
from h5subfile.layout.catalog import Catalog, NodeInfo
from h5subfile.layout.record import DatasetLayout, FileRecord, Session, StoredExtent
from h5subfile.layout.selection import partition
from h5subfile.layout.sharing import ExtentIndex, identities_of, touched_layout


def _brute(extents: list[StoredExtent], box: Block) -> list[int]:
    return [i for i, e in enumerate(extents) if not box.is_empty and box.intersect(e.block)]


def _grid_extents(rng: random.Random) -> list[StoredExtent]:
    """A 2-D dataset cut into a grid of uneven tiles, listed in a random order."""
    rows = sorted(rng.sample(range(1, 200), 6))
    cols = sorted(rng.sample(range(1, 50), 3))
    extents = []
    for r0, r1 in zip([0, *rows], [*rows, 200]):
        for c0, c1 in zip([0, *cols], [*cols, 50]):
            extents.append(StoredExtent("f", "d", (r0, c0), (r1 - r0, c1 - c0), 0))
    rng.shuffle(extents)
    return extents


@pytest.mark.parametrize("seed", range(20))
def test_the_index_finds_exactly_the_extents_a_box_touches(seed: int) -> None:
    rng = random.Random(seed)
    extents = _grid_extents(rng)
    # Long extents overlapping others along axis 0 (a column strip), so that the first axis
    # alone cannot decide.
    extents.append(StoredExtent("f", "d", (0, 49), (200, 1), 0))
    index = ExtentIndex(extents)
    for _ in range(200):
        r0, c0 = rng.randrange(200), rng.randrange(50)
        box = Block((r0, c0), (rng.randrange(0, 200 - r0 + 1), rng.randrange(0, 50 - c0 + 1)))
        assert sorted(index.touching(box)) == _brute(extents, box), box


def test_a_touched_layout_keeps_the_recorded_order_and_every_other_field() -> None:
    extents = tuple(StoredExtent(f"s{i}", "d", (10 * i,), (10,), 64 * i) for i in range(8))
    layout = DatasetLayout(3, extents, dtype="<f4", checksum="xxh3_64")
    part = touched_layout(layout, [Block((35,), (20,)), Block((5,), (1,))])
    assert [e.file for e in part.extents] == ["s0", "s3", "s4", "s5"]
    assert (part.session, part.dtype, part.checksum) == (3, "<f4", "xxh3_64")
    assert touched_layout(layout, [Block((35,), (0,))]).extents == ()


def _file_per_process(ranks: int, per_rank: int) -> tuple[Catalog, DatasetLayout]:
    """rank 0's catalogue of one file-per-process dataset written by ``ranks`` ranks."""
    extents = tuple(
        StoredExtent(f"run.subfiles/s{r}.h5", "x", (r * per_rank,), (per_rank,), 69632, (r,))
        for r in range(ranks)
    )
    layout = DatasetLayout(0, extents, dtype="<f8")
    info = {
        f"run.subfiles/s{r}.h5": {"bytes": 1 << 20, "identity_offset": 4096} for r in range(ranks)
    }
    session = Session(0, "w", ranks, {}, "rank", sorted(info), "1", "now", "then", uuid="a" * 32)
    session.subfile_info = info
    nodes = {
        "/": NodeInfo("group"),
        "/x": NodeInfo(
            "dataset", {}, (ranks * per_rank,), np.dtype("<f8"), layout, record_sha="b" * 64
        ),
    }
    return Catalog(nodes, FileRecord([session]), session_shas={0: "c" * 64}), layout


def test_what_every_reader_is_sent_does_not_grow_with_the_writers() -> None:
    sizes = {}
    for ranks in (1_000, 10_000):
        catalog, _ = _file_per_process(ranks, 100)
        sizes[ranks] = len(pickle.dumps(catalog.for_readers(256)))
    assert sizes[10_000] - sizes[1_000] < 64, sizes  # the numbers' widths only


def test_each_reader_is_sent_its_own_share_plus_a_constant() -> None:
    for ranks in (1_000, 10_000):
        catalog, layout = _file_per_process(ranks, 100)
        index = ExtentIndex(layout.extents)
        readers = 37  # another rank count: shares straddle two writers' extents
        largest = 0
        for reader in range(readers):
            lo, hi = partition(ranks * 100, readers, reader)
            part = touched_layout(layout, [Block((lo,), (hi - lo,))], index)
            own = -(-(hi - lo) // 100) + 1  # the writers' extents its share can meet
            assert len(part.extents) <= own
            ids = identities_of(catalog.record, {e.file for e in part.extents})
            assert sorted(ids.sessions[0].subfile_info) == sorted(e.file for e in part.extents)
            sent = len(pickle.dumps((part, ids))) / max(1, len(part.extents))
            largest = max(largest, int(sent))
        assert largest < 400, largest  # bytes per extent sent: no term in the ranks


def test_a_withheld_layout_is_not_sent_and_is_fetched_once_when_asked_for() -> None:
    catalog, layout = _file_per_process(300, 10)
    shared = catalog.for_readers(256)
    assert shared.record_withheld and shared.record.sessions[0].subfile_info == {}
    assert catalog.nodes["/x"].__dict__["layout"] is layout  # rank 0 keeps it
    received = pickle.loads(pickle.dumps(shared))
    node = received.nodes["/x"]
    assert node.withheld and node.has_layout and "layout" not in node.__dict__
    with pytest.raises(FileModeError, match="not sent to this rank"):
        _ = node.layout
    calls = []
    node.fetch_with(lambda: calls.append(1) or layout)
    assert node.layout is layout and node.layout is layout and calls == [1]


def test_small_layouts_are_still_broadcast_whole() -> None:
    catalog, layout = _file_per_process(8, 10)
    shared = catalog.for_readers(256)
    assert shared is catalog and not shared.record_withheld
    node = pickle.loads(pickle.dumps(shared)).nodes["/x"]
    assert not node.withheld and node.layout == layout

"""Pure planning of chunked storage and two-phase I/O, and the vectored-write layer."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.errors import PlanError
from h5subfile.io.posix import RawFile, coalesce
from h5subfile.layout.blocks import Block
from h5subfile.layout.chunking import choose_chunks, chunk_box, chunk_work, chunks_of
from h5subfile.layout.twophase import plan_two_phase
from h5subfile.plan import Plan


def rows(lengths: list[int], width: int = 1) -> list[tuple[int, Block]]:
    members, at = [], 0
    for rank, n in enumerate(lengths):
        if n:
            members.append((rank, Block((at, 0), (n, width))))
        at += n
    return members


def test_plan_picks_chunks_aligned_to_blocks_when_it_can() -> None:
    members = rows([4096] * 4, 8)  # 4 ranks x 4096 rows of 8 float32 = 128 KiB each
    choice = choose_chunks((16384, 8), 4, [members], True, 1 << 20)
    assert choice.aligned and choice.picked
    assert choice.chunks == (4096, 8)  # 32768 rows would be the target; 4096 divides the blocks
    assert "aligned to rank blocks" in choice.describe()


def test_plan_says_when_chunks_straddle() -> None:
    members = rows([1000, 1037, 1074])  # offsets 1000 and 2037: gcd 1
    choice = choose_chunks((3111, 1), 8, [members], True, 4096)
    assert not choice.aligned and "straddling" in choice.describe()
    assert not choose_chunks((3111, 1), 8, [members], (64, 1), 4096).aligned


def test_explicit_chunks_are_checked() -> None:
    with pytest.raises(PlanError, match="larger than the dataset"):
        choose_chunks((10,), 4, [], (11,), 1 << 20)
    with pytest.raises(PlanError, match="1 positive integer"):
        choose_chunks((10,), 4, [], (2, 2), 1 << 20)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=6),
    chunk=st.integers(1, 17),
    width=st.integers(1, 5),
    inner=st.integers(1, 5),
)
def test_every_element_of_every_chunk_is_assembled_exactly_once(lengths, chunk, width, inner):
    """Owners receive exactly the parts other ranks send, and chunks cover every block once."""
    members = rows(lengths, width)
    if not members:
        return
    shape = (sum(lengths), width)
    chunks = (chunk, min(inner, width))
    works = {rank: chunk_work(members, chunks, shape, rank) for rank, _ in members}
    sent = {(rank, owner, index, box) for rank, w in works.items() for owner, index, box in w.send}
    received = {
        (source, rank, index, box)
        for rank, w in works.items()
        for index, parts in w.owned
        for source, box in parts
    }
    assert sent == received
    covered = np.zeros(shape, int)
    for rank, w in works.items():
        block = dict(members)[rank]
        for index, parts in w.owned:
            box = chunk_box(index, chunks, shape)
            own = block.intersect(box)
            covered[own.slices] += 1
            for _, part in parts:
                covered[part.slices] += 1
    written = np.zeros(shape, int)
    for _, block in members:
        written[block.slices] += 1
    assert np.array_equal(covered, written)


def test_chunks_of_a_box() -> None:
    assert list(chunks_of(Block((3, 0), (5, 4)), (4, 3))) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert chunk_box((1, 1), (4, 3), (6, 4)) == Block((4, 3), (2, 1))  # a partial edge chunk


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(
        st.lists(st.tuples(st.integers(0, 1), st.integers(0, 500), st.integers(1, 90)), max_size=4),
        min_size=1,
        max_size=5,
    ),
    aggregators=st.integers(1, 3),
    buffer_size=st.integers(1, 200),
)
def test_two_phase_moves_every_byte_once_within_the_buffer(runs, aggregators, buffer_size):
    size = len(runs)
    owners = {f: [(f + j) % size for j in range(min(aggregators, size))] for f in (0, 1)}
    owners = {f: list(dict.fromkeys(a)) for f, a in owners.items()}
    rounds = plan_two_phase(runs, owners, buffer_size)
    seen = {}
    for number, windows in enumerate(rounds):
        for window in windows:
            assert window.round == number and window.size <= buffer_size
            assert window.aggregator in owners[window.file]
            spans = {(w_at, n): f_at for f_at, w_at, n in window.spans}
            for piece in window.pieces:
                file, offset, _ = runs[piece.rank][piece.run]
                assert file == window.file
                # the piece's bytes sit in a span at the same file offset
                assert any(
                    w_at <= piece.window_offset
                    and piece.window_offset + piece.nbytes <= w_at + n
                    and f_at + piece.window_offset - w_at == offset + piece.run_offset
                    for (w_at, n), f_at in spans.items()
                )
                for b in range(piece.run_offset, piece.run_offset + piece.nbytes):
                    key = (piece.rank, piece.run, b)
                    assert key not in seen
                    seen[key] = True
    expected = {
        (r, i, b) for r, rr in enumerate(runs) for i, (_, _, n) in enumerate(rr) for b in range(n)
    }
    assert set(seen) == expected


def test_coalesce_merges_neighbours_and_respects_the_transfer_size() -> None:
    a, b, c = (memoryview(bytes(n)) for n in (100, 50, 30))
    calls = coalesce([(100, b), (0, a), (400, c)], limit=1 << 20)
    assert [(off, [len(x) for x in bufs]) for off, bufs in calls] == [(0, [100, 50]), (400, [30])]
    calls = coalesce([(0, a), (100, b)], limit=64)
    assert [(off, sum(len(x) for x in bufs)) for off, bufs in calls] == [
        (0, 64),
        (64, 64),
        (128, 22),
    ]


def test_transfer_size_caps_every_system_call(tmp_path: Path) -> None:
    path = tmp_path / "raw"
    path.write_bytes(b"")
    handle = RawFile(str(path), writable=True, transfer_size=4096)
    data = np.arange(10 * 1024, dtype=np.uint8)
    handle.pwrite(memoryview(data), 0)
    handle.close()
    assert handle.stats.writes == 3  # 4096 + 4096 + 2048
    assert os.path.getsize(path) == data.size and path.read_bytes() == data.tobytes()


def test_plan_fields_come_from_the_environment_too() -> None:
    env = {
        "H5SUBFILE_AGGREGATORS": "2",
        "H5SUBFILE_BUFFER_SIZE": "4m",
        "H5SUBFILE_ALIGNMENT": "1m",
        "H5SUBFILE_COMPRESSION": "zstd:3",
        "H5SUBFILE_TRANSFER_SIZE": "64k",
        "H5SUBFILE_SHUFFLE": "1",
    }
    plan = Plan.parse(env=env)
    assert (
        plan.aggregators,
        plan.buffer_size,
        plan.alignment,
        plan.compression,
        plan.transfer_size,
        plan.shuffle,
    ) == (2, 4 << 20, 1 << 20, "zstd:3", 65536, True)
    assert Plan.parse(env=env, aggregators="direct").aggregators is None
    with pytest.raises(PlanError, match="power of two"):
        Plan.parse(env={"H5SUBFILE_ALIGNMENT": "1000"})

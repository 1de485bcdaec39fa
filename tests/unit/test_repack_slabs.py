"""How repack splits the work: the ranks' shares tile axis 0, and the slabs of a share cover
it exactly once, in storage order, each within the slab size unless it is one element; and the
plan it writes with."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from h5subfile.repack import box_bytes, max_share_bytes, share, slab_boxes, write_behind


@given(st.integers(0, 1000), st.integers(1, 64))
def test_shares_tile_axis_0(n: int, size: int) -> None:
    shares = [share(n, size, rank) for rank in range(size)]
    assert shares[0][0] == 0 and shares[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(shares, shares[1:]))
    lengths = [hi - lo for lo, hi in shares]
    assert max(lengths) - min(lengths) <= 1
    assert max(lengths) * 8 == max_share_bytes((n,), 8, size)


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=4),
    st.sampled_from([1, 2, 8, 15]),
    st.integers(1, 400),
    st.data(),
)
def test_slabs_cover_a_share_once_in_order(
    shape: list[int], itemsize: int, limit: int, data: st.DataObject
) -> None:
    lo = data.draw(st.integers(0, shape[0]))
    hi = data.draw(st.integers(lo, shape[0]))
    covered = np.zeros(shape, dtype=np.int64)
    order = np.arange(covered.size).reshape(shape)
    last = -1
    for box in slab_boxes(lo, hi, tuple(shape), itemsize, limit):
        assert len(box) == len(shape)
        covered[box] += 1
        size = box_bytes(box, itemsize)
        assert size <= limit or size == itemsize, (box, size, limit)
        positions = order[box]
        if positions.size:
            assert positions.min() > last  # storage order
            last = positions.max()
    want = np.zeros(shape, dtype=np.int64)
    want[lo:hi] = 1
    assert np.array_equal(covered, want)


def test_repack_writes_behind_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASYNC_WRITES", "ASYNC_ZERO_COPY", "ASYNC_BUFFER_SIZE"):
        monkeypatch.delenv(f"H5SUBFILE_{name}", raising=False)
    assert write_behind({"subfiles": 1}, 64 << 20) == {
        "subfiles": 1,
        "async_writes": True,
        "async_zero_copy": True,
        "async_buffer_size": 64 << 20,
    }
    assert write_behind({}, 100)["async_buffer_size"] == 4096  # the plan's smallest buffer
    # What the caller says stays: off, or on with its own copy and buffer.
    assert write_behind({"async_writes": False}, 1 << 20) == {"async_writes": False}
    assert write_behind({"async_writes": True}, 1 << 20) == {"async_writes": True}
    assert write_behind({"async_buffer_size": 8192}, 1 << 20)["async_buffer_size"] == 8192
    # ... and what the environment says, as for any plan field.
    monkeypatch.setenv("H5SUBFILE_ASYNC_WRITES", "0")
    assert write_behind({}, 1 << 20) == {}

"""Block.contains agrees with intersect (it is the cheap form used on every dset[box] = x)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from h5subfile.layout.blocks import Block


@st.composite
def two_boxes(draw: st.DrawFn) -> tuple[Block, Block]:
    ndim = draw(st.integers(0, 3))

    def box() -> Block:
        start = tuple(draw(st.integers(0, 6)) for _ in range(ndim))
        count = tuple(draw(st.integers(0, 5)) for _ in range(ndim))
        return Block(start, count)

    return box(), box()


@given(two_boxes())
def test_contains_is_intersect_equal(boxes: tuple[Block, Block]) -> None:
    outer, inner = boxes
    if inner.is_empty:
        assert outer.contains(inner)
    else:
        assert outer.contains(inner) == (outer.intersect(inner) == inner)

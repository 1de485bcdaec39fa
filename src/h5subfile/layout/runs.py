"""Byte runs: how a box inside one C-ordered array maps onto contiguous pieces of another.

Both file extents and numpy buffers are C-ordered boxes; copying a sub-box between them is a list of
contiguous runs whose length is set by the axes where the sub-box spans both outer boxes fully.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def contiguous_axis(outer: Sequence[int], count: Sequence[int]) -> int:
    """The first axis of a contiguous run of the sub-box ``count`` inside the box ``outer``.

    A run covers axes ``j..n-1`` (axis j partly, the rest fully); 0 for a 0-d box.
    """
    j = len(count) - 1
    while j > 0 and count[j] == outer[j]:
        j -= 1
    return max(j, 0)


def _strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def _offsets(
    outer: Sequence[int], start: Sequence[int], count: Sequence[int], j: int
) -> np.ndarray:
    strides = _strides(outer)
    offsets = np.array([sum(s * st for s, st in zip(start, strides))], dtype=np.int64)
    for axis in range(j):
        steps = np.arange(count[axis], dtype=np.int64) * strides[axis]
        offsets = (offsets[:, None] + steps[None, :]).ravel()
    return offsets


def paired_runs(
    count: Sequence[int],
    outer_a: Sequence[int],
    start_a: Sequence[int],
    outer_b: Sequence[int],
    start_b: Sequence[int],
) -> tuple[np.ndarray, np.ndarray, int]:
    """Runs copying the sub-box ``count`` at ``start_a`` in box ``outer_a`` to ``start_b`` in ``outer_b``.

    Returns ``(offsets_a, offsets_b, run_length)`` in elements: run i covers
    ``[offsets_a[i], offsets_a[i] + run_length)`` on side a and the same on side b.
    An empty sub-box gives no runs.
    """
    if math.prod(count) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, 0
    j = max(contiguous_axis(outer_a, count), contiguous_axis(outer_b, count))
    run = math.prod(count[j:])
    return _offsets(outer_a, start_a, count, j), _offsets(outer_b, start_b, count, j), run

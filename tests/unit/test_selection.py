"""h5py-style selections give exactly numpy's answer (hypothesis), reading boxes only."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h5subfile.errors import SelectionError
from h5subfile.layout import selection as sel
from h5subfile.layout.selection import assemble, broadcast_as_h5py, partition, plan_read


def read(array: np.ndarray, selection) -> np.ndarray:
    plan = plan_read(array.shape, array.dtype.itemsize, selection)
    boxes = [array[piece.box.slices] for piece in plan.pieces]
    return assemble(plan, boxes)


@st.composite
def selections(draw, shape):
    items = []
    fancy_used = False
    for n in shape:
        kind = draw(
            st.sampled_from(
                ["int", "slice", "list", "mask"] if not fancy_used else ["int", "slice"]
            )
        )
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n - 2, n + 2))
            stop = draw(st.none() | st.integers(-n - 2, n + 2))
            step = draw(st.none() | st.integers(1, 4))
            items.append(slice(start, stop, step))
        elif kind == "list":
            fancy_used = True
            items.append(draw(st.lists(st.integers(-n, n - 1), max_size=6)))
        else:
            fancy_used = True
            items.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
    if draw(st.booleans()) and len(items) > 1:
        items = items[:-1] + [Ellipsis]
    return tuple(items)


def h5py_like_numpy(array: np.ndarray, selection) -> np.ndarray:
    """numpy's answer with integer axes dropped in place (h5py's rule for one fancy axis)."""
    index = []
    scalar_axes = []
    items = list(selection)
    if any(item is Ellipsis for item in items):
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        items = items[:at] + [slice(None)] * (array.ndim - len(items) + 1) + items[at + 1 :]
    for axis, item in enumerate(items):
        if isinstance(item, int):
            index.append(slice(item % array.shape[axis], item % array.shape[axis] + 1))
            scalar_axes.append(axis)
        else:
            index.append(item)
    result = array[tuple(index)]
    return (
        result.reshape([n for a, n in enumerate(result.shape) if a not in scalar_axes])
        if scalar_axes
        else result
    )


@settings(max_examples=300)
@given(st.data())
def test_selection_matches_numpy(data) -> None:
    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=4)))
    array = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    selection = data.draw(selections(shape))
    got = read(array, selection)
    want = h5py_like_numpy(array, selection)
    assert np.shape(got) == want.shape and np.array_equal(got, want)


def test_sparse_axis_0_selection_is_split_into_boxes(monkeypatch) -> None:
    monkeypatch.setattr(sel, "GAP_BYTES", 64)
    array = np.arange(10_000, dtype=np.float64)
    picks = [3, 4, 5000, 9998]
    plan = plan_read(array.shape, 8, (picks,))
    assert [p.box.count for p in plan.pieces] == [(2,), (1,), (1,)]
    assert np.array_equal(assemble(plan, [array[p.box.slices] for p in plan.pieces]), array[picks])


def test_scalar_result_is_a_numpy_scalar() -> None:
    array = np.arange(6.0).reshape(2, 3)
    assert read(array, (1, 2)) == 5.0 and np.ndim(read(array, (1, 2))) == 0


@pytest.mark.parametrize(
    "bad",
    [
        (slice(None, None, -1),),
        (0, 0, 0),
        ([0, 1], [0, 1]),
        (None,),
        (Ellipsis, Ellipsis),
        ([7],),
        (np.ones(3, bool),),
        ("x",),
    ],
)
def test_bad_selections_raise_selection_error(bad) -> None:
    with pytest.raises(SelectionError):
        plan_read((5, 4), 8, bad)


@given(st.integers(0, 1000), st.integers(1, 40))
def test_partition_covers_every_item_once(n, size) -> None:
    parts = [partition(n, size, r) for r in range(size)]
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert all(hi - lo == n // size for lo, hi in parts[:-1])


_SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.data())
def test_broadcast_as_h5py_writes_what_h5py_writes(dataset: tuple[int, ...], data) -> None:
    """Every source shape into every selection of integers and slices: broadcast_as_h5py
    gives the values h5py stores, or None where h5py raises."""
    selection = tuple(
        data.draw(
            st.one_of(
                st.integers(0, n - 1),
                st.tuples(st.integers(0, n), st.integers(0, n)).map(
                    lambda ab: slice(min(ab), max(ab))
                ),
            )
        )
        for n in dataset
    )
    source = data.draw(_SHAPES)
    values = np.arange(1, math.prod(source) + 1, dtype="f8").reshape(source)
    with h5py.File("broadcast", "w", driver="core", backing_store=False) as f:
        d = f.create_dataset("d", dataset, "f8")
        try:
            d[selection] = values
        except (TypeError, ValueError):
            expected = None
        else:
            expected = d[selection]
    shape = np.zeros(dataset)[selection].shape
    got = broadcast_as_h5py(values, shape)
    if expected is None:
        assert got is None, (source, shape)
    elif np.size(expected):  # an empty selection: h5py writes nothing, whatever the shape
        assert got is not None, (source, shape)
        np.testing.assert_array_equal(got, expected)

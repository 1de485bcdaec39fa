"""Metadata calls without rounds: attribute values as HDF5 stores them, computed alike on every
rank (io/attributes.py), and the ledger whose digests the next collective call compares
(engine/ledger.py)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from h5subfile.engine.ledger import Entry, Ledger
from h5subfile.io.attributes import (
    prepared_attribute,
    set_attribute,
    stored_attribute,
    stored_through_hdf5,
)

NUMERIC = st.one_of(
    hnp.integer_dtypes(endianness="="),
    hnp.unsigned_integer_dtypes(endianness="="),
    hnp.floating_dtypes(endianness="=", sizes=(16, 32, 64)),
    hnp.complex_number_dtypes(endianness="=", sizes=(64, 128)),
    hnp.boolean_dtypes(),
)
VALUES = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.complex_numbers(allow_nan=False),
    st.text(),
    NUMERIC.flatmap(lambda dt: hnp.from_dtype(dt).map(lambda x: np.asarray(x, dt)[()])),
    NUMERIC.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3))),
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=5),
)


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    x, y = np.asarray(a), np.asarray(b)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_the_shortcut_gives_what_hdf5_stores(value: object) -> None:
    """Strings and plain numbers skip HDF5: what they give is what storing the value in HDF5
    and reading it back with h5py gives, type and shape text included, or the same error."""
    try:
        expected = stored_through_hdf5(value)
    except Exception as exc:  # noqa: BLE001 - the shortcut must fail the same way
        with pytest.raises(type(exc)):
            stored_attribute(value)
        return
    got = stored_attribute(value)
    assert got[1] == expected[1]
    assert _same(got[0], expected[0]), (got, expected)


_FILES: list[h5py.File] = []


def _scratch() -> h5py.File:
    if not _FILES:
        _FILES.append(h5py.File("set-attribute", "w", driver="core", backing_store=False))
    return _FILES[0]


@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans(), st.booleans())
def test_set_attribute_stores_what_h5py_stores(
    value: object, existing: bool, prepared: bool
) -> None:
    """The master's own attribute write stores what h5py's ``attrs[name] = value`` stores:
    the same HDF5 type, shape and bytes, over an existing attribute too (also where the
    caller said it was new: ``prepared``, with the array :func:`prepared_attribute` made); a
    value it does not take is left to h5py (False, nothing written)."""
    f = _scratch()
    for name in ("mine", "h5py's"):
        if name in f.attrs:
            del f.attrs[name]
        if existing:
            f.attrs[name] = "an older value"
    try:
        f.attrs["h5py's"] = value
    except Exception:  # noqa: BLE001 - a value h5py refuses is never taken here either
        assert not set_attribute(f.id, "mine", value) or pytest.fail("took a refused value")
        return
    data = prepared_attribute(value)[2] if prepared else None
    if not set_attribute(f.id, "mine", value, data, new=prepared):
        assert not existing or f.attrs["mine"] == "an older value"
        return
    mine, theirs = f.attrs.get_id("mine"), f.attrs.get_id("h5py's")
    assert mine.get_type() == theirs.get_type()
    assert mine.shape == theirs.shape
    assert _same(f.attrs["mine"], f.attrs["h5py's"])


@pytest.mark.parametrize(
    "value",
    ["a\0b", "\udcff", np.str_("x"), object(), {"no": "dicts"}],
)
def test_values_hdf5_refuses_raise_what_h5py_raises(value: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        stored_attribute(value)


def test_type_text_tells_strings_and_types_apart() -> None:
    texts = {stored_attribute(v)[1] for v in ("x", b"x", np.bytes_(b"x"), 1, 1.0, np.int32(1))}
    assert len(texts) == 6


def test_ledger_digests_structure_and_values_apart() -> None:
    def digests(*entries: Entry) -> tuple[int, int]:
        ledger = Ledger()
        for entry in entries:
            ledger.record(entry)
        return ledger.digests()

    group = Entry("create_group /g")
    stamp = Entry("attrs set /.attrs['when'] str", "/", "when", "t0", "sig0")
    later = Entry("attrs set /.attrs['when'] str", "/", "when", "t1", "sig1")
    assert digests() == (0, 0)
    assert digests(group, stamp)[0] == digests(group, later)[0]  # the same structure
    assert digests(group, stamp)[1] != digests(group, later)[1]  # values differ
    assert digests(group, stamp)[0] != digests(stamp, group)[0]  # order is structure
    assert digests(group)[0] != digests(Entry("create_group /h"))[0]
    ledger = Ledger()
    ledger.record(group)
    assert ledger.described() == ("create_group /g",)
    assert ledger.take() == [group] and ledger.digests() == (0, 0)

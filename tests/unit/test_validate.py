"""Layout records are parsed strictly and cross-checked against HDF5's view of the dataset
(layout/validate.py): hypothesis against brute force, and each kind of damage by name."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from h5subfile.errors import CorruptFileError
from h5subfile.layout.blocks import Block
from h5subfile.layout.integrity import PieceSum
from h5subfile.layout.record import (
    DIGEST_KEY,
    DatasetLayout,
    Session,
    StoredExtent,
    canonical_json,
    record_digest,
)
from h5subfile.layout.validate import (
    ByteRange,
    Hdf5Facts,
    Mapping,
    byte_overlaps,
    byte_ranges,
    layout_problem,
)

SESSION = Session(0, "w", 4, {}, "", [], "0", "", "", uuid="ab" * 16)
OLD_SESSION = Session(0, "w", 4, {}, "", [], "0", "", "")  # format 2: no uuid, digest or dtype
F4 = np.dtype("<f4")


def cells(start: tuple[int, ...], shape: tuple[int, ...]) -> set[tuple[int, ...]]:
    return set(itertools.product(*(range(s, s + c) for s, c in zip(start, shape))))


def virtual(
    shape: tuple[int, ...], extents: list[StoredExtent], dtype: str = "<f4"
) -> tuple[DatasetLayout, Hdf5Facts]:
    """A record and the VDS facts that agree with it."""
    layout = DatasetLayout(0, tuple(extents), dtype=dtype)
    mappings = tuple(
        Mapping(e.file, e.dataset, e.start, e.shape, True, int(np.prod(e.shape))) for e in extents
    )
    return layout, Hdf5Facts(shape, F4, "virtual", None, mappings)


def problem(layout: DatasetLayout, facts: Hdf5Facts, session: Session = SESSION) -> str | None:
    return layout_problem("/d", layout.to_json(), layout, facts, [session])


@st.composite
def extents_in(draw, max_extents=4):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    extents = []
    for index in range(draw(st.integers(1, max_extents))):
        start = tuple(draw(st.integers(0, n - 1)) for n in shape)
        count = tuple(draw(st.integers(1, n - s)) for s, n in zip(start, shape))
        offset = draw(st.integers(48, 4096))
        extents.append(StoredExtent(f"s/{index % 2}.h5", f"/d@{index}", start, count, offset))
    return shape, extents


@given(extents_in())
def test_overlapping_extents_are_refused_as_brute_force_says(case) -> None:
    shape, extents = case
    layout, facts = virtual(shape, extents)
    overlapping = any(
        cells(a.start, a.shape) & cells(b.start, b.shape)
        for a, b in itertools.combinations(extents, 2)
    )
    found = problem(layout, facts)
    if overlapping:  # more extents than elements is reported first
        assert found is not None and ("overlaps extent" in found or "extents for" in found), found
    else:
        assert found is None, found


@given(extents_in(max_extents=1), st.integers(0, 2), st.integers(-3, 3))
def test_extents_must_lie_inside_the_shape(case, axis, shift) -> None:
    shape, (extent,) = case
    axis %= len(shape)
    start = list(extent.start)
    start[axis] += shift
    moved = dataclasses.replace(extent, start=tuple(start))
    inside = all(0 <= s and s + c <= n for s, c, n in zip(moved.start, moved.shape, shape))
    layout, facts = virtual(shape, [moved])
    assert (problem(layout, facts) is None) == inside


@given(extents_in(), st.data())
def test_record_and_vds_must_map_the_same_boxes_both_ways(case, data) -> None:
    shape, extents = case
    layout, facts = virtual(shape, extents)
    assume(problem(layout, facts) is None)  # overlapping extents: the test above
    mappings = list(facts.mappings)
    data.draw(st.randoms()).shuffle(mappings)  # order does not matter
    assert problem(layout, dataclasses.replace(facts, mappings=tuple(mappings))) is None
    index = data.draw(st.integers(0, len(extents) - 1))
    fewer = tuple(m for i, m in enumerate(facts.mappings) if i != index)
    assert "mapping" in (problem(layout, dataclasses.replace(facts, mappings=fewer)) or "")
    fewer_extents = layout.extents[:index] + layout.extents[index + 1 :]
    assert "mapping" in (problem(dataclasses.replace(layout, extents=fewer_extents), facts) or "")


@pytest.mark.parametrize(
    "change",
    [
        dict(file="s/other.h5"),
        dict(file="../secret.h5"),
        dict(dataset="/elsewhere"),
        dict(start=(1,)),
        dict(count=(4,)),
        dict(whole_source=False),
        dict(box_count=3),
    ],
)
def test_a_vds_mapping_changed_alone_is_refused(change) -> None:
    extents = [
        StoredExtent("s/0.h5", "/d", (0,), (5,), 2048),
        StoredExtent("s/1.h5", "/d", (5,), (5,), 2048),
    ]
    layout, facts = virtual((10,), extents)
    mappings = (dataclasses.replace(facts.mappings[0], **change), facts.mappings[1])
    found = problem(layout, dataclasses.replace(facts, mappings=mappings))
    assert found is not None and found.startswith("dataset /d:"), found


MASTER = StoredExtent("", "/d", (0, 0), (4, 3), 4096)


@pytest.mark.parametrize(
    "change, fragment",
    [
        (dict(offset=2048), "HDF5 has offset 4096"),
        (dict(offset=0), "superblock"),
        (dict(offset=-8), "superblock"),
        (dict(offset=2**63 - 10), "beyond any file"),
        (dict(start=(1, 0)), "outside the dataset's shape"),
        (dict(shape=(3, 3)), "not the whole dataset"),
        (dict(dataset="/other"), "not virtual"),
        (dict(file="s/0.h5"), "not virtual"),
        (dict(ranks=(0, 4)), "ranks [0, 4] of a 4-rank session"),
        (dict(ranks=(-1,)), "ranks"),
        (dict(chunks=(2, 3)), "not -1"),
        (dict(shape=(0, 3)), "empty"),
    ],
)
def test_a_dataset_in_the_master_is_checked_against_hdf5(change, fragment) -> None:
    facts = Hdf5Facts((4, 3), F4, "contiguous", 4096)
    assert problem(DatasetLayout(0, (MASTER,), dtype="<f4"), facts) is None
    damaged = DatasetLayout(0, (dataclasses.replace(MASTER, **change),), dtype="<f4")
    found = problem(damaged, facts)
    assert found is not None and fragment in found, found


def test_dtype_must_be_recorded_and_match_for_format_3() -> None:
    facts = Hdf5Facts((4, 3), F4, "contiguous", 4096)
    assert "missing" in (problem(DatasetLayout(0, (MASTER,)), facts) or "")
    found = problem(DatasetLayout(0, (MASTER,), dtype="<f8"), facts)
    assert found is not None and "records dtype float64" in found, found
    compound = np.dtype([("a", "<i4"), ("b", "S3")])
    from h5subfile.layout.dtypes import dtype_text

    assert (
        problem(
            DatasetLayout(0, (MASTER,), dtype=dtype_text(compound)),
            dataclasses.replace(facts, dtype=compound),
        )
        is None
    )


def test_older_records_without_digest_or_dtype_are_read() -> None:
    layout = DatasetLayout(0, (MASTER,))
    text = json.dumps(dataclasses.asdict(layout))  # as format 2 wrote it: no digest, no dtype
    facts = Hdf5Facts((4, 3), F4, "contiguous", 4096)
    assert layout_problem("/d", text, layout, facts, [OLD_SESSION]) is None
    assert "digest is missing" in (layout_problem("/d", text, layout, facts, [SESSION]) or "")


def test_unknown_session_is_refused() -> None:
    facts = Hdf5Facts((4, 3), F4, "contiguous", 4096)
    layout = DatasetLayout(7, (MASTER,), dtype="<f4")
    assert "session 7" in (problem(layout, facts) or "")


@given(st.data())
def test_any_edit_of_the_record_breaks_its_digest_or_its_parsing(data) -> None:
    extents = [StoredExtent("s/0.h5", "/d", (0,), (5,), 2048, (0, 1))]
    layout, facts = virtual((5,), extents)
    text = layout.to_json()
    assert problem(layout, facts) is None
    at = data.draw(st.integers(0, len(text) - 1))
    char = data.draw(st.sampled_from('0123456789-"{}[],: .etrufalsn'))
    edited = text[:at] + char + text[at + 1 :]
    try:
        parsed = DatasetLayout.from_json(edited, "/d")
    except CorruptFileError:
        return
    same = json.loads(edited) == json.loads(text)
    assert same or layout_problem("/d", edited, parsed, facts, [SESSION]) is not None


@pytest.mark.parametrize(
    "field, value",
    [
        ("start", "12"),
        ("start", [0.0]),
        ("start", [True]),
        ("start", 0),
        ("shape", ["5"]),
        ("offset", "2048"),
        ("offset", 2048.0),
        ("offset", None),
        ("offset", [2048]),
        ("file", 0),
        ("dataset", None),
        ("ranks", "01"),
        ("chunks", {"a": 1}),
    ],
)
def test_types_are_strict(field, value) -> None:
    data = json.loads(DatasetLayout(0, (MASTER,), dtype="<f4").to_json())
    data["extents"][0][field] = value
    with pytest.raises(CorruptFileError, match=f"{field} must be"):
        DatasetLayout.from_json(json.dumps(data), "/d")


@pytest.mark.parametrize(
    "field, value",
    [("session", "0"), ("complete", 1), ("extents", {}), ("dtype", 4), ("chunks_aligned", None)],
)
def test_top_level_types_are_strict(field, value) -> None:
    data = json.loads(DatasetLayout(0, (MASTER,), dtype="<f4").to_json())
    data[field] = value
    with pytest.raises(CorruptFileError, match="damaged layout record of /d"):
        DatasetLayout.from_json(json.dumps(data), "/d")


def test_digest_is_of_the_canonical_json() -> None:
    data = json.loads(DatasetLayout(0, (MASTER,), dtype="<f4").to_json())
    reordered = dict(reversed(list(data.items())))
    assert record_digest(reordered) == record_digest(data) == data["digest"]


def test_record_is_stored_as_its_canonical_json_and_digest() -> None:
    piece = PieceSum((0, 0), (4, 3), "0123456789abcdef")
    layout = DatasetLayout(0, (MASTER.changed(pieces=(piece,)),), dtype="<f4", checksum="xxh3_64")
    text = layout.to_json()
    data = json.loads(text)
    body = {k: v for k, v in data.items() if k != DIGEST_KEY}
    assert text == canonical_json(body)[:-1] + f',"digest":"{record_digest(data)}"}}'
    assert list(data)[-1] == DIGEST_KEY and body == json.loads(json.dumps(layout.to_dict()))
    assert DatasetLayout.from_json(text, "/d") == layout


def test_records_in_field_order_are_read() -> None:
    """Records were stored in field order with the digest last (until the encoding made the
    stored text the canonical one): key order is not part of the format."""
    layout = DatasetLayout(0, (MASTER,), dtype="<f4")
    data = layout.to_dict()
    data[DIGEST_KEY] = record_digest(data)
    text = json.dumps(data, separators=(",", ":"))
    assert text != layout.to_json()
    assert DatasetLayout.from_json(text, "/d") == layout
    facts = Hdf5Facts((4, 3), F4, "contiguous", 4096)
    assert layout_problem("/d", text, layout, facts, [SESSION]) is None


@given(
    st.lists(
        st.tuples(st.sampled_from(["", "a", "b"]), st.integers(0, 60), st.integers(1, 20)),
        max_size=8,
    )
)
def test_byte_overlaps_agree_with_brute_force(spans) -> None:
    ranges = [ByteRange(f, s, s + n, f"/d{i}") for i, (f, s, n) in enumerate(spans)]
    found = byte_overlaps(ranges)
    expected = any(
        a.file == b.file and a.start < b.stop and b.start < a.stop
        for a, b in itertools.combinations(ranges, 2)
    )
    assert bool(found) == expected
    for a, b in found:
        assert a.file == b.file and a.start < b.stop and b.start < a.stop


def test_byte_ranges_skip_chunked_extents_and_name_the_master() -> None:
    chunked = StoredExtent("s/0.h5", "/d", (0,), (4,), -1, chunks=(2,))
    layout = DatasetLayout(0, (dataclasses.replace(MASTER, file="."), chunked))
    assert byte_ranges("/d", layout, 4) == [ByteRange("", 4096, 4096 + 48, "/d")]


def test_block_overlap_is_found_in_any_order() -> None:
    from h5subfile.layout.blocks import first_overlap

    blocks = [Block((0, 0), (2, 2)), Block((5, 5), (1, 1)), Block((1, 1), (2, 2))]
    assert first_overlap(blocks) == (0, 2)
    assert first_overlap(blocks[:2]) is None


def test_a_record_without_extents_must_have_no_data_in_hdf5() -> None:
    empty = DatasetLayout(0, (), dtype="<f4")
    assert problem(empty, Hdf5Facts((4, 3), F4, "contiguous", None)) is None
    assert "records no data" in (problem(empty, Hdf5Facts((4, 3), F4, "contiguous", 4096)) or "")
    one = (Mapping("s/0.h5", "/d", (0,), (5,), True, 5),)
    vds = Hdf5Facts((10,), F4, "virtual", None, one)
    assert "mapping" in (problem(empty, vds) or "")

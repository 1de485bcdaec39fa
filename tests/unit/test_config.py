"""Plan, units, names, layout record and dtype checks."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from record_helpers import without_format_4_defaults

from h5subfile.errors import CorruptFileError, PlanError, UnsafePathError, UnsupportedDtypeError
from h5subfile.layout.catalog import NodeInfo
from h5subfile.layout.dtypes import check_dtype
from h5subfile.layout.integrity import PieceSum
from h5subfile.layout.names import (
    SUBFILE_NAME,
    resolve_inside,
    subfile_folder,
    subfile_relpath,
)
from h5subfile.layout.record import DatasetLayout, FileRecord, Session, StoredExtent
from h5subfile.plan import PLAN_FIELDS, Plan
from h5subfile.units import format_bytes, parse_count, parse_duration, parse_size


def test_counts_and_sizes() -> None:
    assert parse_count("8Mi") == 8 * 2**20
    assert parse_count("4M") == 4_000_000
    assert parse_count("1024") == 1024 and parse_count(7) == 7
    assert parse_count("2k") == 2000 and parse_count("1.5Ki") == 1536
    assert parse_size("1m") == 2**20 and parse_size("64k") == 65536 and parse_size("2g") == 2**31
    assert parse_size("4MiB") == 4 * 2**20 and parse_size("100") == 100
    assert parse_duration("0.5s") == parse_duration("500ms") == parse_duration("0.5") == 0.5
    assert parse_duration(2) == 2.0 and parse_duration("1 s") == 1.0
    assert parse_duration("250us") == pytest.approx(250e-6) and parse_duration("2min") == 120
    for wrong in ("-1", "soon", "1h", "", True, -0.5, float("nan")):
        with pytest.raises(ValueError):
            parse_duration(wrong)
    for bad in ("x", "1.5", "-3", "3Q", "1.2.3"):
        with pytest.raises(ValueError):
            parse_count(bad)
    assert format_bytes(3 * 2**20) == "3.000 MiB" and format_bytes(10) == "10 B"


def test_plan_parse_and_environment() -> None:
    assert Plan.parse(env={}).grouping == "node"
    assert Plan.parse(subfiles="4", env={}).subfiles == 4
    assert Plan.parse(subfiles="rank", env={}).grouping == "rank"
    assert Plan.parse(env={"H5SUBFILE_SUBFILES": "3"}).subfiles == 3
    assert Plan.parse(env={"H5SUBFILE_RANKS_PER_SUBFILE": "8"}).grouping == "k=8"
    # an explicit grouping argument wins over any grouping variable
    assert Plan.parse(ranks_per_subfile=2, env={"H5SUBFILE_SUBFILES": "3"}).ranks_per_subfile == 2
    assert Plan.parse(env={"H5SUBFILE_FSYNC": "yes"}).fsync is True
    behind = Plan.parse(env={"H5SUBFILE_ASYNC_WRITES": "1", "H5SUBFILE_ASYNC_BUFFER_SIZE": "64m"})
    assert behind.async_writes is True and behind.async_buffer_bytes == 64 << 20
    assert Plan.parse(env={}).async_buffer_bytes == 256 << 20 and not Plan().async_writes
    assert Plan.parse(async_writes=False, env={"H5SUBFILE_ASYNC_WRITES": "1"}).async_writes is False
    assert Plan(async_writes=True).read_only().async_writes is False  # writing only
    for bad in (
        dict(subfiles="nodes"),
        dict(subfiles=0),
        dict(ranks_per_subfile="0"),
        dict(fsync="maybe"),
        dict(subfiles=2, ranks_per_subfile=2),
        dict(bogus=1),
        dict(async_writes="later"),
        dict(async_buffer_size="1k"),
        dict(alignment=2**50),  # a power of two, but datasets would start a PiB apart
        dict(ranks_per_subfile=float("inf")),  # JSON's 1e999
        dict(aggregators=float("inf")),
        dict(buffer_size=2**63),
    ):
        with pytest.raises(PlanError):
            Plan.parse(env={}, **bad)
    assert Plan.parse(alignment="1g", env={}).alignment == 1 << 30
    plan = Plan(subfiles=2, fsync=True)
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert {f.name for f in PLAN_FIELDS} == set(Plan.__dataclass_fields__)


def test_names(tmp_path) -> None:
    master = str(tmp_path / "run.h5")
    assert subfile_folder(master) == str(tmp_path / "run.subfiles")
    assert subfile_relpath(master, 3, "0123abcd" * 4, 12) == "run.subfiles/s3-0123abcd-00012.h5"
    assert SUBFILE_NAME.match("s3-0123abcd-00012.h5").groups() == ("3", "0123abcd", "00012")
    assert SUBFILE_NAME.match("s3-00012.h5").groups() == ("3", None, "00012")  # format <= 2
    assert resolve_inside(master, "run.subfiles/s0-00000.h5").startswith(str(tmp_path))
    assert resolve_inside(master, "") == master
    for evil in ("../x.h5", "/etc/passwd", "run.subfiles/../../x.h5"):
        with pytest.raises(UnsafePathError):
            resolve_inside(master, evil)
    os.symlink("/tmp", tmp_path / "link")
    with pytest.raises(UnsafePathError):
        resolve_inside(master, "link/x.h5")


def test_paths_are_resolved_without_looking_outside_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Symbolic links inside the master's folder are followed; escapes are refused before
    anything outside the folder is looked at (not even lstat of an existing file there)."""
    base = tmp_path / "run"
    (base / "run.subfiles").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.h5").write_bytes(b"secret")
    os.symlink("run.subfiles", base / "alias")
    os.symlink(base / "run.subfiles", base / "absolute_alias")
    os.symlink("../elsewhere", base / "out")
    os.symlink(tmp_path / "elsewhere", base / "absolute_out")
    os.symlink("loop", base / "loop")
    real_base = os.path.realpath(base)  # the master's own folder: resolved once, by the caller
    looked: list[str] = []
    for name in ("lstat", "stat", "readlink"):
        real = getattr(os, name)
        monkeypatch.setattr(
            os, name, lambda p, *a, _real=real, **k: (looked.append(str(p)), _real(p, *a, **k))[1]
        )
    master = str(base / "run.h5")
    inside = str(base / "run.subfiles" / "s.h5")
    for rel in ("run.subfiles/s.h5", "alias/s.h5", "absolute_alias/s.h5", "alias/../alias/s.h5"):
        assert resolve_inside(master, rel, real_base) == inside, rel
    for evil in (
        "out/secret.h5",
        "absolute_out/secret.h5",
        "../elsewhere/secret.h5",
        "../run/run.subfiles/s.h5",
        "nothing/../../elsewhere/secret.h5",
    ):
        with pytest.raises(UnsafePathError, match="escapes the master's folder"):
            resolve_inside(master, evil, real_base)
    for loop in ("loop", "loop/x.h5"):  # a link to itself: a loop, not an escape
        with pytest.raises(UnsafePathError, match="more than 40 symbolic links .* ELOOP"):
            resolve_inside(master, loop, real_base)
    outside = [p for p in looked if not p.startswith(real_base + os.sep) and p != real_base]
    assert looked and not outside, outside


def test_records_round_trip() -> None:
    layout = DatasetLayout(
        2, (StoredExtent("a/s0-00000.h5", "/x", (0, 0), (4, 5), 2048, (0, 1)),), complete=False
    )
    assert DatasetLayout.from_json(layout.to_json(), "here") == layout
    summed = StoredExtent("", "/y", (3,), (4,), 96, (1,), (2,), (PieceSum((3,), (4,), "ab"),))
    full = dataclasses.replace(layout, extents=(summed,), filters={"gzip": 4}, checksum="xxh3")
    for one in (layout, full):  # the hand-built dict is what asdict gives, as JSON (digest!),
        # without format 4's fields at their defaults: a record without them reads as before
        as_json = [
            json.dumps(d, sort_keys=True)
            for d in (one.to_dict(), without_format_4_defaults(dataclasses.asdict(one)))
        ]
        assert as_json[0] == as_json[1]
    assert DatasetLayout.from_json(full.to_json(), "here") == full
    strided = PieceSum((1, 0), (1, 5), "cd", (3, 5), (2, 1), 1)
    learned = dataclasses.replace(
        layout,
        extents=(dataclasses.replace(layout.extents[0], pieces=(strided,)),),
        learned=True,
        maxshape=(-1, 5),
    )
    assert DatasetLayout.from_json(learned.to_json(), "here") == learned
    assert '"learned":true' in learned.to_json() and '"stride":[3,5]' in learned.to_json()
    record = FileRecord([Session(0, "w", 4, {"subfiles": 2}, "2 subfiles", [], "0.1", "t0")])
    back = FileRecord.from_json(record.to_json(), "here")
    assert back.sessions[0].ranks == 4 and back.open_sessions == back.sessions
    with pytest.raises(CorruptFileError, match="damaged"):
        DatasetLayout.from_json('{"session": 1}', "here")
    with pytest.raises(CorruptFileError, match="upgrade"):
        FileRecord.from_json('{"format": 99}', "here")


@pytest.mark.parametrize(
    "good", ["i1", "u8", "f2", "f8", ">f4", "c16", "?", "S5", "g", [("a", "i4"), ("b", "f8", (2,))]]
)
def test_supported_dtypes(good) -> None:
    assert check_dtype(good) == np.dtype(good)


@pytest.mark.parametrize(
    "bad, hint",
    [
        ("U5", "astype"),
        ("O", "variable-length"),
        ("M8[s]", "int64"),
        ("V8", "cannot be stored"),
        ("S0", "length"),
    ],
)
def test_unsupported_dtypes_say_why(bad, hint) -> None:
    with pytest.raises(UnsupportedDtypeError, match=hint):
        check_dtype(bad)


def test_a_sent_node_parses_its_layout_when_first_used() -> None:
    pieces = (PieceSum((0,), (4,), "ab"),)
    extents = tuple(
        StoredExtent(f"r.subfiles/s0-{g:05d}.h5", "/x@0", (4 * g,), (4,), 2048, (g,), (), pieces)
        for g in range(3)
    )
    layout = DatasetLayout(1, extents, dtype="<f8", checksum="xxh3_64", filters={"gzip": 4})
    sent = NodeInfo("dataset", {"a": 1}, (12,), np.dtype("f8"), layout, storage="3 subfiles")
    received = pickle.loads(pickle.dumps(sent))
    assert "layout" not in received.__dict__  # still the string it travelled as
    assert received.layout == layout and received.shape == (12,)
    assert pickle.loads(pickle.dumps(received)).layout == layout  # and passed on again
    group = pickle.loads(pickle.dumps(NodeInfo("group")))
    assert group.layout is None
    with pytest.raises(AttributeError):
        group.not_a_field  # noqa: B018 - only ``layout`` is looked up lazily

"""Every public attribute of h5py's File, Group, Dataset, AttributeManager and the dimension
scales' DimensionManager, on h5subfile's objects: served, or refused with a reason
(``files/h5py_surface.py``, ``REFUSED``) by an error that says so. One process, one rank."""

from __future__ import annotations

from pathlib import Path

import h5py
import h5py._hl.dims as h5py_dims
import numpy as np
import pytest
from mpi4py import MPI

import h5subfile as hs
from h5subfile.files.h5py_surface import REFUSED, UnsupportedAttributeError

#: h5py's classes and the name h5subfile's stand-ins go by in ``REFUSED``
CLASSES = {
    "File": h5py.File,
    "Group": h5py.Group,
    "Dataset": h5py.Dataset,
    "AttributeManager": h5py.AttributeManager,
    "DimensionManager": h5py_dims.DimensionManager,
    "DimensionProxy": h5py_dims.DimensionProxy,
    "Datatype": h5py.Datatype,
}


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    path = Path(tmp_path_factory.mktemp("surface")) / "s.h5"
    f = hs.File(path, "w", comm=MPI.COMM_SELF)
    d = f.create_dataset("x", (4,), "f8", block=slice(0, 4))
    d.write(np.arange(4.0))
    f.attrs["a"] = 1
    f["t"] = np.dtype([("x", "i4"), ("y", "f8")])
    yield {
        "File": f,
        "Group": f.create_group("g"),
        "Dataset": d,
        "AttributeManager": f.attrs,
        "DimensionManager": d.dims,
        "DimensionProxy": d.dims[0],
        "Datatype": f["t"],
    }
    f.close()


@pytest.mark.parametrize("kind", list(CLASSES))
def test_every_public_attribute_of_h5py_is_served_or_refused(
    objects: dict[str, object], kind: str
) -> None:
    obj = objects[kind]
    refused = REFUSED.get(kind, {})
    missing = []
    for name in sorted(_public(CLASSES[kind])):
        if name in refused:
            with pytest.raises(UnsupportedAttributeError, match=f"{kind}.{name} .*: "):
                getattr(obj, name)
            assert not hasattr(obj, name)  # an AttributeError too
        elif not hasattr(obj, name):
            missing.append(name)
    assert not missing, f"h5py's {kind} has {missing}: serve them, or refuse them with a reason"
    assert all(why for why in refused.values())
    assert not set(refused) - _public(CLASSES[kind]), "REFUSED names something h5py lacks"


def test_what_is_served_answers_as_h5py(objects: dict[str, object], tmp_path: Path) -> None:
    """The served attributes give h5py's answers for the same dataset and file."""
    f, d = objects["File"], objects["Dataset"]
    plain = h5py.File(tmp_path / "p.h5", "w", libver=("v108", "v110"))
    p = plain.create_dataset("x", data=np.arange(4.0))
    for name in ("compression_opts", "shuffle", "fletcher32", "scaleoffset", "external"):
        assert getattr(d, name) == getattr(p, name), name
    assert d.is_virtual is False and f.libver == plain.libver
    assert f.userblock_size == plain.userblock_size and f.swmr_mode is False
    assert np.array_equal(d.astype("i2")[1:3], p.astype("i2")[1:3])
    assert d.astype("i2")[1:3].dtype == np.dtype("i2")
    f.attrs.create("c", [1, 2], dtype="i1")
    f.attrs.modify("c", [3, 4])
    plain.attrs.create("c", [1, 2], dtype="i1")
    plain.attrs.modify("c", [3, 4])
    assert f.attrs["c"].dtype == plain.attrs["c"].dtype == np.dtype("i1")
    assert f.attrs["c"].tolist() == plain.attrs["c"].tolist() == [3, 4]
    seen: list[tuple[str, str]] = []
    f.visititems_links(lambda name, link: seen.append((name, type(link).__name__)))
    assert ("x", "HardLink") in seen
    like = f.create_dataset_like("y", p, fillvalue=2.0)
    assert (like.shape, like.dtype, like.fillvalue) == ((4,), np.dtype("f8"), 2.0)
    plain.close()


def test_iter_chunks_as_h5py(tmp_path: Path) -> None:
    """A chunked dataset's chunks, as h5py iterates a plain dataset of the same chunk shape;
    a contiguous one is refused as h5py refuses it."""
    with hs.File(tmp_path / "c.h5", "w", comm=MPI.COMM_SELF) as f:
        d = f.create_dataset("c", (10, 6), "f4", chunks=(4, 4), compression="gzip")
        with d.collective:
            d[...] = np.arange(60, dtype="f4").reshape(10, 6)
        d.flush()
        plain = h5py.File(tmp_path / "p.h5", "w")
        p = plain.create_dataset("c", (10, 6), "f4", chunks=(4, 4))
        for sel in (None, (slice(1, 9), slice(2, 6))):
            assert list(d.iter_chunks(sel)) == list(p.iter_chunks(sel))
        plain.close()
        with pytest.raises(TypeError):
            f.create_dataset("flat", (4,), "f8").iter_chunks()


def test_strings_and_fields(tmp_path: Path) -> None:
    rec = np.array([(1, 2.5), (3, 4.5)], dtype=[("i", "i4"), ("v", "f8")])
    with hs.File(tmp_path / "t.h5", "w", comm=MPI.COMM_SELF) as f:
        s = f.create_dataset("s", data=np.array([b"ab", b"cd"]))
        r = f.create_dataset("r", data=rec)
        f.update({"u": np.arange(2)})
        assert f.setdefault("u", None)[...].tolist() == [0, 1]
    with hs.File(tmp_path / "t.h5", "r", comm=MPI.COMM_SELF) as f:
        s, r = f["s"], f["r"]
        assert s.asstr()[...].tolist() == ["ab", "cd"] and s.asstr()[0] == "ab"
        assert r.fields("v")[...].tolist() == [2.5, 4.5]
        assert r.fields(["i"])[...].dtype.names == ("i",)
        with pytest.raises(TypeError):
            r.asstr()


@pytest.mark.parametrize("mode", ["w", "w-", "x", "a", "r+", "r"])
def test_mode_as_h5py_says_it(tmp_path: Path, mode: str) -> None:
    """``File.mode`` is what h5py's is for a file opened with the same mode: ``"r+"`` for
    every mode that writes, ``"r"`` for reading; a closed file's raises ValueError, as h5py's
    does (h5subfile said ``"w"`` for a file opened with ``"w"``)."""
    ours, theirs = tmp_path / "ours.h5", tmp_path / "theirs.h5"
    if mode in ("r+", "r"):
        hs.File(ours, "w", comm=MPI.COMM_SELF).close()
        h5py.File(theirs, "w").close()
    f = hs.File(ours, mode, comm=MPI.COMM_SELF)
    with h5py.File(theirs, mode) as g:
        assert f.mode == g.mode
        assert f"(mode {g.mode!r})" in repr(f)
    f.close()
    with pytest.raises(ValueError):
        assert f.mode is None  # raises first


def test_writes_broadcast_as_h5py(tmp_path: Path) -> None:
    """Data that h5py broadcasts into a selection is written the same, into a dataset with
    a declared block and into one whose layout is learned (a one-element array into one
    element was refused: ``DataShapeError``)."""
    writes = [
        (3, np.array([7.0])),
        (2, np.array([[4.0]])),
        (slice(0, 2), np.ones((1, 2))),
        ((slice(4, 6),), np.array([[[5.0]]])),
        (slice(6, 10), 2.5),
    ]
    with (
        h5py.File(tmp_path / "h5py.h5", "w") as g,
        hs.File(tmp_path / "ours.h5", "w", comm=MPI.COMM_SELF) as f,
    ):
        want = g.create_dataset("x", (10,), "f8")
        declared = f.create_dataset("declared", (10,), "f8", start=(0,), count=(10,))
        learned = f.create_dataset("learned", (10,), "f8")
        for selection, data in writes:
            want[selection] = data
            declared[selection] = data
            learned[selection] = data
        with pytest.raises(hs.DataShapeError, match="does not match"):
            learned[0:2] = np.ones(3)
        want = want[...]
    with h5py.File(tmp_path / "ours.h5", "r") as f:
        np.testing.assert_array_equal(f["declared"][...], want)
        np.testing.assert_array_equal(f["learned"][...], want)

"""h5py's object model in a write session, as parallel HDF5 serves it on every rank:
``track_order`` (members and attributes in creation order, in h5subfile and for plain h5py),
and attributes whose values differ between ranks (a time stamp, a host name)."""

from __future__ import annotations

import json
import socket
import time
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from mpi4py import MPI
from ranks import plain_h5py, raises_on_every_rank, same_on_every_rank

import h5subfile as hs

#: What plain h5py lists of the file, in its own order (h5subfile's reserved attributes left out)
LISTING = """
import json, sys, h5py
def attrs(obj):
    return [a for a in obj.attrs if not a.startswith("h5subfile")]
with h5py.File(sys.argv[1]) as f:
    out = {"/": [list(f), attrs(f)]}
    f.visititems(lambda name, obj: out.__setitem__(
        name, [list(obj) if isinstance(obj, h5py.Group) else obj[...].tolist(), attrs(obj)]))
print(json.dumps(out, sort_keys=True))
"""


def _listing(f: hs.File, values: bool = True) -> dict[str, list]:
    """The same listing, through h5subfile (``values``: datasets' values, else None)."""
    out = {"/": [list(f), list(f.attrs)]}

    def visit(name: str, obj: hs.Group | hs.Dataset) -> None:
        first = list(obj) if isinstance(obj, hs.Group) else obj[...].tolist() if values else None
        out[name] = [first, list(obj.attrs)]

    f.visititems(visit)
    return json.loads(json.dumps(out, sort_keys=True))


@pytest.mark.parametrize("subfiles", [1, 2])
def test_track_order_lists_members_and_attributes_as_created(
    comm: MPI.Comm, shared_tmp: Path, subfiles: int
) -> None:
    """A file, groups and datasets made with ``track_order=True`` list members and attributes
    in creation order, others by name; a dataset whose layout is learned from the writes (made
    again at close with several subfiles) keeps its place; plain h5py lists the same, and so
    does h5subfile reading the file back at any rank count."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / "ordered.h5"
    with hs.File(path, "w", comm=comm, subfiles=min(subfiles, size), track_order=True) as f:
        for name in ("zeta", "alpha", "mid"):
            f.create_group(name)
        f.attrs["title"] = "run"
        f.attrs["Conventions"] = "CF-1.8"
        g = f.create_group("vars", track_order=True)
        x = g.create_dataset("x", (4 * size,), "f8", track_order=True)
        x.attrs["units"] = "m"
        x.attrs["_FillValue"] = -1.0
        x.attrs["axis"] = "X"
        x[4 * rank : 4 * rank + 4] = np.arange(4.0) + 10 * rank
        g.create_dataset("a", data=np.arange(3, dtype="i4"))
        g.create_dataset("m", (size,), "i8", block=slice(rank, rank + 1)).write(np.array([rank]))
        by_name = f.create_group("by_name", track_order=False)
        by_name.create_group("b")
        by_name.create_group("a")
        by_name.attrs["y"] = 1
        by_name.attrs["x"] = 2
        in_session = same_on_every_rank(comm, _listing(f, values=False))
    with hs.File(path, "r", comm=comm) as back:
        written = same_on_every_rank(comm, _listing(back))
    groups = ("/", "vars", "by_name", "alpha", "mid", "zeta", "by_name/a", "by_name/b")
    assert in_session == {k: [v[0] if k in groups else None, v[1]] for k, v in written.items()}
    assert written["/"] == [["zeta", "alpha", "mid", "vars", "by_name"], ["title", "Conventions"]]
    assert written["vars"][0] == ["x", "a", "m"]
    assert written["vars/x"][1] == ["units", "_FillValue", "axis"]
    assert written["by_name"] == [["a", "b"], ["x", "y"]]
    plain = json.loads(plain_h5py(comm, LISTING, str(path)))
    assert plain == written, (plain, written)


def test_track_order_of_a_file_plain_h5py_wrote(comm: MPI.Comm, shared_tmp: Path) -> None:
    """h5subfile lists a plain HDF5 file's members as h5py does, by creation order where the
    file tracks it; appending keeps the order, new members last."""
    path = shared_tmp / "plain.h5"
    make = (
        "import sys, h5py\n"
        "with h5py.File(sys.argv[1], 'w', track_order=True) as f:\n"
        "    for n in ('c', 'a', 'b'): f.create_group(n)\n"
        "    f.attrs['z'] = 1; f.attrs['a'] = 2\n"
    )
    plain_h5py(comm, make, str(path))
    with hs.File(path, "a", comm=comm) as f:
        assert list(f) == ["c", "a", "b"] and list(f.attrs) == ["z", "a"]
        f.create_group("0")
        f.attrs["m"] = 3
    with hs.File(path, "r", comm=comm) as f:
        assert list(f) == ["c", "a", "b", "0"] and list(f.attrs) == ["z", "a", "m"]


def test_attributes_that_differ_between_ranks_keep_rank_0s(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """Every rank stamps the file with its own clock and host (as netCDF writers do): no error;
    the file keeps rank 0's values, every rank reads them after the next collective call, and
    rank 0 warns once, naming them."""
    path = shared_tmp / "stamped.h5"
    with hs.File(path, "w", comm=comm) as f:
        f.attrs["date_created"] = time.strftime("%Y-%m-%dT%H:%M:%S") + f".{time.time_ns()}"
        f.attrs["host"] = f"{socket.gethostname()}-rank{comm.rank}"
        f.attrs["ranks"] = comm.size  # the same everywhere
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f.create_dataset("x", (comm.size,), "f8")  # one group: made without a round
            f.flush()  # the next collective call
        said = [str(w.message) for w in caught if w.category is hs.DifferentValuesWarning]
        assert len(said) == (1 if comm.rank == 0 and comm.size > 1 else 0), said
        if said:
            assert "/.attrs['date_created'], /.attrs['host']" in said[0]
        stamp = same_on_every_rank(comm, (f.attrs["date_created"], f.attrs["host"]))
        assert stamp[1].endswith("-rank0")
    code = "import sys, h5py; a = h5py.File(sys.argv[1]).attrs; print(a['date_created'], a['host'])"
    assert plain_h5py(comm, code, str(path)) == f"{stamp[0]} {stamp[1]}"


#: Every link of a file as plain h5py sees it: name -> (kind, target, file), and each soft
#: or hard link's values read through it
LINKS = """
import json, sys, h5py
out = {}
with h5py.File(sys.argv[1]) as f:
    def visit(name, link):
        kind = type(link).__name__
        target = getattr(link, "path", "")
        out[name] = [kind, target, getattr(link, "filename", "")]
        obj = f.get(name)
        if isinstance(obj, h5py.Dataset):
            out[name].append(obj[()].tolist())
    f.visititems_links(visit)
print(json.dumps(out, sort_keys=True))
"""


def _links(group: hs.Group) -> dict[str, list]:
    """The same through h5subfile."""
    out: dict[str, list] = {}

    def visit(name: str, link: object) -> None:
        out[name] = [
            type(link).__name__,
            getattr(link, "path", ""),
            getattr(link, "filename", ""),
        ]
        obj = group.get(name)
        if obj is not None and hasattr(obj, "shape"):
            out[name].append(obj[()].tolist())

    group.visititems_links(visit)
    return out


@pytest.mark.parametrize("subfiles", [1, 2])
def test_soft_external_and_hard_links(comm: MPI.Comm, shared_tmp: Path, subfiles: int) -> None:
    """``group[name] = h5py.SoftLink / ExternalLink / an object`` make HDF5's links, as with
    parallel h5py: listed and followed by h5subfile in the session and after it, the same for
    plain h5py; a hard link to a dataset whose layout is learned reads what the ranks wrote;
    links are moved and removed without touching what they point to."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"links{subfiles}.h5"
    other = shared_tmp / f"links-other{subfiles}.h5"
    if rank == 0:
        with h5py.File(other, "w") as f:
            f["grid/x"] = np.arange(4.0)
    comm.Barrier()
    with hs.File(path, "w", comm=comm, subfiles=min(subfiles, size)) as f:
        d = f.create_dataset("data/t", (3 * size,), "i8")
        d[3 * rank : 3 * rank + 3] = np.arange(3) + 10 * rank
        f["data/latest"] = h5py.SoftLink("/data/t")
        f["relative"] = h5py.SoftLink("data/t")
        f["nowhere"] = h5py.SoftLink("/missing")
        f["grid"] = h5py.ExternalLink(other.name, "/grid")
        f["alias_t"] = d
        f.move("alias_t", "zz_t")  # a hard link made at the commit: moved before
        f["data_again"] = f["data"]
        with raises_on_every_rank(comm, hs.ObjectNotFoundError, "/nowhere", "does not exist"):
            f.create_dataset("nowhere/x", (2,), "f8")  # HDF5: component not found
        f["to_data"] = h5py.SoftLink("/data")
        made = f.create_dataset("to_data/through", data=np.arange(2))  # made in /data
        assert made[...].tolist() == [0, 1] and "through" in f["data"]
        del f["to_data"]
        del f["data/through"]
        seen = (
            "nowhere" in f,
            f.get("nowhere"),
            f.get("data/latest", getlink=True).path,
            f["grid/x"][()].tolist(),
            f["data_again/latest"].name,
        )
        in_session = same_on_every_rank(comm, sorted(f.keys()))
    assert seen == (True, None, "/data/t", [0.0, 1.0, 2.0, 3.0], "/data_again/latest")
    expect = np.concatenate([np.arange(3) + 10 * r for r in range(size)]).tolist()
    with hs.File(path, "r", comm=comm) as back:
        read = same_on_every_rank(comm, _links(back))
        assert sorted(back.keys()) == in_session
    plain = json.loads(plain_h5py(comm, LINKS, str(path)))
    assert read == plain
    assert plain["zz_t"] == ["HardLink", "", "", expect]
    assert plain["relative"] == ["SoftLink", "data/t", "", expect]
    assert plain["grid"] == ["ExternalLink", "/grid", other.name]
    assert plain["nowhere"] == ["SoftLink", "/missing", ""]
    with hs.File(path, "a", comm=comm) as f:
        del f["zz_t"]
        del f["data_again"]
        del f["nowhere"]
        with raises_on_every_rank(comm, hs.ObjectExistsError, "/relative", "soft link"):
            f.create_group("relative")
        f.move("relative", "moved/relative")
    plain = json.loads(plain_h5py(comm, LINKS, str(path)))
    assert sorted(plain) == ["data", "data/latest", "data/t", "grid", "moved", "moved/relative"]
    # its target is relative: from its new group it names nothing (HDF5 keeps the text)
    assert plain["moved/relative"] == ["SoftLink", "data/t", ""]
    assert plain["data/t"][3] == expect


#: What plain h5py finds in a file: each object's names (H5Ovisit's first, then every hard
#: link), values and attributes, and whether HDF5 calls any two of them the same object
OBJECTS = """
import json, sys, h5py
out = {}
with h5py.File(sys.argv[1]) as f:
    def visit(name, link):
        obj = f[name]
        entry = {"attrs": {k: str(v) for k, v in obj.attrs.items() if not k.startswith("h5subfile")}}
        if isinstance(obj, h5py.Dataset):
            entry["values"] = obj[()].tolist()
        out[name] = entry
    f.visititems_links(lambda name, link: None if isinstance(link, h5py.SoftLink) else visit(name, link))
    out["same keep/alias"] = "alias" in f and f["keep"] == f["alias"]
print(json.dumps(out, sort_keys=True))
"""


def _objects(f: hs.File) -> dict[str, object]:
    """The same through h5subfile."""
    out: dict[str, object] = {}

    def visit(name: str, link: object) -> None:
        if isinstance(link, h5py.SoftLink):
            return
        obj = f[name]
        attrs = {k: str(v) for k, v in obj.attrs.items()}
        out[name] = {
            "attrs": attrs,
            **({"values": obj[()].tolist()} if hasattr(obj, "shape") else {}),
        }

    f.visititems_links(visit)
    out["same keep/alias"] = "alias" in f and f["keep"] == f["alias"]
    return out


@pytest.mark.parametrize("subfiles", [1, 2])
def test_move_and_delete_objects_as_hdf5(comm: MPI.Comm, shared_tmp: Path, subfiles: int) -> None:
    """``move`` of groups and datasets (made in the session, or in an earlier one), and ``del``
    of a name of an object that a hard link still names, as HDF5 does them: the object keeps
    its data, attributes and members under its new name, the old name is free once the file
    is closed (refused until then, saying why), the program's objects keep working, and an
    object goes when its last name goes. Plain h5py reads the same in another process, and
    verify is clean."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"moves{subfiles}.h5"
    x = np.arange(3) + 10 * rank
    with hs.File(path, "w", comm=comm, subfiles=min(subfiles, size)) as f:
        d = f.create_dataset("a/x", (3 * size,), "i8")
        d[3 * rank : 3 * rank + 3] = x
        g = f.create_group("g")
        g.attrs["k"] = 1
        e = g.create_dataset("e", (2 * size,), "f8", fillvalue=-1.0)
        f.move("a/x", "b/y")
        f.move("g", "h")
        e[2 * rank] = rank + 0.5  # written through the object the program holds
        f["h"].attrs["set_after"] = "moved"
        f["h/sub"] = np.arange(2)
        f["keep"] = f["h/e"]
        del f["h/e"]  # another name holds it
        f.move("b/y", "c")  # a moved object's new name moved again
        seen = (
            "a/x" in f,
            "g" in f,
            "h/e" in f,
            sorted(f.keys()),
            f["h"].attrs["k"],
            f.get("c", getlink=True).__class__.__name__,
        )
        visited: list[str] = []
        f.visit(visited.append)
        listing = same_on_every_rank(comm, visited)
        with raises_on_every_rank(comm, hs.UnsupportedError, "/g", "moved or deleted", "closed"):
            f.create_group("g/again")
        with raises_on_every_rank(comm, hs.ObjectNotFoundError, "/a/x"):
            f.move("a/x", "z")
        with raises_on_every_rank(comm, hs.ObjectExistsError, "/h"):
            f.move("c", "h")
    assert seen == (False, False, False, ["a", "b", "c", "h", "keep"], 1, "HardLink")
    assert listing == ["a", "b", "c", "h", "h/sub", "keep"]
    values = np.concatenate([np.arange(3) + 10 * r for r in range(size)]).tolist()
    kept = [v for r in range(size) for v in (r + 0.5, -1.0)]
    expected = {
        "a": {"attrs": {}},
        "b": {"attrs": {}},
        "c": {"attrs": {}, "values": values},
        "h": {"attrs": {"k": "1", "set_after": "moved"}},
        "h/sub": {"attrs": {}, "values": [0, 1]},
        "keep": {"attrs": {}, "values": kept},
        "same keep/alias": False,
    }
    plain = json.loads(plain_h5py(comm, OBJECTS, str(path)))
    assert plain == expected
    with hs.File(path, "r", comm=comm) as back:
        assert _objects(back) == expected
        assert back.verify()["clean"]
    with hs.File(path, "a", comm=comm) as f:
        f.create_group("g")  # free again
        f.move("c", "d/c")  # from an earlier session
        f["alias"] = f["keep"]
        del f["keep"]
        assert same_on_every_rank(comm, sorted(f.keys())) == ["a", "alias", "b", "d", "g", "h"]
        f["keep"] = f["alias"]
    expected.update({"d": {"attrs": {}}, "d/c": expected.pop("c"), "g": {"attrs": {}}})
    expected["alias"] = expected["keep"]
    expected["same keep/alias"] = True
    plain = json.loads(plain_h5py(comm, OBJECTS, str(path)))
    assert plain == expected
    with hs.File(path, "a", comm=comm) as f:
        assert _objects(f) == expected
        del f["alias"]
        del f["keep"]  # its last name: the dataset goes
        assert "keep" not in f and "alias" not in f
    plain = json.loads(plain_h5py(comm, OBJECTS, str(path)))
    assert "keep" not in plain and "alias" not in plain and plain["d/c"]["values"] == values
    with hs.File(path, "r", comm=comm) as back:
        assert back.verify()["clean"]


def test_pop_and_popitem_as_h5py(comm: MPI.Comm, shared_tmp: Path) -> None:
    """h5py's ``pop`` and ``popitem``: the name goes, the object returned stays readable
    until the file is closed (and stays in the file if the program names it again); a link
    popped is removed; ``default`` or KeyError where nothing has the name."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / "popped.h5"
    with hs.File(path, "w", comm=comm) as f:
        d = f.create_dataset("d", (2 * size,), "i8")
        d[2 * rank : 2 * rank + 2] = rank
        f.create_group("g").attrs["k"] = 1
        f.create_group("x")
        f["s"] = h5py.SoftLink("/x")
        popped = f.pop("d")
        group = f.pop("g")
        name, linked = f.popitem()  # the first member listed: the soft link "s"
        with popped.collective:
            values = popped[...].tolist()
        seen = (sorted(f), group.attrs["k"], name, linked.name, f.pop("missing", 7))
        assert popped.name is None and d.name is None and group.name is None  # as h5py's
        with pytest.raises(KeyError):
            f.pop("missing")
        with raises_on_every_rank(comm, hs.UnsupportedError, "/d", "closed"):
            f.create_group("d")
        f["kept"] = popped  # named again: it stays
    assert values == [r for r in range(size) for _ in "ab"]
    assert seen == (["x"], 1, "s", "/s", 7)  # named by the path used, as HDF5 names it
    listing = plain_h5py(
        comm,
        "import sys, h5py, json; f = h5py.File(sys.argv[1]);"
        "print(json.dumps([sorted(f), f['kept'][...].tolist()]))",
        str(path),
    )
    assert json.loads(listing) == [["kept", "x"], values]


#: The object references in a file's attributes as plain h5py dereferences them: by owner and
#: attribute, the name of each object pointed at ("" for the null reference)
REFS = """
import json, sys, h5py
out = {}
with h5py.File(sys.argv[1]) as f:
    def name(ref):
        return f[ref].name if ref else ""
    def visit(path, obj):
        for key, value in obj.attrs.items():
            if isinstance(value, h5py.Reference):
                out[f"{path}.{key}"] = name(value)
            elif getattr(value, "dtype", None) is not None and h5py.check_dtype(ref=value.dtype):
                out[f"{path}.{key}"] = [name(r) for r in value.flat]
    visit("/", f)
    f.visititems(visit)
print(json.dumps(out, sort_keys=True))
"""


@pytest.mark.parametrize("subfiles", [1, 2])
def test_attributes_holding_object_references(
    comm: MPI.Comm, shared_tmp: Path, subfiles: int
) -> None:
    """``attrs[name] = obj.ref`` (and arrays of references, the null one among them) as in
    parallel h5py: read back as references in the session and after it (``f[ref]`` opens
    the object), and by plain h5py in another process, pointing at the objects, also at a
    dataset whose virtual dataset is made at close, at one moved since, and nowhere for one
    deleted; h5py's own references (another file's) and mixed values are refused on every
    rank."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"refs{subfiles}.h5"
    with hs.File(path, "w", comm=comm, subfiles=min(subfiles, size)) as f:
        x = f.create_dataset("x", (2 * size,), "f8")
        x[2 * rank : 2 * rank + 2] = rank
        g = f.create_group("g")
        gone = f.create_dataset("gone", data=np.arange(3))
        f.attrs["data"] = x.ref
        g.attrs["pair"] = np.array([x.ref, g.ref], dtype=h5py.ref_dtype)
        g.attrs["with_null"] = [gone.ref, hs.ObjectRef("")]
        x.attrs["group"] = g.ref
        f.move("g", "moved")
        del f["gone"]
        seen = (f[f.attrs["data"]].name, f[f["moved"].attrs["pair"][1]].name)
        assert not f["moved"].attrs["with_null"][0]  # its object is gone
        with raises_on_every_rank(comm, hs.errors.RankTypeError, "h5py's", "attribute 'theirs'"):
            with h5py.File(f"plain{subfiles}.h5", "w", driver="core", backing_store=False) as p:
                f.attrs["theirs"] = p.create_group("p").ref
        with raises_on_every_rank(comm, hs.errors.RankTypeError, "nothing else", "'mixed'"):
            f.attrs["mixed"] = [x.ref, 1]
        with raises_on_every_rank(comm, hs.ObjectNotFoundError, "/nowhere"):
            f.attrs["missing"] = hs.ObjectRef("/nowhere")
    assert seen == ("/x", "/moved")
    expected = {
        "/.data": "/x",
        "moved.pair": ["/x", "/moved"],
        "moved.with_null": ["", ""],
        "x.group": "/moved",
    }
    assert json.loads(plain_h5py(comm, REFS, str(path))) == expected
    with hs.File(path, "r", comm=comm) as back:
        assert back[back.attrs["data"]][...].tolist() == [r for r in range(size) for _ in "ab"]
        assert back[back["x"].attrs["group"]].name == "/moved"
        assert [r.path for r in back["moved"].attrs["pair"]] == ["/x", "/moved"]


#: What plain h5py finds of named types: each type's dtype and attributes, and for each
#: dataset whether its type is committed, and which
TYPES = """
import json, sys, h5py
out = {}
with h5py.File(sys.argv[1]) as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Datatype):
            out[name] = ["type", str(obj.dtype), {k: str(v) for k, v in obj.attrs.items()}]
        elif isinstance(obj, h5py.Dataset):
            kind = obj.id.get_type()
            named = h5py.h5i.get_name(kind).decode() if kind.committed() else ""
            out[name] = ["dataset", named, obj[()].tolist()]
    f.visititems(visit)
print(json.dumps(out, sort_keys=True))
"""


@pytest.mark.parametrize("subfiles", [1, 2])
def test_named_types_as_hdf5(comm: MPI.Comm, shared_tmp: Path, subfiles: int) -> None:
    """``group[name] = dtype`` commits a named type, as parallel h5py does; datasets made
    with ``dtype=group[name]`` share it in the file (plain h5py sees their type committed),
    others of the same dtype do not; types carry attributes, are listed, visited, linked
    and deleted like any object, and read back as ``Datatype`` at another rank count. A type
    HDF5 cannot hold, or a name taken, raises on every rank."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"types{subfiles}.h5"
    point = np.dtype([("x", "<f4"), ("y", "<i2")])
    with hs.File(path, "w", comm=comm, subfiles=min(subfiles, size)) as f:
        f["types/point"] = point
        t = f["types/point"]
        t.attrs["units"] = "m"
        f["types/state"] = h5py.enum_dtype({"off": 0, "on": 1}, basetype="i1")
        d = f.create_dataset("points", (2 * size,), dtype=t)
        d[2 * rank : 2 * rank + 2] = np.array([(rank, 1), (rank, 2)], dtype=point)
        f.create_dataset("plain", data=np.zeros(2, dtype=point))
        s = f.create_dataset("states", (size,), dtype=f["types/state"])
        s[rank] = rank % 2
        f["alias"] = t  # another name of the type
        f["gone"] = np.dtype("f8")
        del f["gone"]
        seen = (
            isinstance(t, hs.Datatype),
            t.dtype == point,
            sorted(f["types"]),
            "gone" in f,
            h5py.h5t.TypeID.committed(d.id.get_type()),
        )
        visited: list[str] = []
        f.visit(visited.append)
        with raises_on_every_rank(comm, hs.ObjectExistsError, "/types/point"):
            f["types/point"] = np.dtype("f8")
        with raises_on_every_rank(comm, hs.errors.RankTypeError, "named type at /bad"):
            f["bad"] = np.dtype(object)
    assert seen == (True, True, ["point", "state"], False, True)
    assert same_on_every_rank(comm, visited) == [
        "alias", "plain", "points", "states", "types", "types/state",
    ]  # fmt: skip
    found = json.loads(plain_h5py(comm, TYPES, str(path)))
    points = [[r, k] for r in range(size) for k in (1, 2)]
    assert found["alias"] == ["type", str(point), {"units": "m"}]  # HDF5 visits it there
    assert found["points"][1] in ("/alias", "/types/point") and found["points"][2] == points
    assert found["plain"][1] == "" and found["states"][1] == "/types/state"
    assert found["states"][2] == [r % 2 for r in range(size)]
    with hs.File(path, "r", comm=comm) as back:
        assert isinstance(back["types/point"], hs.Datatype)
        assert back["types/point"].attrs["units"] == "m" and back["alias"] == back["types/point"]
        assert back["points"][...].tolist() == [tuple(p) for p in points]
        assert h5py.h5t.TypeID.committed(back["points"].id.get_type())


#: A plain HDF5 file to copy from: a group with attributes, a compressed resizable dataset
#: with a fill value, a soft link, a subgroup; what copy refuses beside it
SOURCE = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    g = f.create_group("g")
    g.attrs["title"] = "grid"
    x = g.create_dataset("x", data=np.arange(12.0).reshape(3, 4), chunks=(1, 4),
                         compression="gzip", maxshape=(None, 4), fillvalue=-1.0)
    x.attrs["units"] = "m"
    g["latest"] = h5py.SoftLink("/g/x")
    g.create_group("sub").create_dataset("n", data=np.int32(7))
    f["text"] = np.array([b"a", b"bc"], dtype=h5py.string_dtype("ascii"))
    r = f.create_dataset("r", data=np.arange(3))
    r.attrs["me"] = r.ref
    g["x_again"] = x
    g["rows"] = np.arange(3.0)
    g["rows"].make_scale("row")
    x.dims[0].attach_scale(g["rows"])
    x.dims[1].label = "column"
    g["sub/n"].attrs["of"] = x.ref
    g["sub/n"].attrs["both"] = np.array([x.ref, h5py.Reference()], dtype=h5py.ref_dtype)
    f.create_group("elsewhere").attrs["out"] = r.ref
"""

#: What plain h5py finds of the references in a copy (of SOURCE's /g as /grid, /r as /r)
COPIED_REFS = """
import json, sys, h5py
with h5py.File(sys.argv[1]) as f:
    x, n = f["grid/x"], f["grid/sub/n"]
    print(json.dumps([
        x == f["grid/x_again"], [[s.name for s in d.values()] for d in x.dims],
        [d.label for d in x.dims], h5py.h5ds.get_scale_name(f["grid/rows"].id).decode(),
        f[n.attrs["of"]] == x, [bool(r) and f[r] == x for r in n.attrs["both"]],
        f[f["r"].attrs["me"]] == f["r"], f[f["own_copy"].attrs["to"]] == f["own"],
    ]))
"""

#: What plain h5py finds of a copy: every object's values and attributes
COPIED = """
import json, sys, h5py
out = {}
with h5py.File(sys.argv[1]) as f:
    def visit(name, link):
        obj = f.get(name)
        entry = {"link": type(link).__name__, "target": getattr(link, "path", ""), "attrs": {
            k: str(v) for k, v in getattr(obj, "attrs", {}).items()
            if not k.startswith("h5subfile")}}
        if isinstance(obj, h5py.Dataset):
            entry["values"] = obj[()].tolist()
        out[name] = entry
    f.visititems_links(visit)
print(json.dumps(out, sort_keys=True))
"""


def test_copy_from_another_file_and_within(comm: MPI.Comm, shared_tmp: Path) -> None:
    """``group.copy`` as h5py's: a group of a plain HDF5 file copied with its attributes,
    storage (chunks, gzip, maximum shape, fill value), soft link and subgroup; a dataset the
    ranks wrote in this session copied within the file; ``shallow`` copies a group's members
    empty; hard links, dimension scales and references within the copied group point at the
    copies; a reference to an object of the other file that is not copied, or variable-length
    strings, are refused on every rank before anything is made."""
    rank, size = comm.rank, comm.size
    source, path = shared_tmp / "source.h5", shared_tmp / "copied.h5"
    plain_h5py(comm, SOURCE, str(source))
    with h5py.File(source, "r") as src, hs.File(path, "w", comm=comm) as f:
        f.copy(src["g"], "grid")
        f.create_group("out")
        f.copy(src["g"], f["out"], name="shallow", shallow=True)
        d = f.create_dataset("own", (2 * size,), "i4")
        d[2 * rank : 2 * rank + 2] = [rank, 10 * rank]
        d.attrs["to"] = d.ref
        f.copy("own", "own_copy")  # its reference to itself points at the copy
        f["own_copy"].attrs["to"] = d.ref  # and, set again, at the original
        f.copy(src["r"], "r")
        with raises_on_every_rank(comm, hs.UnsupportedError, "'out'", "/r of another file"):
            f.copy(src["elsewhere"], "elsewhere")
        with raises_on_every_rank(comm, hs.UnsupportedDtypeError):
            f.copy(src["text"], "text")
        made = same_on_every_rank(comm, sorted(f.keys()))
    assert made == ["grid", "out", "own", "own_copy", "r"]
    refs = json.loads(plain_h5py(comm, COPIED_REFS, str(path)))
    assert refs == [
        True,  # one dataset, two names, as in the source
        [["/grid/rows"], []],
        ["", "column"],
        "row",
        True,
        [True, False],
        True,
        True,
    ]
    found = json.loads(plain_h5py(comm, COPIED, str(path)))
    with hs.File(path, "r", comm=comm) as back:
        x = back["grid/x"]
        storage = same_on_every_rank(
            comm, (x.chunks, x.compression, x.maxshape, float(x.fillvalue))
        )
    assert storage == ((1, 4), "gzip", (None, 4), -1.0)
    x = found["grid/x"]
    assert x["values"] == np.arange(12.0).reshape(3, 4).tolist()
    assert x["attrs"]["units"] == "m" and found["grid"]["attrs"] == {"title": "grid"}
    assert sorted(x["attrs"]) == ["DIMENSION_LABELS", "DIMENSION_LIST", "units"]
    # a soft link's path is kept as it was (it dangles here, as h5py's copy leaves it)
    assert found["grid/latest"] == {"link": "SoftLink", "target": "/g/x", "attrs": {}}
    assert found["grid/sub/n"]["values"] == 7
    own = [v for r in range(size) for v in (r, 10 * r)]
    assert found["own_copy"]["values"] == own == found["own"]["values"]
    shallow = sorted(k for k in found if k.startswith("out/shallow/"))
    assert shallow == [
        "out/shallow/latest",
        "out/shallow/rows",
        "out/shallow/sub",
        "out/shallow/x",
        "out/shallow/x_again",
    ]

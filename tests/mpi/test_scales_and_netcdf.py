"""Dimension scales, references, ``obj.id`` and deleting in a write session, as h5py serves
them, and netCDF-4 files written in parallel by h5netcdf through h5py's ``mpio`` driver
(served by h5subfile): compared with the same calls made serially by plain h5netcdf."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
from mpi4py import MPI
from ranks import on_root, plain_h5py, raises_on_every_rank, same_on_every_rank

import h5subfile as hs

#: What plain h5py sees of the scales of /v and /x (and the data), in a separate process.
SCALES = """
import json, sys, h5py
with h5py.File(sys.argv[1]) as f:
    v, x = f["v"], f["x"]
    print(json.dumps({
        "dims": [[s.name for s in d.values()] for d in v.dims],
        "keys": [list(d.keys()) for d in v.dims],
        "labels": [d.label for d in v.dims],
        "scale": h5py.h5ds.is_scale(x.id),
        "users": sorted(f[r].name for r, _ in x.attrs["REFERENCE_LIST"]),
        "x": x[...].tolist(), "v": v[...].sum().item()}))
"""


@pytest.mark.parametrize("subfiles", [1, 2])
def test_dimension_scales_as_h5py(comm: MPI.Comm, shared_tmp: Path, subfiles: int) -> None:
    """make_scale, attach_scale, detach_scale and labels on datasets whose layout is learned
    (made again at close with several subfiles): h5subfile, plain h5py and h5subfile reading
    back see the same scales, references open their objects."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / f"scales{subfiles}.h5"
    n = 4 * size
    with hs.File(path, "w", comm=comm, subfiles=min(subfiles, size)) as f:
        x = f.create_dataset("x", (n,), "f8")
        y = f.create_dataset("y", (3,), "i4")
        other = f.create_dataset("other", (n,), "f8")
        v = f.create_dataset("v", (n, 3), "f4")
        x.make_scale("the x")
        y.make_scale()
        other.make_scale("other")
        v.dims[0].attach_scale(x)
        v.dims[0].attach_scale(other)
        v.dims[1].attach_scale(y)
        v.dims[0].detach_scale(other)
        v.dims[1].label = "column"
        x[rank * 4 : (rank + 1) * 4] = np.arange(4) + rank * 4
        v[rank * 4 : (rank + 1) * 4] = rank + 1
        if rank == 0:
            y[...] = [7, 8, 9]
        assert x.is_scale and not v.is_scale
        assert [d.keys() for d in v.dims] == [["the x"], [""]]
        assert v.dims[1].label == "column" and v.dims[0].label == ""
        assert v.dims[0][0] == x and v.dims[0]["the x"] == x
        assert f[v.attrs["DIMENSION_LIST"][0][0]] == x and f[x.ref] == x
        assert h5py.h5ds.is_scale(x.id) and not h5py.h5ds.is_scale(v.id)
    seen = json.loads(plain_h5py(comm, SCALES, str(path)))
    assert seen == {
        "dims": [["/x"], ["/y"]],
        "keys": [["the x"], [""]],
        "labels": ["", "column"],
        "scale": True,
        "users": ["/v"],
        "x": list(range(n)),
        "v": float(3 * 4 * sum(range(1, size + 1))),
    }
    with hs.File(path, "r", comm=comm) as f:
        v = f["v"]
        assert [s.name for s in v.dims[0]] == ["/x"] and v.dims[1].label == "column"
        assert v.dims[1][0][...].tolist() == [7, 8, 9]
        assert f["x"].is_scale and not f["other"].attrs.get("REFERENCE_LIST", [])
        assert h5py.h5ds.is_scale(f["x"].id)


def test_dimension_scale_errors_on_every_rank(comm: MPI.Comm, shared_tmp: Path) -> None:
    """HDF5's own checks, made on every rank alike: a scale attached to itself, a dimension
    out of range, a scale of another file, a reference attribute to another file's object."""
    with hs.File(shared_tmp / "scale_errors.h5", "w", comm=comm) as f:
        x = f.create_dataset("x", (4,), "f8")
        v = f.create_dataset("v", (4,), "f8")
        x.make_scale("x")
        with raises_on_every_rank(comm, hs.errors.RankValueError, "/x cannot be", "of itself"):
            x.dims[0].attach_scale(x)
        with raises_on_every_rank(comm, hs.errors.RankValueError, "HDF5 refused dims attach"):
            x.dims[0].attach_scale(v)  # a scale has no scales
        with pytest.raises(IndexError):
            v.dims[1]  # noqa: B018
        v.dims[0].attach_scale(x)
        with hs.File(shared_tmp / "scale_other.h5", "w", comm=comm) as g:
            z = g.create_dataset("x", (4,), "f8")
            with pytest.raises(ValueError, match="same open file"):
                v.dims[0].attach_scale(z)
            with raises_on_every_rank(comm, hs.errors.RankTypeError, "another file"):
                v.attrs["theirs"] = z.ref  # its path names an object here too


def test_id_serves_metadata_and_refuses_changes(comm: MPI.Comm, shared_tmp: Path) -> None:
    """``.id`` answers h5py's low-level calls about metadata (types, creation properties, fill
    values) as for plain h5py; data written or objects made through it are not lost silently:
    the close raises on every rank."""
    with hs.File(shared_tmp / "ids.h5", "w", comm=comm, track_order=True) as f:
        g = f.create_group("g", track_order=True)
        d = f.create_dataset("d", (6,), "i2", fillvalue=-3, maxshape=(None,), chunks=(2,))
        assert d.id.get_type().dtype == np.dtype("i2")
        fill = np.zeros((), "i2")
        d.id.get_create_plist().get_fill_value(fill)
        assert fill == -3 and d.id.get_create_plist().get_layout() == h5py.h5d.CHUNKED
        flags = h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED
        assert g.id.get_create_plist().get_link_creation_order() == flags
        assert f.id.get_create_plist().get_link_creation_order() == flags
        d.resize((8,))
        assert d.id.shape == (8,)
    path = shared_tmp / "ids_written.h5"
    f = hs.File(path, "w", comm=comm)
    d = f.create_dataset("d", (4,), "f8")
    d.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(4.0))
    with raises_on_every_rank(comm, hs.UnsupportedError, "data written to /d through .id"):
        f.close()
    f = hs.File(shared_tmp / "ids_made.h5", "w", comm=comm)
    enum = h5py.h5t.enum_create(h5py.h5t.STD_U8LE)  # as h5netcdf makes its enum types
    enum.enum_insert(b"clear", 0)
    enum.commit(f.create_group("g").id, b"cloud_t")
    with raises_on_every_rank(comm, hs.UnsupportedError, "datatype /g/cloud_t made"):
        f.close()


def test_delete_as_h5py(comm: MPI.Comm, shared_tmp: Path) -> None:
    """``del group[name]`` unlinks a dataset or a group with everything below it, written or
    not, and the name can be used again (``clear()`` unlinks every member); a missing name
    fails on every rank."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / "deleted.h5"
    with hs.File(path, "w", comm=comm, subfiles=min(2, size)) as f:
        d = f.create_dataset("d", (size,), "i8")
        d[rank] = rank
        f.create_group("g/h").create_dataset("e", (2,), "f4")
        del f["d"]
        del f["g"]
        assert "d" not in f and "g" not in f and list(f) == []
        f.create_dataset("d", (size,), "i8")[rank] = 10 * rank
        with raises_on_every_rank(comm, hs.ObjectNotFoundError, "/nothing"):
            del f["nothing"]
        with raises_on_every_rank(comm, hs.UnsupportedError, "is h5subfile's own"):
            f.create_group("h5subfile-deleted")  # where deleted storage waits
        scratch = f.create_group("scratch")
        scratch.create_dataset("a", (2,), "f4")
        scratch.create_group("b")
        scratch.clear()
        assert list(scratch) == []
        del f["scratch"]
    listing = plain_h5py(
        comm,
        "import sys, h5py, json; f = h5py.File(sys.argv[1]);"
        "print(json.dumps([list(f), f['d'][...].tolist()]))",
        str(path),
    )
    assert json.loads(listing) == [["d"], [10 * r for r in range(size)]]


# netCDF-4 through h5netcdf -----------------------------------------------------------------
h5netcdf = pytest.importorskip("h5netcdf", reason="h5netcdf is not installed")

#: Attributes of every netCDF-4 type.
ATTRS = {
    "i1": np.int8(-1),
    "u1": np.uint8(2),
    "i2": np.int16(-3),
    "u2": np.uint16(4),
    "i4": np.int32(-5),
    "u4": np.uint32(6),
    "i8": np.int64(-7),
    "u8": np.uint64(8),
    "f4": np.float32(0.5),
    "f8": 0.25,
    "text": "a string",
    "numbers": np.arange(3, dtype="f8"),
}


def write_netcdf(nc: object, parts: list[int], size: int) -> None:
    """The same netCDF-4 file from ``nc`` (an open h5netcdf File), writing the parts of
    ranks ``parts``: fixed and unlimited dimensions, coordinate and data variables, a group,
    attributes of every type, a compound type (a named type) and a variable of it."""
    n = 4 * size
    nc.dimensions = {"x": n, "y": 3, "time": None}
    nc.attrs.update({"title": "h5subfile netCDF", **ATTRS})
    x = nc.create_variable("x", ("x",), "f8")
    x.attrs["units"] = "m"
    temp = nc.create_variable("temp", ("time", "x", "y"), "f4", fillvalue=np.float32(-1))
    temp.attrs.update(ATTRS)
    nc.resize_dimension("time", 2)
    g = nc.create_group("ocean")
    g.dimensions = {"z": 5}
    z = g.create_variable("z", ("z",), "i4")
    salt = g.create_variable("salt", ("z", "x"), "f8")
    wind_t = g.create_cmptype(np.dtype([("u", "<f4"), ("v", "<f4")]), "wind_t")  # a named type
    wind = g.create_variable("wind", ("x",), wind_t)
    for rank in parts:
        rows = slice(rank * 4, (rank + 1) * 4)
        x[rows] = np.arange(rows.start, rows.stop)
        temp[:, rows, :] = np.arange(24, dtype="f4").reshape(2, 4, 3) + rank
        salt[:, rows] = rank + 0.5
        wind[rows] = np.array([(rank, k) for k in range(4)], dtype=wind_t.dtype)
        if rank == 0:
            z[:] = np.arange(5)


def append_netcdf(nc: object, parts: list[int]) -> None:
    """One more step of the unlimited dimension in a file opened again, as models append
    their output: written by the ranks ``parts``."""
    nc.resize_dimension("time", 3)
    temp = nc["temp"]
    for rank in parts:
        temp[2, rank * 4 : (rank + 1) * 4, :] = 100 + rank


#: Everything h5netcdf reads of a file, values included (h5subfile's records left out: its
#: own attributes, the file's and each dataset's layout, docs/FORMAT.md).
DESCRIBE = """
import json, sys, h5netcdf, numpy as np
def ours(name):
    return name.startswith("h5subfile")
def group(g):
    return {"dims": {k: [len(d), d.isunlimited()] for k, d in g.dimensions.items()},
            "attrs": {k: np.asarray(v).tolist() for k, v in g.attrs.items() if not ours(k)},
            "vars": {k: [v.dimensions, v.dtype.str, np.asarray(v[...]).tolist(),
                         {a: np.asarray(b).tolist() for a, b in v.attrs.items() if not ours(a)}]
                     for k, v in g.variables.items()},
            "groups": {k: group(s) for k, s in g.groups.items()}}
with h5netcdf.File(sys.argv[1], "r") as f:
    print(json.dumps(group(f), sort_keys=True))
"""


def test_h5netcdf_writes_in_parallel_as_serially(comm: MPI.Comm, shared_tmp: Path) -> None:
    """h5netcdf's File with ``driver="mpio"`` (h5py served by h5subfile), or given an open
    h5subfile File, and a step appended by a later session: the file reads back
    in h5netcdf and xarray, with plain h5py in a separate process, as the same calls made
    serially by plain h5netcdf; ``ncdump -h`` shows the same header (but h5subfile's records)."""
    from h5subfile import dropin

    size = comm.size
    parallel, serial = shared_tmp / "parallel.nc", shared_tmp / "serial.nc"
    passed = shared_tmp / "passed.nc"
    dropin.install()
    try:
        with h5netcdf.File(str(parallel), "w", driver="mpio", comm=comm) as nc:
            write_netcdf(nc, [comm.rank], size)
        with hs.File(passed, "w", comm=comm, track_order=True) as f:  # an open file passed in
            with h5netcdf.File(f, "w") as nc:
                write_netcdf(nc, [comm.rank], size)
        with h5netcdf.File(str(parallel), "r+", driver="mpio", comm=comm) as nc:
            append_netcdf(nc, [comm.rank])
        with h5netcdf.File(str(parallel), "r", driver="mpio", comm=comm) as nc:
            assert nc["temp"].dimensions == ("time", "x", "y")
            assert nc["ocean"]["salt"][...].shape == (5, 4 * size)
    finally:
        dropin.uninstall()

    def serially(append: bool) -> None:
        with h5netcdf.File(str(serial), "r+" if append else "w") as nc:
            if append:
                append_netcdf(nc, list(range(size)))
            else:
                write_netcdf(nc, list(range(size)), size)

    on_root(comm, lambda: serially(False))
    seen = [plain_h5py(comm, DESCRIBE, str(p)) for p in (passed, serial)]
    assert json.loads(seen[0]) == json.loads(seen[1])
    on_root(comm, lambda: serially(True))
    seen = [plain_h5py(comm, DESCRIBE, str(p)) for p in (parallel, serial)]
    assert json.loads(seen[0]) == json.loads(seen[1])
    xarray = pytest.importorskip("xarray", reason="xarray is not installed")
    ds = xarray.open_dataset(parallel, engine="h5netcdf")
    assert dict(ds.sizes) == {"time": 3, "x": 4 * size, "y": 3}
    assert ds["temp"].dims == ("time", "x", "y") and ds.attrs["title"] == "h5subfile netCDF"
    ds.close()
    if shutil.which("ncdump"):
        headers = same_on_every_rank(comm, [_header(p) for p in (parallel, serial)], "headers")
        assert headers[0] == headers[1]


def _header(path: Path) -> list[str]:
    """``ncdump -h``'s lines, but the file's name and h5subfile's records."""
    out = subprocess.run(["ncdump", "-h", str(path)], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines()[1:] if ":h5subfile" not in line]


def test_h5netcdf_legacy_api_grows_unlimited_dimensions_by_writing_past_them(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    """h5netcdf's netCDF4-python-like API resizes an unlimited dimension when a write reaches
    past it (every rank writes its part of each step, and the step's time, the same value):
    the same file as the same calls made serially."""
    from h5netcdf import legacyapi

    from h5subfile import dropin

    size = comm.size
    parallel, serial = shared_tmp / "legacy.nc", shared_tmp / "legacy_serial.nc"

    def steps(ds: object, parts: list[int]) -> None:
        ds.createDimension("time", None)
        ds.createDimension("x", 4 * size)
        v = ds.createVariable("v", "f8", ("time", "x"))
        t = ds.createVariable("time", "f8", ("time",))
        for step in range(3):
            for rank in parts:
                v[step, 4 * rank : 4 * rank + 4] = step + rank
                t[step] = step * 0.5

    dropin.install()
    try:
        with legacyapi.Dataset(str(parallel), "w", driver="mpio", comm=comm) as ds:
            steps(ds, [comm.rank])
    finally:
        dropin.uninstall()

    def serially() -> None:
        with legacyapi.Dataset(str(serial), "w") as ds:
            steps(ds, list(range(size)))

    on_root(comm, serially)
    seen = [plain_h5py(comm, DESCRIBE, str(p)) for p in (parallel, serial)]
    assert json.loads(seen[0]) == json.loads(seen[1])
    assert json.loads(seen[0])["dims"]["time"] == [3, True]


def test_delete_leaves_alike_named_datasets(comm: MPI.Comm, shared_tmp: Path) -> None:
    """Deleting ``x`` takes only ``x``: a program's dataset named ``x@1`` (the way h5subfile
    names a grown dataset's other sources) stays, with its data."""
    rank, size = comm.rank, comm.size
    path = shared_tmp / "alike.h5"
    with hs.File(path, "w", comm=comm, subfiles=min(2, size)) as f:
        f.create_dataset("x", (size,), "i4")[rank] = rank
        f.create_dataset("x@1", (size,), "i4")[rank] = 10 + rank
        del f["x"]
    listing = plain_h5py(
        comm,
        "import sys, h5py, json; f = h5py.File(sys.argv[1]);"
        "print(json.dumps([list(f), f['x@1'][...].tolist()]))",
        str(path),
    )
    assert json.loads(listing) == [["x@1"], [10 + r for r in range(size)]]


def test_deleting_a_scale_detaches_it_first(comm: MPI.Comm, shared_tmp: Path) -> None:
    """Deleting a dimension scale (or a dataset with scales) detaches it first: no reference is
    left pointing at a deleted object, and a new dataset of the same name is no one's scale."""
    path = shared_tmp / "detached.h5"
    with hs.File(path, "w", comm=comm, subfiles=min(2, comm.size)) as f:
        x = f.create_dataset("x", (4,), "f8")
        y = f.create_dataset("y", (3,), "f8")
        v = f.create_dataset("v", (4, 3), "f4")
        x.make_scale("x")
        y.make_scale("y")
        v.dims[0].attach_scale(x)
        v.dims[1].attach_scale(y)
        del f["x"]
        f.create_dataset("x", (4,), "f8")
        assert len(v.dims[0]) == 0 and [s.name for s in v.dims[1]] == ["/y"]
        assert "REFERENCE_LIST" not in f["x"].attrs
    seen = plain_h5py(
        comm,
        "import sys, h5py, json; f = h5py.File(sys.argv[1]); v = f['v'];"
        "print(json.dumps([[s.name for s in d.values()] for d in v.dims]"
        " + [[a for a in f['x'].attrs if not a.startswith('h5subfile')],"
        " [f[r].name for r, _ in f['y'].attrs['REFERENCE_LIST']]]))",
        str(path),
    )
    assert json.loads(seen) == [[], ["/y"], [], ["/v"]]

"""Seeded fuzzer over masters and layout records (run by tests/test_fuzz.py).

``python layout_fuzz.py make FOLDER`` (under ``mpiexec -n 4``) writes the two base files:
``subfiled.h5`` (4 ranks in 2 subfiles; the master holds only metadata, several extents per
subfile) and, on rank 0 alone, ``single.h5`` (one group: the data is in the master).
``python layout_fuzz.py run FOLDER FIRST COUNT`` runs the cases ``FIRST .. FIRST + COUNT - 1``
one after the other and prints one JSON line per case: the seed, the mutation, and its outcome:

- ``ok``: every dataset and attribute read back bit for bit;
- ``error``: opening or reading raised an ``H5SubfileError`` (a clean refusal);
- ``wrong``: a read returned other values (a damage nobody caught);
- ``foreign``: another exception escaped.

A case that crashes or hangs the process prints nothing: the caller knows the seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np

BASES = ("subfiled", "single")
COMPOUND = np.dtype([("x", "<f4"), ("n", "<i4"), ("s", "S3")])
KINDS = ("truncate", "flip", "record", "record", "hostile", "hostile", "root", "vds")
LAYOUT = "h5subfile.layout"


# ----------------------------------------------------------------------------- base files
def expected(rank: int, ranks: int) -> dict[str, tuple[tuple[int, ...], np.ndarray]]:
    """Each dataset's whole contents, and this rank's block (start) of it."""
    n = ranks
    a = np.arange(50 * n, dtype="<f4") * 1.5 - 7
    b = np.arange(30 * n, dtype="<i8") * -(2**40) + 3
    t = (np.arange(6 * 2 * n, dtype="<i2").reshape(6, 2 * n) * 37) % 1000
    c = np.zeros(10 * n, COMPOUND)
    c["x"], c["n"], c["s"] = np.arange(10 * n) / 4, np.arange(10 * n) * 11, b"ab"
    return {
        "/a": ((50 * rank,), a),
        "/g/b": ((30 * rank,), b),
        "/t": ((0, 2 * rank), t),
        "/c": ((10 * rank,), c),
    }


def make(folder: Path) -> None:
    from mpi4py import MPI

    import h5subfile as hs

    comm = MPI.COMM_WORLD
    write(hs, folder / "subfiled.h5", comm, subfiles=2)
    if comm.rank == 0:
        write(hs, folder / "single.h5", MPI.COMM_SELF, subfiles=1)
        with h5py.File(folder.parent / "secret.h5", "w") as secret:  # what ../secret.h5 holds
            for name, (_, whole) in expected(0, 4).items():
                secret[name] = np.ones_like(whole)


def write(hs: Any, path: Path, comm: Any, subfiles: int) -> None:
    """Every rank of ``comm`` writes its block of the 4-rank data; one rank writes it all.

    Attributes are fixed-length or numeric: HDF5 keeps them in the object header, under its
    checksum. A ``str`` attribute (h5py stores it variable-length) lives in the master's global
    heap, which HDF5 does not checksum: a flipped bit there silently changes the string, or
    makes it unreadable, which ``.attrs`` reports as an "<unreadable attribute: ...>" note
    rather than an error (seen as seed 359 of this fuzzer with such attributes).
    """
    with hs.File(path, "w", comm=comm, subfiles=subfiles) as f:
        f.attrs["title"] = np.bytes_("fuzz")
        f.attrs["steps"] = np.arange(3, dtype="<i4")
        for name, (start, whole) in expected(comm.rank, 4).items():
            if comm.size == 1:
                start, count = (0,) * whole.ndim, whole.shape
            else:
                count = (whole.shape[0] // 4,) if whole.ndim == 1 else (6, 2)
            block = whole[tuple(slice(s, s + n) for s, n in zip(start, count))]
            f.create_dataset(
                name, shape=whole.shape, dtype=whole.dtype, start=start, count=count
            ).write(np.ascontiguousarray(block))
        f["/a"].attrs["units"] = np.bytes_("m")
        f.create_dataset("/z", shape=(5,), dtype="<f8")  # never written: fill values


# ----------------------------------------------------------------------------- mutations
def data_ranges(path: Path) -> list[tuple[int, int]]:
    """Byte ranges of raw data stored in a master: a third of the bit flips aim there (only
    the data checksums, read with ``verify=True``, can tell a flipped data bit)."""
    ranges = []
    with h5py.File(path, "r") as f:

        def visit(_: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset) and obj.id.get_offset() is not None:
                ranges.append(
                    (obj.id.get_offset(), obj.id.get_offset() + obj.id.get_storage_size())
                )

        f.visititems(visit)
    return ranges


def flip(rng: random.Random, path: Path, data_at: list[tuple[int, int]]) -> str:
    """Flip 1-3 bits: in raw data (when the master holds some) a third of the time, else half
    the time in non-zero bytes (metadata, mostly), else anywhere."""
    data = bytearray(path.read_bytes())
    used = [i for i, byte in enumerate(data) if byte]
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        if data_at and rng.random() < 1 / 3:
            lo, hi = rng.choice(data_at)
            at = rng.randrange(lo, hi)
        else:
            at = rng.choice(used) if rng.random() < 0.5 else rng.randrange(len(data))
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        done.append(f"{at}.{bit}")
    path.write_bytes(bytes(data))
    return "flip " + ",".join(done)


def truncate(rng: random.Random, path: Path) -> str:
    size = rng.randrange(path.stat().st_size)
    with open(path, "r+b") as handle:
        handle.truncate(size)
    return f"truncate to {size}"


def leaves(value: Any, at: tuple = ()) -> list[tuple]:
    """Paths of every value inside a JSON document (lists and objects included)."""
    found = [at] if at else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += leaves(item, at + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += leaves(item, at + (index,))
    return found


def get(doc: Any, at: tuple) -> Any:
    for key in at:
        doc = doc[key]
    return doc


def put(doc: Any, at: tuple, value: Any) -> None:
    get(doc, at[:-1])[at[-1]] = value


def new_value(rng: random.Random, old: Any, doc: dict) -> Any:
    """A changed value: a nearby or absurd number, or another type."""
    if type(old) is int and rng.random() < 0.6:
        offsets = [e.get("offset") for e in doc.get("extents", []) if isinstance(e, dict)]
        step = rng.choice((1, 2, 4, 8, 16, 48, 200, 4096))
        return rng.choice(
            [old + step, old - step, 0, -old, -1, old * 2, 2**63, 2**64, 2**31 - 1]
            + [o for o in offsets if o != old]
        )
    return rng.choice(
        [str(old), "12", 1.0 * old if type(old) is int else 1.5, True, False, None, [old], {}, []]
    )


def edit_record(rng: random.Random, doc: dict, hostile: bool) -> str | None:
    """One edit of a layout record (None: not applicable); ``hostile`` edits recompute the
    digest afterwards, as someone editing on purpose would."""
    extents = doc.get("extents", [])
    op = rng.choice(("value", "value", "value", "swap", "remove", "remove-extent", "duplicate"))
    if op == "swap" and len(extents) >= 2:
        i, j = rng.sample(range(len(extents)), 2)
        key = rng.choice(("start", "shape", "offset", "file", "dataset", "ranks"))
        if hostile and key == "offset":
            return None  # see below: offsets inside one subfile
        extents[i][key], extents[j][key] = extents[j][key], extents[i][key]
        return f"swap {key} of extents {i} and {j}"
    if op == "remove-extent" and extents:
        i = rng.randrange(len(extents))
        del extents[i]
        return f"remove extent {i}"
    if op == "duplicate" and extents:
        i = rng.randrange(len(extents))
        extents.append(dict(extents[i]))
        return f"duplicate extent {i}"
    paths = leaves(doc)
    at = rng.choice(paths)
    if op == "remove":
        del get(doc, at[:-1])[at[-1]]
        return f"remove {at}"
    old = get(doc, at)
    new = new_value(rng, old, doc)
    if hostile and at[-1] == "offset" and get(doc, at[:-1]).get("file") not in ("", "."):
        # Known limit (docs/FORMAT.md, "Offsets inside subfiles"): an offset moved on purpose
        # to another place of the same subfile, with the digest recomputed, reads those bytes.
        # Absurd values (negative, huge, another extent's) are still caught and tested.
        others = [e.get("offset") for e in extents if isinstance(e, dict)]
        if type(new) is int and 0 <= new < 2**62 and new not in others:
            return None
    put(doc, at, new)
    return f"set {at} from {old!r} to {new!r}"


def edit_records(rng: random.Random, path: Path, hostile: bool, root: bool) -> str | None:
    from h5subfile.io.h5 import write_text_attr
    from h5subfile.layout.record import DIGEST_KEY, record_digest

    with h5py.File(path, "r+") as f:
        names: list[str] = []
        f.visititems(lambda n, o: names.append(n) if LAYOUT in o.attrs else None)
        obj = f if root else f[rng.choice(sorted(names))]
        key = "h5subfile" if root else LAYOUT
        doc = json.loads(obj.attrs[key])
        what = edit_record(rng, doc, hostile)
        if what is None:
            return None
        if hostile and isinstance(doc, dict) and not root:
            doc[DIGEST_KEY] = record_digest(doc)
        write_text_attr(obj, key, json.dumps(doc))
        return f"{'hostile ' if hostile else ''}{obj.name}: {what}"


def edit_vds(rng: random.Random, path: Path) -> str | None:
    """Recreate a virtual dataset with one mapping or its dtype changed, its layout record
    (and every attribute) kept."""
    with h5py.File(path, "r+") as f:
        name = rng.choice(["a", "g/b", "t", "c"])
        old = f[name]
        if not old.is_virtual:
            return None
        dcpl = old.id.get_create_plist()
        sources = []
        for index in range(dcpl.get_virtual_count()):
            vspace = dcpl.get_virtual_vspace(index)
            low, high = vspace.get_select_bounds()
            count = tuple(h - lo + 1 for lo, h in zip(low, high))
            file, dset = dcpl.get_virtual_filename(index), dcpl.get_virtual_dsetname(index)
            sources.append([file, dset, vspace, h5py.h5s.create_simple(count)])
        dtype = old.dtype
        op = rng.choice(("file", "secret", "dataset", "shift", "dtype", "drop", "plain"))
        i = rng.randrange(len(sources))
        if op == "file":
            others = sorted({s[0] for s in sources} - {sources[i][0]}) or ["missing.h5"]
            sources[i][0] = rng.choice(others)
        elif op == "secret":
            sources[i][0] = "../secret.h5"
        elif op == "dataset":
            sources[i][1] = rng.choice(["/a", "/g/b", "/t", "/c", "/nothing"])
        elif op == "shift":
            low, high = sources[i][2].get_select_bounds()
            if low[-1] == 0:
                return None
            start = tuple(low[:-1]) + (low[-1] - 1,)
            count = tuple(h - lo + 1 for lo, h in zip(low, high))
            sources[i][2] = h5py.h5s.create_simple(old.shape)
            sources[i][2].select_hyperslab(start, count)
        elif op == "dtype":
            dtype = {"f": np.dtype("<f8"), "i": np.dtype(">i8")}.get(dtype.kind, np.dtype("S"))
            if dtype.itemsize == 0:
                return None
        elif op == "drop":
            if len(sources) < 2:
                return None
            del sources[i]
        attrs = {k: old.attrs[k] for k in old.attrs}
        shape = old.shape
        del f[name]
        if op == "plain":
            new = f.create_dataset(name, shape=shape, dtype=dtype)
        else:
            new_dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            for file, dset, vspace, src_space in sources:
                new_dcpl.set_virtual(vspace, file.encode(), dset.encode(), src_space)
            type_id = h5py.h5t.py_create(dtype, logical=True)
            space = h5py.h5s.create_simple(shape)
            h5py.h5d.create(f.id, name.encode(), type_id, space, dcpl=new_dcpl)
            new = f[name]
        for key, value in attrs.items():
            new.attrs[key] = value
        return f"vds {name}: {op} (mapping {i})"


def mutate(rng: random.Random, kind: str, path: Path, base: str, data_at: list) -> str | None:
    if kind == "truncate":
        return truncate(rng, path)
    if kind == "flip":
        return flip(rng, path, data_at)
    if kind == "vds":
        return edit_vds(rng, path) if base == "subfiled" else None
    return edit_records(rng, path, hostile=kind == "hostile", root=kind == "root")


# ----------------------------------------------------------------------------- reading
def snapshot(path: Path) -> dict[str, Any]:
    """Everything h5subfile reads of a file, as comparable bytes (raises what it raises)."""
    import h5subfile as hs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = hs.File(path, "r", verify=True)
    seen: dict[str, Any] = {}
    with f:
        for name in ("/", "/a", "/g/b", "/t", "/c", "/z"):
            obj = f if name == "/" else f[name]
            attrs = {k: _bytes(np.asarray(v)) for k, v in sorted(obj.attrs.items())}
            seen[name + ":attrs"] = attrs
            if name != "/":
                seen[name] = _bytes(obj[...])
    return seen


def _bytes(array: np.ndarray) -> list[str]:
    return [str(array.dtype), str(array.shape), array.tobytes().hex()]


def run_case(folder: Path, seed: int, truth: dict, data_at: dict) -> dict[str, Any]:
    from h5subfile.errors import H5SubfileError

    rng = random.Random(seed)
    base = BASES[seed % 2]
    path = folder / f"case-{os.getpid()}.h5"
    shutil.copyfile(folder / f"{base}.h5", path)
    try:
        what = None
        while what is None:  # a mutation that does not apply to this file: draw another
            what = mutate(rng, rng.choice(KINDS), path, base, data_at[base])
        result = {"seed": seed, "base": base, "mutation": what}
        try:
            seen = snapshot(path)
        except H5SubfileError as exc:
            return {**result, "outcome": "error", "detail": f"{type(exc).__name__}: {exc}"[:300]}
        except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
            return {**result, "outcome": "foreign", "detail": f"{type(exc).__name__}: {exc}"[:600]}
        if seen == truth[base]:
            return {**result, "outcome": "ok"}
        differ = sorted(k for k in truth[base] if seen.get(k) != truth[base][k])
        return {**result, "outcome": "wrong", "detail": f"differs: {differ}"}
    finally:
        path.unlink(missing_ok=True)


def run(folder: Path, first: int, count: int) -> None:
    truth = {base: snapshot(folder / f"{base}.h5") for base in BASES}
    for base in BASES:  # the base files themselves read back what was written
        for name, (_, whole) in expected(0, 4).items():
            assert truth[base][name] == _bytes(whole), (base, name)
    data_at = {base: data_ranges(folder / f"{base}.h5") for base in BASES}
    for seed in range(first, first + count):
        print(json.dumps(run_case(folder, seed, truth, data_at)), flush=True)


# ----------------------------------------------------------------------------- named edits
def offsets_in(doc: dict, file: str) -> list[int]:
    return [e["offset"] for e in doc["extents"] if e["file"] == file]


def _negative(doc: dict, f: h5py.File, name: str) -> None:
    doc["extents"][0]["offset"] = -8


def _zero(doc: dict, f: h5py.File, name: str) -> None:
    doc["extents"][0]["offset"] = 0


def _other_dataset(doc: dict, f: h5py.File, name: str) -> None:
    extent = doc["extents"][0]
    other = json.loads(f["g/b"].attrs[LAYOUT])
    extent["offset"] = offsets_in(other, extent["file"])[0]


def _past_the_end(doc: dict, f: h5py.File, name: str) -> None:
    doc["extents"][0]["offset"] = 10**9


def _overlap(doc: dict, f: h5py.File, name: str) -> None:
    doc["extents"][1]["start"] = list(doc["extents"][0]["start"])


def _shift(doc: dict, f: h5py.File, name: str) -> None:
    doc["extents"][-1]["start"][0] += 1


def _swap(doc: dict, f: h5py.File, name: str) -> None:
    first, second = doc["extents"][0], doc["extents"][1]
    first["start"], second["start"] = second["start"], first["start"]


def _remove(doc: dict, f: h5py.File, name: str) -> None:
    del doc["extents"][-1]


def _start_text(doc: dict, f: h5py.File, name: str) -> None:
    extent = doc["extents"][-1]
    extent["start"] = "".join(map(str, extent["start"]))  # "02": int() of each char: (0, 2)


NAMED = {  # edit -> (function, dataset, bases it applies to)
    "negative offset": (_negative, "a", BASES),
    "offset 0": (_zero, "a", BASES),
    "offset of another dataset": (_other_dataset, "a", BASES),
    "offset past the end": (_past_the_end, "a", BASES),
    "overlapping extents": (_overlap, "t", ("subfiled",)),
    "shifted extent": (_shift, "t", ("subfiled",)),
    "swapped extents": (_swap, "a", ("subfiled",)),
    "removed extent": (_remove, "a", BASES),
    "start as a string": (_start_text, "t", BASES),
}


def read_outcome(path: Path, name: str) -> dict[str, Any]:
    """What h5subfile does with dataset ``name``: the values' digest or the error, and the
    problems File.problems (hence ``h5subfile info``) lists."""
    import h5subfile as hs
    from h5subfile.cli.info import describe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        problems = describe(str(path))["problems"]
        with hs.File(path, "r") as f:
            try:
                values = f[name][...]
                return {"read": _bytes(values)[2][:64], "problems": problems}
            except hs.H5SubfileError as exc:
                return {"error": type(exc).__name__, "message": str(exc), "problems": problems}


def named(folder: Path) -> None:
    """Each named hostile edit, with the record's digest left stale and recomputed."""
    from h5subfile.io.h5 import write_text_attr
    from h5subfile.layout.record import DIGEST_KEY, record_digest

    results = [  # the datasets unedited, to compare with
        {"edit": "none", "base": base, "dataset": "/a", **read_outcome(folder / f"{base}.h5", "/a")}
        for base in BASES
    ]
    for what, (edit, name, bases) in NAMED.items():
        for base, recompute in ((b, r) for b in bases for r in (False, True)):
            path = folder / f"named-{base}.h5"
            shutil.copyfile(folder / f"{base}.h5", path)
            with h5py.File(path, "r+") as f:
                doc = json.loads(f[name].attrs[LAYOUT])
                edit(doc, f, name)
                if recompute:
                    doc[DIGEST_KEY] = record_digest(doc)
                write_text_attr(f[name], LAYOUT, json.dumps(doc))
            outcome = read_outcome(path, "/" + name)
            results.append(
                {"edit": what, "base": base, "dataset": "/" + name, "digest": recompute, **outcome}
            )
    results += vds_edits(folder)
    results += older_formats(folder)
    print(json.dumps(results))


def older_formats(folder: Path) -> list[dict[str, Any]]:
    """Both base files as format 2 wrote them (no session uuid, no dtype, no digest): read back
    bit for bit, no problem reported."""
    from h5subfile.io.h5 import write_text_attr

    results = []
    for base in BASES:
        path = folder / f"format2-{base}.h5"
        shutil.copyfile(folder / f"{base}.h5", path)
        with h5py.File(path, "r+") as f:
            root = json.loads(f.attrs["h5subfile"])
            root["format"] = 2
            for session in root["sessions"]:
                del session["uuid"]
            write_text_attr(f, "h5subfile", json.dumps(root))
            for name in ("a", "g/b", "t", "c", "z"):
                doc = json.loads(f[name].attrs[LAYOUT])
                del doc["dtype"], doc["digest"]
                write_text_attr(f[name], LAYOUT, json.dumps(doc))
        same = snapshot(path) == snapshot(folder / f"{base}.h5")
        results.append({"edit": "format 2", "base": base, "same": same, **read_outcome(path, "/t")})
    return results


def vds_edits(folder: Path) -> list[dict[str, Any]]:
    """A VDS whose dtype changed, or whose source was redirected to ../secret.h5, its record
    kept: h5subfile refuses it; stock h5py reads the other values."""
    results = []
    for what in ("dtype", "secret"):
        path = folder / "named-vds.h5"
        shutil.copyfile(folder / "subfiled.h5", path)
        with h5py.File(path, "r+") as f:
            attrs = {k: f["a"].attrs[k] for k in f["a"].attrs}
            sources = [list(s) for s in f["a"].virtual_sources()]
            del f["a"]
            dtype = np.dtype("<f8") if what == "dtype" else np.dtype("<f4")
            layout = h5py.VirtualLayout((200,), dtype)
            for vspace, file, dset, _ in sources:
                low, high = vspace.get_select_bounds()
                file = "../secret.h5" if what == "secret" else file
                source = h5py.VirtualSource(file, dset, shape=(200,))
                layout[low[0] : high[0] + 1] = source[low[0] : high[0] + 1]
            new = f.create_virtual_dataset("a", layout)
            for key, value in attrs.items():
                new.attrs[key] = value
        with h5py.File(path, "r") as f:
            stock = bool((f["a"][...] == 1).all())
        results.append({"edit": f"vds {what}", "dataset": "/a", "stock_h5py_reads_secret": stock})
        results[-1].update(read_outcome(path, "/a"))
    return results


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]))
    elif sys.argv[1] == "named":
        named(Path(sys.argv[2]))
    else:
        run(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))

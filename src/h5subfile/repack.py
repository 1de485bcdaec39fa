"""Repack: copy a whole HDF5 file into a new one written with a chosen plan, in parallel.

The source is anything :class:`~h5subfile.File` reads: a file written by h5subfile (subfiled
or not) or a plain HDF5 file written by h5py, h5bench or C. The target is written with any
plan: ``subfiles=1`` gives one conventional HDF5 file (contiguous datasets in the master, no
virtual datasets, which parallel-HDF5 applications read through the MPI-IO driver),
``compression=...`` chunked and compressed datasets, ``subfiles=M`` a subfiled file.

Built on the public API only. Every rank opens the source; every dataset is split along axis
0 over the ranks (rank r of P copies rows ``[r*N//P, (r+1)*N//P)``); each rank reads its share
and writes it. Small datasets of one group go out together in one ``write_datasets`` call; a
dataset whose share exceeds ``slab_size`` bytes is created first and written in collective
rounds of at most ``slab_size`` bytes per rank (memory stays bounded), except when the target
is chunked: chunks are compressed whole, so each rank then writes its whole share at once.

The source is verified first, as ``h5subfile verify`` verifies a file (:meth:`File.verify`),
and a damaged one is refused with verify's report: a copy would put its damage under the
target's fresh checksums, where nothing could find it any more. It is a pass of its own, not
reads with ``verify=True`` during the copy: those read every piece they touch whole, in every
slab round that touches it (memory no longer bounded by the slab), and miss what the report
lists besides (every bad piece, not the first; the subfiles' HDF5 structure). README,
*Repack*, gives its cost. ``verify=False`` copies unchecked and says so in the target's record.

Nothing appears at the target until everything is written: the new file is written into a
staging folder beside the target (``<target>.repack-<token>.partial/``, holding the master and
its subfile folder under their final names, so that the relative subfile paths recorded in
the master stay right) and moved into place at the end; on failure the staging folder is
removed and the same error is raised on every rank.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import h5py
import numpy as np
from mpi4py import MPI

from .errors import (
    CorruptFileError,
    DamagedFileError,
    FileExistsH5SubfileError,
    H5SubfileError,
    ObjectExistsError,
    SameFileError,
    UnsupportedDtypeError,
)
from .files import Dataset, Datatype, File, Group
from .files.dims import scale_name
from .io.h5 import is_attribute_note
from .layout.dtypes import check_dtype
from .layout.names import subfile_folder
from .layout.references import SCALE_ATTRS, ObjectRef, holds_refs
from .mpi.collective import agree, barrier, root_only
from .plan import MIN_BUFFER_SIZE, PLAN_FIELDS

DEFAULT_SLAB_SIZE = 256 << 20

#: ``progress(done_bytes, total_bytes, done_datasets, total_datasets)``, called on every rank.
Progress = Callable[[int, int, int, int], None]
#: ``verify_progress(done_bytes, total_bytes)`` of this rank's share of the verification.
VerifyProgress = Callable[[int, int], None]


@dataclass
class Summary:
    """What a repack did: files, sizes and time (the same on every rank)."""

    source: str
    target: str
    ranks: int
    groups: int = 0
    datasets: int = 0
    attributes: int = 0
    bytes: int = 0
    seconds: float = 0.0
    subfiles: int = 0
    plan: dict[str, Any] = field(default_factory=dict)
    skipped_links: list[str] = field(default_factory=list)
    #: verify's report of the source, checked clean before the copy; None: copied without
    #: verifying (``verify=False``)
    verification: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["mib_per_second"] = self.bytes / 2**20 / self.seconds if self.seconds else 0.0
        return data


# Splitting the work (pure) -------------------------------------------------------------------
def share(n: int, size: int, rank: int) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of ``n`` that rank ``rank`` of ``size`` copies (balanced: shares
    differ by at most one row)."""
    return rank * n // size, (rank + 1) * n // size


def slab_boxes(
    lo: int, hi: int, shape: tuple[int, ...], itemsize: int, limit: int
) -> list[tuple[slice, ...]]:
    """Boxes covering rows ``[lo, hi)`` of a dataset of ``shape``, in storage order, each of at
    most ``limit`` bytes: whole rows while a row fits, else each row cut along the next axis
    (recursively; a single element is never cut)."""
    if hi <= lo:
        return []
    inner = shape[1:]
    row_bytes = itemsize * int(np.prod(inner, dtype=np.int64))
    if not inner or row_bytes <= limit:
        rest = tuple(slice(0, n) for n in inner)
        step = max(1, limit // max(row_bytes, 1))
        return [(slice(a, min(a + step, hi)), *rest) for a in range(lo, hi, step)]
    boxes: list[tuple[slice, ...]] = []
    for row in range(lo, hi):
        for part in slab_boxes(0, inner[0], inner, itemsize, limit):
            boxes.append((slice(row, row + 1), *part))
    return boxes


def box_bytes(box: tuple[slice, ...], itemsize: int) -> int:
    """Bytes of a box of slices (with explicit starts and stops)."""
    return itemsize * int(np.prod([b.stop - b.start for b in box], dtype=np.int64))


def max_share_bytes(shape: tuple[int, ...], itemsize: int, size: int) -> int:
    """The largest share of any rank, in bytes (the same on every rank)."""
    if not shape:
        return itemsize
    rows = -(-shape[0] // size)
    return rows * itemsize * int(np.prod(shape[1:], dtype=np.int64))


# The source's inventory (every rank, from the identical catalogue) ---------------------------
@dataclass(frozen=True)
class Inventory:
    """Every group (parents first), dataset and named type of the source, and what cannot be
    copied."""

    groups: list[str]
    datasets: list[str]
    refused: list[str]
    types: list[str] = field(default_factory=list)


def inventory(source: File) -> Inventory:
    """Walk the source (no communication: every rank holds the same catalogue)."""
    groups: list[str] = []
    datasets: list[str] = []
    refused: list[str] = []
    types: list[str] = []

    def visit(name: str) -> None:
        path = "/" + name
        obj = source[path]
        if isinstance(obj, Group):
            groups.append(path)
        elif isinstance(obj, Datatype):
            types.append(path)
        else:
            datasets.append(path)
            refused.extend(_dataset_problems(obj))
        refused.extend(_attribute_problems(path, obj))

    refused.extend(_attribute_problems("/", source))
    source.visit(visit)
    return Inventory(groups, datasets, refused, types)


def _dataset_problems(dataset: Dataset) -> list[str]:
    problems = []
    try:
        check_dtype(dataset.dtype)
    except UnsupportedDtypeError as exc:
        kind = "variable-length" if dataset.dtype.kind == "O" else str(dataset.dtype)
        problems.append(f"dataset {dataset.name} ({kind}): {exc}")
    if dataset.problem is not None:
        problems.append(f"dataset {dataset.name} cannot be read: {dataset.problem}")
    return problems


def _attribute_problems(path: str, obj: Group | Dataset) -> list[str]:
    """Attributes a copy cannot carry: unreadable ones, and references (but those of
    dimension scales, which :func:`copy_scales` makes again)."""
    problems = []
    for name, value in obj.attrs.items():
        if is_attribute_note(value):
            problems.append(f"attribute {name!r} of {path}: {value[1:-1]}")
        elif name not in SCALE_ATTRS and holds_refs(value):
            problems.append(f"attribute {name!r} of {path}: {_refs_text(value)}")
    return problems


def _refs_text(value: Any) -> str:
    if isinstance(value, ObjectRef):
        return f"HDF5 object reference to {value.path or 'nothing'}"
    return "HDF5 object references (h5subfile writes none but dimension scales')"


def links_of(source: File) -> dict[str, h5py.SoftLink | h5py.ExternalLink | str]:
    """The links of a file besides each object's own name: soft and external links, and for
    a further hard link the path of its object."""
    objects: set[str] = set()
    source.visit(objects.add)
    found: dict[str, Any] = {}

    def visit(name: str, link: Any) -> None:
        if isinstance(link, h5py.HardLink):
            if name not in objects:
                found["/" + name] = source[name].ref.path  # its own path
        else:
            found["/" + name] = link

    source.visititems_links(visit)
    return found


def described_links(links: dict[str, Any]) -> list[str]:
    """:func:`links_of` in words, for what ``skip_links`` left out."""
    out = []
    for path, link in sorted(links.items()):
        if isinstance(link, str):
            out.append(f"{path} (hard link to {link})")
        elif isinstance(link, h5py.ExternalLink):
            out.append(f"{path} (external link to {link.filename}:{link.path})")
        else:
            out.append(f"{path} (soft link to {link.path})")
    return out


def copy_links(links: dict[str, Any], target: File) -> None:
    """Collective: the links made again in ``target``, each as it was."""
    for path, link in sorted(links.items()):
        target[path] = target[link] if isinstance(link, str) else link


def refusal(inv: Inventory, source: str) -> H5SubfileError | None:
    """The error naming everything that cannot be copied, or None."""
    refused = inv.refused
    if not refused:
        return None
    shown = "; ".join(refused[:10])
    more = f"; and {len(refused) - 10} more" if len(refused) > 10 else ""
    text = f"cannot repack {source}: {shown}{more}"
    if any("cannot be read" in r for r in refused):
        return CorruptFileError(text)
    return UnsupportedDtypeError(text)


# Verifying the source (collective) ---------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """How a repack reads its source (the same on every rank)."""

    slab_size: int = DEFAULT_SLAB_SIZE
    skip_links: bool = False
    verify: bool = True
    verify_progress: VerifyProgress | None = None


def verified(source: File, progress: VerifyProgress | None = None) -> dict[str, Any]:
    """Collective: verify's report of the open ``source`` (:meth:`File.verify`) when it is
    clean; else DamagedFileError, carrying the report, on every rank."""
    report = source.verify(progress)
    if report["clean"]:
        return report
    found = [f"{len(report['bad'])} bad piece(s) or subfile(s)"] if report["bad"] else []
    if report["problems"]:
        found.append(f"{len(report['problems'])} problem(s) found when opening it")
    path = report["file"]
    error = DamagedFileError(
        f"cannot repack {path}: it fails verification ({', '.join(found)}, as h5subfile "
        f"verify {path} reports); nothing was written. Repack with --no-verify "
        "(verify=False) to copy what can be read without checking it",
        report,
    )
    error.collective = True  # verify's report is the same on every rank
    raise error


def provenance(source: str, report: dict[str, Any] | None) -> dict[str, Any]:
    """What the target's write session records of its source (``extra["repack"]``,
    docs/FORMAT.md): the source, whether it was verified before the copy and, if so, how many
    of its datasets had no checksums to check."""
    if report is None:
        return {"source": source, "verified": False}
    return {"source": source, "verified": True, "no_checksums": len(report["no_checksums"])}


# Copying (collective) ------------------------------------------------------------------------
class _Copier:
    """Copies datasets from the open source to the open target, batch by batch."""

    def __init__(
        self,
        source: File,
        target: File,
        slab_size: int,
        sizes: tuple[int, int],
        progress: Progress | None,
    ):
        total, datasets = sizes
        self.source, self.target = source, target
        self.comm: MPI.Comm = target.comm
        self.slab_size = slab_size
        plan = target.plan
        self.chunked = plan is not None and plan.compression is not None
        self.total, self.done = total, 0
        self.datasets, self.copied, self.attributes = datasets, 0, 0
        self.progress = progress

    def advance(self, nbytes: int, datasets: int) -> None:
        self.done += nbytes
        self.copied += datasets
        if self.progress is not None:
            self.progress(self.done, self.total, self.copied, self.datasets)

    def _read_share(self, dataset: Dataset) -> np.ndarray:
        if not dataset.shape:
            return np.asarray(dataset.read(()))
        lo, hi = share(dataset.shape[0], self.comm.size, self.comm.rank)
        return _read(dataset, np.s_[lo:hi])

    def copy_group(self, parent: str, names: list[str]) -> None:
        """Collective: copy the datasets ``names`` of group ``parent``: small ones together."""
        batch: list[Dataset] = []
        batch_bytes = 0
        for name in names:
            dataset = self.source[f"{parent.rstrip('/')}/{name}"]
            assert isinstance(dataset, Dataset)
            nbytes = max_share_bytes(dataset.shape, dataset.dtype.itemsize, self.comm.size)
            if nbytes > self.slab_size:
                self.write_batch(parent, batch)
                batch, batch_bytes = [], 0
                self.write_large(parent, dataset)
                continue
            if batch and batch_bytes + nbytes > self.slab_size:
                self.write_batch(parent, batch)
                batch, batch_bytes = [], 0
            batch.append(dataset)
            batch_bytes += nbytes
        self.write_batch(parent, batch)

    def write_batch(self, parent: str, batch: list[Dataset]) -> None:
        """Collective: create and write small datasets of one group with one call."""
        if not batch:
            return
        arrays: dict[str, np.ndarray] = {}
        error = None
        try:
            arrays = {d.name.rsplit("/", 1)[1]: self._read_share(d) for d in batch}
        except Exception as exc:  # noqa: BLE001 - agreed on every rank next
            error = exc
        agree(self.comm, error)
        group = _group(self.target, parent)
        written = group.write_datasets(arrays)
        for source, copy in zip(batch, written):
            self.attributes += copy_attributes(source, copy)
        self.advance(sum(d.nbytes for d in batch), len(batch))

    def write_large(self, parent: str, dataset: Dataset) -> None:
        """Collective: a dataset whose share exceeds the slab size: written whole per rank
        when the target is chunked, else in rounds of at most one slab per rank."""
        group = _group(self.target, parent)
        name = dataset.name.rsplit("/", 1)[1]
        if self.chunked:
            error, data = None, None
            try:
                data = self._read_share(dataset)
            except Exception as exc:  # noqa: BLE001 - agreed on every rank next
                error = exc
            agree(self.comm, error)
            copy = group.write_dataset(name, data)
            self.attributes += copy_attributes(dataset, copy)
            self.advance(dataset.nbytes, 1)
            return
        shape, itemsize, size = dataset.shape, dataset.dtype.itemsize, self.comm.size
        lo, hi = share(shape[0], size, self.comm.rank)
        start, count = (lo,) + (0,) * (len(shape) - 1), (hi - lo, *shape[1:])
        copy = group.create_dataset(name, shape, dataset.dtype, start=start, count=count)
        every = [
            slab_boxes(*share(shape[0], size, r), shape, itemsize, self.slab_size)
            for r in range(size)
        ]
        mine = every[self.comm.rank]
        empty = (slice(lo, lo),) + tuple(slice(0, n) for n in shape[1:])
        for index in range(max(len(boxes) for boxes in every)):
            box = mine[index] if index < len(mine) else empty
            error, data = None, None
            try:
                data = _read(dataset, box)
            except Exception as exc:  # noqa: BLE001 - agreed on every rank next
                error = exc
            agree(self.comm, error)
            with copy.collective:
                copy[box] = data
            self.advance(sum(box_bytes(b[index], itemsize) for b in every if index < len(b)), 0)
        self.attributes += copy_attributes(dataset, copy)
        self.advance(0, 1)


def _group(file: File, path: str) -> Group:
    group = file if path == "/" else file[path]
    assert isinstance(group, Group)
    return group


def copy_attributes(source: Group | Dataset | File, target: Group | Dataset | File) -> int:
    """Collective: set every attribute of ``source`` on ``target`` (but those of dimension
    scales: :func:`copy_scales`); how many."""
    count = 0
    for name, value in source.attrs.items():
        if name not in SCALE_ATTRS:
            target.attrs[name] = value
            count += 1
    return count


def copy_scales(source: File, target: File, datasets: list[str]) -> int:
    """Collective: the dimension scales of ``datasets`` made again in ``target`` (scales,
    attachments in order, labels); how many calls."""
    count = 0
    for path in datasets:
        old = source[path]
        if isinstance(old, Dataset) and old.is_scale:
            target_scale = target[path]
            assert isinstance(target_scale, Dataset)
            target_scale.make_scale(scale_name(old.attrs))
            count += 1
    for path in datasets:
        old, new = source[path], target[path]
        if not isinstance(old, Dataset) or not isinstance(new, Dataset):
            continue
        for dim, axis in enumerate(old.dims):
            for scale in axis:
                new.dims[dim].attach_scale(target[scale.name])
                count += 1
            if axis.label:
                new.dims[dim].label = axis.label
                count += 1
    return count


def write_behind(plan: dict[str, Any], slab_size: int) -> dict[str, Any]:
    """The plan a repack writes with: ``plan``, and unless it or the environment says whether
    to write behind, writing behind without a copy through a buffer of one slab, so that each
    rank reads its next slab while its last one is written. No copy is safe here: a repack
    never touches an array once it has handed it to a write."""
    env = {field.name: field.env for field in PLAN_FIELDS}
    given = {name for name in env if plan.get(name) is not None or os.environ.get(env[name])}
    if "async_writes" in given:
        return dict(plan)
    defaults = {
        "async_writes": True,
        "async_zero_copy": True,
        "async_buffer_size": max(slab_size, MIN_BUFFER_SIZE),
    }
    return {**plan, **{name: v for name, v in defaults.items() if name not in given}}


# The whole repack ----------------------------------------------------------------------------
def repack(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    comm: MPI.Comm | None = None,
    force: bool = False,
    slab_size: int = DEFAULT_SLAB_SIZE,
    progress: Progress | None = None,
    skip_links: bool = False,
    verify: bool = True,
    verify_progress: VerifyProgress | None = None,
    **plan: Any,
) -> Summary:
    """Collective: copy every group, dataset (bit for bit) and attribute of ``source`` into a
    new file ``target`` written with ``plan`` (the plan fields of :class:`~h5subfile.File`:
    ``subfiles=1`` for one conventional HDF5 file, ``compression``, ...).

    ``target`` must not exist unless ``force`` (then it and its subfile folder are replaced
    once the new file is complete); it may not be ``source``. Soft, external and further hard
    links are made again as they were, or with ``skip_links`` left out (listed in
    ``skipped_links``). Each
    rank reads about ``slab_size`` bytes at a time (its whole share of a dataset when the
    target is chunked) while its last slab is written (:func:`write_behind`: about twice
    ``slab_size`` held at most, unless ``async_writes`` is given). On failure nothing is left at ``target`` and every
    rank raises the same error. ``progress(done_bytes, total_bytes, done_datasets,
    total_datasets)`` is called on every rank when the copy starts (nothing done yet) and
    after each write.

    With ``verify`` the source is first checked as :meth:`File.verify` checks it (every
    stored piece against its checksum, every subfile's identity, size and HDF5 structure;
    ``verify_progress(done_bytes, total_bytes)`` with this rank's share): a damaged source
    raises DamagedFileError on every rank, its ``report`` verify's, before anything is
    written. ``verify=False`` copies what a read returns without checking. Either way the
    target's write session records the source and whether it was verified (``extra["repack"]``).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    source, target = os.path.abspath(os.fspath(source)), os.path.abspath(os.fspath(target))
    bad_size = isinstance(slab_size, bool) or not isinstance(slab_size, int) or slab_size < 1
    agree(
        comm, ValueError(f"slab_size={slab_size!r}: expected a positive int") if bad_size else None
    )
    barrier(comm)
    started = time.perf_counter()
    staging = root_only(comm, lambda: _prepare(source, target, force))
    summary = Summary(source, target, comm.size)
    try:
        master = os.path.join(staging, os.path.basename(target))
        options = Options(slab_size, skip_links, bool(verify), verify_progress)
        _copy(source, master, comm, options, progress, summary, write_behind(plan, slab_size))
        root_only(comm, lambda: _install(staging, target, force))
    except BaseException:
        if comm.rank == 0:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    summary.seconds = comm.bcast(time.perf_counter() - started)
    return summary


def _copy(
    source: str,
    master: str,
    comm: MPI.Comm,
    options: Options,
    progress: Progress | None,
    summary: Summary,
    plan: dict[str, Any],
) -> None:
    """Collective: verifying the source (unless told not to) and the copy itself, into the
    staging folder's master."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # damage is reported or refused below
        src = File(source, "r", comm=comm)
    with src:
        if options.verify:
            summary.verification = verified(src, options.verify_progress)
        inv = inventory(src)
        agree(comm, refusal(inv, source))
        links = links_of(src)
        if options.skip_links:
            summary.skipped_links = described_links(links)
        datasets = [src[path] for path in inv.datasets]
        total = sum(d.nbytes for d in datasets if isinstance(d, Dataset))
        with File(master, "w-", comm=comm, **plan) as out:
            assert out.plan is not None and out.grouping is not None
            out.record_extra("repack", provenance(source, summary.verification))
            summary.plan = out.plan.to_dict()
            summary.subfiles = 0 if out.grouping.ngroups == 1 else out.grouping.ngroups
            summary.attributes += copy_attributes(src, out)
            for path in inv.groups:
                summary.attributes += copy_attributes(src[path], out.create_group(path))
            for path in inv.types:  # named types (the datasets copied have their types)
                out[path] = src[path].dtype
                summary.attributes += copy_attributes(src[path], out[path])
            copier = _Copier(src, out, options.slab_size, (total, len(datasets)), progress)
            copier.advance(0, 0)  # the copy starts (after the verification)
            by_parent: dict[str, list[str]] = {}
            for path in inv.datasets:
                parent, _, name = path.rpartition("/")
                by_parent.setdefault(parent or "/", []).append(name)
            for parent, names in by_parent.items():
                copier.copy_group(parent, names)
            summary.attributes += copier.attributes + copy_scales(src, out, inv.datasets)
            if not options.skip_links:
                copy_links(links, out)
    summary.groups, summary.datasets, summary.bytes = len(inv.groups), len(datasets), total


def _prepare(source: str, target: str, force: bool) -> str:
    """Rank 0: refuse a target that is the source, a folder, or exists (without ``force``);
    make the staging folder beside it and return its path."""
    same = source == target or os.path.realpath(source) == os.path.realpath(target)
    if not same and os.path.exists(source) and os.path.exists(target):
        same = os.path.samefile(source, target)
    if same:
        raise SameFileError(
            f"cannot repack {source} onto itself: write the new file under another name "
            "(and rename it afterwards if you like)"
        )
    if os.path.isdir(target):
        raise ObjectExistsError(f"the target {target} is a folder; name the file to write")
    folder = subfile_folder(target)
    if not force:
        for path in (target, folder):
            if os.path.lexists(path):
                raise FileExistsH5SubfileError(
                    f"{path} exists; repack with --force (force=True) to replace "
                    f"{target} and its subfile folder"
                )
    staging = f"{target}.repack-{uuid.uuid4().hex[:8]}.partial"
    os.mkdir(staging)
    return staging


def _install(staging: str, target: str, force: bool) -> None:
    """Rank 0: move the new master and its subfile folder from ``staging`` into place
    (replacing the old ones with ``force``), then remove ``staging``."""
    new_master = os.path.join(staging, os.path.basename(target))
    new_folder, folder = subfile_folder(new_master), subfile_folder(target)
    if not force and (os.path.lexists(target) or os.path.lexists(folder)):
        raise FileExistsH5SubfileError(
            f"{target} or {folder} appeared while the repack ran; not replaced"
        )
    if os.path.isdir(new_folder) and not os.listdir(new_folder):
        os.rmdir(new_folder)  # a conventional file: no subfiles
    replaced = os.path.join(staging, "replaced.subfiles")
    if os.path.lexists(folder):
        os.rename(folder, replaced)
    moved = False
    try:
        if os.path.isdir(new_folder):
            os.rename(new_folder, folder)
            moved = True
        os.replace(new_master, target)
    except BaseException:
        if moved:
            os.rename(folder, new_folder)
        if os.path.lexists(replaced):
            os.rename(replaced, folder)  # the old file stays as it was
        raise
    shutil.rmtree(staging)


def _read(dataset: Dataset, selection: Any) -> np.ndarray:
    """Collective (every rank calls it with its own share): rank 0 sends each rank only the
    extents its share touches when the layout is too large to broadcast; variable-length data
    is read by each rank through h5py."""
    if dataset.dtype.kind == "O":
        return np.asarray(dataset.read(selection))
    return np.asarray(dataset.read_collective(selection))

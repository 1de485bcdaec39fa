"""Dimension scales and ``obj.id`` in a write session: h5py's ``make_scale``,
``dims[i].attach_scale``, ``detach_scale`` and ``label``, collective without a round, as
engine/structure.py makes groups and attributes.

Every rank makes the call in its in-memory image of the file's metadata (io/image.py), with
HDF5's own dimension-scale code: its checks give the same answer on every rank, and the
attributes it writes (``CLASS``, ``NAME``, ``DIMENSION_LIST``, ``REFERENCE_LIST``,
``DIMENSION_LABELS``) go into the catalogue, references as paths. Rank 0 makes the same call in
the master, whose objects the references there point at. The call goes into the ledger,
compared at the next collective call. An object whose scales were attached in an earlier
session gets them in the image too, with every object attached to it, before it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import H5SubfileError
from ..io import image as hdf5
from ..io.image import DatasetShape, MetadataImage
from ..io.master import MasterWriter
from ..io.references import as_paths
from ..layout.references import SCALE_ATTRS, ObjectRef
from .ledger import Entry
from .session import Session
from .structure import _on_root, agreed

#: How a dataset's copy in the image is made, from the facades' view of it (files/dims.py).
ShapeOf = Callable[[str], DatasetShape]


def image(session: Session) -> MetadataImage:
    """This rank's image of the file's metadata (made on first use)."""
    writing = session.require_writable("the metadata image")
    if writing.image is None:
        writing.image = MetadataImage(session.node("/").track_order)
    return writing.image


def image_object(session: Session, path: str, shape_of: ShapeOf) -> Any:
    """Local: the image's copy of ``path`` (an h5py object), with every object its dimension
    scales connect it to."""
    return _ensure(session, image(session), path, shape_of, set())


def _ensure(
    session: Session, made: MetadataImage, path: str, shape_of: ShapeOf, seen: set[str]
) -> Any:
    node = session.node(path)
    parent = path.rsplit("/", 1)[0] or "/"
    if path != "/" and parent not in made.h5:  # made first, with its own creation order
        _ensure(session, made, parent, shape_of, seen)
    if node.kind == "group":
        return made.group(path, node.track_order, node.attrs)
    if node.kind == "datatype":
        return made.datatype(path, node.dtype, node.attrs)
    fresh = path not in made.h5
    shape = shape_of(path)
    if shape.named_type:
        _ensure(session, made, shape.named_type, shape_of, seen)
    dataset = made.dataset(path, shape, node.attrs)
    if fresh and path not in seen:
        seen.add(path)
        for dim, scale in _attached(node.attrs):
            other = _ensure(session, made, scale, shape_of, seen)
            hdf5.attach_scale(dataset, dim, other)
        for target, _dim in _referenced(node.attrs):
            _ensure(session, made, target, shape_of, seen)  # it attaches this one
    return dataset


def _attached(attrs: dict[str, Any]) -> Iterable[tuple[int, str]]:
    """(dimension, scale path) of each scale a dataset's ``DIMENSION_LIST`` holds."""
    for dim, refs in enumerate(attrs.get("DIMENSION_LIST", ())):
        for ref in refs:
            if isinstance(ref, ObjectRef) and ref:
                yield dim, ref.path


def _referenced(attrs: dict[str, Any]) -> Iterable[tuple[str, int]]:
    """(dataset path, dimension) of each dataset a scale's ``REFERENCE_LIST`` holds."""
    listed = attrs.get("REFERENCE_LIST")
    if listed is None or getattr(listed, "dtype", None) is None or listed.dtype.names is None:
        return
    for row in listed.reshape(-1):
        ref = row[listed.dtype.names[0]]
        if isinstance(ref, ObjectRef) and ref:
            yield ref.path, int(row[listed.dtype.names[1]])


def _scale_call(
    session: Session,
    described: str,
    paths: tuple[str, ...],
    shape_of: ShapeOf,
    in_image: Callable[[list[Any]], None],
    in_master: Callable[[MasterWriter], None],
) -> None:
    """One dimension-scale call on ``paths``: made in the image (HDF5's checks, alike on
    every rank), its attributes copied into the catalogue, made in the master by rank 0, and
    recorded in the ledger."""
    session.require_writable(described)
    try:
        objects = [image_object(session, path, shape_of) for path in paths]
        touched = {path for path in paths}
        for path in paths:
            if session.node(path).kind != "dataset":
                raise TypeError(f"{path} is a group: dimension scales are datasets")
        if len(paths) == 2 and paths[0] == paths[1]:
            raise ValueError(f"{paths[0]} cannot be a dimension scale of itself")
        for path in paths:  # the other ends of what changes
            touched.update(p for _, p in _attached(session.node(path).attrs))
            touched.update(p for p, _ in _referenced(session.node(path).attrs))
        in_image(objects)
    except H5SubfileError as exc:
        raise agreed(exc) from None
    except (ValueError, TypeError, KeyError, RuntimeError) as exc:
        # HDF5's dimension-scale code says little ("Unspecified error in H5DSattach_scale"):
        # the call it refused is named, with HDF5's words
        refused = ValueError(f"HDF5 refused {described}: {exc}")
        raise agreed(refused) from exc
    made = image(session)
    for path in paths:
        touched.update(p for _, p in _attached(_read(made, path)))
        touched.update(p for p, _ in _referenced(_read(made, path)))
    for path in sorted(touched):
        _copy_back(session, made, path)
    _on_root(session, in_master, described)
    session.ledger.record(Entry(described))


def _read(made: MetadataImage, path: str) -> dict[str, Any]:
    attrs = made.h5[path].attrs
    return {name: as_paths(made.h5, attrs[name]) for name in SCALE_ATTRS if name in attrs}


def _copy_back(session: Session, made: MetadataImage, path: str) -> None:
    """The dimension-scale attributes of ``path`` as the image has them, into the catalogue."""
    node = session.node(path)
    now = _read(made, path)
    for name in SCALE_ATTRS:
        if name in now:
            node.attrs[name] = now[name]
        else:
            node.attrs.pop(name, None)


def make_scale(session: Session, path: str, name: str | bytes, shape_of: ShapeOf) -> None:
    """Collective: dataset ``path`` becomes a dimension scale named ``name`` (h5py's
    ``Dataset.make_scale``)."""
    _scale_call(
        session,
        f"make_scale {path} {name!r}",
        (path,),
        shape_of,
        lambda objs: hdf5.set_scale(objs[0], name),
        lambda master: master.make_scale(path, name),
    )


def attach_scale(session: Session, path: str, dim: int, scale: str, shape_of: ShapeOf) -> None:
    """Collective: attach dimension scale ``scale`` to dimension ``dim`` of ``path``."""
    _pair_call(session, "attach", path, dim, scale, shape_of)


def detach_scale(session: Session, path: str, dim: int, scale: str, shape_of: ShapeOf) -> None:
    """Collective: detach dimension scale ``scale`` from dimension ``dim`` of ``path``."""
    _pair_call(session, "detach", path, dim, scale, shape_of)


def _pair_call(
    session: Session, verb: str, path: str, dim: int, scale: str, shape_of: ShapeOf
) -> None:
    """``verb`` ("attach" or "detach") ``scale`` to or from dimension ``dim`` of ``path``: the
    same call in the image (io/image.py) and in the master (its method of the same name)."""
    in_image = {"attach": hdf5.attach_scale, "detach": hdf5.detach_scale}[verb]
    _scale_call(
        session,
        f"dims {verb} {path}[{dim}] {scale}",
        (path, scale),
        shape_of,
        lambda objs: in_image(objs[0], dim, objs[1]),
        lambda master: getattr(master, f"{verb}_scale")(path, dim, scale),
    )


def set_label(session: Session, path: str, dim: int, label: str, shape_of: ShapeOf) -> None:
    """Collective: label dimension ``dim`` of ``path`` (h5py's ``dims[dim].label = ...``)."""
    _scale_call(
        session,
        f"dims label {path}[{dim}] {label!r}",
        (path,),
        shape_of,
        lambda objs: hdf5.set_label(objs[0], dim, label),
        lambda master: master.set_label(path, dim, label),
    )


def detach_everything(session: Session, path: str, shape_of: ShapeOf) -> None:
    """Collective (no round), before ``path`` and everything below it are deleted: their
    scales detached from them, and they from the datasets they are scales of, so that no
    reference is left pointing at a deleted object (HDF5 would leave it dangling, and a new
    object of the same name would answer a path)."""
    below = path.rstrip("/") + "/"
    for old in [p for p in session.catalog.nodes if p == path or p.startswith(below)]:
        node = session.catalog.nodes.get(old)
        if node is None or node.kind != "dataset":
            continue
        for dim, scale in list(_attached(node.attrs)):
            if scale in session.catalog.nodes:
                detach_scale(session, old, dim, scale, shape_of)
        for user, dim in list(_referenced(node.attrs)):
            if user in session.catalog.nodes:
                detach_scale(session, user, dim, old, shape_of)


def changed_through_id(session: Session) -> str:
    """Local: what the program changed through ``.id`` in the image but not in the file
    ("" for nothing), as one error message."""
    writing = session.writing
    if writing is None or writing.image is None:
        return ""
    found = writing.image.changed(lambda path: session.node(path).attrs)
    if not found:
        return ""
    return (
        f"{'; '.join(found)} through .id: in a write session, h5py's low-level calls on "
        "h5subfile's objects read metadata only, nothing they change is written to the file "
        "(use the objects' own methods: attrs, dims, resize, indexing)"
    )

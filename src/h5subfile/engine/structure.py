"""Groups and attributes (collective, without a round): every rank checks and applies the
call to its catalogue on its own, rank 0 also makes it in the master.

Every rank holds the same catalogue, so a check made on each rank gives the same answer on
each: an error (a group that exists, an attribute that is missing, a value HDF5 cannot store)
is raised by every rank at the call, and marked agreed. The call goes into the session's
ledger (engine/ledger.py), compared at the next collective call: a rank that made other
metadata calls fails that call on every rank, and nothing of the session is published. A
failure of rank 0's own write of the master (a full disk) is kept and raised by every rank at
the next collective call. Attribute values are kept as HDF5 stores them
(:func:`~h5subfile.io.attributes.stored_attribute`): every rank reads back what the master
holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from ..errors import (
    H5SubfileError,
    ObjectExistsError,
    ObjectNotFoundError,
    UnsupportedError,
    as_error,
)
from ..io.attributes import prepared_attribute
from ..io.master import MasterWriter
from ..io.objects import committable
from ..io.references import holds_any_refs, referenced, stored_refs
from ..layout.catalog import Link, NodeInfo
from ..layout.dtypes import dtype_text
from ..layout.record import is_reserved
from ..layout.references import SCALE_ATTRS, ObjectRef
from .ledger import Entry
from .session import Session


def agreed(exc: BaseException) -> H5SubfileError:
    """``exc`` as the hierarchy's error, marked as raised alike on every rank (its check ran
    on identical catalogues; the ledger catches ranks that were not)."""
    error = as_error(exc)
    error.collective = True
    return error


def _on_root(
    session: Session, change: Callable[[MasterWriter], Any], what: str | Callable[[], str]
) -> None:
    """Rank 0 makes ``change`` in the master; a failure is kept (``Writing.kept``) and raised
    by every rank at the next collective call, ``what`` (or what it returns, asked only then)
    naming the call."""
    writing = session.writing
    assert writing is not None
    if writing.root is None:
        return
    try:
        change(writing.root.master)
    except Exception as exc:  # noqa: BLE001 - raised by every rank at the next collective call
        if writing.kept is None:
            error = as_error(exc)
            error.args = (f"{error} ({what if isinstance(what, str) else what()})",)
            error.__cause__ = exc  # shown on rank 0 where it is raised
            writing.kept = error


def _image_stale(session: Session, path: str) -> None:
    """The image's copy of ``path`` (if made) takes its attributes again when next asked."""
    writing = session.writing
    if writing is not None and writing.image is not None:
        writing.image.stale.add(path)


def create_group(session: Session, path: str, track_order: bool = False) -> None:
    """Collective: create group ``path`` and its missing parents (no round: the next
    collective call checks that every rank made it); ``track_order``: h5py's, for the group
    itself (its members and attributes listed in creation order)."""
    session.require_writable("create_group")
    catalog = session.catalog
    try:
        new = catalog.missing_groups(path)
        if path in catalog.nodes:
            raise ObjectExistsError(f"{path} already exists in {session.path}")
    except H5SubfileError as exc:
        raise agreed(exc) from None
    if track_order:
        _on_root(session, lambda master: master.groups.tracked.add(path), "track_order")
    _on_root(session, lambda master: master.create_group(path), f"creating group {path}")
    for new_path in new:
        catalog.nodes[new_path] = NodeInfo("group", track_order=track_order and new_path == path)
    session.ledger.record(Entry(f"create_group {path}{' track_order' if track_order else ''}"))


def create_link(session: Session, path: str, link: Link) -> None:
    """Collective: make ``link`` at ``path`` (h5py's ``group[name] = SoftLink(...)``,
    ``ExternalLink(...)`` or an object of the file, for a hard link), with missing parent
    groups (no round, as :func:`create_group`). A soft or external link is made in the master
    at once; a hard link when the session closes, once its object's storage is final."""
    session.require_writable("creating a link")
    catalog = session.catalog
    if link.kind == "hard" and link.target == path and path in catalog.unnamed:
        # an object given back the name it lost in this session: nothing to make
        _on_root(session, lambda master: master.unnamed.remove(path), f"linking {path}")
        catalog.unnamed.discard(path)
        catalog.held.discard(path)
        session.ledger.record(Entry(f"link hard {path} {path}"))
        return
    try:
        new = catalog.missing_groups(path)[:-1]
        if path in catalog.nodes:
            raise ObjectExistsError(f"{path} already exists in {session.path}")
        if not isinstance(link.target, str) or not link.target:
            raise ValueError(f"a link needs a target path, not {link.target!r}")
        if link.kind == "hard" and link.target not in catalog.nodes:  # (an object's own path)
            link = Link("hard", catalog.resolve(link.target))
            if link.target not in catalog.nodes:
                raise ObjectNotFoundError(f"no object {link.target!r} to link to")
        elif link.kind == "external" and not link.file:
            raise ValueError("an external link needs a file name")
    except (H5SubfileError, ValueError) as exc:
        raise agreed(exc) from None
    _on_root(session, lambda master: master.link(path, link), f"linking {path}")
    for new_path in new:
        catalog.nodes[new_path] = NodeInfo("group")
    catalog.links[path] = link
    session.ledger.record(Entry(f"link {link.kind} {path} {link.file}:{link.target}"))


def delete_link(session: Session, path: str) -> None:
    """Collective: remove link ``path`` (no round, as :func:`delete`); an object it was the
    last name of (one moved, or whose first name was deleted) goes with it."""
    session.require_writable(f"del {path}")
    catalog = session.catalog
    orphans = _orphaned(session, {path})
    _on_root(session, lambda master: master.unlink(path), f"deleting link {path}")
    del catalog.links[path]
    session.ledger.record(Entry(f"delete link {path}"))
    for orphan in orphans:
        _delete_object(session, orphan)


def _orphaned(session: Session, removed: set[str]) -> list[str]:
    """The objects that lose their last name when the hard links ``removed`` go: objects
    without a name of their own (:attr:`~h5subfile.layout.catalog.Catalog.unnamed`) that no
    other hard link names. Refuses (on every rank alike) where one of them has objects that
    other hard links still name, which h5subfile does not keep apart from their group."""
    catalog = session.catalog
    if not catalog.unnamed:
        return []
    named = {
        link.target
        for path, link in catalog.links.items()
        if link.kind == "hard" and path not in removed
    }
    orphans = sorted(p for p in catalog.unnamed if p not in named and p not in catalog.held)
    for orphan in orphans:
        _refuse_other_names(session, orphan, removed)
    return orphans


def _refuse_other_names(session: Session, path: str, removed: Collection[str] = ()) -> None:
    """UnsupportedError (agreed) if an object below ``path`` has a hard link from outside it
    (besides ``removed``): deleting ``path`` would have to keep that object alone."""
    below = path.rstrip("/") + "/"
    outside = [
        p for p in session.catalog.links_below(path) if p not in removed and not p.startswith(below)
    ]
    if outside:
        raise agreed(
            UnsupportedError(
                f"{path} holds objects that other names still reach (hard links {outside}): "
                "h5subfile deletes a group together with everything in it; delete those "
                "links first"
            )
        )


def move(session: Session, path: str, new: str) -> None:
    """Collective: h5py's ``move`` of group or dataset ``path`` to ``new`` (missing parent
    groups made; no round, as :func:`create_link`). The object keeps its own path in the
    session (where its data, its layout and the program's objects know it): ``new`` becomes
    a hard link to it and ``path`` is a name no more (:meth:`Catalog.resolve`); the master
    makes the link and drops the old name at the commit."""
    session.require_writable(f"move {path}")
    catalog = session.catalog
    try:
        _check_named(session, path, "move")
        if new == path or new.startswith(path.rstrip("/") + "/"):
            raise ValueError(f"cannot move {path} to {new}: into itself")
        made = catalog.missing_groups(new)[:-1]
        if new in catalog.nodes or new in catalog.links:
            raise ObjectExistsError(f"cannot move {path} to {new}: {new} already exists")
    except (H5SubfileError, ValueError) as exc:
        raise agreed(exc) from None
    link = Link("hard", path)
    _on_root(session, lambda master: master.link(new, link), f"moving {path} to {new}")
    for group in made:
        catalog.nodes[group] = NodeInfo("group")
    catalog.links[new] = link
    session.ledger.record(Entry(f"link hard {new} {path}"))
    _unname(session, path, "move")


def move_link(session: Session, path: str, new: str) -> None:
    """Collective: rename link ``path`` to ``new`` (h5py's ``move`` of a link; missing parent
    groups made; no round, as :func:`create_link`)."""
    session.require_writable(f"move {path}")
    catalog = session.catalog
    try:
        made = catalog.missing_groups(new)[:-1]
        if new in catalog.nodes or new in catalog.links:
            raise ObjectExistsError(f"cannot move {path} to {new}: {new} already exists")
    except H5SubfileError as exc:
        raise agreed(exc) from None
    _on_root(session, lambda master: master.move_link(path, new), f"moving link {path}")
    for group in made:
        catalog.nodes[group] = NodeInfo("group")
    catalog.links[new] = catalog.links.pop(path)
    session.ledger.record(Entry(f"move link {path} {new}"))


def create_type(session: Session, path: str, dtype: np.dtype) -> None:
    """Collective: a named (committed) type at ``path`` (h5py's ``group[name] = dtype``), with
    missing parent groups (no round, as :func:`create_group`)."""
    session.require_writable("committing a type")
    catalog = session.catalog
    try:
        new = catalog.missing_groups(path)[:-1]
        if path in catalog.nodes or path in catalog.links:
            raise ObjectExistsError(f"{path} already exists in {session.path}")
        committable(dtype)
    except (H5SubfileError, TypeError, ValueError) as exc:
        error = agreed(exc)
        error.args = (f"{error} (committing a named type at {path})",)
        raise error from None
    _on_root(session, lambda master: master.commit_type(path, dtype), f"committing type {path}")
    for group in new:
        catalog.nodes[group] = NodeInfo("group")
    catalog.nodes[path] = NodeInfo("datatype", dtype=dtype)
    session.ledger.record(Entry(f"commit type {path} {dtype_text(dtype)} {dtype.metadata}"))


def use_type(session: Session, path: str, named: str) -> None:
    """Collective, before dataset ``path`` is created (no round: the creation's own round
    compares it): the dataset is made with the named type ``named`` (h5py's
    ``create_dataset(..., dtype=f[name])``), which it then shares in the file."""
    session.require_writable("create_dataset")
    try:
        if session.catalog.nodes.get(named, NodeInfo("group")).kind != "datatype":
            raise TypeError(f"{named} is not a named type of {session.path}")
    except TypeError as exc:
        raise agreed(exc) from None
    _on_root(session, lambda master: master.groups.typed.__setitem__(path, named), "dtype")
    session.catalog.typed[path] = named
    session.ledger.record(Entry(f"use type {named} for {path}"))


def forget_type(session: Session, path: str) -> None:
    """Every rank, after the creation of dataset ``path`` failed on every rank: the named
    type :func:`use_type` chose is not for a later dataset of that name."""
    session.catalog.typed.pop(path, None)
    _on_root(session, lambda master: master.groups.typed.pop(path, None), "dtype")


def track_order(session: Session, path: str) -> None:
    """Collective, before dataset ``path`` is created (no round: the creation's own round
    compares it): the dataset keeps its attributes' creation order (h5py's ``track_order``)."""
    session.require_writable("track_order")
    _on_root(session, lambda master: master.groups.tracked.add(path), "track_order")
    session.ledger.record(Entry(f"track_order {path}"))


def tracking_order(session: Session, path: str) -> None:
    """Local, after dataset ``path`` was created with ``track_order``: list its attributes in
    creation order."""
    session.node(path).track_order = True


#: Values up to this size (characters, or bytes of an array) are their own signature; larger
#: ones are hashed (the ledger hashes every signature again: this only bounds what it holds).
SIGNATURE_INLINE = 256


def value_signature(value: Any) -> str:
    """A small, comparable summary of an attribute value (to check collective agreement)."""
    if type(value) is str:
        if len(value) <= SIGNATURE_INLINE:
            return "str " + value
        return "str sha1 " + hashlib.sha1(value.encode()).hexdigest()[:16]
    try:
        array = np.asarray(value)
        if array.dtype.kind != "O":
            data = array.tobytes()
            if len(data) > SIGNATURE_INLINE:
                data = hashlib.sha1(data).digest()[:8]
            return f"{array.dtype.str} {array.shape} {data.hex()}"
    except (TypeError, ValueError):
        pass
    return repr(value)


def set_attrs(session: Session, path: str, values: Mapping[str, Any]) -> None:
    """Collective: set the attributes ``values`` (name -> value) of ``path``, in order (no
    round: the next collective call checks that every rank set the same names with the same
    types and shapes; values that differ keep rank 0's, with a warning). The first that
    fails stops the call, on every rank alike, the ones before it set.

    Thousands of attributes are set one by one in a model's output, each on every rank:
    nothing here is done that the call does not need (a message is made when it is shown)."""
    writing = session.writing
    if writing is None or session.closed:
        session.require_writable(f"setting attributes {list(values)!r}")
    assert writing is not None
    node = session.catalog.nodes.get(path)
    if node is None:
        try:
            session.node(path)
        except H5SubfileError as exc:
            raise agreed(exc) from None
    assert node is not None
    for name, value in values.items():
        if not isinstance(name, str) or not name or is_reserved(name):
            raise ValueError(f"attribute name {name!r} is invalid or reserved for h5subfile")
        refs = holds_any_refs(value)
        try:
            if refs:
                stored, kind, data = stored_refs(value, session.path), "object references", None
                for target in referenced(stored):
                    if target not in session.catalog.nodes:
                        raise ObjectNotFoundError(f"no object {target!r} to refer to")
            else:
                stored, kind, data = prepared_attribute(value)
        except Exception as exc:  # noqa: BLE001 - the same on every rank
            error = agreed(exc)
            error.args = (f"{error} (setting attribute {name!r} of {path})",)
            raise error from exc
        if refs:
            session.catalog.refers = True
        if writing.root is not None and refs:
            _on_root(
                session,
                lambda master: master.set_ref_attr(path, name, stored),  # noqa: B023
                lambda: f"setting attribute {name!r} of {path}",  # noqa: B023 - called now
            )
        elif writing.root is not None:
            new = name not in node.attrs  # the catalogue holds the master's attributes
            _on_root(
                session,
                lambda master: master.set_attr(path, name, value, data, new),  # noqa: B023
                lambda: f"setting attribute {name!r} of {path}",  # noqa: B023 - called now
            )
        node.attrs[name] = stored
        if writing.image is not None:
            writing.image.stale.add(path)
        signature = value_signature(stored)
        described = f"attrs set {path}.attrs[{name!r}] {kind}"
        session.ledger.record(Entry(described, path, name, stored, signature))


def set_attr(session: Session, path: str, name: str, value: Any) -> None:
    """Collective: set attribute ``name`` of ``path`` (every rank passes the same value)."""
    set_attrs(session, path, {name: value})


def delete_attr(session: Session, path: str, name: str) -> None:
    """Collective: delete attribute ``name`` of ``path`` (no round, as :func:`set_attrs`)."""
    session.require_writable(f"deleting attribute {name!r}")
    attrs = session.node(path).attrs
    if name not in attrs:
        raise agreed(ObjectNotFoundError(f"no attribute {name!r} on {path}"))
    _on_root(
        session,
        lambda master: master.delete_attr(path, name),
        f"deleting attribute {name!r} of {path}",
    )
    del attrs[name]
    _image_stale(session, path)
    session.ledger.record(Entry(f"attrs delete {path}.attrs[{name!r}]"))


def forget_dataset(session: Session, path: str) -> None:
    """Local: this rank forgets dataset ``path`` of the write session (not in the file): what it
    knows of it, what it wrote of it, and on rank 0 the pieces reported of it."""
    session.catalog.nodes.pop(path, None)
    writing = session.writing
    assert writing is not None
    for held in (
        writing.targets,
        writing.learned,
        writing.unwritten,
        writing.sums,
        writing.streams,
        writing.chunk_sums,
    ):
        held.pop(path, None)
    for key in [k for k in writing.chunks_taken if k[0] == path]:
        del writing.chunks_taken[key]
    if writing.root is not None and writing.root.book is not None:
        writing.root.book.forget(path)


def delete(session: Session, path: str) -> None:
    """Collective: unlink group or dataset ``path`` and everything below it (h5py's ``del
    group[name]``; no round, as :func:`create_group`). Its data stays in the subfiles, unused,
    as HDF5 leaves a deleted dataset's space in its file."""
    session.require_writable(f"del {path}")
    session.take_announced()  # what this rank wrote of a new dataset, forgotten with it
    catalog = session.catalog
    try:
        _check_named(session, path, "delete")
        kept = bool(catalog.other_names(path))  # only this name goes, as in HDF5
        if not kept:
            _refuse_other_names(session, path)
            below = path.rstrip("/") + "/"
            inside = {p for p in catalog.links if p.startswith(below)}
            orphans = [p for p in _orphaned(session, inside) if not p.startswith(below)]
    except (H5SubfileError, ValueError) as exc:
        raise agreed(exc) from None
    if kept:
        _unname(session, path, "unname")
        return
    _delete_object(session, path)
    for orphan in orphans:
        _delete_object(session, orphan)


def pop_name(session: Session, path: str) -> None:
    """Collective: h5py's ``group.pop`` of group or dataset ``path`` (no round, as
    :func:`delete`): the name goes, the object stays for the objects the program holds of it
    (and for its other names) until the session closes, then it is deleted
    (:func:`drop_held`) unless another name holds it."""
    session.require_writable(f"pop {path}")
    try:
        _check_named(session, path, "pop")
    except (H5SubfileError, ValueError) as exc:
        raise agreed(exc) from None
    if not session.catalog.other_names(path):
        session.catalog.held.add(path)
    _unname(session, path, "pop")


def _check_named(session: Session, path: str, verb: str) -> None:
    """Refuse ``verb`` of ``path`` unless it names a group or dataset, the root left out."""
    if path in session.catalog.unnamed:
        raise ObjectNotFoundError(f"cannot {verb} {path}: no such object")
    session.node(path)
    if path == "/":
        raise ValueError(f"cannot {verb} the root group: it is no group's member")


def _unname(session: Session, path: str, verb: str) -> None:
    """``path`` is a name no more; its object stays (the master drops the name at commit)."""
    _on_root(session, lambda master: master.unname(path), f"{verb} {path}")
    session.catalog.unnamed.add(path)
    session.ledger.record(Entry(f"{verb} {path}"))


def drop_held(session: Session) -> None:
    """Every rank, as the session closes: the popped objects no name holds are deleted (the
    program's objects of them end with the session)."""
    catalog = session.catalog
    for path in sorted(catalog.held, key=lambda p: p.count("/")):
        if path in catalog.held and not catalog.other_names(path):
            _delete_object(session, path)
    catalog.held.clear()


def _point_nowhere(session: Session, path: str) -> None:
    """References a program set in attributes to ``path`` or objects below it, deleted now,
    made null (HDF5's would dangle; a new object of the same name is not what they meant);
    those of dimension scales are dims.py's."""
    catalog = session.catalog
    if catalog.refers is None:  # looked for once, then kept up to date by set_attrs
        catalog.refers = any(_refs_in(name, value) for node in catalog.nodes.values()
                             for name, value in node.attrs.items())  # fmt: skip
    if not catalog.refers:
        return
    below = path.rstrip("/") + "/"
    for owner, node in catalog.nodes.items():
        for name, value in node.attrs.items():
            if not any(r.path == path or r.path.startswith(below) for r in _refs_in(name, value)):
                continue
            kept = _nulled(value, path, below)
            node.attrs[name] = kept
            _on_root(session, _set_refs(owner, name, kept), f"deleting {path}")


def _refs_in(name: str, value: Any) -> list[ObjectRef]:
    """The references a program's attribute ``name`` holds (dimension scales' left out)."""
    if name in SCALE_ATTRS:
        return []
    if isinstance(value, ObjectRef):
        return [value]
    if isinstance(value, np.ndarray) and value.dtype == object:
        return [r for r in value.flat if isinstance(r, ObjectRef)]
    return []


def _set_refs(path: str, name: str, value: Any) -> Callable[[MasterWriter], None]:
    return lambda master: master.set_ref_attr(path, name, value)


def _nulled(value: Any, path: str, below: str) -> Any:
    if isinstance(value, ObjectRef):
        gone = value.path == path or value.path.startswith(below)
        return ObjectRef("") if gone else value
    out = value.copy()
    for index, item in np.ndenumerate(value):
        out[index] = _nulled(item, path, below) if isinstance(item, ObjectRef) else item
    return out


def _delete_object(session: Session, path: str) -> None:
    """Every rank: forget group or dataset ``path`` and everything below it, links included,
    and (rank 0) delete it from the master."""
    below = path.rstrip("/") + "/"
    _point_nowhere(session, path)
    session.catalog.unnamed -= {
        p for p in session.catalog.unnamed if p == path or p.startswith(below)
    }
    session.catalog.held -= {p for p in session.catalog.held if p == path or p.startswith(below)}
    gone = [p for p in session.catalog.nodes if p == path or p.startswith(below)]
    for old in gone:
        session.catalog.typed.pop(old, None)
    writing = session.writing
    assert writing is not None
    # this group's sources of the deleted object: the object itself (a group holds its
    # datasets' sources), and a grown dataset's other sources beside it
    sources = {path} | {e.dataset for e in getattr(writing.learned.get(path), "stored", ())}
    for link in [p for p in session.catalog.links if p.startswith(below)]:
        del session.catalog.links[link]
    for old in gone:
        if session.catalog.nodes[old].kind == "dataset":
            forget_dataset(session, old)
        else:
            session.catalog.nodes.pop(old, None)
    if writing.image is not None:
        writing.image.forget(path)
    leader = writing.leader
    if leader is not None and leader.subfile is not None:
        try:
            leader.subfile.set_aside(sorted(sources))
        except Exception as exc:  # noqa: BLE001 - raised by every rank at the next collective call
            writing.kept = writing.kept or as_error(exc)
        for name in [n for n in leader.chunk_sinks if n in sources or n.startswith(below)]:
            del leader.chunk_sinks[name]
    _on_root(session, lambda master: master.delete(path), f"deleting {path}")
    session.ledger.record(Entry(f"delete {path}"))

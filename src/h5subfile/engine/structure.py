"""Groups and attributes (collective): rank 0 changes the master, every rank learns the result.

Each call's agreement round (:meth:`.session.Session.enter`) also checks that every rank passed
the same arguments; rank 0's change is the call's question (:meth:`.Question.of_root`): where
the rounds are stars rank 0 makes it in that round once every rank agrees, and the answer (the
result or the error) comes back in it, one round in all; otherwise a broadcast follows."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ObjectExistsError, ObjectNotFoundError
from ..io.master import MasterWriter
from ..layout.catalog import NodeInfo
from ..layout.record import is_reserved
from ..mpi.collective import Question
from ..mpi.failures import Failure, describe, rebuild
from .session import Session


def _master(session: Session) -> MasterWriter:
    """Rank 0's master writer (only called on rank 0, inside a root-only step)."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    return writing.root.master


def create_group(session: Session, path: str) -> None:
    """Collective: create group ``path`` and its missing parents."""
    session.require_writable("create_group")
    catalog = session.catalog

    def create_on_root() -> list[str]:
        if path in catalog.nodes:
            raise ObjectExistsError(f"{path} already exists in {session.path}")
        new = catalog.missing_groups(path)
        _master(session).create_group(path)
        return new

    # The same path on every rank, checked in the call's round, which also brings rank 0's answer.
    question = Question.of_root(create_on_root)
    created = session.enter("create_group", detail=path, args=path, question=question)
    for new_path in created:
        catalog.nodes[new_path] = NodeInfo("group")


def value_signature(value: Any) -> Any:
    """A small, comparable summary of an attribute value (to check collective agreement)."""
    try:
        array = np.asarray(value)
        if array.dtype.kind != "O":
            digest = hashlib.sha1(array.tobytes()).hexdigest()[:16]
            return (array.dtype.str, array.shape, digest)
    except (TypeError, ValueError):
        pass
    return repr(value)


def set_attrs(session: Session, path: str, values: Mapping[str, Any]) -> None:
    """Collective: set the attributes ``values`` (name -> value) of ``path`` in one call,
    whatever their number (every rank passes the same names and values, in the same
    order). Rank 0 sets them in order; the first that fails stops it, and its error is
    raised on every rank, the ones before it set."""
    items = list(values.items())
    session.require_writable(f"setting attributes {[n for n, _ in items]!r}")
    for name, _ in items:
        if not isinstance(name, str) or not name or is_reserved(name):
            raise ValueError(f"attribute name {name!r} is invalid or reserved for h5subfile")
    where = ", ".join(f"{path}.attrs[{n!r}]" for n, _ in items)
    # The same object, names and values on every rank, checked in the call's own round.
    signature = "; ".join(f"{n!r} = {value_signature(v)!r}" for n, v in items)
    cause: list[BaseException] = []

    def set_on_root() -> tuple[dict[str, Any], Failure | None]:
        master, done = _master(session), {}
        for name, value in items:
            try:
                done[name] = master.set_attr(path, name, value)
            except Exception as exc:  # noqa: BLE001 - raised on every rank below
                cause.append(exc)
                kind, message = describe(exc)  # the errno, if any, stays in front
                return done, (kind, f"{message} (setting attribute {name!r} of {path})")
        return done, None

    args, question = f"{path}: {signature}", Question.of_root(set_on_root)
    done, failure = session.enter("attrs set", detail=where, args=args, question=question)
    session.node(path).attrs.update(done)  # the same on every rank, failed or not
    if failure is not None:
        raise rebuild([(0, failure)], 1) from (cause[0] if cause else None)


def set_attr(session: Session, path: str, name: str, value: Any) -> None:
    """Collective: set attribute ``name`` of ``path`` (every rank passes the same value)."""
    set_attrs(session, path, {name: value})


def delete_attr(session: Session, path: str, name: str) -> None:
    """Collective: delete attribute ``name`` of ``path``."""
    session.require_writable(f"deleting attribute {name!r}")
    attrs = session.node(path).attrs
    if name not in attrs:
        raise ObjectNotFoundError(f"no attribute {name!r} on {path}")
    where = f"{path}.attrs[{name!r}]"
    question = Question.of_root(lambda: _master(session).delete_attr(path, name))
    session.enter("attrs delete", detail=where, args=f"del {where}", question=question)
    del attrs[name]

"""The catalogue of an open file: every group and dataset with its attributes and layout.

Rank 0 builds it (by scanning the master, or while creating objects) and every rank holds
the same copy, so that navigation and reads need no communication.

Each dataset is a :class:`NodeInfo`; its layout travels as bytes and is unpickled when a
rank first uses it. A damaged dataset carries a :data:`Problem`, raised when it is read
(:func:`raise_problem`), so a file with one bad dataset still opens.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import errors
from .names import SET_ASIDE
from .record import DatasetLayout, FileRecord
from .sharing import identities_of, listed_subfiles

#: Why a dataset cannot be read: (error class name, message), raised when it is read.
Problem = tuple[str, str]


def raise_problem(problem: Problem) -> None:
    """Raise the error a :data:`Problem` describes."""
    name, message = problem
    cls = getattr(errors, name, errors.CorruptFileError)
    raise cls(message)


#: Where a received :class:`NodeInfo` keeps its layout until it is first used.
_WIRE = "_layout_wire"
#: Where a received :class:`NodeInfo` whose layout was withheld keeps how to read it.
_FETCH = "_layout_fetch"
#: Where a dataset created without a round keeps how this rank takes its layout from rank 0's
#: announcement (engine/announced.py): called once, it fills the node in place, or raises.
PENDING = "_layout_pending"


def _no_layout() -> DatasetLayout | None:
    return None


class NameTakenAway(errors.ObjectNotFoundError):
    """A path passes through ``name``, a name the session took away from an object that
    other names still reach (:attr:`Catalog.unnamed`): no object is found there."""

    def __init__(self, name: str):
        super().__init__(f"{name}: no such object (it was moved or deleted)")
        self.name = name


def freed_name(path: str, name: str) -> str:
    """Why ``path`` cannot be created: ``name`` on its way is one the session took away from
    an object that other names still reach (:attr:`Catalog.unnamed`)."""
    return (
        f"cannot create {path}: the name {name} was moved or deleted in this session while "
        "another name still reaches its object; h5subfile can use that name again once the "
        "file is closed"
    )


#: How many links a path may pass through before it is refused as a loop (HDF5's default
#: limit of soft and external link traversals, ``H5Pset_nlinks``).
MAX_LINKS = 16


@dataclass(frozen=True)
class Link:
    """A name that is not an object's only one: ``soft`` (a path, absolute or relative to the
    link's group, that may dangle), ``external`` (a path in another HDF5 file) or ``hard``
    (another name of an object of this file, ``target`` being the path the catalogue holds
    it under), as h5py's ``SoftLink``, ``ExternalLink`` and ``HardLink``."""

    kind: str  # "soft", "external" or "hard"
    target: str
    file: str = ""  # an external link's file, as written in the link


class ExternalLinkReached(Exception):
    """A path passes through an external link: ``link`` is the link's path, ``rest`` what
    follows it (an object of the other file, which h5subfile does not hold)."""

    def __init__(self, link: str, rest: str):
        super().__init__(link, rest)
        self.link = link
        self.rest = rest


@dataclass
class NodeInfo:
    """What every rank knows of one group or dataset.

    Sent between ranks, the layout travels as bytes (:meth:`DatasetLayout.to_wire`) and
    is parsed when this rank first uses it: a rank that opens a file of P extents per dataset
    pays for the datasets it reads, not for every layout (``layout`` has no class attribute,
    so that :meth:`__getattr__` sees it missing). A large layout is not sent at all
    (``withheld``, layout/sharing.py): collective reads receive the extents they touch, and
    anything else that asks for ``layout`` reads the record on this rank (:meth:`fetch_with`).
    """

    kind: str  # "group", "dataset" or "datatype" (a named type: its ``dtype``)
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] = ()
    dtype: np.dtype | None = None
    layout: DatasetLayout | None = field(default_factory=_no_layout)  # read from these extents
    via_h5py: bool = False  # read through h5py instead
    problem: Problem | None = None  # raised when read
    storage: str = ""  # short description for `info`
    #: Created in the open write session: this rank holds only its own extent of the layout
    #: (rank 0 all of them), so independent reads are refused until the file is closed.
    local_view: bool = False
    #: Read mode: rank 0 holds the layout and did not broadcast it (more extents than
    #: layout/sharing.BROADCAST_EXTENTS); the same flag on every rank.
    withheld: bool = False
    record_sha: str = ""  # SHA-256 of the layout record's text as rank 0 read and checked it
    #: the fill value's bytes (one element), what elements never written read as; None: zeros
    fill: bytes | None = None
    #: h5py's ``track_order``: attributes (and a group's members) listed in creation order,
    #: not by name; ``order``: a group's members as the file listed them when it was opened
    track_order: bool = False
    order: tuple[str, ...] = ()
    #: Stored in the master, its data moved by a tool that rewrote the file (h5repack): read
    #: where HDF5 has it, and always with its checksums checked, since that offset is not
    #: the one the record was written with
    moved: bool = False

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop(_FETCH, None)
        state.pop(PENDING, None)
        layout = state.pop("layout", None)
        if self.withheld:
            state.pop(_WIRE, None)  # the receiver asks for it when it needs it
        elif layout is not None:
            state[_WIRE] = layout.to_wire()
        elif _WIRE not in state:
            state["layout"] = None
        return state

    def fetch_with(self, fetch: Callable[[], DatasetLayout]) -> None:
        """How this rank gets a withheld layout the first time it is asked for (reading the
        record from the master); a node that holds its layout ignores it."""
        if self.withheld and "layout" not in self.__dict__:
            self.__dict__[_FETCH] = fetch

    @property
    def has_layout(self) -> bool:
        """Whether the dataset has a layout (held, sent, or withheld), without fetching it."""
        if self.withheld or _WIRE in self.__dict__ or PENDING in self.__dict__:
            return True
        return self.__dict__.get("layout") is not None

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> DatasetLayout | None:
        """``layout`` of a received node: parsed, or fetched if withheld, or taken from rank 0's
        announcement, on first use."""
        if name != "layout":
            raise AttributeError(name)
        if PENDING in self.__dict__:
            self.__dict__[PENDING]()  # announced: taken now (it removes the hook), or raises
            if "layout" in self.__dict__:
                return self.__dict__["layout"]
        if _WIRE in self.__dict__:
            layout = DatasetLayout.from_wire(self.__dict__.pop(_WIRE))
        elif self.withheld and _FETCH in self.__dict__:
            layout = self.__dict__[_FETCH]()
            del self.__dict__[_FETCH]
        elif self.withheld:
            raise errors.FileModeError("this dataset's layout was not sent to this rank")
        else:
            raise AttributeError(name)
        self.__dict__["layout"] = layout
        return layout

    @property
    def unfinished(self) -> bool:
        """A dataset left incomplete by a session that did not finish (its name can be reused)."""
        return (
            self.kind == "dataset"
            and self.problem is not None
            and self.problem[0] == "IncompleteFileError"
        )


@dataclass
class Catalog:
    """Every group and dataset of a file, with attributes and layouts; identical on all ranks."""

    nodes: dict[str, NodeInfo]
    record: FileRecord
    problems: list[str] = field(default_factory=list)
    #: Read mode: ``record`` holds the identities of the broadcast layouts' subfiles only
    #: (rank 0 holds them all); ``session_shas``: each closed write session's
    #: :func:`~.record.session_sha` as rank 0 read it (a rank reading the record later uses
    #: these sessions, unchanged, and ignores sessions closed since).
    record_withheld: bool = False
    session_shas: dict[int, str] = field(default_factory=dict)
    #: Soft, external and hard links (:class:`Link`) by path: every name of the file that is
    #: not an object's own (the objects in ``nodes`` each have one path)
    links: dict[str, Link] = field(default_factory=dict)
    #: Write mode: objects whose own path is a name no more (moved, or deleted while a hard
    #: link still names them), reached through their links only; the master loses those
    #: names at the commit (engine/structure.py, :func:`move` and :func:`delete`)
    unnamed: set[str] = field(default_factory=set)
    #: of those, objects a program popped (``group.pop``): no name reaches them, the objects
    #: it holds do, until the session closes (then they are deleted)
    held: set[str] = field(default_factory=set)
    #: Write mode: whether attributes hold a program's object references (None: not looked
    #: for yet), so that a deletion looks for references to what it deletes only then
    refers: bool | None = None
    #: datasets made with a named type, which they share in the file: path -> the type's path
    typed: dict[str, str] = field(default_factory=dict)

    def resolve(self, path: str, within: bool = False) -> str:
        """The path ``nodes`` holds the object at ``path`` under, following soft and hard
        links as HDF5 does (at most :data:`MAX_LINKS`); ``path`` itself where no link is on
        the way (it may not exist). Raises :class:`ExternalLinkReached` at an external link,
        and ObjectNotFoundError for a loop of links, a soft link on the way whose target does
        not exist, or a name the session took away from an object that other names still
        reach (:attr:`unnamed`). ``within``: ``path`` is a group something is made in, so a
        soft link it ends with must point at something too, as when more names follow."""
        if not self.unnamed and (not self.links or path in self.nodes):
            return path  # an object's own path, every part of it a name
        return self._walk("/", [p for p in path.split("/") if p], path, [0], within)

    def _walk(
        self, current: str, parts: list[str], path: str, followed: list[int], within: bool
    ) -> str:
        """:meth:`resolve` from the object at ``current`` (an own path) through the names
        ``parts``; ``followed``: the links followed so far."""
        for index, part in enumerate(parts):
            name = posixpath.join(current, part)
            link = self.links.get(name)
            if link is None:
                if name in self.unnamed:
                    raise NameTakenAway(name)
                current = name
                continue
            rest = parts[index + 1 :]
            if link.kind == "external":
                raise ExternalLinkReached(name, "/".join(rest))
            followed[0] += 1
            if followed[0] > MAX_LINKS:
                raise errors.ObjectNotFoundError(
                    f"{path}: more than {MAX_LINKS} links followed (a loop of soft links?)"
                )
            if link.kind == "hard":  # the object's own path: a name only where it is one
                return self._walk(link.target, rest, path, followed, within)
            target = link.target
            start = "/" if target.startswith("/") else current  # relative: from its group
            if ".." in target.split("/"):
                start = "/"
                target = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            found = self._walk(start, [p for p in target.split("/") if p], path, followed, False)
            if (rest or within) and found not in self.nodes:
                raise errors.ObjectNotFoundError(
                    f"{path}: the soft link {name} points to {link.target}, which does not "
                    "exist (component not found)"
                )
            return self._walk(found, rest, path, followed, within)
        return current

    def walk(self, path: str, links: bool = False) -> Iterator[tuple[str, str | None]]:
        """What HDF5's visits meet below group ``path``, depth first, members by name: (name
        relative to ``path``, the object's own path) for every object reached through hard
        links, once, by the first name met (``H5Ovisit``); with ``links``, every link instead,
        soft and external ones with None, each group entered once (``H5Lvisit``)."""
        members: dict[str, list[tuple[str, str | None]]] = {}
        for own in self.nodes:
            if own != "/" and own not in self.unnamed:
                parent, name = posixpath.split(own)
                members.setdefault(parent, []).append((name, own))
        for named, link in self.links.items():
            parent, name = posixpath.split(named)
            members.setdefault(parent, []).append(
                (name, link.target if link.kind == "hard" else None)
            )
        seen = {path}

        def below(group: str, prefix: str) -> Iterator[tuple[str, str | None]]:
            for name, own in sorted(members.get(group, ()), key=lambda member: member[0]):
                first = own is not None and own not in seen
                if first or links:
                    yield prefix + name, own
                if first:
                    assert own is not None
                    seen.add(own)
                    if self.nodes[own].kind == "group":
                        yield from below(own, f"{prefix}{name}/")

        return below(path, "")

    def name_of(self, path: str) -> str:
        """The name HDF5 gives the object whose own path is ``path`` when it reaches it by
        reference: the first met by :meth:`walk` (an earlier hard link's, a moved object's
        new one); ``path`` itself where the file has no links."""
        if not self.unnamed and not any(
            link.kind == "hard" and (path + "/").startswith(link.target.rstrip("/") + "/")
            for link in self.links.values()
        ):
            return path  # its only name: no other reaches it or a group above it
        found = next((name for name, own in self.walk("/", links=True) if own == path), None)
        return path if found is None else "/" + found

    def other_names(self, path: str) -> list[str]:
        """The hard links outside object ``path`` that name it (deleting ``path`` there
        removes one name of it, not the object)."""
        below = path.rstrip("/") + "/"
        return [
            p
            for p, link in self.links.items()
            if link.kind == "hard" and link.target == path and not p.startswith(below)
        ]

    def links_below(self, path: str) -> list[str]:
        """The hard links whose object is ``path`` or lies below it."""
        below = path.rstrip("/") + "/"
        return [
            p
            for p, link in self.links.items()
            if link.kind == "hard" and (link.target == path or link.target.startswith(below))
        ]

    def for_readers(self, limit: int) -> Catalog:
        """Rank 0 of a read session: what to broadcast. Layouts of more than ``limit`` extents
        are marked ``withheld`` here (rank 0 keeps them; pickling leaves them out), and when
        that leaves subfiles out, the record keeps only the broadcast layouts' subfiles."""
        sent_files: set[str] = set()
        for info in self.nodes.values():
            layout = info.__dict__.get("layout")
            if info.kind != "dataset" or layout is None or not info.record_sha:
                if layout is not None:
                    sent_files.update(e.file for e in layout.extents)
                continue
            info.withheld = len(layout.extents) > limit
            if not info.withheld:
                sent_files.update(e.file for e in layout.extents)
        record = identities_of(self.record, sent_files)
        if listed_subfiles(record.sessions) == listed_subfiles(self.record.sessions):
            return self
        return dataclasses.replace(self, record=record, record_withheld=True)

    def children(self, path: str) -> list[str]:
        """The members of group ``path`` as h5py lists them: by name, or in creation order
        where the group tracks it (those the file held when opened, then those created since,
        which the catalogue holds in the order they were made)."""
        prefix = path.rstrip("/") + "/"
        names = dict.fromkeys(
            p[len(prefix) :].split("/", 1)[0]
            for held in (self.nodes, self.links)
            for p in held
            if p.startswith(prefix) and p != "/"
        )
        if self.unnamed:
            names = {n: None for n in names if prefix + n not in self.unnamed}
        group = self.nodes.get(path)
        if group is None or not group.track_order:
            return sorted(names)
        known = [n for n in group.order if n in names]
        listed = set(known)
        return known + [n for n in names if n not in listed]

    def attribute_names(self, path: str) -> list[str]:
        """The attributes of ``path`` as h5py lists them: by name, or in creation order."""
        node = self.nodes[path]
        return list(node.attrs) if node.track_order else sorted(node.attrs)

    def missing_groups(self, path: str) -> list[str]:
        """Groups to create so that ``path`` (a new object) has its parents; refuses datasets
        and links on the way, and a link of that name."""
        new: list[str] = []
        parts = path.strip("/").split("/")
        if parts[0] == SET_ASIDE:
            raise errors.UnsupportedError(
                f"cannot create {path}: /{SET_ASIDE} is h5subfile's own (docs/FORMAT.md)"
            )
        if path in self.unnamed:
            raise errors.UnsupportedError(freed_name(path, path))
        for depth in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:depth])
            info = self.nodes.get(prefix)
            link = self.links.get(prefix)
            if link is not None:
                raise errors.ObjectExistsError(
                    f"cannot create {path}: {prefix} is a {link.kind} link"
                    + (" (create it where the link points)" if depth < len(parts) else "")
                )
            if info is None:
                new.append(prefix)
            elif info.kind != "group" and depth < len(parts):
                raise errors.ObjectExistsError(
                    f"cannot create {path}: {prefix} is a {info.kind}, not a group"
                )
        return new

    # steps ---------------------------------------------------------------------------------
    def steps(self) -> list[str]:
        """The file's completed steps, in the order they were committed (``File.commit``,
        docs/FORMAT.md, *Steps*): the top-level groups its closed write sessions recorded.
        A file whose sessions recorded none (written before steps were recorded, or by another
        program) has as steps its top-level groups holding data, none of it unfinished, in
        natural order (``Timestep_2`` before ``Timestep_10``)."""
        closed = [s for s in self.record.sessions if s.closed is not None]
        if not any(STEPS_KEY in s.extra for s in closed):
            return sorted(self._finished_groups(), key=_natural_key)
        recorded = [path for s in closed for path in s.extra.get(STEPS_KEY, [])]
        return [p for p in recorded if p in self.nodes and self.nodes[p].kind == "group"]

    def new_steps(self, existing: Collection[str] = ()) -> list[str]:
        """What a commit records as completed steps: the top-level groups holding data, none
        of it unfinished or incomplete, that no closed session recorded yet. Groups that were
        in the file before the session (``existing``) come first, in natural order (a file
        written without steps), then the session's own, in creation order."""
        recorded = {
            path
            for s in self.record.sessions
            if s.closed is not None
            for path in s.extra.get(STEPS_KEY, [])
        }
        new = [p for p in self._finished_groups() if p not in recorded]
        old = sorted((p for p in new if p in existing), key=_natural_key)
        return old + [p for p in new if p not in existing]

    def _finished_groups(self) -> list[str]:
        """Top-level groups holding a dataset, none of whose datasets is unfinished or
        incomplete, in catalogue order."""
        holding: set[str] = set()
        unfinished: set[str] = set()
        for path, info in self.nodes.items():
            if info.kind != "dataset" or path.count("/") < 2:
                continue
            top = "/" + path.split("/", 2)[1]
            holding.add(top)
            if _incomplete(info):
                unfinished.add(top)
        return [
            p
            for p, info in self.nodes.items()
            if info.kind == "group"
            and p in holding
            and p not in unfinished
            and p not in self.unnamed
        ]


def _incomplete(info: NodeInfo) -> bool:
    """A dataset readers refuse as unfinished or incomplete (its layout is not parsed)."""
    if info.problem is not None and info.problem[0] == "IncompleteFileError":
        return True
    layout = info.__dict__.get("layout")
    return layout is not None and not layout.complete


#: The key of a session's ``extra`` that lists the steps its commit completed.
STEPS_KEY = "steps"


def _natural_key(path: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]

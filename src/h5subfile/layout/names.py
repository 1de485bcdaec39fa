"""File names: the subfile folder beside the master, subfile names, and the path-safety rule.

:class:`SourcePaths` is the one place where a recorded source path becomes a file path
(``""`` or ``"."`` is the master itself); :func:`resolve_inside` refuses a path that escapes
the master's folder, following symbolic links: the one function of ``layout/`` that asks the
file system anything.
"""

from __future__ import annotations

import os
import re
import stat

from ..errors import UnsafePathError

#: Subfiles of write session S (id U) for group G are ``<stem>.subfiles/s<S>-<U[:8]>-<G:05d>.h5``
#: (format 3; before it ``s<S>-<G:05d>.h5``): no two sessions name a subfile alike.
SUBFILE_NAME = re.compile(r"^s(\d+)-(?:([0-9a-f]{8})-)?(\d{5,})\.h5$")
TOKEN_LENGTH = 8
#: The group of the master and of each subfile where a write session keeps the storage of the
#: objects it deleted until it ends (io/h5.SourceFile.set_aside); programs cannot make it.
SET_ASIDE = "h5subfile-deleted"


def subfile_folder(master_path: str) -> str:
    """The folder holding a master's subfiles: ``run.h5`` -> ``run.subfiles`` (beside it)."""
    head, tail = os.path.split(master_path)
    stem = tail[:-3] if tail.endswith(".h5") and len(tail) > 3 else tail
    return os.path.join(head, stem + ".subfiles")


def subfile_relpath(master_path: str, session: int, session_id: str, group: int) -> str:
    """Path of a subfile relative to the master's folder (as stored in the VDS and the record):
    unique per session through the first characters of the session's id."""
    folder = os.path.basename(subfile_folder(master_path))
    return f"{folder}/s{session}-{session_id[:TOKEN_LENGTH]}-{group:05d}.h5"


def partial_path(master_path: str) -> str:
    """Where a master is written before it is renamed into place at close."""
    return master_path + ".partial"


def user_path(path: str) -> str:
    """The file a user knows ``path`` as, for messages: a master's ``.partial`` copy (a name
    h5subfile writes on the way, :func:`partial_path`) is the master; any other path itself."""
    return path[: -len(".partial")] if path.endswith(".partial") else path


def claim_path(master_path: str) -> str:
    """The claim file of a master's write session, beside it: ``run.h5`` -> ``run.h5.lock``."""
    return master_path + ".lock"


def names_master(relpath: str) -> bool:
    """Whether a recorded source path names the master itself (``""`` or ``"."``)."""
    return relpath in ("", ".")


def resolve_inside(master_path: str, relpath: str, base: str | None = None) -> str:
    """Absolute path of ``relpath`` (relative to the master's folder), refusing escapes.

    ``""`` and ``"."`` name the master itself. Absolute paths and paths leaving the master's
    folder (``..``, symbolic links pointing out of it) raise :class:`UnsafePathError`, and
    nothing outside the folder is looked at to decide: links are followed one component at
    a time, only inside it (see :func:`_walk_inside`). ``base``: the master's folder with
    symbolic links resolved, when the caller knows it.
    """
    if names_master(relpath):
        return os.path.abspath(master_path)
    if base is None:
        base = os.path.realpath(os.path.dirname(os.path.abspath(master_path)))
    if os.path.isabs(relpath):
        raise UnsafePathError(
            f"source path {relpath!r} in {master_path} is absolute; h5subfile only follows paths "
            "relative to the master's folder"
        )
    try:
        target = _walk_inside(base, relpath)
    except _LinkLoop:
        error = UnsafePathError(
            f"source path {relpath!r} in {master_path} cannot be followed: more than "
            f"{MAX_LINKS} symbolic links (a link that points to itself, or a loop of links; "
            "ELOOP)"
        )
        error.loop = True
        raise error from None
    if target is None:
        raise UnsafePathError(
            f"source path {relpath!r} in {master_path} escapes the master's folder {base}"
        )
    return target


#: The most symbolic links followed in one path (Linux's limit is 40).
MAX_LINKS = 40


class _LinkLoop(Exception):
    """More than :data:`MAX_LINKS` links in one path."""


def _walk_inside(base: str, relpath: str) -> str | None:
    """``relpath`` under the real folder ``base`` with its symbolic links resolved, or None as
    soon as it leaves ``base`` (by ``..`` or by a link's target, compared as written; _LinkLoop
    after :data:`MAX_LINKS` links): only paths inside ``base`` are looked at. A missing component ends the lookups (the rest is
    taken as written), as :func:`os.path.realpath` does."""
    pending = relpath.split("/")[::-1]
    current, links, looking = base, 0, True
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        current = os.path.dirname(current) if part == ".." else os.path.join(current, part)
        if not _inside(base, current):
            return None
        if not looking:
            continue
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            looking = False  # missing (or unreadable): nothing below it to resolve
            continue
        if stat.S_ISLNK(mode):
            links += 1
            if links > MAX_LINKS:
                raise _LinkLoop
            target = os.readlink(current)
            if os.path.isabs(target):  # followed only when it names a place inside base
                current, target = base, os.path.relpath(os.path.normpath(target), base)
            else:
                current = os.path.dirname(current)
            pending.extend(target.split("/")[::-1])
    return current


def _inside(base: str, path: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


class SourcePaths:
    """The one place where source paths recorded in a master become absolute paths.

    ``""`` and ``"."`` name the master's own bytes, which are at ``data_path`` (the
    ``.partial`` file while a write session is open; the master otherwise). Other paths are
    relative to the master's folder and may not escape it (:func:`resolve_inside`). Each path
    is resolved once; a refused path raises the same :class:`UnsafePathError` every time.
    """

    def __init__(self, master_path: str, data_path: str | None = None):
        self.master_path = os.path.abspath(master_path)
        self.data_path = self.master_path if data_path is None else data_path
        self._known: dict[str, str | UnsafePathError] = {}
        self._names: dict[str, str] = {}  # absolute path -> the first name resolved to it
        self._base: str | None = None

    def resolve(self, relpath: str) -> str:
        found = self._known.get(relpath)
        if found is None:
            try:
                if names_master(relpath):
                    found = self.data_path
                else:
                    if self._base is None:
                        self._base = os.path.realpath(os.path.dirname(self.master_path))
                    found = resolve_inside(self.master_path, relpath, self._base)
                self._names.setdefault(found, relpath)
            except UnsafePathError as exc:
                found = exc
            self._known[relpath] = found
        if isinstance(found, UnsafePathError):
            raise found
        return found

    def name_of(self, path: str) -> str | None:
        """The first relative path :meth:`resolve` turned into ``path``, if any."""
        return self._names.get(path)


def source_name(path: str, index: int) -> str:
    """Name of a dataset's extent ``index`` inside its subfile (the dataset's own path first)."""
    return path if index == 0 else f"{path}@{index}"

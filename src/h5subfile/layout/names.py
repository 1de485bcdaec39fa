"""File names: the subfile folder beside the master, subfile names, and the path-safety rule."""

from __future__ import annotations

import os
import re

from ..errors import UnsafePathError

#: Subfiles of write session S for group G are ``<stem>.subfiles/s<S>-<G:05d>.h5``.
SUBFILE_NAME = re.compile(r"^s(\d+)-(\d{5,})\.h5$")


def subfile_folder(master_path: str) -> str:
    """The folder holding a master's subfiles: ``run.h5`` -> ``run.subfiles`` (beside it)."""
    head, tail = os.path.split(master_path)
    stem = tail[:-3] if tail.endswith(".h5") and len(tail) > 3 else tail
    return os.path.join(head, stem + ".subfiles")


def subfile_relpath(master_path: str, session: int, group: int) -> str:
    """Path of a subfile relative to the master's folder (as stored in the VDS and the record)."""
    folder = os.path.basename(subfile_folder(master_path))
    return f"{folder}/s{session}-{group:05d}.h5"


def partial_path(master_path: str) -> str:
    """Where a master is written before it is renamed into place at close."""
    return master_path + ".partial"


def resolve_inside(master_path: str, relpath: str) -> str:
    """Absolute path of ``relpath`` (relative to the master's folder), refusing escapes.

    ``""`` and ``"."`` name the master itself. Absolute paths and paths leaving the master's
    folder (``..``, symlinked folders) raise :class:`UnsafePathError`.
    """
    if relpath in ("", "."):
        return os.path.abspath(master_path)
    base = os.path.realpath(os.path.dirname(os.path.abspath(master_path)))
    if os.path.isabs(relpath):
        raise UnsafePathError(
            f"source path {relpath!r} in {master_path} is absolute; h5subfile only follows paths "
            "relative to the master's folder"
        )
    target = os.path.realpath(os.path.join(base, relpath))
    if os.path.commonpath([base, target]) != base:
        raise UnsafePathError(
            f"source path {relpath!r} in {master_path} escapes the master's folder {base}"
        )
    return target

"""The metadata calls a rank made since its last collective call, folded into two digests.

Creating a group and setting or deleting an attribute need no round among the ranks: every
rank holds the same catalogue, so each checks and applies the call on its own, the same way,
and rank 0 also makes it in the master (engine/structure.py). This is how parallel HDF5 keeps
metadata, every rank updating its own copy. What keeps it safe is this ledger: each such call
is folded into a digest of its structure (which call, which object, which attribute, its HDF5
type and shape) and one of its values, and the next collective call's agreement round compares
both (:meth:`.session.Session.enter`). Ranks whose structures differ raise
CollectiveMismatchError, naming the first call that differs, and the session is abandoned:
nothing of it is published. Ranks whose values alone differ (a time stamp, a host name) keep
rank 0's, the value the master holds, with one warning naming the attributes
(docs/DESIGN-NOTES.md, *Metadata calls without rounds*).
"""

from __future__ import annotations

import hashlib
import os
import sys
import warnings
from typing import Any, NamedTuple

from mpi4py import MPI

from ..errors import DifferentValuesWarning
from ..layout.catalog import Catalog
from ..mpi.calls import digest_int
from ..mpi.collective import bcast, gather


class Entry(NamedTuple):
    """One metadata call: ``described`` is its structure (hashed, and shown in messages); an
    attribute set also has the object's ``path``, the attribute's ``name``, the ``value`` as
    HDF5 stored it and that value's ``signature`` (hashed apart). A tuple: a model's file
    records thousands, one per attribute set, and a frozen dataclass took 2.5 times as long to
    make (0.65 us against 0.25)."""

    described: str
    path: str = ""
    name: str = ""
    value: Any = None
    signature: str = ""


class Ledger:
    """This rank's metadata calls on one file since its last collective call."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._reset()

    def _reset(self) -> None:
        self.entries = []
        self._structure = hashlib.blake2b(digest_size=8)
        self._values = hashlib.blake2b(digest_size=8)

    def record(self, entry: Entry) -> None:
        """Local: add one metadata call, in the order it was made."""
        self.entries.append(entry)
        self._structure.update(entry.described.encode() + b"\0")
        if entry.name:
            self._values.update(entry.signature.encode() + b"\0")

    def digests(self) -> tuple[int, int]:
        """(structure, values): two positive ints, (0, 0) when no call was made."""
        if not self.entries:
            return 0, 0
        return digest_int(self._structure.digest()), digest_int(self._values.digest())

    def described(self) -> tuple[str, ...]:
        """Every call's structure, in order (only shown when the ranks' digests differ)."""
        return tuple(e.described for e in self.entries)

    def take(self) -> list[Entry]:
        """Local: the calls recorded, the ledger emptied for the next collective call."""
        entries = self.entries
        self._reset()
        return entries


def keep_root_values(comm: MPI.Comm, catalog: Catalog, made: list[Entry], path: str) -> None:
    """Collective, after an agreement round found that the ranks set attributes of the same
    structure to different values: every rank's catalogue takes rank 0's values (those the
    master holds), and rank 0 warns once, naming every attribute that differed on some rank.
    Two rounds, only when values differ."""
    attributes = [e for e in made if e.name]
    mine = [(e.signature, e.value) for e in attributes] if comm.rank == 0 else None
    root: list[tuple[str, Any]] = bcast(comm, mine)
    differ = []
    for entry, (signature, value) in zip(attributes, root):
        if signature != entry.signature:
            differ.append(f"{entry.path}.attrs[{entry.name!r}]")
        node = catalog.nodes.get(entry.path)
        if node is not None and entry.name in node.attrs:  # not deleted since
            node.attrs[entry.name] = value  # in call order: the last set wins, as on rank 0
    everyone = gather(comm, differ)
    if everyone is not None:
        named = list(dict.fromkeys(name for names in everyone for name in names))
        warnings.warn(
            f"{path}: ranks set {', '.join(named)} to different values; the file keeps rank "
            "0's (parallel HDF5 keeps one rank's, not always the same)",
            DifferentValuesWarning,
            stacklevel=_callers_level(),
        )


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside h5subfile, for a warning to name the
    program's line that made the collective call."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level

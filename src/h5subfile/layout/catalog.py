"""The catalogue of an open file: every group and dataset with its attributes and layout.

Rank 0 builds it (by scanning the master, or while creating objects) and every rank holds
the same copy, so that navigation and reads need no communication.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import errors
from .record import DatasetLayout, FileRecord

#: Why a dataset cannot be read: (error class name, message), raised when it is read.
Problem = tuple[str, str]


def raise_problem(problem: Problem) -> None:
    """Raise the error a :data:`Problem` describes."""
    name, message = problem
    cls = getattr(errors, name, errors.CorruptFileError)
    raise cls(message)


#: Where a received :class:`NodeInfo` keeps its layout until it is first used.
_WIRE = "_layout_wire"


def _no_layout() -> DatasetLayout | None:
    return None


@dataclass
class NodeInfo:
    """What every rank knows of one group or dataset.

    Sent between ranks, the layout travels as one string (:meth:`DatasetLayout.to_wire`) and
    is parsed when this rank first uses it: a rank that opens a file of P extents per dataset
    pays for the datasets it reads, not for every layout (``layout`` has no class attribute,
    so that :meth:`__getattr__` sees it missing).
    """

    kind: str  # "group" or "dataset"
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

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        layout = state.pop("layout", None)
        if layout is not None:
            state[_WIRE] = layout.to_wire()
        elif _WIRE not in state:
            state["layout"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> DatasetLayout | None:
        """``layout`` of a received node: parsed on first use."""
        if name != "layout" or _WIRE not in self.__dict__:
            raise AttributeError(name)
        wire = self.__dict__.pop(_WIRE)
        layout = self.__dict__["layout"] = DatasetLayout.from_wire(wire)
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

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {
            p[len(prefix) :].split("/", 1)[0]
            for p in self.nodes
            if p.startswith(prefix) and p != "/"
        }
        return sorted(names)

    def missing_groups(self, path: str) -> list[str]:
        """Groups to create so that ``path`` (a new object) has its parents; refuses datasets."""
        new: list[str] = []
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:depth])
            info = self.nodes.get(prefix)
            if info is None:
                new.append(prefix)
            elif info.kind != "group" and depth < len(parts):
                raise errors.ObjectExistsError(
                    f"cannot create {path}: {prefix} is a dataset, not a group"
                )
        return new

"""The plan: every write-time choice for one file, in one frozen object.

One table (:data:`PLAN_FIELDS`) declares each tunable once; it feeds the ``File`` arguments, the CLI
flags (``--subfiles``...), the environment overrides (``H5SUBFILE_SUBFILES``...) and the JSON record
stored in every file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import PlanError

GROUPING_KEYWORDS = ("node", "rank")


def parse_subfiles(value: Any) -> int | str | None:
    """Normalise ``subfiles``: a positive int, ``"node"``, ``"rank"`` or None (default)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in GROUPING_KEYWORDS:
            return text
        if not text.isdigit():
            raise PlanError(
                f"subfiles={value!r}: expected a positive integer, 'node' (one subfile per node) "
                "or 'rank' (one file per process)"
            )
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"subfiles={value!r}: expected a positive integer, 'node' or 'rank'")
    return value


def parse_positive_int(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None or value == "":
            return None
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise PlanError(f"{name}={value!r}: expected a positive integer") from None
        if isinstance(value, bool) or number < 1 or str(number) != str(value).strip():
            raise PlanError(f"{name}={value!r}: expected a positive integer")
        return number

    return parse


def parse_bool(name: str) -> Callable[[Any], bool | None]:
    def parse(value: Any) -> bool | None:
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise PlanError(f"{name}={value!r}: expected true or false")

    return parse


@dataclass(frozen=True)
class PlanField:
    """One tunable: its name, CLI flag, environment variable, help and parser."""

    name: str
    env: str
    help: str
    parse: Callable[[Any], Any]

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


PLAN_FIELDS: tuple[PlanField, ...] = (
    PlanField(
        "subfiles",
        "H5SUBFILE_SUBFILES",
        "number of subfiles (ranks in contiguous blocks), 'node' (one per node, the default), "
        "'rank' (file per process); 1 writes one conventional HDF5 file",
        parse_subfiles,
    ),
    PlanField(
        "ranks_per_subfile",
        "H5SUBFILE_RANKS_PER_SUBFILE",
        "ranks writing each subfile (the paper's subfiling factor)",
        parse_positive_int("ranks_per_subfile"),
    ),
    PlanField(
        "fsync",
        "H5SUBFILE_FSYNC",
        "fsync every file written before the master is committed (durable against power loss)",
        parse_bool("fsync"),
    ),
)


@dataclass(frozen=True)
class Plan:
    """Every write-time choice for one file.

    Parameters
    ----------
    subfiles
        ``int`` M: M subfiles, ranks in contiguous blocks; ``"node"``: one subfile per node;
        ``"rank"``: one file per process; None: the default (``"node"``), unless
        ``ranks_per_subfile`` is given.
    ranks_per_subfile
        k ranks per subfile (the paper's subfiling factor); exclusive with ``subfiles``.
    fsync
        fsync every written file before the master is committed.
    """

    subfiles: int | str | None = None
    ranks_per_subfile: int | None = None
    fsync: bool = False

    def __post_init__(self) -> None:
        if self.subfiles is not None and self.ranks_per_subfile is not None:
            raise PlanError(
                f"give either subfiles={self.subfiles!r} or ranks_per_subfile="
                f"{self.ranks_per_subfile!r}, not both"
            )

    @classmethod
    def parse(cls, env: Mapping[str, str] | None = None, **values: Any) -> Plan:
        """Build a plan from arguments; an argument left None falls back to its environment variable."""
        env = os.environ if env is None else env
        known = {field.name for field in PLAN_FIELDS}
        unknown = set(values) - known
        if unknown:
            raise PlanError(f"unknown plan field(s) {sorted(unknown)}; known: {sorted(known)}")
        parsed: dict[str, Any] = {}
        explicit_grouping = any(values.get(n) is not None for n in ("subfiles", "ranks_per_subfile"))
        for field in PLAN_FIELDS:
            value = field.parse(values.get(field.name))
            grouping_field = field.name in ("subfiles", "ranks_per_subfile")
            if value is None and not (grouping_field and explicit_grouping):
                value = field.parse(env.get(field.env))
            if value is not None:
                parsed[field.name] = value
        return cls(**parsed)

    @property
    def grouping(self) -> int | str:
        """The grouping rule actually used: an int, ``"node"``, ``"rank"`` or ``"k=<n>"``."""
        if self.ranks_per_subfile is not None:
            return f"k={self.ranks_per_subfile}"
        return "node" if self.subfiles is None else self.subfiles

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        known = {field.name for field in PLAN_FIELDS}
        return cls(**{k: v for k, v in data.items() if k in known})

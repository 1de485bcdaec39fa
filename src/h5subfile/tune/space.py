"""The tuner's search space, derived from the plan table (:data:`h5subfile.plan.PLAN_FIELDS`).

Every field with ``candidates`` is searched; fields sharing an ``axis`` (``subfiles`` and
``ranks_per_subfile``: the grouping) form one axis whose values set one of them at a time. No
value is listed here again: a new tunable needs only its ``candidates`` in the table.

Not tuned, on purpose: ``fsync`` (durability against power loss: a choice, not a speed),
``compression``, ``shuffle`` and ``chunk_size`` (they change the bytes stored and what readers
need). The tuner never changes what a file holds or how safe it is, only how it is written.

A *point* is a dict from field names to values, None meaning the field's default; the default
point (every value None) is ``Plan()``. Pure: no MPI, no I/O.

:func:`plan_from_point` refuses the points not worth trying (a buffer size without
aggregators, as many aggregators as ranks per subfile); :func:`format_space` prints the tables of
docs/TUNING.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import PlanError
from ..plan import PLAN_FIELDS, Plan, PlanField

Point = dict[str, Any]


@dataclass(frozen=True)
class Axis:
    """One choice of the search: its name, the plan fields it sets, and its values.

    Each value assigns every field of the axis (at most one of them not None); the first is
    the default.
    """

    name: str
    fields: tuple[str, ...]
    values: tuple[Point, ...]

    def labels(self) -> list[str]:
        """Each value as a short text (``"node"``, ``"ranks_per_subfile=4"``, ``"1m"``)."""
        return [
            label(value) if len(self.fields) > 1 else label(value, bare=True)
            for value in self.values
        ]


def tuned_fields() -> tuple[PlanField, ...]:
    """The plan fields the tuner searches (those with ``candidates``), in table order."""
    return tuple(field for field in PLAN_FIELDS if field.candidates is not None)


def search_space(ranks: int) -> list[Axis]:
    """The axes worth searching for a job of ``ranks`` ranks, from the plan table.

    Parameters
    ----------
    ranks
        The job's rank count (some candidates depend on it: subfiling factors up to
        ``ranks // 2``, aggregators fewer than the ranks).

    Returns
    -------
    list[Axis]
        One axis per ``axis`` name, in table order; an axis with a single value (nothing to
        try) is left out.
    """
    if ranks < 1:
        raise PlanError(f"ranks={ranks}: a job has at least one rank")
    grouped: dict[str, list[PlanField]] = {}
    for field in tuned_fields():
        grouped.setdefault(field.axis_name, []).append(field)
    axes = []
    for name, fields in grouped.items():
        names = tuple(field.name for field in fields)
        values: list[Point] = [dict.fromkeys(names)]
        for field in fields:
            assert field.candidates is not None
            for value in field.candidates(ranks):
                if value is not None:
                    values.append({**dict.fromkeys(names), field.name: value})
        if len(values) > 1:
            axes.append(Axis(name, names, tuple(values)))
    return axes


def default_point(space: list[Axis]) -> Point:
    """The point of every axis's first value: the default plan."""
    point: Point = {}
    for axis in space:
        point.update(axis.values[0])
    return point


def ranks_per_subfile(point: Mapping[str, Any], ranks: int) -> int:
    """The most ranks one subfile of ``point`` can have (one node: every rank, by default)."""
    subfiles = point.get("subfiles")
    if point.get("ranks_per_subfile") is not None:
        return min(int(point["ranks_per_subfile"]), ranks)
    if subfiles == "rank":
        return 1
    if isinstance(subfiles, int):
        return -(-ranks // subfiles)
    return ranks


def problem(point: Mapping[str, Any], ranks: int) -> str | None:
    """Why ``point`` is not worth trying at ``ranks`` ranks, or None if it is."""
    if point.get("subfiles") is not None and point.get("ranks_per_subfile") is not None:
        return "subfiles and ranks_per_subfile are one choice: set one of them"
    aggregators = point.get("aggregators")
    if point.get("buffer_size") is not None and aggregators is None:
        return "buffer_size only matters with aggregators (two-phase I/O)"
    if aggregators is not None and aggregators >= ranks_per_subfile(point, ranks):
        return (
            f"aggregators={aggregators} with at most {ranks_per_subfile(point, ranks)} rank(s) "
            "per subfile: every rank would write, after an exchange"
        )
    return None


def plan_from_point(point: Mapping[str, Any], ranks: int) -> Plan:
    """The :class:`Plan` of ``point``; raises :class:`PlanError` for a point not worth trying.

    Parameters
    ----------
    point
        Field names to values (None: the default); fields not named keep their defaults.
    ranks
        The job's rank count.
    """
    reason = problem(point, ranks)
    if reason is not None:
        raise PlanError(f"plan {point_key(point)} at {ranks} ranks: {reason}")
    return Plan.from_dict(compact(point))


def compact(point: Mapping[str, Any]) -> Point:
    """``point`` without its default (None) values: the fields a plan sets."""
    return {name: value for name, value in point.items() if value is not None}


def point_key(point: Mapping[str, Any]) -> str:
    """A canonical text of ``point``: ``"aggregators=1,alignment=1048576"``; ``"default"``."""
    return (
        ",".join(f"{name}={value}" for name, value in sorted(compact(point).items())) or "default"
    )


def exhaustive(space: list[Axis], ranks: int) -> list[Point]:
    """Every point of ``space`` worth trying at ``ranks`` ranks, the default first."""
    points = []
    for combination in itertools.product(*(axis.values for axis in space)):
        point: Point = {}
        for value in combination:
            point.update(value)
        if problem(point, ranks) is None:
            points.append(point)
    return points


def label(point: Mapping[str, Any], bare: bool = False) -> str:
    """A value of one axis as text: byte sizes as ``64k``/``4m``, None as the default's name."""
    fields = {field.name: field for field in PLAN_FIELDS}
    given = compact(point)
    if not given:
        names = [name for name in point if name in fields]
        return fields[names[0]].default_label if names else "default"
    texts = []
    for name, value in given.items():
        text = size_label(value) if name in BYTE_FIELDS else str(value)
        texts.append(text if bare else f"{name}={text}")
    return ",".join(texts)


#: Tuned fields whose values are byte counts (shown as 64k, 1m, ...).
BYTE_FIELDS = ("buffer_size", "alignment", "transfer_size")


def size_label(value: int) -> str:
    """``65536`` -> ``"64k"``, ``1048576`` -> ``"1m"`` (IOR's binary suffixes)."""
    for suffix, scale in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if value % scale == 0:
            return f"{value // scale}{suffix}"
    return str(value)


def format_space(ranks: int) -> str:
    """The search space at ``ranks`` ranks as a Markdown table (docs/TUNING.md shows it)."""
    space = search_space(ranks)
    lines = [
        f"Search space at {ranks} ranks ({len(exhaustive(space, ranks))} points worth trying):",
        "",
        "| axis | plan fields | values (default first) |",
        "|---|---|---|",
    ]
    for axis in space:
        fields = ", ".join(f"`{name}`" for name in axis.fields)
        lines.append(f"| {axis.name} | {fields} | {', '.join(axis.labels())} |")
    return "\n".join(lines)

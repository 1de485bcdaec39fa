"""``plan="auto"``: the plan of the tuning profile matching this job (docs/TUNING.md), found on
rank 0 from the file system of the file's folder, its mount and the job's rank and node counts.

Arguments given explicitly win over the profile's fields (a grouping given replaces the
profile's grouping); the profile's fields win over the ``H5SUBFILE_*`` environment variables.
Without a matching profile the plan is what it would be without ``plan="auto"``. The reason
(which profile, or that none matched) is recorded in the write session's record.
"""

from __future__ import annotations

import os
from typing import Any

from mpi4py import MPI

from ..errors import PlanError
from ..io.filesystem import probe
from ..io.tuning_profiles import auto_plan
from ..mpi.collective import root_only
from ..mpi.nodes import node_of_ranks
from ..plan import READ_FIELDS

AUTO = "auto"
GROUPING = ("subfiles", "ranks_per_subfile")


def check_choice(choice: Any) -> None:
    """``plan=`` takes ``"auto"`` or None (the plan given by the other arguments)."""
    if choice is not None and choice != AUTO:
        raise PlanError(
            f"plan={choice!r}: expected 'auto' (the matching tuning profile, docs/TUNING.md) "
            "or None; give plan fields as arguments (subfiles=..., aggregators=...)"
        )


def profile_fields(path: str, ranks: int, nodes: int) -> tuple[dict[str, Any], str]:
    """Rank 0: the matching profile's plan fields (those set) and the reason."""
    fs = probe(os.path.dirname(os.path.abspath(path)) or ".")
    plan, reason = auto_plan(fs.name, fs.mount, ranks, nodes)
    if plan is None:
        return {}, reason
    return {k: v for k, v in plan.to_dict().items() if v not in (None, False)}, reason


def merge(profile: dict[str, Any], given: dict[str, Any], mode: str) -> dict[str, Any]:
    """The plan fields to parse: ``given`` (explicit arguments), filled in from ``profile``."""
    if mode == "r":
        profile = {k: v for k, v in profile.items() if k in READ_FIELDS}
    if any(given.get(name) is not None for name in GROUPING):
        profile = {k: v for k, v in profile.items() if k not in GROUPING}
    merged = dict(given)
    for name, value in profile.items():
        if merged.get(name) is None:
            merged[name] = value
    return merged


def resolve(comm: MPI.Comm, path: str, mode: str, given: dict[str, Any]) -> tuple[dict, str]:
    """Collective: the plan fields of ``plan="auto"`` and the reason, the same on every rank."""
    nodes = len(set(node_of_ranks(comm)))
    profile, reason = root_only(comm, lambda: profile_fields(path, comm.size, nodes))
    return merge(profile, given, mode), reason

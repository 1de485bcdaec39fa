"""``plan="auto"``: the plan of the tuning profile matching this job (docs/TUNING.md), found on
rank 0 from the file system of the file's folder, its mount and the job's rank and node counts.

Arguments given explicitly win over the profile's fields (a grouping given replaces the
profile's grouping); the profile's fields win over the ``H5SUBFILE_*`` environment variables.
A profile is used only if the plan it makes fits this job (:func:`check_fit`: a profile tuned
for 64 ranks may ask for more subfiles than a 2-rank job has ranks); else the next that fits.
Without one the plan is what it would be without ``plan="auto"``. The reason (which profile,
or that none fitted, and the better ones that did not fit) is recorded in the write session's
record. A write on Lustre also stripes the subfile folder and aligns the datasets to the
stripe size.

:func:`resolve` is collective, and runs only when every rank asked for ``plan="auto"`` (the
open's agreement round compares ``plan=``); the nodes it locates for the profile's node count
also make the grouping, so the open makes one node round (two only when aggregators need every
rank's node on every rank).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from mpi4py import MPI

from ..errors import PlanError
from ..io.filesystem import FileSystem, lustre_setup, probe
from ..io.filters import resolve_filters
from ..io.tuning_profiles import auto_plan
from ..layout.grouping import plan_groups
from ..layout.names import subfile_folder
from ..mpi.collective import root_only
from ..mpi.nodes import Nodes, locate_nodes
from ..plan import READ_FIELDS, Plan

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
    """Rank 0: the plan fields (those set) of the profile a write with no fields given would
    take, and the reason."""
    fields, reason, _ = _profile(path, "w", {}, spread(ranks, nodes))
    return fields, reason


def spread(ranks: int, nodes: int) -> tuple[int, ...]:
    """Each rank's node when only the counts are known: ``nodes`` nodes of consecutive ranks,
    as even as they can be."""
    return tuple(rank * nodes // ranks for rank in range(ranks))


def check_fit(
    profile: dict[str, Any], given: dict[str, Any], mode: str, of_rank: Sequence[int]
) -> None:
    """Raise :class:`PlanError` unless the plan ``profile``'s fields make with ``given`` (as
    :func:`merge` makes it) is one this job can use: it parses, with the environment, as the
    open parses it; a write's plan groups the job's ranks (``of_rank``: each rank's node),
    as :func:`plan_groups` will (no more subfiles than ranks, no more aggregators than the
    smallest subfile's ranks), and names a compression filter this machine has, as new
    datasets will need."""
    plan = Plan.parse(**merge(profile, given, mode))
    if mode != "r":
        plan_groups(len(of_rank), plan, of_rank)
        resolve_filters(plan.compression, None, plan.shuffle)


def _profile(
    path: str, mode: str, given: dict[str, Any], of_rank: Sequence[int]
) -> tuple[dict[str, Any], str, FileSystem]:
    fs = probe(os.path.dirname(os.path.abspath(path)) or ".")

    def fits(plan: Plan) -> None:
        check_fit(plan.set_fields(), given, mode, of_rank)

    ranks, nodes = len(of_rank), len(set(of_rank))
    plan, reason = auto_plan(fs.name, fs.mount, ranks, nodes, fits=fits)
    if plan is None:
        return {}, reason, fs
    return plan.set_fields(), reason, fs


def subfile_count(fields: dict[str, Any], ranks: int, nodes: int) -> int:
    """How many subfiles a plan's grouping makes (before ``plan_groups`` runs)."""
    subfiles, per = fields.get("subfiles"), fields.get("ranks_per_subfile")
    if per:
        return -(-ranks // int(per))
    if subfiles == "rank":
        return ranks
    if isinstance(subfiles, int):
        return min(subfiles, ranks)
    return nodes  # "node", the default


def stripe_lustre(
    fs: FileSystem,
    path: str,
    fields: dict[str, Any],
    ranks: int,
    nodes: int,
    run: Callable[[list[str]], Any] | None = None,
) -> str:
    """Rank 0, a write on Lustre: stripe the subfile folder (``lfs setstripe``: one stripe per
    subfile, stripes of :func:`stripe_size_for` a 32 MiB block, docs/TUNING.md) and align the
    datasets to the stripe size unless ``alignment`` is given (``fields`` is updated). Returns
    what was done, for the record; nothing on other file systems."""
    if fs.name != "lustre":
        return ""
    setup = lustre_setup(fs, subfile_folder(path), subfile_count(fields, ranks, nodes), 32 << 20)
    if fields.get("alignment") is None:
        fields["alignment"] = setup["alignment"]
    command = setup["command"]
    if shutil.which(command[0]) is None:
        return f"Lustre: {command[0]} not found, the subfile folder's stripes left as they are"
    os.makedirs(command[-1], exist_ok=True)
    done = (run or subprocess.run)(command)
    if getattr(done, "returncode", 0) != 0:
        raise PlanError(f"Lustre: {' '.join(command)} failed (exit status {done.returncode})")
    return f"Lustre: {' '.join(command)}"


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


def decide(
    path: str,
    mode: str,
    given: dict[str, Any],
    ranks: int,
    nodes: int,
    of_rank: Sequence[int] | None = None,
) -> tuple[dict, str]:
    """Rank 0: the plan fields of ``plan="auto"`` and the reason (a write on Lustre also
    stripes the subfile folder: :func:`stripe_lustre`). ``of_rank``: each rank's node, as
    located (default: :func:`spread`)."""
    of_rank = spread(ranks, nodes) if of_rank is None else of_rank
    profile, reason, fs = _profile(path, mode, given, of_rank)
    fields = merge(profile, given, mode)
    if mode != "r":
        done = stripe_lustre(fs, path, fields, ranks, nodes)
        reason += f"; {done}" if done else ""
    return fields, reason


def resolve(
    comm: MPI.Comm, path: str, mode: str, given: dict[str, Any], nodes: Nodes | None = None
) -> tuple[dict, str]:
    """Collective: the plan fields of ``plan="auto"`` and the reason, the same on every rank.
    ``nodes``: the ranks' nodes when the caller located them already (on every rank or none)."""
    located = nodes or locate_nodes(comm)  # rank 0 knows every rank's node (of_rank)
    fields, reason = root_only(
        comm, lambda: decide(path, mode, given, comm.size, located.count, located.of_rank)
    )
    return fields, reason

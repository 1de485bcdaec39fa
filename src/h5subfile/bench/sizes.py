"""Dataset creation at any rank count, on paper: rank 0's plan and the sizes of what it sends.

The VPIC-IO pattern (eight 1-D datasets, ``particles`` per rank at the prefix sum) is planned by
the engine's own pure planner (:func:`~h5subfile.engine.creation_plan.plan_datasets`, which runs
:func:`~h5subfile.layout.planning.place_dataset` per dataset) without MPI traffic or files. The
sizes are those of the real messages as mpi4py pickles them (``MPI.pickle``) and of the real
layout records (``DatasetLayout.to_json``); only the byte offsets and checksums, which the
leaders and the writing ranks supply, are stand-ins of the right width (see :func:`records`).
Used by ``benchmarks/plan_sizes.py`` and ``tests/unit/test_million.py``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from ..engine.creation_plan import CreationPlan, RequestedDataset, own_views, plan_datasets
from ..engine.messages import DatasetRequest, OwnView, RequestKind
from ..layout.blockmap import BlockMap
from ..layout.blocks import Block
from ..layout.catalog import Catalog, NodeInfo
from ..layout.grouping import Grouping, plan_groups
from ..layout.integrity import PieceSum, checksum
from ..layout.names import subfile_relpath
from ..layout.planning import vds_sources
from ..layout.record import DatasetLayout, FileRecord, Session, StoredExtent
from ..layout.selection import partition
from ..layout.sharing import ExtentIndex, Identities, broadcast_limit, touched_layout
from ..layout.vpic import FIELDS
from ..plan import Plan

MASTER = "run.h5"
SESSION_ID = "3f2a9c1e5d0b4e7a9a61c2f08d3b5e77"
#: Where a subfile's first dataset's data starts: after the 64 KiB metadata block and the
#: 128-byte identity (io/h5.META_BLOCK_SIZE, layout/integrity), as the leaders report it.
FIRST_OFFSET = 69632


def vpic_requests(
    ranks: int, particles: int, step: int = 0, fields: int = len(FIELDS)
) -> list[RequestedDataset]:
    """One VPIC-IO step (its first ``fields`` datasets) as rank 0 holds it once the ranks'
    requests agree: rank 0's request per field and every rank's block (``particles`` each,
    at the prefix sum)."""
    blocks = BlockMap.prefix(np.full(ranks, particles, dtype=np.int64), ())
    requested = []
    for name, dtype in FIELDS[:fields]:
        request = DatasetRequest(
            f"/Timestep_{step}/{name}",
            np.dtype(dtype),
            RequestKind.PREFIX,
            None,
            Block((0,), (particles,)),
        )
        requested.append(RequestedDataset(request, (ranks * particles,), blocks))
    return requested


@dataclass
class PlannedStep:
    """A planned VPIC-IO step: the grouping, rank 0's creation plan, and seconds of CPU;
    ``own``: every rank's own views, sent with its assignment when each rank creates the
    extent it holds (``write_datasets`` writes the step: :func:`~h5subfile.engine.creation_plan.own_views`)."""

    grouping: Grouping
    creation: CreationPlan
    requested: list[RequestedDataset]
    seconds: dict[str, float]
    own: list[tuple[OwnView, ...]] | None = None


def plan_vpic(ranks: int, plan: Plan, particles: int, fields: int = len(FIELDS)) -> PlannedStep:
    """Group ``ranks`` as ``plan`` says and plan one VPIC-IO step (CPU seconds per phase)."""
    seconds: dict[str, float] = {}
    started = time.process_time()
    grouping = plan_groups(ranks, plan)
    grouping.members  # noqa: B018 - computed here (the session does it at open)
    seconds["grouping"] = time.process_time() - started
    started = time.process_time()
    requested = vpic_requests(ranks, particles, fields=fields)
    seconds["block map"] = time.process_time() - started
    started = time.process_time()
    catalog = Catalog({"/": NodeInfo("group"), "/Timestep_0": NodeInfo("group")}, FileRecord())
    creation = plan_datasets(
        MASTER,
        catalog,
        grouping,
        plan,
        lambda group: subfile_relpath(MASTER, 0, SESSION_ID, group),
        requested,
    )
    seconds["extents and tasks"] = time.process_time() - started
    started = time.process_time()
    own = own_views(creation, 0, plan)
    seconds["own views"] = time.process_time() - started
    return PlannedStep(grouping, creation, requested, seconds, own)


def message_bytes(message: Any) -> int:
    """Bytes of ``message`` as mpi4py sends a Python object (its pickle)."""
    return len(MPI.pickle.dumps(message))


def scatter_sizes(step: PlannedStep, ranks: Iterable[int]) -> dict[int, int]:
    """Bytes rank 0 scatters to each of ``ranks`` (its ``RankAssignment``, with its own views
    when the step has them)."""
    own = step.own
    return {
        rank: message_bytes(step.creation.assignment(rank, None if own is None else own[rank]))
        for rank in ranks
    }


def gather_bytes(step: PlannedStep) -> int:
    """Bytes one rank sends rank 0 (its requests, as the creation's agreement round carries them); the same
    for every rank here (every rank has as many particles)."""
    return message_bytes(([one.request for one in step.requested], None))


def records(step: PlannedStep, pieces: bool, datasets: int | None = None) -> list[DatasetLayout]:
    """The layout record of each dataset (the first ``datasets``): at creation (``pieces``
    False) or after close, with a checksum per rank's block (``pieces`` True). Offsets: each subfile holds the step's
    datasets one after another from :data:`FIRST_OFFSET`; checksums: 16 hex digits, as
    xxh3_64 gives them (the JSON has the same length whatever the digits)."""
    digits = checksum(b"")
    next_offset: dict[str, int] = {}
    made = []
    for dataset in step.creation.datasets[:datasets]:
        itemsize = dataset.dtype.itemsize
        stored = []
        for extent in dataset.extents:
            offset = next_offset.get(extent.file, FIRST_OFFSET)
            next_offset[extent.file] = offset + extent.nbytes(itemsize)
            found: tuple[PieceSum, ...] = ()
            if pieces:
                found = tuple(_pieces(step, dataset.path, extent, digits))
            stored.append(dataclasses.replace(extent, offset=offset, pieces=found))
        made.append(DatasetLayout(0, tuple(stored), dtype=dataset.dtype.str, checksum="xxh3_64"))
    return made


def _pieces(step: PlannedStep, path: str, extent: StoredExtent, digits: str) -> Iterable[PieceSum]:
    placed = next(p for p in step.creation.placed if p.dataset.path == path)
    blocks = placed.placement.blocks
    for rank in extent.ranks:
        start, count = blocks.starts[rank].tolist(), blocks.counts[rank].tolist()
        yield PieceSum(tuple(start), tuple(count), digits)


def root_record(step: PlannedStep, plan: Plan, ranks: int, subfile_bytes: int) -> FileRecord:
    """The root record (``h5subfile`` attribute) after this one session, every subfile
    ``subfile_bytes`` long."""
    names = [subfile_relpath(MASTER, 0, SESSION_ID, g) for g in range(step.grouping.ngroups)]
    info = {name: {"bytes": subfile_bytes, "identity_offset": 65536} for name in names}
    session = Session(
        0,
        "w",
        ranks,
        plan.to_dict(),
        step.grouping.describe(),
        names,
        "0.1.0",
        "2026-11-23T12:00:00+00:00",
        "2026-11-23T12:00:09+00:00",
        uuid=SESSION_ID,
        subfile_info=info,
    )
    return FileRecord([session])


def broadcast_bytes(step: PlannedStep, layouts: Sequence[DatasetLayout]) -> int:
    """Bytes rank 0 broadcasts after publishing (what every rank learns of the new datasets)."""
    nodes = {
        d.path: NodeInfo("dataset", {}, d.shape, d.dtype, layout, storage="")
        for d, layout in zip(step.creation.datasets, layouts)
    }
    return message_bytes(nodes)


def read_open_bytes(step: PlannedStep, layouts: Sequence[DatasetLayout], record: FileRecord) -> int:
    """Bytes rank 0 broadcasts to every rank when the file is opened for reading: the
    catalogue without the layouts of more than ``sharing.broadcast_limit()`` extents, and the
    identities of the broadcast layouts' subfiles only (layout/sharing.py)."""
    nodes: dict[str, NodeInfo] = {"/": NodeInfo("group")}
    for d, layout in zip(step.creation.datasets, layouts):
        nodes[d.path] = NodeInfo("dataset", {}, d.shape, d.dtype, layout, record_sha="0" * 64)
    shas = {s.id: "0" * 64 for s in record.sessions}
    catalog = Catalog(nodes, record, session_shas=shas)
    return message_bytes((True, catalog.for_readers(broadcast_limit())))


def read_share_bytes(
    step: PlannedStep,
    layouts: Sequence[DatasetLayout],
    record: FileRecord,
    readers: int,
    sample: Iterable[int],
) -> dict[int, int]:
    """Bytes rank 0 sends each reader of ``sample`` (of ``readers``) for a collective read of its
    BD-CATS share of every dataset of ``layouts``: the extents the share touches and their
    subfiles' identities, as :func:`engine.read.sent_layout` sends them."""
    sent: dict[int, int] = {}
    indexes = [ExtentIndex(layout.extents) for layout in layouts]
    identities = Identities(record)
    for reader in sample:
        total = 0
        for d, layout, index in zip(step.creation.datasets, layouts, indexes):
            lo, hi = partition(d.shape[0], readers, reader)
            part = touched_layout(layout, [Block((lo,), (hi - lo,))], index)
            files = {e.file for e in part.extents}
            total += message_bytes((True, (part, identities.of(files))))
        sent[reader] = total
    return sent


def vds_mappings(step: PlannedStep) -> list[int]:
    """The number of VDS mappings of each dataset."""
    return [len(vds_sources(d.extents)) for d in step.creation.datasets]

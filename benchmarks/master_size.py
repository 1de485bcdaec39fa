"""The master's size and open time against its number of VDS mappings.

For each configuration (ranks, grouping) one VPIC-IO step is planned by the engine's planner
(``h5subfile.bench.sizes``) and its first dataset (``/Timestep_0/x``, 1 Mi float32 particles
per rank) is written into a master exactly as rank 0 publishes it (``io/h5.py``: the file with
our version bounds and metadata block, the virtual dataset over every extent, the layout record
as it is after close, with a checksum per rank's block, and the root record). The sources are
not written: HDF5 opens a virtual dataset without them (a read returns fill values).

Timed in CPU seconds of this process, each a median of ``--repeats`` runs (min-max), on the
page-cached file:

- ``open``: ``h5py.File(path, "r")`` and the dataset opened, its shape and dtype read;
- ``first``: reading its first element (HDF5 resolves the mappings);
- ``facts``: what h5subfile's open asks HDF5 of the dataset (``io/h5.hdf5_facts``: every mapping);
- ``validate``: the record parsed and cross-checked against those facts
  (``DatasetLayout.from_json`` + ``layout/validate.layout_problem``).

Usage: ``.venv/bin/python benchmarks/master_size.py [--repeats 5] [--json docs/master-size.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import h5py

from h5subfile.bench import sizes
from h5subfile.io.h5 import (
    META_BLOCK_SIZE,
    Groups,
    create_file,
    create_virtual_dataset,
    hdf5_facts,
    write_text_attr,
)
from h5subfile.layout.planning import vds_sources
from h5subfile.layout.record import LAYOUT_ATTR, ROOT_ATTR, DatasetLayout, FileRecord
from h5subfile.layout.validate import layout_problem
from h5subfile.plan import Plan

PARTICLES = 1 << 20
CONFIGS = [
    (100, "file per process", Plan(subfiles="rank")),
    (1_000, "file per process", Plan(subfiles="rank")),
    (10_000, "file per process", Plan(subfiles="rank")),
    (10_000, "16 ranks per subfile", Plan(ranks_per_subfile=16)),
    (10_000, "100 ranks per subfile", Plan(ranks_per_subfile=100)),
]


def write_master(path: str, ranks: int, plan: Plan) -> tuple[int, int]:
    """Write the master of one dataset; returns (mappings, record bytes)."""
    step = sizes.plan_vpic(ranks, plan, PARTICLES)
    dataset = step.creation.datasets[0]
    layout = sizes.records(step, pieces=True)[0]
    text = layout.to_json()
    h5 = create_file(path, None, META_BLOCK_SIZE)
    with h5:
        groups = Groups(h5)
        sources = vds_sources(layout.extents)
        create_virtual_dataset(groups, dataset.path, dataset.shape, dataset.dtype, sources)
        write_text_attr(h5py.h5o.open(h5.id, dataset.path.encode()), LAYOUT_ATTR, text)
        root = sizes.root_record(step, plan, ranks, 2 * PARTICLES * 4 * 8)
        write_text_attr(h5, ROOT_ATTR, root.to_json())
    return len(sources), len(text)


def timed(action: Callable[[], Any], repeats: int) -> list[float]:
    """CPU seconds of each of ``repeats`` runs (everything timed here runs on the CPU: the
    file is in the page cache), so that other jobs on a shared machine stretch it less than
    wall time."""
    found = []
    for _ in range(repeats):
        started = time.process_time()
        action()
        found.append(time.process_time() - started)
    return found


def measure(path: str, repeats: int) -> dict[str, list[float]]:
    name = "/Timestep_0/x"

    def open_dataset() -> None:
        with h5py.File(path, "r") as h5:
            d = h5[name]
            d.shape, d.dtype  # noqa: B018

    def first_element() -> None:
        with h5py.File(path, "r") as h5:
            h5[name][0]  # noqa: B018

    with h5py.File(path, "r") as h5:
        obj = h5[name]
        text = obj.attrs[LAYOUT_ATTR].decode()
        record = FileRecord.from_json(h5.attrs[ROOT_ATTR].decode(), path)
        facts = hdf5_facts(obj)

        def validate() -> None:
            layout = DatasetLayout.from_json(text, name)
            problem = layout_problem(name, text, layout, facts, record.sessions)
            assert problem is None, problem

        result = {
            "facts": timed(lambda: hdf5_facts(obj), repeats),
            "validate": timed(validate, repeats),
        }
    result["open"] = timed(open_dataset, repeats)
    result["first"] = timed(first_element, repeats)
    return result


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for ranks, grouping, plan in CONFIGS:
            path = os.path.join(folder, f"m{ranks}-{len(rows)}.h5")
            mappings, record = write_master(path, ranks, plan)
            times = {k: summary(v) for k, v in measure(path, args.repeats).items()}
            rows.append(
                {
                    "ranks": ranks,
                    "grouping": grouping,
                    "mappings": mappings,
                    "master_bytes": os.path.getsize(path),
                    "record_bytes": record,
                    "seconds": times,
                }
            )
    print(
        "| ranks | grouping | VDS mappings | master bytes | layout record bytes | "
        "open ms CPU | first element ms CPU | HDF5 facts ms CPU | record checks ms CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [
            f"{1000 * row['seconds'][k]['median']:.1f} "
            f"({1000 * row['seconds'][k]['min']:.1f}-{1000 * row['seconds'][k]['max']:.1f})"
            for k in ("open", "first", "facts", "validate")
        ]
        print(
            f"| {row['ranks']} | {row['grouping']} | {row['mappings']} | "
            f"{row['master_bytes']} | {row['record_bytes']} | " + " | ".join(cells) + " |"
        )
    if args.json:
        machine = {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "h5py": h5py.version.version,
            "hdf5": h5py.version.hdf5_version,
        }
        with open(args.json, "w") as out:
            json.dump({"machine": machine, "repeats": args.repeats, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()

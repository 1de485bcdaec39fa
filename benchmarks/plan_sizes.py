"""Sizes at 10K and 1M ranks: what rank 0 plans, gathers, scatters and broadcasts when a VPIC-IO
step (8 datasets of 1 Mi particles per rank) is created, the layout records it writes, and what
a reading rank of the same count is sent (the catalogue at open, the extents of its share).

Computed by the engine's own pure planner (``h5subfile.bench.sizes``; no MPI traffic, no files):
messages are sized as mpi4py pickles them, records as ``DatasetLayout.to_json`` writes them.
Each configuration runs in its own process (peak memory is its own). Every rank's message is
sized at 10K ranks; at 1M ranks a sample (every leader up to 2,000 of them, the last 500 ranks,
500 others) gives the largest, and the total is estimated from the sample's means (leaders and
other ranks apart). File per process at 1M ranks plans one dataset, not eight (eight would hold
8M extents in memory, ~10 GB): its per-step numbers are that dataset's times 8 where marked.

Usage: ``.venv/bin/python benchmarks/plan_sizes.py [--json docs/plan-sizes.json]``
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from typing import Any

CONFIGS = [
    (10_000, "file per process", {"subfiles": "rank"}, 8),
    (10_000, "16 ranks per subfile", {"ranks_per_subfile": 16}, 8),
    (1_000_000, "file per process", {"subfiles": "rank"}, 1),
    (1_000_000, "16 ranks per subfile", {"ranks_per_subfile": 16}, 8),
    (1_000_000, "100 ranks per subfile (10,000 subfiles)", {"ranks_per_subfile": 100}, 8),
]


def one(ranks: int, plan_args: dict[str, Any], fields: int) -> dict[str, Any]:
    """Plan one configuration in this process and size everything."""
    from h5subfile.bench import sizes
    from h5subfile.plan import Plan

    plan = Plan(**plan_args)
    started = time.process_time()
    step = sizes.plan_vpic(ranks, plan, 1 << 20, fields=fields)
    layouts = sizes.records(step, pieces=False)
    record = [len(r.to_json()) for r in layouts]
    planning = time.process_time() - started
    leaders = set(step.grouping.leaders)
    if ranks <= 10_000:
        sample = list(range(ranks))
    else:
        pick = random.Random(20261123)
        sample = sorted(
            set(sorted(leaders)[:: max(1, len(leaders) // 2000)])
            | set(range(ranks - 500, ranks))
            | set(pick.sample(range(ranks), 500))
        )
    started = time.perf_counter()
    scatter = sizes.scatter_sizes(step, sample)
    per_message = (time.perf_counter() - started) / len(sample)
    lead = [n for r, n in scatter.items() if r in leaders]
    rest = [n for r, n in scatter.items() if r not in leaders]
    total = len(leaders) * (sum(lead) / len(lead)) if lead else 0.0
    total += (ranks - len(leaders)) * (sum(rest) / len(rest)) if rest else 0.0
    started = time.process_time()
    closed_layouts = sizes.records(step, pieces=True, datasets=1)
    closed = len(closed_layouts[0].to_json())
    pieces_seconds = time.process_time() - started
    root = sizes.root_record(
        step, plan, ranks, 2 * (1 << 20) * 4 * 8 * ranks // step.grouping.ngroups
    )
    readers = sample if ranks <= 10_000 else sample[:: max(1, len(sample) // 1000)]
    read_sent = sizes.read_share_bytes(step, closed_layouts, root, ranks, readers)
    return {
        "ranks": ranks,
        "datasets_planned": fields,
        "subfiles": step.grouping.ngroups,
        "planning_cpu_s": planning,
        "phases_cpu_s": step.seconds,
        "mappings_per_dataset": sizes.vds_mappings(step)[0],
        "gather_per_rank": sizes.gather_bytes(step),
        "scatter_max_other": max(rest, default=0),
        "scatter_max_leader": max(lead, default=0),
        "scatter_total": total if ranks > 10_000 else float(sum(scatter.values())),
        "scatter_total_exact": ranks <= 10_000,
        "scatter_seconds_per_rank": per_message,
        "broadcast_per_rank": sizes.broadcast_bytes(step, layouts),
        "record_at_creation": record[0],
        "record_after_close": closed,
        "record_after_close_cpu_s": pieces_seconds,
        "root_record": len(root.to_json()),
        "read_open_broadcast": sizes.read_open_bytes(step, layouts, root),
        "read_sent_max": max(read_sent.values()),
        "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def mib(n: float) -> str:
    return (
        f"{n / 2**20:.1f} MiB"
        if n >= 2**20
        else f"{n / 1024:.1f} KiB"
        if n >= 1024
        else f"{n:.0f} B"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        ranks, plan_args, fields = json.loads(args.one)
        print(json.dumps(one(ranks, plan_args, fields)))
        return
    rows = []
    for ranks, label, plan_args, fields in CONFIGS:
        out = subprocess.run(
            [sys.executable, __file__, "--one", json.dumps([ranks, plan_args, fields])],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append({"grouping": label, **json.loads(out.stdout)})
        print(label, ranks, "done", file=sys.stderr)
    print(
        "| ranks | grouping | subfiles | planner CPU s | peak | mappings / dataset | "
        "gathered per rank | scattered: other rank / leader (max) | scattered total | "
        "broadcast per rank | record at creation / after close (1 dataset) | root record | "
        "read: broadcast at open / sent per reader, 1 dataset (max) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        note = "" if r["datasets_planned"] == 8 else " (1 dataset)"
        print(
            f"| {r['ranks']:,} | {r['grouping']}{note} | {r['subfiles']:,} | "
            f"{r['planning_cpu_s']:.1f} | {mib(r['peak_bytes'])} | {r['mappings_per_dataset']:,} | "
            f"{mib(r['gather_per_rank'])} | {mib(r['scatter_max_other'])} / "
            f"{mib(r['scatter_max_leader'])} | {mib(r['scatter_total'])}"
            f"{'' if r['scatter_total_exact'] else ' (est.)'} | {mib(r['broadcast_per_rank'])} | "
            f"{mib(r['record_at_creation'])} / {mib(r['record_after_close'])} | "
            f"{mib(r['root_record'])} | {mib(r['read_open_broadcast'])} / "
            f"{mib(r['read_sent_max'])} |"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()

"""Datasets without declared blocks against declared blocks (docs/BENCHMARKS.md, "Datasets
without declared blocks").

Three measurements:

- **VPIC-IO write, h5py's way.** One MPI job (``interleave.py``) alternates, in rotating
  order, the VPIC write as a parallel h5py program writes it (``vpic --style
  h5py-collective``: each step's datasets created with their global shape alone, each rank's
  slab written inside ``with d.collective:``, a call per dataset: B) with the same calls
  declaring blocks (``--style blocks-each``: ``create_datasets`` with ``start``/``count``,
  then ``d.write`` per dataset: A, and A' for the null comparison), and with the block API's
  fastest form, one ``write_datasets`` call per step (D). Speed ratio: A's time / B's per
  round (at least 0.95: the target), and D's / B's.
- **Round-robin rows, independent writes.** One MPI job alternates rank r of P writing rows
  r, r + P, ... of a dataset without blocks, one ``d[i] = row`` each (B), with each rank
  writing as many rows of the same size into its declared block of consecutive rows (A, A').
- **The master of a round-robin file at 64 ranks** (oversubscribed; small rows): written by
  h5subfile, one strided mapping per rank, against the same data mapped one row per mapping
  (a virtual dataset made with h5py over h5subfile's own subfiles, as a layout without
  strided pieces would be): the master's size, opening it for reading with h5subfile (rank
  0's scan and checks) and plain h5py opening it and reading it whole, medians of repeats.

Run (2 ranks: the machine's cores; the JSON feeds ``benchmarks/report.py``):

    .venv/bin/python benchmarks/undeclared.py --ranks 2 --rounds 11 --json docs/undeclared.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interleave import begin, cell, run_job, save, scratch, summarise  # noqa: E402

from h5subfile.mpi.launch import mpiexec  # noqa: E402

TITLE = "Datasets without declared blocks: h5py's programs against declared blocks"
VPIC_VARIANTS = (
    "blocks, a call per dataset",
    "h5py collective",
    "blocks'",
    "blocks, a call per step",
)
VPIC_CHANGES = [
    {"plan": {"style": "blocks-each"}},
    {"plan": {"style": "h5py-collective"}},
    {"plan": {"style": "blocks-each"}},
    {},
]
ROWS_VARIANTS = ("declared rows", "round-robin rows", "declared rows'")
#: speed of B over A per round (A's time / B's), the null comparison (A / A'), and B against
#: the block API's fastest form, one write_datasets call per step (D's time / B's)
RATIOS = [
    ("blocks / h5py", 0, 1),
    ("null: blocks / blocks'", 0, 2),
    ("one call per step / h5py", 3, 1),
]
ROWS_SPEED, ROWS_NULL = "declared / round-robin", "null: declared / declared'"
TARGET = 0.95
PLANS = {"default": {}, "rank": {"subfiles": "rank"}}

#: Run by every rank: folder, rows per rank, row bytes, rounds, plan (JSON). Prints, on rank
#: 0, [round, variant, observed seconds] rows.
ROWS_JOB = """
import json, os, shutil, sys, time
import numpy as np
from mpi4py import MPI
import h5subfile as hs
from h5subfile.mpi.collective import barrier

comm = MPI.COMM_WORLD
folder, rows, width, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) // 8, int(sys.argv[4])
plan = json.loads(sys.argv[5])
size, rank = comm.size, comm.rank
data = np.random.default_rng(rank).random((rows, width))


def one(name, variant):
    path = os.path.join(folder, name, "rows.h5")
    if rank == 0:
        os.makedirs(os.path.dirname(path))
    barrier(comm)
    started = time.perf_counter()
    with hs.File(path, "w", **plan) as f:
        if variant == 1:  # round robin, no blocks: rows rank, rank + size, ...
            d = f.create_dataset("rows", (rows * size, width), "f8")
            for k, i in enumerate(range(rank, rows * size, size)):
                d[i] = data[k]
        else:  # each rank's block of consecutive rows, written row by row
            d = f.create_dataset("rows", (rows * size, width), "f8", start=(rows * rank, 0),
                                 count=(rows, width))
            for k in range(rows):
                d[rows * rank + k] = data[k]
    took = comm.allreduce(time.perf_counter() - started, op=MPI.MAX)
    if rank == 0:
        shutil.rmtree(os.path.dirname(path))
        os.sync()
    barrier(comm)
    return took


one("warm-up", 0)
found = []
for round_ in range(rounds):
    order = [(round_ + step) % 3 for step in range(3)]
    for index in order:
        found.append([round_, index, one(f"run{round_}-{index}", index)])
if rank == 0:
    print(json.dumps(found))
"""

#: Run by 64 ranks: the round-robin file (rows per rank, row bytes, plan JSON).
MASTER_JOB = """
import json, sys
import numpy as np
from mpi4py import MPI
import h5subfile as hs

comm = MPI.COMM_WORLD
path, rows, width, plan = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) // 8, json.loads(sys.argv[4])
with hs.File(path, "w", **plan) as f:
    d = f.create_dataset("rows", (rows * comm.size, width), "f8")
    for i in range(comm.rank, rows * comm.size, comm.size):
        d[i] = np.full(width, i, "f8")
"""


def rows_job(
    ranks: int, folder: Path, rows: int, row_bytes: int, rounds: int, plan: dict[str, Any]
) -> list[list[float]]:
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-c", ROWS_JOB, str(folder)]
    command += [str(rows), str(row_bytes), str(rounds), json.dumps(plan)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def rows_summary(samples: list[list[float]], rounds: int) -> dict[str, Any]:
    """Each variant's observed time, and the speed ratios per round (declared time / other)."""
    by = {(int(r), int(v)): t for r, v, t in samples}

    def spread(values: list[float]) -> dict[str, float]:
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    return {
        "variants": {
            name: spread([by[(r, i)] for r in range(rounds)])
            for i, name in enumerate(ROWS_VARIANTS)
        },
        "ratios": {
            ROWS_SPEED: spread([by[(r, 0)] / by[(r, 1)] for r in range(rounds)]),
            ROWS_NULL: spread([by[(r, 0)] / by[(r, 2)] for r in range(rounds)]),
        },
    }


def per_row_master(source: Path, target: Path) -> None:
    """The same data as ``source`` mapped one row per VDS mapping (h5py, plain HDF5)."""
    import h5py

    with h5py.File(source, "r") as f:
        dset = f["rows"]
        shape, dtype = dset.shape, dset.dtype
        plist = dset.id.get_create_plist()
        mappings = []
        for k in range(plist.get_virtual_count()):
            file = plist.get_virtual_filename(k)
            name = plist.get_virtual_dsetname(k)
            start, stride, count, _ = plist.get_virtual_vspace(k).get_regular_hyperslab()
            mappings.extend((file, name, start[0] + j * stride[0]) for j in range(count[0]))
    layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
    for file, name, row in mappings:
        layout[row] = h5py.VirtualSource(str(source.parent / file), name, shape=shape)[row]
    with h5py.File(target, "w", libver=("v108", "v110")) as f:
        f.create_virtual_dataset("rows", layout)


def timed(work: Any, argument: Any, repeats: int) -> dict[str, float]:
    found = []
    for _ in range(repeats):
        t = time.perf_counter()
        work(argument)
        found.append(time.perf_counter() - t)
    return {"median": statistics.median(found), "min": min(found), "max": max(found)}


def master_run(folder: Path, ranks: int, rows: int, row_bytes: int, repeats: int) -> list[dict]:
    """The round-robin file written by ``ranks`` ranks with each plan, and its master opened."""
    import h5py
    from mpi4py import MPI

    import h5subfile as hs

    results = []
    for label, plan in (
        ("file per process", {"subfiles": "rank"}),
        ("8 subfiles", {"subfiles": 8}),
    ):
        path = folder / f"{label.replace(' ', '-')}.h5"
        command = [mpiexec(), "-n", str(ranks), sys.executable, "-c", MASTER_JOB, str(path)]
        command += [str(rows), str(row_bytes), json.dumps(plan)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
        flat = folder / f"{path.stem}-per-row.h5"
        per_row_master(path, flat)

        def read_plain(master: Path) -> None:
            with h5py.File(master, "r") as f:
                f["rows"][...]

        def open_ours(master: Path) -> None:
            with hs.File(master, "r", comm=MPI.COMM_SELF):
                pass

        with h5py.File(path, "r") as f:
            mappings = f["rows"].id.get_create_plist().get_virtual_count()
        with h5py.File(flat, "r") as f:
            flat_mappings = f["rows"].id.get_create_plist().get_virtual_count()
        results.append(
            {
                "plan": label,
                "rows": rows * ranks,
                "mappings": mappings,
                "bytes": path.stat().st_size,
                "open_h5subfile_s": timed(open_ours, path, repeats),
                "read_plain_s": timed(read_plain, path, repeats),
                "per_row": {
                    "mappings": flat_mappings,
                    "bytes": flat.stat().st_size,
                    "read_plain_s": timed(read_plain, flat, repeats),
                },
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--particles", type=int, default=4 * 2**20)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--rows", type=int, default=256, help="rows per rank (round robin)")
    parser.add_argument("--row-bytes", type=int, default=256 * 1024)
    parser.add_argument("--master-ranks", type=int, default=64)
    parser.add_argument("--master-rows", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    begun = begin()
    vpic, rows = [], []
    for name, plan in PLANS.items():
        with scratch("undeclared") as folder:
            samples = run_job(
                args.ranks, folder, args.particles, args.steps, args.rounds, plan, VPIC_CHANGES
            )
        summary = summarise(samples, list(VPIC_VARIANTS), args.rounds, RATIOS)
        vpic.append({"plan": name, "samples": samples, **summary})
        print(f"vpic {name}: blocks / h5py {cell(summary['ratios']['blocks / h5py']['observed'])}")
        with scratch("undeclared-rows") as folder:
            found = rows_job(args.ranks, folder, args.rows, args.row_bytes, args.rounds, plan)
        rows.append({"plan": name, "samples": found, **rows_summary(found, args.rounds)})
        print(f"rows {name}: {cell(rows[-1]['ratios'][ROWS_SPEED])}")
    with scratch("undeclared-master") as folder:
        masters = master_run(folder, args.master_ranks, args.master_rows, 1024, args.repeats)
    for m in masters:
        print(f"master {m['plan']}: {m['mappings']} mappings, {m['bytes']} B")
    save(
        args.json,
        args,
        begun,
        row_bytes=args.row_bytes,
        rows_per_rank=args.rows,
        master_ranks=args.master_ranks,
        repeats=args.repeats,
        vpic=vpic,
        rows_results=rows,
        masters=masters,
        load_end=os.getloadavg(),
    )


PLAN_LABELS = {
    "default": "default plan (2 ranks on one node: one file, the master)",
    "rank": 'file per process (`subfiles="rank"`)',
}


def verdict(ratio: dict[str, float]) -> str:
    return "met" if ratio["median"] >= TARGET else "not met"


def render(record: dict) -> str:
    """The section of docs/BENCHMARKS.md for one run of this script."""
    mib = record["particles"] * 32 / 2**20
    lines = [
        f"## {TITLE}",
        "",
        "Generated by `benchmarks/undeclared.py` from docs/undeclared.json. Parallel h5py "
        "programs declare no blocks: every rank creates a dataset with its global shape and "
        "writes its hyperslabs (README, *Coming from parallel h5py*). Two MPI jobs per plan "
        "alternate, round by round in rotating order, such a program with the same write "
        "declaring blocks (twice: A and A', the null comparison); each write goes to a fresh "
        "folder, deleted and followed by `sync` outside the timing. Command:",
        "",
        "```sh",
        f".venv/bin/python benchmarks/undeclared.py --ranks {record['ranks']} "
        f"--rounds {record['rounds']} --json docs/undeclared.json",
        "```",
        "",
        f"{record['ranks']} ranks on {record['cpus']} cores ({record['machine']}), commit "
        f"{record['commit']}; load average before {record['load_before'][0]:.1f} (after: "
        f"{record['load_after'][0]:.1f}, from the {record['master_ranks']}-rank job at the end). "
        "Cells: median (min-max) over the rounds; ratios per round, above 1: the program "
        "without blocks is faster.",
        "",
        f"**VPIC-IO write** ({record['particles'] // 2**20}Mi particles per rank, {mib:.0f} MiB "
        f"per rank per step, {record['steps']} steps; observed completion time): each step's "
        "eight datasets created with their global shape and each rank's slab written inside "
        "`with d.collective:`, a call per dataset (`h5subfile vpic --style h5py-collective`), "
        "against the same calls declaring each rank's block (`--style blocks-each`: "
        "`create_datasets` with `start`/`count`, then `d.write` per dataset) and against the "
        "block API's fastest form, one `write_datasets` call per step (`--style blocks`). "
        f"Target: speed at least {TARGET} of the same calls with blocks declared.",
        "",
        "| plan | blocks, a call per dataset s | h5py collective s | speed: blocks time / "
        "h5py time | null | target | blocks, a call per step s | speed: a call per step / "
        "h5py | metadata (observed - raw) s: blocks a call per dataset, h5py, a call per step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in record["vpic"]:
        v, ratios = r["variants"], r["ratios"]
        speed = ratios["blocks / h5py"]["observed"]
        names = (VPIC_VARIANTS[0], VPIC_VARIANTS[1], VPIC_VARIANTS[3])
        metadata = ", ".join(cell(v[n]["metadata"]) for n in names)
        lines.append(
            f"| {PLAN_LABELS.get(r['plan'], r['plan'])} | {cell(v[VPIC_VARIANTS[0]]['observed'])} | "
            f"{cell(v['h5py collective']['observed'])} | **{cell(speed, 2)}** | "
            f"{cell(ratios[RATIOS[1][0]]['observed'], 2)} | {verdict(speed)} | "
            f"{cell(v[VPIC_VARIANTS[3]]['observed'])} | "
            f"{cell(ratios[RATIOS[2][0]]['observed'], 2)} | {metadata} |"
        )
    lines += _vpic_reading(record)
    kib = record["row_bytes"] // 1024
    lines += [
        "",
        f"**Round-robin rows, independent writes** ({record['rows_per_rank']} rows of {kib} "
        f"KiB per rank, one `d[i] = row` each; observed time from open to close): rank r of "
        f"P writing rows r, r + P, ... of a dataset without blocks, against each rank writing "
        "as many rows into its declared block of consecutive rows.",
        "",
        "| plan | declared rows s | round-robin rows s | speed: declared time / round-robin time | null |",
        "|---|---|---|---|---|",
    ]
    for r in record["rows_results"]:
        v, ratios = r["variants"], r["ratios"]
        lines.append(
            f"| {PLAN_LABELS.get(r['plan'], r['plan'])} | {cell(v['declared rows'])} | "
            f"{cell(v['round-robin rows'])} | **{cell(ratios[ROWS_SPEED], 2)}** "
            f"| {cell(ratios[ROWS_NULL], 2)} |"
        )
    lines += [
        "",
        "- **Rows without blocks are written faster than rows into declared blocks**: a "
        "declared block written in several pieces is hashed again from the file at close (its "
        "bytes read back), while a rank's rows of a dataset without blocks are one piece, "
        "hashed as each row is written.",
    ]
    lines += _master_lines(record)
    return "\n".join(lines)


def _vpic_reading(record: dict) -> list[str]:
    """What the VPIC table says, from its numbers."""
    found = []
    for r in record["vpic"]:
        v = r["variants"]
        each, h5py_way, step = (v[VPIC_VARIANTS[i]]["metadata"]["median"] for i in (0, 1, 3))
        found.append(
            f"{r['plan']}: {1000 * each:.0f} ms with blocks and a call per dataset, "
            f"{1000 * h5py_way:.0f} ms without blocks, {1000 * step:.0f} ms with one call per "
            "step"
        )
    return [
        "",
        "- **Without blocks, the same calls cost what they cost with blocks**: the layout learned "
        "from the writes (sources of the whole dataset, pieces, the virtual dataset mapped "
        "piece by piece at close) adds nothing measurable to the metadata time (observed - "
        "raw: " + "; ".join(found) + ").",
        "- **Eight calls per step cost more than one**: against `write_datasets`, one call per "
        "step, a program making a collective call per dataset waits eight times per step for "
        "the slowest rank to enter the call (its agreement round; a collective write of a "
        "dataset without blocks has no closing round, so no rank waits for another's write "
        "to end), where the block API's single call waits once. A program declaring its "
        "blocks pays the same when it writes dataset by dataset; `write_datasets` is the way "
        "to write many datasets at once, with or without h5py's habits.",
    ]


def _master_lines(record: dict) -> list[str]:
    ms = lambda s: f"{1000 * s['median']:.1f} ({1000 * s['min']:.1f}-{1000 * s['max']:.1f})"  # noqa: E731
    lines = [
        "",
        f"**The master of a round-robin file at {record['master_ranks']} ranks** "
        "(oversubscribed on this machine: the writing is not timed; rows of 1 KiB): each "
        "rank's rows are one strided piece, one mapping, against the same data mapped one "
        "row per mapping (built with h5py over the same subfiles). Opening and reading on "
        f"one rank, median (min-max) of {record.get('repeats', 7)} repeats, ms.",
        "",
        "| plan | rows | mappings | master | open with h5subfile | plain h5py open + read "
        "| one mapping per row: mappings | master | plain h5py open + read |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in record["masters"]:
        flat = m["per_row"]
        lines.append(
            f"| {m['plan']} | {m['rows']} | {m['mappings']} | {m['bytes'] / 1024:.0f} KiB | "
            f"{ms(m['open_h5subfile_s'])} | {ms(m['read_plain_s'])} | {flat['mappings']} | "
            f"{flat['bytes'] / 1024:.0f} KiB | {ms(flat['read_plain_s'])} |"
        )
    faster = ", ".join(
        f"{m['per_row']['read_plain_s']['median'] / m['read_plain_s']['median']:.1f}x ({m['plan']})"
        for m in record["masters"]
    )
    lines += [
        "",
        f"- **One mapping per rank, not per row**: {record['master_ranks']} mappings instead of "
        f"{record['masters'][0]['rows']}, and plain h5py opens and reads the file {faster} "
        "faster than the same data mapped row by row. Most of the master's size is its 64 KiB "
        "metadata block (docs/FORMAT.md, *Alignment*). Opening it with h5subfile costs more "
        "than plain h5py's open and read: rank 0 checks every subfile (existence, size) and "
        "every mapping against the layout record before any rank reads.",
    ]
    return lines


def summary_rows(record: dict) -> list[tuple[str, str, str]]:
    """The rows of docs/BENCHMARKS.md's summary."""
    vpic = "; ".join(
        f"{r['plan']}: **{cell(r['ratios']['blocks / h5py']['observed'], 2)}** (null "
        f"{cell(r['ratios'][RATIOS[1][0]]['observed'], 2)}), "
        f"{verdict(r['ratios']['blocks / h5py']['observed'])}; against one call per step "
        f"{cell(r['ratios'][RATIOS[2][0]]['observed'], 2)}"
        for r in record["vpic"]
    )
    rows = "; ".join(
        f"{r['plan']}: **{cell(r['ratios'][ROWS_SPEED], 2)}** (null "
        f"{cell(r['ratios'][ROWS_NULL], 2)})"
        for r in record["rows_results"]
    )
    masters = "; ".join(
        f"{m['plan']}: {m['mappings']} mappings, {m['bytes'] / 1024:.0f} KiB (one per row: "
        f"{m['per_row']['mappings']}, {m['per_row']['bytes'] / 1024:.0f} KiB)"
        for m in record["masters"]
    )
    return [
        (
            f"VPIC write at {record['ranks']} ranks as a parallel h5py program writes it (no "
            "blocks, a collective call per dataset): speed / the same calls with blocks "
            f"declared (target at least {TARGET}); and / one write_datasets call per step",
            vpic,
            TITLE,
        ),
        (
            f"Round-robin rows at {record['ranks']} ranks, independent writes, no blocks: speed "
            "/ declared blocks of consecutive rows",
            rows,
            TITLE,
        ),
        (
            f"Round-robin rows at {record['master_ranks']} ranks: the master (strided pieces, "
            "one mapping per rank)",
            masters,
            TITLE,
        ),
    ]


if __name__ == "__main__":
    main()

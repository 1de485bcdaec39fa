"""Write-behind against compute: VPIC-IO with emulated compute between steps, with and without
``async_writes`` (docs/BENCHMARKS.md, "Overlapping writes with compute").

One MPI job writes the VPIC-IO file again and again (``run_vpic(..., compute_time=C)``: C
seconds of emulated compute after each step's write call, as h5bench's
``EMULATED_COMPUTE_TIME_PER_TIMESTEP``), each write into a fresh folder (deleted after it, then
``sync``, untimed), in rounds whose order rotates, four variants:

- **sync** (A, and A' for the null comparison): the default, the step's bytes are written
  before the write call returns;
- **async** (B): ``async_writes=True``, the bytes go out in the background while the next
  compute runs;
- **I/O only** (D): the default without compute, which gives the I/O time of a step;
- **async, zero copy** (E): ``async_zero_copy=True`` as well, the background thread writes
  straight from the kernel's arrays (which it leaves unchanged until close).

Metric: the kernel's observed time per step *with the compute included* (open to close, max
over ranks, divided by the steps): what a simulation waits. As in h5bench no compute follows
the last step, so with S steps, compute C and a step's I/O time W, no overlap gives
((S-1) C + S W) / S and perfect overlap ((S-1) max(C, W) + W) / S.

Run (2 ranks: the machine's cores; the JSON feeds ``benchmarks/report.py``):

    .venv/bin/python benchmarks/async_overlap.py --ranks 2 --rounds 5 --compute 0.5 0.2 \
        --json docs/async-overlap.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docplot import run_facts  # noqa: E402
from interleave import cell, run_job, spread  # noqa: E402

VARIANTS = ("sync", "async", "sync'", "I/O only", "async, zero copy")
NULL = "null: sync' / sync"
ZERO = "zero copy / sync"


def variants(compute: float) -> list[dict]:
    """The variants, in ``VARIANTS`` order, as ``interleave.run_job`` takes them."""
    plans = [
        dict(compute_time=compute),
        dict(compute_time=compute, async_writes=True),
        dict(compute_time=compute),
        dict(compute_time=0.0),
        dict(compute_time=compute, async_writes=True, async_zero_copy=True),
    ]
    return [{"plan": plan} for plan in plans]


def run(ranks: int, folder: Path, particles: int, steps: int, rounds: int, compute: float) -> list:
    """Rows ``[round, variant, observed seconds per step with compute, raw, cpu]``."""
    rows = run_job(ranks, folder, particles, steps, rounds, {}, variants(compute))
    return [[r, i, observed / steps, raw, cpu] for r, i, observed, raw, cpu in rows]


def summarise(samples: list, rounds: int) -> dict:
    """Per variant the step time's median (min-max); async / sync and sync' / sync per round."""
    by = {(int(s[0]), int(s[1])): s[2] for s in samples}
    variants = {
        name: spread([by[(r, i)] for r in range(rounds)]) for i, name in enumerate(VARIANTS)
    }
    ratios = {
        label: spread([by[(r, top)] / by[(r, 0)] for r in range(rounds)])
        for label, top in (("async / sync", 1), (NULL, 2), (ZERO, 4))
    }
    return {"variants": variants, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--particles", type=int, default=8 * 2**20)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compute", type=float, nargs="+", default=[0.5])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    load_before, started = os.getloadavg(), time.time()
    results = []
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"async-overlap-{os.getpid()}"
    for compute in args.compute:
        scratch.mkdir(parents=True)
        try:
            samples = run(args.ranks, scratch, args.particles, args.steps, args.rounds, compute)
        finally:
            subprocess.run(["rm", "-rf", str(scratch)], check=False)
        summary = summarise(samples, args.rounds)
        results.append({"compute": compute, "samples": samples, **summary})
        v = summary["variants"]
        print(
            f"compute {compute:g} s: sync {cell(v['sync'])}  async {cell(v['async'])}  "
            f"zero copy {cell(v['async, zero copy'])}  I/O only {cell(v['I/O only'])}  async/sync "
            f"{cell(summary['ratios']['async / sync'])}  null "
            f"{cell(summary['ratios'][NULL])}"
        )
    if args.json is not None:
        record = {
            "ranks": args.ranks,
            "particles": args.particles,
            "steps": args.steps,
            "rounds": args.rounds,
            **run_facts(load_before, started),
            "results": results,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")


TITLE = "Overlapping writes with compute"


def _closed(measured: dict, serial: float, gap: float) -> str:
    """The share of the gap between no overlap and perfect overlap a variant saved."""
    return f"{100 * (serial - measured['median']) / gap:.0f} %"


def render(record: dict) -> str:
    """The section of docs/BENCHMARKS.md for one run of this script."""
    mib = record["particles"] * 32 / 2**20
    lines = [
        f"## {TITLE}",
        "",
        "Generated by `benchmarks/async_overlap.py` from docs/async-overlap.json. One MPI job "
        "writes VPIC-IO again and again with C seconds of emulated compute after each step's "
        "write call (`h5subfile vpic --compute-time C`, as h5bench's "
        "`EMULATED_COMPUTE_TIME_PER_TIMESTEP`), alternating, round by round in rotating "
        "order, the default (*sync*, twice: A and A' for the null comparison), "
        "`async_writes=True` (*async*: each write copied into the library's buffer), "
        "`async_writes=True, async_zero_copy=True` (*async, zero copy*: written straight from "
        "the kernel's arrays) and the default without compute (*I/O only*: the I/O time of a "
        "step). Each write goes to a fresh folder, deleted and followed by `sync` "
        "outside the timing. Command:",
        "",
        "```sh",
        f".venv/bin/python benchmarks/async_overlap.py --ranks {record['ranks']} "
        f"--rounds {record['rounds']} --compute "
        + " ".join(f"{r['compute']:g}" for r in record["results"])
        + " --json docs/async-overlap.json",
        "```",
        "",
        f"{record['ranks']} ranks on {record['cpus']} cores ({record['machine']}), "
        f"{record['particles'] / 2**20:g}Mi particles per rank ({mib:.0f} MiB per rank per "
        f"step), {record['steps']} steps, {record['rounds']} rounds, commit "
        f"{record['commit']}; load average before / after "
        f"{record['load_before'][0]:.1f} / {record['load_after'][0]:.1f}. Metric: observed "
        "time per step with the compute included (open to close, max over ranks, / steps): "
        "median (min-max) over the rounds, in seconds; ratios per round. As in h5bench no "
        f"compute follows the last step, so with S = {record['steps']} steps, compute C and a step's "
        "I/O time W (*I/O only*), no overlap is ((S-1) C + S W) / S and perfect overlap "
        "((S-1) max(C, W) + W) / S.",
        "",
        "| compute C | I/O only W | no overlap | perfect overlap | sync | async | "
        "async, zero copy | async / sync | zero copy / sync | null: sync' / sync |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    steps = record["steps"]
    for r in record["results"]:
        v, c = r["variants"], r["compute"]
        io = v["I/O only"]["median"]
        serial = ((steps - 1) * c + steps * io) / steps
        overlap = ((steps - 1) * max(c, io) + io) / steps
        lines.append(
            f"| {c:g} s | {cell(v['I/O only'])} | {serial:.3f} | {overlap:.3f} | "
            f"{cell(v['sync'])} | {cell(v['async'])} | {cell(v['async, zero copy'])} | "
            f"**{cell(r['ratios']['async / sync'])}** | **{cell(r['ratios'][ZERO])}** | "
            f"{cell(r['ratios'][NULL])} |"
        )
    lines.append("")
    for r in record["results"]:
        v, c = r["variants"], r["compute"]
        io = v["I/O only"]["median"]
        serial = ((steps - 1) * c + steps * io) / steps
        overlap = ((steps - 1) * max(c, io) + io) / steps
        gap = serial - overlap

        lines.append(
            f"- **Compute {c:g} s, I/O {io:.3f} s per step:** of the time overlap can save "
            f"({gap:.3f} s per step, from {serial:.3f} to {overlap:.3f}), writing behind with "
            f"a copy saves {_closed(v['async'], serial, gap)} and without one "
            f"{_closed(v['async, zero copy'], serial, gap)}; "
            f"the default measured {v['sync']['median']:.3f} s against {serial:.3f} s "
            "expected without overlap."
        )
    lines += [
        "",
        "What is left is spent in the foreground: copying each step into the library's buffer "
        "(with a copy: a memory copy of the step, about half of what writing it to the page "
        "cache costs), hashing it for its checksums during the call, and the last step's "
        "write, which close waits for. On storage slower than the page cache (a parallel "
        "file system, `fsync=True`) the I/O time grows and these stay the same. h5bench's "
        "own async mode needs HDF5's asynchronous VOL connector, a separate build of HDF5 "
        "with thread safety and the Argobots library, which was not built on this machine: "
        "there is no h5bench async row to compare with.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

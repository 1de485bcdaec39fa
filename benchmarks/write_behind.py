"""Writing behind, chosen call by call: each way against writing directly and against the best
any write-behind can do (docs/BENCHMARKS.md, "Writing behind, chosen call by call").

For each configuration (particles per rank, seconds of compute), one MPI job
(``interleave.py``) writes the VPIC-IO file again and again, 2 subfiles, with C seconds of
emulated compute after each step but the last (h5bench's ``EMULATED_COMPUTE_TIME_PER_TIMESTEP``),
in rounds whose order rotates and every other round runs backwards, seven variants:

- **direct** (and **direct'**, the null comparison): the default, every write done in the call;
- **copy**: ``async_writes=True``, each call's way chosen by what a copy and a write cost here
  (write directly, or copy and write behind);
- **zero copy**: ``async_zero_copy=True`` as well (behind from the caller's arrays, or directly);
- **I/O only**: the default without compute (a step's I/O time);
- **copy always**, **zero copy always**: the same with ``async_always=True``, every call behind
  whatever it costs (what writing behind did before each call's way was chosen).

Metric: the observed time per step with the compute included (open to close, max over ranks,
divided by the steps): what a simulation waits. With S steps, compute C and a step's write W
(taken from *direct*, round by round: W = direct - C (S-1)/S), the best any write-behind can do
is ((S-1) max(C, W) + W) / S: only the last step's write shows, or the writes show where they
are longer than the compute. *Hidden*: (direct - variant) / (direct - best), round by round.

Run (2 ranks: the machine's cores; the JSON feeds ``benchmarks/report.py``):

    .venv/bin/python benchmarks/write_behind.py --ranks 2 --rounds 5 \
        --particles 4194304 8388608 --compute 0.2 0.5 --warm 4 --json docs/write-behind.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interleave import begin, cell, run_job, save, scratch, spread  # noqa: E402

TITLE = "Writing behind, chosen call by call"
VARIANTS = (
    "direct",
    "copy",
    "zero copy",
    "direct'",
    "I/O only",
    "copy always",
    "zero copy always",
)
WAYS = ("copy", "zero copy", "copy always", "zero copy always")
NULL = "null: direct' / direct"
#: the issue's targets, the share of the hideable time hidden where the write is at least a
#: quarter of a step
TARGETS = {"copy": 0.6, "zero copy": 0.8}
TARGET_SHARE = 0.25


def variants(compute: float, subfiles: int) -> list[dict]:
    """The variants, in ``VARIANTS`` order, as ``interleave.run_job`` takes them."""
    base = dict(compute_time=compute, subfiles=subfiles)
    copy = dict(base, async_writes=True)
    zero = dict(copy, async_zero_copy=True)
    plans = [
        base,
        copy,
        zero,
        base,
        dict(base, compute_time=0.0),
        dict(copy, async_always=True),
        dict(zero, async_always=True),
    ]
    return [{"plan": plan} for plan in plans]


def best(direct: float, compute: float, steps: int) -> float:
    """The best any write-behind can do, given the direct step time (see the docstring)."""
    write = direct - compute * (steps - 1) / steps
    return ((steps - 1) * max(compute, write) + write) / steps


def summarise(samples: list, rounds: int, compute: float, steps: int) -> dict:
    """Per variant its step time; the best possible; per way, variant / direct and the share
    hidden, round by round; and the write's share of a direct step."""
    by = {(int(s[0]), int(s[1])): s[2] / steps for s in samples}
    times = {name: [by[(r, i)] for r in range(rounds)] for i, name in enumerate(VARIANTS)}
    direct = times["direct"]
    bests = [best(d, compute, steps) for d in direct]
    hidden, ratios = {}, {NULL: spread([a / d for a, d in zip(times["direct'"], direct)])}
    for way in WAYS:
        ratios[way] = spread([t / d for t, d in zip(times[way], direct)])
        hidden[way] = spread(
            [(d - t) / (d - b) for t, d, b in zip(times[way], direct, bests) if d > b]
        )
    share = spread([1 - compute * (steps - 1) / steps / d for d in direct])
    return {
        "variants": {name: spread(values) for name, values in times.items()},
        "best": spread(bests),
        "ratios": ratios,
        "hidden": hidden,
        "write_share": share,
    }


def causes(mib: int, reps: int, folder: Path) -> dict[str, dict[str, float]]:
    """What a step's hand-over costs in one process, per ``mib`` MiB (seconds, median (min-max)
    over ``reps``): the first copy into a fresh buffer (its pages faulted in), a copy into a
    buffer already touched, hashing the bytes (the checksum the library keeps), and writing
    them into the page cache (one file, 1.5 MiB system calls, then unlinked)."""
    import os
    import time

    import numpy as np

    from h5subfile.layout.integrity import new_hasher

    source = np.random.default_rng(0).integers(0, 255, mib << 20, dtype=np.uint8)
    found: dict[str, list[float]] = {k: [] for k in CAUSES}
    for _ in range(reps):
        fresh = np.empty_like(source)
        started = time.perf_counter()
        np.copyto(fresh, source)
        found["first copy into a fresh buffer"].append(time.perf_counter() - started)
        started = time.perf_counter()
        np.copyto(fresh, source)
        found["copy into a touched buffer"].append(time.perf_counter() - started)
        hasher, started = new_hasher(), time.perf_counter()
        hasher.update(source)
        hasher.hexdigest()
        found["hash (xxh3)"].append(time.perf_counter() - started)
        path = folder / "causes.bin"
        view, step = memoryview(source), 3 << 19
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        started = time.perf_counter()
        for offset in range(0, len(view), step):
            os.pwrite(fd, view[offset : offset + step], offset)
        found["write into the page cache"].append(time.perf_counter() - started)
        os.close(fd)
        os.unlink(path)
        del fresh
        os.sync()
    return {k: spread(v) for k, v in found.items()}


CAUSES = (
    "first copy into a fresh buffer",
    "copy into a touched buffer",
    "hash (xxh3)",
    "write into the page cache",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--particles", type=int, nargs="+", default=[4 * 2**20, 8 * 2**20])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--subfiles", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compute", type=float, nargs="+", default=[0.2, 0.5])
    parser.add_argument("--causes-mib", type=int, default=256, help="0: no one-process costs")
    parser.add_argument("--warm", type=float, default=2.0, help="GiB touched before each run")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    begun = begin()
    costs = {}
    if args.causes_mib:
        with scratch("write-behind-causes") as folder:
            costs = causes(args.causes_mib, args.rounds, folder)
        print("; ".join(f"{k} {cell(v)}" for k, v in costs.items()), flush=True)
    results = []
    for particles in args.particles:
        for compute in args.compute:
            with scratch("write-behind") as folder:
                samples = run_job(
                    args.ranks,
                    folder,
                    particles,
                    args.steps,
                    args.rounds,
                    {},
                    variants(compute, args.subfiles),
                    warm=args.warm,
                    alternate=True,
                )
            summary = summarise(samples, args.rounds, compute, args.steps)
            results.append(
                {"particles": particles, "compute": compute, "samples": samples, **summary}
            )
            v, h = summary["variants"], summary["hidden"]
            print(
                f"{particles * 32 / 2**20:g} MiB, compute {compute:g} s: best "
                f"{cell(summary['best'])}  direct {cell(v['direct'])}  copy {cell(v['copy'])} "
                f"(hidden {cell(h['copy'], 2)})  zero copy {cell(v['zero copy'])} "
                f"(hidden {cell(h['zero copy'], 2)})",
                flush=True,
            )
    save(
        args.json,
        args,
        begun,
        subfiles=args.subfiles,
        causes_mib=args.causes_mib,
        causes=costs,
        warm_gib=args.warm,
        results=results,
    )


def _mib(particles: int) -> str:
    return f"{particles * 32 / 2**20:g} MiB"


def render(record: dict) -> str:
    """The section of docs/BENCHMARKS.md for one run of this script."""
    results = record["results"]
    command = (
        f".venv/bin/python benchmarks/write_behind.py --ranks {record['ranks']} --rounds "
        f"{record['rounds']} --particles "
        + " ".join(str(p) for p in sorted({r["particles"] for r in results}))
        + " --compute "
        + " ".join(f"{c:g}" for c in sorted({r["compute"] for r in results}))
        + (f" --warm {record['warm_gib']:g}" if "warm_gib" in record else "")
        + " --json docs/write-behind.json"
    )
    warmed = (
        f", after {record['warm_gib']:g} GiB of memory touched (`benchmarks/warm.py`: on a "
        "virtual machine that hands freed memory back to its host, a write into the page cache "
        "otherwise pays for faulting its pages in on the host again, and varies tenfold)"
        if record.get("warm_gib")
        else ""
    )
    lines = [
        f"## {TITLE}",
        "",
        "Generated by `benchmarks/write_behind.py` from docs/write-behind.json. For each "
        "configuration one MPI job writes VPIC-IO again and again "
        f"({record['steps']} steps, {record['subfiles']} subfiles, C seconds of emulated "
        "compute after each step but the last, as h5bench's "
        "`EMULATED_COMPUTE_TIME_PER_TIMESTEP`), round by round in rotating order, every other "
        "round backwards: the default (*direct*, twice for the null comparison), "
        "`async_writes=True` (*copy*: each call writes directly or copies and writes behind, "
        "whichever costs less here), `async_zero_copy=True` as well (*zero copy*: directly, or "
        "behind from the caller's arrays), both with `async_always=True` (*always*: every call "
        "behind, as before the choice existed) and the default without compute (*I/O only*). "
        "Each write goes to a fresh folder, deleted and followed by `sync` outside the timing"
        + warmed
        + ". Command:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"{record['ranks']} ranks on {record['cpus']} cores ({record['machine']}), "
        f"{record['rounds']} rounds, commit {record['commit']}; load average before / after "
        f"{record['load_before'][0]:.1f} / {record['load_after'][0]:.1f}. Observed time per "
        "step with the compute included (open to close, max over ranks, / steps), in seconds: "
        "median (min-max) over the rounds. *Best*: ((S-1) max(C, W) + W) / S, with the step's "
        "write W = direct - C (S-1)/S of the same round; *hidden*: (direct - way) / (direct - "
        "best) per round, the share of what can be hidden that was (1: all of it; below 0: "
        "slower than direct). *Write share*: W / direct.",
        "",
        "| per rank per step | compute C | write share | best | direct | copy | zero copy | "
        "copy always | zero copy always | I/O only |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        v = r["variants"]
        lines.append(
            f"| {_mib(r['particles'])} | {r['compute']:g} s | {cell(r['write_share'], 2)} | "
            f"{cell(r['best'])} | {cell(v['direct'])} | {cell(v['copy'])} | "
            f"{cell(v['zero copy'])} | {cell(v['copy always'])} | "
            f"{cell(v['zero copy always'])} | {cell(v['I/O only'])} |"
        )
    lines += [
        "",
        "| per rank per step | compute C | hidden: copy | zero copy | copy always | "
        "zero copy always | copy / direct | zero copy / direct | null: direct' / direct |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        h, q = r["hidden"], r["ratios"]
        lines.append(
            f"| {_mib(r['particles'])} | {r['compute']:g} s | **{cell(h['copy'], 2)}** | "
            f"**{cell(h['zero copy'], 2)}** | {cell(h['copy always'], 2)} | "
            f"{cell(h['zero copy always'], 2)} | {cell(q['copy'])} | {cell(q['zero copy'])} | "
            f"{cell(q[NULL])} |"
        )
    lines += ["", *verdicts(record)]
    if record.get("causes"):
        lines += [
            "",
            f"What handing a step over costs, in one process, per {record['causes_mib']} MiB "
            f"(seconds, median (min-max) over {record['rounds']} repetitions, the same job): "
            "the ring buffer is faulted in by a thread of its own when the file opens, so that "
            "the first copy does not pay for its pages; a copy into it costs the caller the "
            "second row; writing behind from the caller's arrays hashes them in the background "
            "thread instead, as it writes them.",
            "",
            "| cost | seconds |",
            "|---|---|",
            *(f"| {name} | {cell(value)} |" for name, value in record["causes"].items()),
        ]
    if record.get("notes"):  # what the tables say, and why (written once the run was read)
        lines += ["", *(f"- {note}" for note in record["notes"])]
    return "\n".join(lines) + "\n"


def verdicts(record: dict) -> list[str]:
    """Where each way meets its target, and whether any was slower than direct beyond the
    null comparison's spread."""
    out = []
    for way, target in TARGETS.items():
        counted = [r for r in record["results"] if r["write_share"]["median"] >= TARGET_SHARE]
        met = [r for r in counted if r["hidden"][way]["median"] >= target]
        out.append(
            f"- **{way.capitalize()}** hides at least {target:g} of the hideable time in "
            f"{len(met)} of the {len(counted)} configurations whose write is at least "
            f"{TARGET_SHARE:g} of a step"
            + (
                " (" + ", ".join(f"{_mib(r['particles'])} at {r['compute']:g} s" for r in met) + ")"
                if met
                else ""
            )
            + "."
        )
    slower = [
        f"{way} at {_mib(r['particles'])}, {r['compute']:g} s"
        for r in record["results"]
        for way in ("copy", "zero copy")
        if r["ratios"][way]["median"] > r["ratios"][NULL]["max"]
    ]
    out.append(
        "- **Slower than direct** beyond the null comparison's largest ratio: "
        + ("; ".join(slower) if slower else "none")
        + "."
    )
    return out


def summary_rows(record: dict) -> list[tuple[str, str, str]]:
    """The summary's row: the share hidden, per configuration."""
    cells = [
        f"{_mib(r['particles'])}, {r['compute']:g} s: copy **{cell(r['hidden']['copy'], 2)}**, "
        f"zero copy **{cell(r['hidden']['zero copy'], 2)}**"
        for r in record["results"]
    ]
    return [
        (
            f"Writing behind at {record['ranks']} ranks, VPIC with compute: share of the "
            "hideable time hidden (targets: copy 0.6, zero copy 0.8; 1 = the best possible)",
            "; ".join(cells),
            TITLE,
        )
    ]


if __name__ == "__main__":
    main()

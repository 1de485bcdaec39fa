"""The whole VPIC-IO write at 2 ranks against parallel HDF5, measured in one job
(docs/BENCHMARKS.md, "Whole write at 2 ranks, in one job").

*Metadata at scale* compares the whole write in separate jobs, one per configuration and
repetition; there the same configuration varied 2-4x between jobs and its null comparison
spread as wide as the differences. Here one MPI job (``interleave.py``) writes the VPIC-IO
file again and again and alternates, round by round in rotating order (every other round
backwards, so that no variant always follows the same one), five variants:

- **file per process** (A, and A' for the null comparison): ``subfiles="rank"``;
- **default plan**: one subfile per node, which at 2 ranks on one node is one file, the
  master itself, written by both ranks (the same single shared file as parallel HDF5);
- **parallel HDF5, independent** and **collective**: the same kernel through h5py's ``mpio``
  driver into one shared file, h5bench's way (``h5subfile vpic --api phdf5``).

Each write goes to a fresh folder (deleted after it, then ``sync``, untimed), with memory
touched before it (``warm.py``, untimed). Metric: h5bench's observed completion time (open to
close, max over ranks); also the raw time (inside the data writes, max over ranks), and
their difference, the metadata time as h5bench counts it.

Needs an h5py built with MPI (``make phdf5``); run (2 ranks: the machine's cores):

    .venv-phdf5/bin/python benchmarks/whole_write.py --rounds 15 --json docs/whole-write.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docplot import mpi_name  # noqa: E402
from interleave import begin, cell, run_job, save, scratch, summarise  # noqa: E402

FPP, DEFAULT = "h5subfile, file per process", "h5subfile, default plan"
INDEPENDENT, COLLECTIVE = "parallel HDF5, independent", "parallel HDF5, collective"
NULL = "h5subfile, file per process (null: same again)"
#: The variants in ``interleave.run_job``'s terms, in this order.
VARIANTS = {
    FPP: {"plan": {"subfiles": "rank"}},
    DEFAULT: {},
    INDEPENDENT: {"api": "phdf5"},
    COLLECTIVE: {"api": "phdf5", "collective": True},
    NULL: {"plan": {"subfiles": "rank"}},
}
NAMES = list(VARIANTS)
#: Ratios of observed times, round by round: above 1, the h5subfile variant is faster.
RATIOS = [
    (f"{INDEPENDENT} / {FPP}", INDEPENDENT, FPP),
    (f"{COLLECTIVE} / {FPP}", COLLECTIVE, FPP),
    (f"{INDEPENDENT} / {DEFAULT}", INDEPENDENT, DEFAULT),
    (f"{COLLECTIVE} / {DEFAULT}", COLLECTIVE, DEFAULT),
    (f"null: {FPP} / same again", FPP, NULL),
]
METRICS = ("observed", "raw", "metadata", "cpu")


def ratio_indices() -> list[tuple[str, int, int]]:
    return [(label, NAMES.index(top), NAMES.index(bottom)) for label, top, bottom in RATIOS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--particles", type=int, default=4 * 2**20, help="per rank")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warm", type=float, default=2.0, help="GiB touched before each run")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import h5py

    if not h5py.get_config().mpi:
        sys.exit("this h5py has no MPI support: run with .venv-phdf5/bin/python (make phdf5)")
    from h5subfile.bench.report import versions
    from h5subfile.io.filesystem import probe

    begun = begin()
    with scratch("whole-write") as folder:
        filesystem = probe(folder).name
        samples = run_job(
            args.ranks,
            folder,
            args.particles,
            args.steps,
            args.rounds,
            {},
            list(VARIANTS.values()),
            warm=args.warm,
            alternate=True,
        )
    summary = summarise(samples, NAMES, args.rounds, ratio_indices())
    for name, v in summary["variants"].items():
        print(f"{name:48s} observed {cell(v['observed'])}  raw {cell(v['raw'])}")
    for label, ratio in summary["ratios"].items():
        above = summary["above_one"][label]
        print(f"{label:60s} {cell(ratio['observed'])}  (above 1 in {above} of {args.rounds})")
    save(
        args.json,
        args,
        begun,
        warm_gib=args.warm,
        filesystem=filesystem,
        versions=versions(""),
        samples=samples,
        **summary,
    )


TITLE = "Whole write at 2 ranks, in one job"


def render(record: dict) -> str:
    """The section of docs/BENCHMARKS.md for one run of this script."""
    mib = record["particles"] * 32 / 2**20
    v, rounds, above = record["variants"], record["rounds"], record["above_one"]
    hdf5, mpi = record["versions"]["hdf5"], mpi_name(record["versions"]["mpi"])
    ranks, cores = record["ranks"], record["cpus"]
    fs = record["filesystem"]
    lines = [
        f"## {TITLE}",
        "",
        "Generated by `benchmarks/whole_write.py` from docs/whole-write.json. *Metadata at "
        "scale* compares the whole write at 2 ranks in separate jobs, where one configuration "
        "varied 2-4x between jobs and the null comparison spread as wide as the differences. "
        "Here one MPI job writes the VPIC-IO file again and again and alternates, round by "
        "round in rotating order (every other round backwards, so that no variant always "
        "follows the same one), h5subfile with file per process (twice: A and A' for the "
        "null comparison), h5subfile's default plan (one subfile per node: with every rank on "
        "one node one file, the master, written by every rank) and parallel HDF5 (h5py's "
        "`mpio` driver, one shared file, h5bench's way) with independent and with collective "
        "writes. Each write goes to a fresh folder, deleted and followed by `sync` outside the "
        f"timing, after {record['warm_gib']:g} GiB of memory touched (`benchmarks/warm.py`). "
        "Command:",
        "",
        "```sh",
        f".venv-phdf5/bin/python benchmarks/whole_write.py --rounds {rounds} "
        "--json docs/whole-write.json",
        "```",
        "",
        f"{ranks} ranks on {cores} cores "
        f"({'not ' if ranks <= cores else ''}oversubscribed; {record['machine']}; the files "
        f"on {fs}), HDF5 {hdf5} and {mpi} for every variant (`make phdf5`), "
        f"{record['particles'] / 2**20:g}Mi particles per rank ({mib:.0f} MiB per rank per "
        f"step), {record['steps']} steps, {rounds} rounds, commit {record['commit']}; load "
        f"average before / after {record['load_before'][0]:.1f} / "
        f"{record['load_after'][0]:.1f}. Seconds, median (min-max) over the rounds: *observed* "
        "is h5bench's completion time (open to close, max over ranks), *raw* the time inside "
        "the data writes (max over ranks), *metadata* observed - raw, *CPU* the largest CPU "
        "time of a rank (all its threads).",
        "",
        "| variant | observed s | raw s | metadata s | CPU s |",
        "|---|---|---|---|---|",
    ]
    for name in NAMES:
        m = v[name]
        lines.append(
            f"| {name} | **{cell(m['observed'])}** | {cell(m['raw'])} | "
            f"{cell(m['metadata'])} | {cell(m['cpu'])} |"
        )
    lines += [
        "",
        "Observed time, ratio per round (above 1: the numerator took longer; for the "
        "parallel HDF5 rows, h5subfile was faster):",
        "",
        "| ratio | median (min-max) | rounds above 1 |",
        "|---|---|---|",
    ]
    for label, *_ in RATIOS:
        lines.append(
            f"| {label} | **{cell(record['ratios'][label]['observed'], 2)}** | "
            f"{above[label]} of {rounds} |"
        )
    lines += ["", "Reading it:", "", *_reading(record)]
    return "\n".join(lines) + "\n"


def _reading(record: dict) -> list[str]:
    """The bullets under the tables, each computed from the run's numbers."""
    v, rounds, above = record["variants"], record["rounds"], record["above_one"]
    modes = (INDEPENDENT, COLLECTIVE)
    null = record["ratios"][RATIOS[-1][0]]["observed"]

    def median(name: str, metric: str) -> float:
        return v[name][metric]["median"]

    def verdict(ours: str) -> str:
        labels = [f"{m} / {ours}" for m in modes]
        ratios = [record["ratios"][label]["observed"]["median"] for label in labels]
        rounds_won = " and ".join(f"{above[label]}" for label in labels)
        if all(r > 1 for r in ratios):
            said = "faster than both parallel HDF5 modes"
        elif all(r < 1 for r in ratios):
            said = "slower than both parallel HDF5 modes"
        else:
            said = "between the two parallel HDF5 modes"
        return (
            f"{said} (median ratios {ratios[0]:.2f} and {ratios[1]:.2f}; faster in "
            f"{rounds_won} of {rounds} rounds)"
        )

    shared = sorted(median(m, "raw") for m in modes)
    fpp_meta, best_meta = median(FPP, "metadata"), min(median(m, "metadata") for m in modes)
    gained = shared[0] - median(FPP, "raw")
    meta_note = (
        f"{fpp_meta - best_meta:.3f} s more than the better parallel HDF5 mode's "
        f"({best_meta:.3f} s), against {gained:.3f} s gained in the data path"
        if fpp_meta > best_meta
        else f"no more than parallel HDF5's ({best_meta:.3f} s)"
    )
    return [
        f"- **File per process** is {verdict(FPP)}. Each rank writes its own file, so the "
        f"ranks copy into the page cache at the same time: its data path takes "
        f"{median(FPP, 'raw'):.3f} s against {shared[0]:.3f}-{shared[1]:.3f} s for parallel "
        "HDF5. Its metadata (open, groups, datasets, waiting for the other ranks, checksums, "
        f"records, commit) takes {fpp_meta:.3f} s, {meta_note}.",
        f"- **The default plan** is {verdict(DEFAULT)}. It puts every rank's data in one "
        f"file, as parallel HDF5 does, and its data path takes {median(DEFAULT, 'raw'):.3f} s "
        f"(parallel HDF5: {shared[0]:.3f}-{shared[1]:.3f} s; file per process: "
        f"{median(FPP, 'raw'):.3f} s). On {record['filesystem']} (and on XFS) "
        "a buffered write holds the file's inode lock, so the writes of several "
        "processes into one file take turns. "
        + (
            "h5subfile holds the lock for less: a rank writes its block in slices, each "
            "hashed for its checksum just before it is written, so the copy reads it from "
            "the core's cache, and it hashes its next slice while the other rank holds the "
            "lock. That lead pays for its larger metadata"
            if median(DEFAULT, "raw") < shared[0]
            else "The default plan's larger metadata then has nothing to hide behind"
        )
        + f" ({median(DEFAULT, 'metadata'):.3f} s against {best_meta:.3f} s). On a "
        'node-local file system, file per process (`subfiles="rank"`) lets the ranks '
        "write at the same time.",
        f"- **Noise:** file per process against itself gives {cell(null, 2)}, above 1 in "
        f"{above[RATIOS[-1][0]]} of {rounds} rounds: one round proves nothing; the medians "
        "over the rounds and the rounds each side won are what the verdicts read.",
    ]


if __name__ == "__main__":
    main()

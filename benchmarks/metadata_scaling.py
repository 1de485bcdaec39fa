"""Metadata time against rank count: h5subfile against parallel HDF5 (docs/BENCHMARKS.md,
"Metadata at scale"); and the whole VPIC-IO write at 2 ranks.

Every run is one ``h5subfile vpic`` job (h5bench's VPIC-IO layout, ``--json``) under
``mpiexec -n P``, in a fresh folder after an untimed ``sync``:

- scaling: at each rank count (8 ... 256 by default) every configuration (h5subfile file per
  process, 8 ranks per subfile, one file, the default plan; parallel HDF5 independent and
  collective, through
  ``--api phdf5``) with 1,024 particles per rank and 2 steps, so the data is tiny and the time
  is metadata; each repetition runs the configurations in a new shuffled order, all
  repetitions of one rank count before the next rank count;
- whole write: 2 ranks, 4 Mi particles per rank (128 MiB per rank per step), 2 steps, observed
  completion time of h5subfile (default plan, and again as the null comparison; file per
  process) and of parallel HDF5 (independent, collective), repetitions shuffled the same way.

Run it with the parallel-HDF5 environment so that both sides share one MPI library
(``make phdf5`` first):

    .venv-phdf5/bin/python benchmarks/metadata_scaling.py --label "after the rewrite"

Options shorten it (``--ranks 8 16 --reps 2 --whole-reps 2``). Each run's results are kept in
docs/metadata-scaling.json under its label (a new label adds a run, the same label replaces
it); then the whole of docs/BENCHMARKS.md (whose summary reports the last run kept) and its
figures, docs/figures/metadata_scaling.png among them, are rebuilt from every run kept, through
``benchmarks/report.py`` (``--render`` rebuilds them without measuring).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from docplot import caption, environment_warning, mpi_name, rebuild_report
from warm import reports_free_pages, warm_memory

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RESULTS = ROOT / "docs" / "metadata-scaling.json"
FIGURE = ROOT / "docs" / "figures" / "metadata_scaling.png"
MARKDOWN = ROOT / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- metadata-scaling:begin -->", "<!-- metadata-scaling:end -->"

FPP = "h5subfile, file per process"
PHDF5_IND, PHDF5_COLL = "parallel HDF5, independent", "parallel HDF5, collective"
DEFAULT = "h5subfile, default plan"
#: The default plan groups by node: on one machine one file, like ``--subfiles 1``, after rank 0
#: has grouped the ranks' processor names.
SCALING = {
    FPP: ["--subfiles", "rank"],
    "h5subfile, 8 ranks per subfile": ["--ranks-per-subfile", "8"],
    "h5subfile, one file": ["--subfiles", "1"],
    DEFAULT: [],
    PHDF5_IND: ["--api", "phdf5"],
    PHDF5_COLL: ["--api", "phdf5", "--collective"],
}
NULL = "h5subfile, default plan (null: same again)"
WHOLE = {
    DEFAULT: [],
    NULL: [],
    "h5subfile, file per process": ["--subfiles", "rank"],
    PHDF5_IND: ["--api", "phdf5"],
    PHDF5_COLL: ["--api", "phdf5", "--collective"],
}
TIMEOUT = 3600  # seconds per job: a hung job is killed and recorded as failed


def vpic(
    ranks: int, flags: list[str], particles: str, steps: int, folder: Path, warm: float = 0.0
) -> dict:
    """One ``h5subfile vpic`` job: its metrics, the job's wall time and the load before it;
    ``warm`` GiB of memory touched before it (benchmarks/warm.py)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [str(BIN / "mpiexec"), "-n", str(ranks), str(BIN / "h5subfile"), "vpic"]
    command += [str(folder / "run.h5"), "--particles", particles, "--steps", str(steps)]
    command += ["--json", "--quiet", *flags]
    os.sync()  # untimed: no run pays for the previous run's dirty pages
    warm_memory(warm)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
        )
        wall = time.perf_counter() - started
        if result.returncode != 0:
            return dict(error=result.stderr[-2000:], wall_seconds=wall, load=load)
        record = json.loads(result.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return dict(error=f"killed after {TIMEOUT} s", load=load)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    keys = ("metadata_seconds", "observed_seconds", "raw_seconds", "total_bytes")
    return dict({k: record[k] for k in keys}, wall_seconds=wall, load=load)


def measure(args: argparse.Namespace, record: dict, save: Callable[[], None]) -> None:
    """Every configuration at every point, appended to ``record`` and saved after each job."""
    rng = random.Random(args.seed)
    points = [("whole", 2, WHOLE, args.whole_particles, args.steps)] if args.whole_reps else []
    points += [("scaling", p, SCALING, args.particles, args.steps) for p in args.ranks]
    with tempfile.TemporaryDirectory(prefix="h5subfile-scaling-", dir=args.workdir) as tmp:
        for kind, ranks, configs, particles, steps in points:
            reps = args.whole_reps if kind == "whole" else args.reps
            if kind == "scaling" and ranks <= args.small:
                reps = max(reps, args.small_reps)
            done = [r["repetition"] for r in record[kind] if r["ranks"] == ranks]
            first = 1 + max(done) if done else 0  # --extend: after the repetitions kept
            for rep in range(first, first + reps):
                order = list(configs)
                rng.shuffle(order)
                for label in order:
                    if kind == "scaling" and label not in args.configs:
                        continue
                    warm = args.warm if kind == "whole" else 0.0
                    job = Path(tmp) / "job"
                    result = vpic(ranks, configs[label], particles, steps, job, warm)
                    result.update(kind=kind, ranks=ranks, config=label, repetition=rep)
                    record[kind].append(result)
                    shown = result.get("error", "").strip().splitlines()[-1:] or [
                        f"metadata {result['metadata_seconds']:.3f} s, observed "
                        f"{result['observed_seconds']:.3f} s, job {result['wall_seconds']:.1f} s"
                    ]
                    print(f"[{kind} P={ranks} rep {rep + 1}] {label}: {shown[0]}", flush=True)
                    save()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def environment() -> dict:
    """What ran: the checkout, the libraries of this environment (both sides use them)."""
    from h5subfile.bench.report import machine, versions

    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return dict(
        commit=git("rev-parse", "--short", "HEAD") + (" (with local changes)" if dirty else ""),
        subject=git("log", "-1", "--format=%s")[:100],
        machine=machine(),
        versions=versions(""),
        mpiexec=str(BIN / "mpiexec"),
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    )


# Rendering: tables, targets, the figure ------------------------------------------------------
def values(runs: list[dict], ranks: int, config: str, key: str) -> list[float]:
    return [r[key] for r in runs if r["ranks"] == ranks and r["config"] == config and key in r]


def cell(samples: list[float], digits: int = 2) -> str:
    if not samples:
        return "-"
    return f"**{statistics.median(samples):.{digits}f}** ({min(samples):.{digits}f}-{max(samples):.{digits}f})"


def paired(runs: list[dict], ranks: int, top: str, bottom: str, key: str) -> list[float]:
    """Per-repetition ratios top / bottom (the two ran in the same repetition)."""
    by_rep: dict[tuple[str, int], float] = {
        (r["config"], r["repetition"]): r[key] for r in runs if r["ranks"] == ranks and key in r
    }
    reps = sorted({rep for _, rep in by_rep})
    return [
        by_rep[(top, rep)] / by_rep[(bottom, rep)]
        for rep in reps
        if (top, rep) in by_rep and (bottom, rep) in by_rep and by_rep[(bottom, rep)] > 0
    ]


def median_of(runs: list[dict], ranks: int, config: str, key: str) -> float:
    samples = values(runs, ranks, config, key)
    return statistics.median(samples) if samples else float("nan")


def scaling_table(run: dict, key: str = "metadata_seconds") -> list[str]:
    runs = run["scaling"]
    configs = [c for c in SCALING if any(r["config"] == c for r in runs)]
    lines = [
        "| ranks | " + " | ".join(configs) + " | file per process / best parallel HDF5 "
        "| job wall s (all configs) | load |",
        "|---" * (len(configs) + 4) + "|",
    ]
    for ranks in sorted({r["ranks"] for r in runs}):
        best = min(
            (c for c in (PHDF5_IND, PHDF5_COLL) if values(runs, ranks, c, key)),
            key=lambda c: median_of(runs, ranks, c, key),
            default=None,
        )
        ratio = cell(paired(runs, ranks, FPP, best, key)) if best else "-"
        here = [r for r in runs if r["ranks"] == ranks]
        wall = [r["wall_seconds"] for r in here if "wall_seconds" in r]
        loads = [r["load"] for r in here]
        failed = sum("error" in r for r in here)
        note = f" ({failed} failed)" if failed else ""
        cells = [cell(values(runs, ranks, c, key), 3) for c in configs]
        lines.append(
            f"| {ranks}{' (oversubscribed)' if ranks > 2 else ''}{note} | "
            + " | ".join(cells)
            + f" | {ratio} | {statistics.median(wall) if wall else float('nan'):.0f} "
            f"| {min(loads):.1f}-{max(loads):.1f} |"
        )
    return lines


def whole_table(run: dict) -> list[str]:
    runs = run["whole"]
    lines = [
        "| configuration | observed s | raw s | metadata s | parallel HDF5 indep. / this "
        "| parallel HDF5 coll. / this |",
        "|---|---|---|---|---|---|",
    ]
    for config in WHOLE:
        ratios = [
            "-"
            if config.startswith("parallel")
            else cell(paired(runs, 2, p, config, "observed_seconds"))
            for p in (PHDF5_IND, PHDF5_COLL)
        ]
        lines.append(
            f"| {config} | {cell(values(runs, 2, config, 'observed_seconds'), 3)} "
            f"| {cell(values(runs, 2, config, 'raw_seconds'), 3)} "
            f"| {cell(values(runs, 2, config, 'metadata_seconds'), 3)} | {ratios[0]} | {ratios[1]} |"
        )
    null = paired(runs, 2, NULL, DEFAULT, "observed_seconds")
    lines += [
        "",
        f"Null comparison (the default plan against itself, same repetition): {cell(null)}.",
    ]
    return lines


def targets(run: dict) -> list[str]:
    runs, whole = run["scaling"], run["whole"]
    lines = ["| target | measured | met |", "|---|---|---|"]
    low, high = (
        median_of(runs, 32, FPP, "metadata_seconds"),
        median_of(runs, 128, FPP, "metadata_seconds"),
    )
    if low == low and high == high:
        growth = high / low
        lines.append(
            f"| file per process: metadata time grows at most x5 from 32 to 128 ranks | "
            f"x{growth:.1f} ({low:.2f} s -> {high:.2f} s) | {'yes' if growth <= 5 else '**no**'} |"
        )
    for config in (FPP, "h5subfile, 8 ranks per subfile", "h5subfile, one file", DEFAULT):
        slower = []
        counts = sorted({r["ranks"] for r in runs if r["config"] == config})
        for ranks in counts:
            times = [median_of(runs, ranks, c, "metadata_seconds") for c in (PHDF5_IND, PHDF5_COLL)]
            times = [t for t in times if t == t]
            if times and median_of(runs, ranks, config, "metadata_seconds") >= min(times):
                slower.append(str(ranks))
        missing = sorted({r["ranks"] for r in runs} - set(counts))
        if counts:
            verdict = "**no**" if slower else "not measured at " + ", ".join(map(str, missing))
            lines.append(
                f"| {config}: metadata time below parallel HDF5's (best of independent and "
                f"collective) at every rank count | slower at "
                f"{', '.join(slower) or 'none'} of {', '.join(map(str, counts))} ranks "
                f"| {verdict if slower or missing else 'yes'} |"
            )
    for config in (DEFAULT, "h5subfile, file per process"):
        for phdf5 in (PHDF5_IND, PHDF5_COLL):
            ratio = paired(whole, 2, phdf5, config, "observed_seconds")
            if ratio:
                met = median_of(whole, 2, config, "observed_seconds") < median_of(
                    whole, 2, phdf5, "observed_seconds"
                )
                lines.append(
                    f"| 2 ranks, whole VPIC write: {config} faster than {phdf5} | "
                    f"{phdf5} / h5subfile = {cell(ratio)} | {'yes' if met else '**no**'} |"
                )
    return lines


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    colours = dict(zip(SCALING, ("C0", "C1", "C2", "C5", "C3", "C4")))
    labels = list(record["runs"])
    for number, label in enumerate(labels):
        runs = record["runs"][label]["scaling"]
        latest = number == len(labels) - 1
        for config in SCALING:
            counts = sorted(
                {r["ranks"] for r in runs if values(runs, r["ranks"], config, "metadata_seconds")}
            )
            if not counts:
                continue
            samples = [values(runs, p, config, "metadata_seconds") for p in counts]
            mid = [statistics.median(s) for s in samples]
            err = [
                [m - min(s) for m, s in zip(mid, samples)],
                [max(s) - m for m, s in zip(mid, samples)],
            ]
            name = f"{config} [{label}]" if latest else None  # earlier runs: one entry below
            ax.errorbar(
                counts,
                mid,
                yerr=err,
                color=colours[config],
                marker="o" if latest else "x",
                linestyle="-" if latest else ":",
                alpha=1.0 if latest else 0.55,
                capsize=3,
                label=name,
            )
    if len(labels) > 1:
        earlier = (
            f"earlier runs ({len(labels) - 1}): same colours; purple: parallel HDF5, collective"
        )
        ax.plot([], [], color="grey", marker="x", linestyle=":", alpha=0.55, label=earlier)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("MPI ranks (2 cores: oversubscribed beyond 2)")
    ax.set_ylabel("metadata time, s (median; bars: min-max)")
    ax.set_title("VPIC-IO, 1,024 particles per rank, 2 steps: metadata time")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(record: dict, latest_only: bool = False) -> str:
    """The section: every run of ``record``, or (``latest_only``, for the reference document)
    the latest with a pointer to the earlier ones in docs/BENCHMARKS-HISTORY.md."""
    latest = list(record["runs"])[-1]
    spread = max(
        max(samples) / min(samples)
        for run in record["runs"].values()
        for part in (run["scaling"], run["whole"])
        for ranks, config in {(r["ranks"], r["config"]) for r in part}
        for samples in [values(part, ranks, config, "observed_seconds")]
        if samples and min(samples) > 0
    )
    warned = set()
    for run in record["runs"].values():
        v = run["versions"]
        warned.add(
            "\n".join(environment_warning(v["hdf5"], v["mpi"], "`make phdf5`, in `.venv-phdf5`"))
        )
    lines = [
        BEGIN,
        "## Metadata at scale",
        "",
        *sorted(warned),
        "",
        "Generated by `benchmarks/metadata_scaling.py` from docs/metadata-scaling.json; do not "
        "edit by hand. The question: how h5subfile's metadata time (h5bench's "
        "*Metadata time*: observed completion time minus the time inside the data writes, max "
        "over ranks) grows with the rank count, against parallel HDF5 writing the same VPIC-IO "
        "layout into one shared file (`h5subfile vpic --api phdf5 [--collective]`: h5py's "
        "`mpio` driver, h5bench's way). Every run is one `mpiexec -n P h5subfile vpic` job with "
        "an untimed `sync` before it; at each rank count every configuration runs once per "
        "repetition in a shuffled order; cells are **median** (min-max) over repetitions, "
        "ratios are per repetition (the two configurations of one repetition) with their "
        "median and range. Reproduce (after `make phdf5`; both sides then use the same MPI "
        "library and HDF5 build), one command:",
        "",
        "```sh",
        '.venv-phdf5/bin/python benchmarks/metadata_scaling.py --label "after the rewrite"',
        "```",
        "",
        "(`--ranks 8 16 32 --reps 3 --whole-reps 2` for a quick look). "
        "**The machine has 2 cores: every rank count above 2 is oversubscribed** (256 ranks "
        "are 128 per core), the disk and page cache are shared with other jobs (the load average "
        "before each job is recorded), and the same job varied up to "
        f"{spread:.1f}x between repetitions (slowest / fastest observed time of one "
        "configuration at one rank count, over every run below). "
        "The time is dominated by ranks waiting for the CPU; on a real cluster (a core per "
        "rank) every absolute number here would be far lower, while the ratios between "
        "configurations measured in one run are what this table is for.",
        "",
        "Targets: (1) file per process, metadata time grows at most x5 from 32 "
        "to 128 ranks; (2) metadata time below parallel HDF5's at every rank count; (3) at 2 "
        "ranks, the whole VPIC write (128 MiB per rank per step, 2 steps, observed completion "
        "time) faster than parallel HDF5 independent and collective.",
        "",
        "![metadata time vs ranks](figures/metadata_scaling.png)",
        "",
        caption(
            "M1",
            "Metadata time against rank count, log-log: the median over the repetitions of "
            "each run (markers) with the minimum and maximum (error bars); solid lines the "
            f"latest run ({latest}), dotted the earlier ones. 2 cores: every point above 2 "
            "ranks is oversubscribed.",
        ),
    ]
    shown = record["runs"]
    if latest_only:
        shown = {latest: record["runs"][latest]}
        lines += [
            "",
            f"The latest run follows; the {len(record['runs']) - 1} earlier ones, each with its "
            "commit, are in [BENCHMARKS-HISTORY.md](BENCHMARKS-HISTORY.md#metadata-at-scale).",
        ]
    for label, run in shown.items():
        m, v, s = run["machine"], run["versions"], run["settings"]
        lines += [
            "",
            f"### {label}",
            "",
            f"- commit `{run['commit']}` ({run['subject']}); measured {run['started']} to "
            f"{run.get('finished', '(unfinished)')}",
            f"- machine: {m['hostname']}, {m['cores']} cores (**oversubscribed above 2 "
            f"ranks**), {run['memory_gib']} GiB, {m['platform']}; load average (1 min) before "
            f"the jobs {run['load_before']:.1f}, after {run.get('load_after', float('nan')):.1f}",
            f"- MPI: {mpi_name(v['mpi'])} (mpi4py {v['mpi4py']}), `{run['mpiexec']}` for every job; "
            f"h5py {v['h5py']} with HDF5 {v['hdf5']} (MPI: {v['h5py_mpi']}), numpy "
            f"{v['numpy']}, h5subfile {v['h5subfile']}",
            f"- scaling: {s['particles']} particles per rank, {s['steps']} steps; "
            f"{s['reps']} repetitions ({s['small_reps']} up to {s['small']} ranks); whole "
            f"write: 2 ranks, {s['whole_particles']} particles per rank, {s['whole_reps']} "
            "repetitions"
            + (
                f", {s['warm']:g} GiB of memory touched before each job (`benchmarks/warm.py`)"
                if s.get("warm")
                else ""
            ),
            "",
            "Metadata time, seconds (oversubscribed beyond 2 ranks):",
            "",
            *scaling_table(run),
            "",
            "Observed completion time (open to close, max over ranks), seconds, same jobs "
            "(oversubscribed beyond 2 ranks); it differs from the metadata time by the time "
            "inside the data writes, which is large only for collective parallel HDF5 "
            "(two-phase I/O of tiny blocks on ranks waiting for the CPU):",
            "",
            *scaling_table(run, "observed_seconds"),
        ]
        if run["whole"]:
            lines += [
                "",
                "Whole VPIC write at 2 ranks (not oversubscribed), seconds; ratios above 1 "
                "mean h5subfile is faster:",
                "",
                *whole_table(run),
            ]
        lines += ["", "Targets:", "", *targets(run)]
        if run.get("notes"):
            lines += ["", *run["notes"]]
    return "\n".join([*lines, END])


def publish(record: dict) -> None:
    """Rebuild docs/BENCHMARKS.md whole (its summary reads this section's data too) and every
    figure, from the saved results (``record`` is what RESULTS holds)."""
    rebuild_report()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default=None, help="this run's name (default: the commit)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--reps", type=int, default=3, help="repetitions per point")
    parser.add_argument("--small", type=int, default=32, help="up to this many ranks...")
    parser.add_argument("--small-reps", type=int, default=5, help="...this many repetitions")
    parser.add_argument("--configs", nargs="+", default=list(SCALING), choices=list(SCALING))
    parser.add_argument("--particles", default="1024", help="per rank, scaling runs")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--whole-reps", type=int, default=5, help="0: no whole-write runs")
    parser.add_argument("--whole-particles", default="4Mi", help="per rank, whole write")
    parser.add_argument(
        "--warm",
        type=float,
        default=None,
        help="GiB of memory touched before each whole-write job (benchmarks/warm.py; default "
        "2 where the kernel hands freed memory back to its host, else 0)",
    )
    parser.add_argument("--seed", type=int, default=20261123, help="of the shuffled orders")
    parser.add_argument("--workdir", type=Path, default=None, help="where the files go (TMPDIR)")
    parser.add_argument("--render", action="store_true", help="only rebuild the docs")
    parser.add_argument(
        "--extend", action="store_true", help="add these jobs to the run of the same label"
    )
    args = parser.parse_args()
    if args.warm is None:
        args.warm = 2.0 if reports_free_pages() else 0.0
    record = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"runs": {}}
    if not args.render:
        import h5py

        if not h5py.get_config().mpi:
            print(f"{sys.executable}: h5py has no MPI; run `make phdf5` and use "
                  ".venv-phdf5/bin/python", file=sys.stderr)  # fmt: skip
            return 1
        run = dict(environment(), settings={**vars(args), "workdir": str(args.workdir)})
        run.update(started=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        run.update(load_before=os.getloadavg()[0], scaling=[], whole=[])
        label = args.label or f"commit {run['commit']}"
        if args.extend and label in record["runs"]:  # more points for a run already kept
            kept = record["runs"][label]
            run.update(scaling=kept["scaling"], whole=kept["whole"], notes=kept.get("notes"))
            run.update(started=kept["started"], load_before=kept["load_before"])
            run["settings"] = dict(kept["settings"], extended=run["settings"])
        record["runs"].pop(label, None)
        record["runs"][label] = run

        def save() -> None:
            RESULTS.write_text(json.dumps(record, indent=1, default=str) + "\n")

        measure(args, run, save)
        run.update(finished=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        run.update(load_after=os.getloadavg()[0])
        save()
    publish(record)
    print(f"wrote {RESULTS}, {MARKDOWN} and its figures", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

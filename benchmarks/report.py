"""Rebuild docs/BENCHMARKS.md and docs/figures/ from the saved results in docs/*.json.

Nothing is measured here: every table, figure and number of the document is computed from the
JSON files that the measuring scripts wrote (or, for three sections measured by hand, from
docs/recorded-results.json, which holds their text and tables as they were recorded). The
summary at the top is computed from the same data as the tables below it.

Usage (from the repository, after `make test` created .venv):

    .venv/bin/python benchmarks/report.py            # the document and every figure
    .venv/bin/python benchmarks/report.py --check    # exit 1 if the document is out of date

Each section's own generator renders it (``paper_experiment.render``,
``storage_experiment.render``, ``metadata_scaling.render``, ...); this script puts them in
order under the header and the summary. Rendering needs neither MPI nor matplotlib; drawing the
figures needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import async_overlap  # noqa: E402
import checksum_cost  # noqa: E402
import metadata_heavy  # noqa: E402
import metadata_scaling  # noqa: E402
import open_scaling  # noqa: E402
import paper_experiment  # noqa: E402
import profile_cost  # noqa: E402
import read_patterns  # noqa: E402
import repack_experiment  # noqa: E402
import storage_experiment  # noqa: E402
import undeclared  # noqa: E402
import whole_write  # noqa: E402
import write_behind  # noqa: E402
import write_patterns  # noqa: E402
import write_slices  # noqa: E402
from docplot import MAKE_HDF5, MAKE_MPI, bars, caption, environment_warning  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKDOWN = DOCS / "BENCHMARKS.md"
HISTORY_MARKDOWN = DOCS / "BENCHMARKS-HISTORY.md"
FIGURES = DOCS / "figures"
DATA = {
    "paper": "benchmarks-results.json",
    "storage": "storage-results.json",
    "recorded": "recorded-results.json",
    "metadata": "metadata-scaling.json",
    "master": "master-size.json",
    "open": "open-scaling.json",
    "repack_512mib": "repack-results-512mib.json",
    "repack_1gib": "repack-results-1gib.json",
    "repack_2gib": "repack-results-2gib.json",
    "checksums": "checksum-cost.json",
    "profile": "profile-cost.json",
    "async": "async-overlap.json",
    "whole": "whole-write.json",
    "undeclared": "undeclared.json",
    "patterns": "write-patterns.json",
    "patterns_overlap": "write-patterns-overlap.json",
    "slices": "write-slices.json",
    "patterns_trust": "write-patterns-trust.json",
    "patterns_trust_big": "write-patterns-trust-big.json",
    "patterns_quiet": "write-patterns-quiet.json",
    "heavy": "metadata-heavy.json",
    "patterns_metadata": "write-patterns-metadata.json",
    "patterns_metadata_vpic": "write-patterns-metadata-vpic.json",
    "patterns_scales": "write-patterns-scales.json",
    "patterns_scales_vpic": "write-patterns-scales-vpic.json",
    "patterns_one_round": "write-patterns-one-round.json",
    "patterns_proven": "write-patterns-proven-copies.json",
    "patterns_announced": "write-patterns-announced.json",
    "patterns_master_attrs": "write-patterns-master-attributes.json",
    "patterns_creation_trim": "write-patterns-creation-trim.json",
    "patterns_offsets": "write-patterns-offsets.json",
    "reads_merged": "read-patterns-merged.json",
    "patterns_merged": "write-patterns-merged.json",
    "reads": "read-patterns.json",
    "patterns_consolidated": "write-patterns-consolidated.json",
    "behind": "write-behind.json",
    "patterns_ways": "write-patterns-ways.json",
    "reads_ways": "read-patterns-ways.json",
    "patterns_next_piece": "write-patterns-next-piece.json",
    "patterns_next_piece_vpic": "write-patterns-next-piece-vpic.json",
    "patterns_reads": "write-patterns-reads.json",
    "patterns_folder_fsync": "write-patterns-folder-fsync.json",
    "reads_boxes": "read-patterns-boxes.json",
}
PAPER_TITLE = paper_experiment.TITLE
SHORT = {PAPER_TITLE: "VPIC-IO / IOR"}
SUMMARY_BEGIN, SUMMARY_END = "<!-- summary:begin -->", "<!-- summary:end -->"


def load(docs: Path = DOCS) -> dict[str, dict]:
    return {key: json.loads((docs / name).read_text()) for key, name in DATA.items()}


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", title.lower().replace("`", ""))
    return "#" + text.replace(" ", "-")


# Sections recorded by hand (docs/recorded-results.json) --------------------------------------
def table(header: list[str], rows: list[list[str]]) -> list[str]:
    def row(cells: list[str]) -> str:
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"

    return [row(header), "|---" * len(header) + "|", *(row(r) for r in rows)]


def recorded(section: dict) -> str:
    lines = [f"## {section['title']}", ""]
    for block in section["blocks"]:
        if "text" in block:
            lines.append(block["text"])
        else:
            lines += table(block["table"]["header"], block["table"]["rows"])
    return "\n".join(lines)


# Master size ------------------------------------------------------------------------------------
MASTER_TITLE = "Master size and open time against VDS mappings"


def master_row(data: dict, ranks: int, grouping: str) -> dict:
    return next(r for r in data["rows"] if r["ranks"] == ranks and r["grouping"] == grouping)


def ms(row: dict, key: str) -> str:
    s = row["seconds"][key]
    return f"{1000 * s['median']:.1f} ({1000 * s['min']:.1f}-{1000 * s['max']:.1f})"


def master(data: dict) -> str:
    m = data["machine"]
    rows = data["rows"]
    lines = [
        f"## {MASTER_TITLE}",
        "",
        f"Measured with the HDF5 that `make` installs ({m['hdf5']}), in one process (no MPI)."
        if m["hdf5"] == MAKE_HDF5
        else f"> **Different software from `make`:** HDF5 {m['hdf5']}, not {MAKE_HDF5}.",
        "",
        "One dataset (`/Timestep_0/x` of a VPIC-IO step, 1 Mi float32 particles per rank) "
        "written into a master exactly as rank 0 publishes it (`io/h5.py`: our version bounds "
        "and 64 KiB metadata block, the virtual dataset over every extent planned by the "
        "engine's planner, the layout record as it is after close, with one checksum per "
        "rank's block, and the root record); the sources are not written (HDF5 opens a "
        "virtual dataset without them). Measured with (one process, no MPI job):",
        "",
        "```sh",
        f".venv/bin/python benchmarks/master_size.py --repeats {data['repeats']} "
        "--json docs/master-size.json",
        "```",
        "",
        f"Times are CPU milliseconds of the measuring process (median of {data['repeats']}, "
        "min-max), on the page-cached file: *open* = `h5py.File` + the dataset opened + shape "
        "and dtype; *first element* = `d[0]` after an open; *HDF5 facts* = what h5subfile's "
        "open asks HDF5 of the dataset (`io/h5.hdf5_facts`, every mapping); *record checks* = "
        "the record parsed and cross-checked (`DatasetLayout.from_json` + "
        "`layout/validate.layout_problem`). Machine: "
        f"{m['cpus']} cores, {m['platform']}, shared with other jobs (load average at the end "
        f"of the run: {' / '.join(f'{x:.0f}' for x in m['load_average'])} over 1 / 5 / 15 "
        "min), so even CPU times are inflated and noisy; "
        f"h5py {m['h5py']} with HDF5 {m['hdf5']}.",
        "",
        "| ranks | grouping | VDS mappings | master bytes | layout record bytes | open ms CPU "
        "| first element ms CPU | HDF5 facts ms CPU | record checks ms CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['ranks']} | {r['grouping']} | {r['mappings']} | {r['master_bytes']} | "
            f"{r['record_bytes']} | "
            + " | ".join(ms(r, k) for k in ("open", "first", "facts", "validate"))
            + " |"
        )
    fpp = [r for r in rows if r["grouping"] == "file per process"]
    big = max(fpp, key=lambda r: r["mappings"])
    grouped = sorted(
        (r for r in rows if r["ranks"] == big["ranks"] and r is not big),
        key=lambda r: -r["mappings"],
    )
    fewest = grouped[-1] if grouped else big
    per_mapping = (
        (big["master_bytes"] - big["record_bytes"])
        - (fewest["master_bytes"] - fewest["record_bytes"])
    ) / max(big["mappings"] - fewest["mappings"], 1)

    def med(row: dict, key: str) -> float:
        return float(row["seconds"][key]["median"])

    lines += [
        "",
        "- **Coalescing is what keeps the master small and quick to open.** With file per "
        f"process, going from {fewest['mappings']} to {big['mappings']} mappings at "
        f"{big['ranks']} ranks adds ~{per_mapping:.0f} bytes per mapping to the master besides "
        "the layout record (the virtual dataset's mapping and the root record's entry for the "
        "subfile), and HDF5's open "
        f"(~{1e6 * med(big, 'open') / big['mappings']:.1f} us per mapping), first read and the "
        "facts h5subfile asks at open "
        f"(~{1e6 * med(big, 'facts') / big['mappings']:.0f} us per mapping) grow with the "
        f"mappings: {big['mappings']} mappings cost {1000 * med(big, 'open'):.1f} ms to open, "
        f"{1000 * med(big, 'facts'):.1f} ms of facts and {1000 * med(big, 'validate'):.1f} ms "
        "of record checks per dataset. "
        + " ".join(
            f"With {r['grouping']} the same {r['ranks']} ranks need {r['mappings']} mappings "
            f"(open {1000 * med(r, 'open'):.1f} ms, facts {1000 * med(r, 'facts'):.1f} ms)."
            for r in grouped
        ),
        "- **What stays:** the record lists every rank and, after close, every rank's block "
        "checksum, so the record (and the time to parse and check it) is O(ranks) whatever the "
        f"grouping: {fewest['record_bytes']} bytes (~{fewest['record_bytes'] / fewest['ranks']:.0f}"
        f" per rank) and {1000 * med(fewest, 'validate'):.1f} ms of checks for "
        f"{fewest['ranks']} ranks even with {fewest['mappings']} mappings.",
        "- **Record checks are linear** (one pass over the extents, a sort per axis to rule out "
        f"overlaps): ~{1e6 * med(big, 'validate') / big['mappings']:.0f} us per mapping with "
        "file per process.",
    ]
    return "\n".join(lines)


# Repack -----------------------------------------------------------------------------------------
REPACK_TITLE = "Repack: `h5subfile repack` against `h5repack -l CONTI`"
REPACK_COMMANDS = ("repack 1 rank", "repack 2 ranks")
REPACK_LABELS = {
    "h5repack": "`h5repack -l CONTI`",
    "h5repack again": "`h5repack -l CONTI` again (null)",
    "repack 1 rank": "`h5subfile repack`, 1 rank",
    "repack 2 ranks": "`h5subfile repack`, 2 ranks",
    "start-up, 2 ranks": "start-up only, 2 ranks (imports, MPI, one barrier; nothing copied)",
}


def _repack_reasons(data: dict) -> list[str]:
    summary, cores = data["summary"], data["machine"]["cores"]
    busy = data["load_average"]["median"] > cores
    reasons = []
    startup = summary.get(repack_experiment.STARTUP)
    if startup is not None:
        whole = summary["repack 2 ranks"]["median"]
        reasons.append(
            f"- **Start-up.** Starting 2 ranks with what `repack` imports (`mpiexec`, Python, "
            f"numpy, h5py, mpi4py, h5subfile) and one barrier takes {startup['median']:.2f} s "
            f"(row *{repack_experiment.STARTUP}*) of the 2-rank command's {whole:.2f} s on the "
            f"{repack_experiment.size_name(data['input']['bytes'])} input; h5repack is one C "
            "process."
        )
    else:
        reasons.append(
            "- **Start-up.** `mpiexec`, Python, numpy, h5py, mpi4py and h5subfile start "
            "before any byte is copied; h5repack is one C process (not timed in this run)."
        )
    two, one = summary["repack 2 ranks"]["median"], summary["repack 1 rank"]["median"]
    reasons.append(
        f"- **{'No free core for the second rank' if busy else 'Two ranks on two cores'}.** "
        f"2 ranks took {two:.2f} s against {one:.2f} s for 1 (medians)"
        + (
            f"; with a load average above {cores} a second rank gets no core of its own."
            if busy
            else "; the copy runs at page-cache speed, which two ranks share."
        )
    )
    reasons.append(
        "- **Extra work per byte.** h5subfile hashes every written piece (xxh3_64, for "
        "`verify`; see *Cost of the checksums*) and agrees each collective step; h5repack "
        "only copies."
    )
    return reasons


REPACK_VERDICTS = {
    "faster": "faster than h5repack",
    "slower": "slower than h5repack",
    "level": "level with h5repack (inside the null comparison's middle half)",
}


def repack_ratios(data: dict, key: str) -> list[float]:
    """h5repack's time / command ``key``'s, repetition by repetition (above 1: ``key`` faster)."""
    times = data["times"]
    return [r / s for r, s in zip(times[repack_experiment.REFERENCE], times[key])]


def null_band(data: dict) -> tuple[float, float]:
    """The middle half (quartiles) of the null comparison's per-repetition ratios: how far two
    runs of the same h5repack differ. Quartiles, not the extremes, so that more repetitions
    narrow the band instead of widening it with each outlier."""
    quartiles = statistics.quantiles(repack_ratios(data, repack_experiment.NULL), n=4)
    return quartiles[0], quartiles[2]


def repack_verdict(data: dict, key: str) -> str:
    """Command ``key`` against h5repack: ``faster`` when its median ratio is above the
    :func:`null_band`, ``slower`` below it, ``level`` inside it."""
    ratio = data["summary"][key]["speedup_median"]
    low, high = null_band(data)
    if low <= ratio <= high:
        return "level"
    return "faster" if ratio > high else "slower"


def _repack_verdicts(data: dict) -> str:
    """Each repack command's ratio, range, repetitions won and :func:`repack_verdict`."""
    parts = []
    for key in REPACK_COMMANDS:
        row, ratios = data["summary"][key], repack_ratios(data, key)
        won = sum(r > 1 for r in ratios)
        parts.append(
            f"{key.split(' ', 1)[1]}: **{row['speedup_median']:.2f}** ({row['speedup_min']:.2f}-"
            f"{row['speedup_max']:.2f}; faster in {won} of {len(ratios)} repetitions), "
            f"{REPACK_VERDICTS[repack_verdict(data, key)]}"
        )
    return "; ".join(parts)


def _repack_run(data: dict, figure: str, number: str) -> list[str]:
    """The command, machine, table and figure of one repack run."""
    rows = {REPACK_LABELS.get(k, k): v for k, v in data["summary"].items()}
    load = data["load_average"]
    v, m = data["versions"], data["machine"]
    inp = data["input"]
    warm = data.get("warm_gib")  # runs before memory warming have none
    return [
        "```sh",
        f".venv/bin/python benchmarks/repack_experiment.py --reps {data['reps']} "
        f"--particles {inp['particles_per_rank']} --steps {inp['steps']}"
        + (f" --warm {warm:g}" if warm is not None else ""),
        "```",
        "",
        f"Input: {inp['bytes'] / 2**20:.0f} MiB (2 writer ranks x {inp['particles_per_rank']} "
        f"particles x {inp['steps']} steps); {data['reps']} repetitions"
        + (
            f", {warm:g} GiB of memory touched before each run (`benchmarks/warm.py`)"
            if warm
            else ""
        )
        + ". Machine: "
        f"{m['hostname']}, {m['cores']} cores, {m['platform']}; page cache (the whole file "
        "fits); "
        + ("**heavily shared while measuring**: " if load["median"] > m["cores"] else "")
        + f"load average {load['min']:.1f}-{load['max']:.1f} on {m['cores']} cores (median "
        f"{load['median']:.1f}). h5subfile ran with h5py "
        f"{v['h5py']}, HDF5 {v['hdf5']}, {' '.join(v['mpi'].replace('Version:', '').split())}.",
        "",
        repack_experiment.table(rows, inp["bytes"]),
        "",
        f"![repack](figures/{figure})",
        "",
        caption(
            number,
            f"Whole-command time of each repack command on the {inp['bytes'] / 2**20:.0f} MiB "
            f"input: median over {data['reps']} repetitions (bars), minimum and maximum "
            "(whiskers), log scale.",
        ),
        "",
        f"h5repack / h5subfile repack, {inp['bytes'] / 2**20:.0f} MiB: {_repack_verdicts(data)}"
        + f". Null comparison (h5repack against itself): {_null_text(data)}.",
        "",
    ]


def _null_text(data: dict) -> str:
    null = data["summary"][repack_experiment.NULL]
    low, high = null_band(data)
    return (
        f"{null['speedup_median']:.2f} ({null['speedup_min']:.2f}-{null['speedup_max']:.2f}; "
        f"middle half {low:.2f}-{high:.2f})"
    )


def repack_runs(data: dict[str, dict]) -> list[dict]:
    """The repack runs, smallest input first."""
    runs = [data[key] for key in DATA if key.startswith("repack_")]
    return sorted(runs, key=lambda run: run["input"]["bytes"])


def repack_figure(run: dict) -> str:
    """docs/figures/repack-512mib.png, ... for the run's input size."""
    return f"repack-{repack_experiment.size_slug(run['input']['bytes'])}.png"


def _repack_by_size(runs: list[dict]) -> list[str]:
    """One row per input size (medians), and from which size each command beats h5repack."""
    lines = [
        "| input | h5repack, s | start-up only, 2 ranks, s | `h5subfile repack` 1 rank, s "
        "| 2 ranks, s | h5repack / 1 rank | h5repack / 2 ranks |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        row = run["summary"]
        startup = row.get(repack_experiment.STARTUP)
        lines.append(
            f"| {repack_experiment.size_name(run['input']['bytes'])} | "
            f"{row['h5repack']['median']:.2f} | "
            + (f"{startup['median']:.2f}" if startup else "-")
            + f" | {row['repack 1 rank']['median']:.2f} | {row['repack 2 ranks']['median']:.2f} | "
            f"**{row['repack 1 rank']['speedup_median']:.2f}** | "
            f"**{row['repack 2 ranks']['speedup_median']:.2f}** |"
        )
    lines.append("")
    for key in REPACK_COMMANDS:
        lines.append(
            f"- `h5subfile repack`, {key.split(' ', 1)[1]}: {repack_crossover(runs, key)}."
        )
    return lines


def repack_crossover(runs: list[dict], key: str) -> str:
    """Command ``key``'s :func:`repack_verdict` by input size, neighbouring sizes of the same
    verdict together: where it starts to beat h5repack."""
    groups: list[tuple[str, list[str]]] = []
    for run in runs:
        verdict, size = repack_verdict(run, key), repack_experiment.size_name(run["input"]["bytes"])
        if groups and groups[-1][0] == verdict:
            groups[-1][1].append(size)
        else:
            groups.append((verdict, [size]))
    return "; ".join(f"{REPACK_VERDICTS[v]} at {', '.join(sizes)}" for v, sizes in groups)


def repack(runs: list[dict]) -> str:
    smallest, largest = runs[0], runs[-1]
    v, sizes = smallest["versions"], largest["summary"]
    startup, ref = sizes[repack_experiment.STARTUP]["median"], sizes["h5repack"]["median"]
    one, two = sizes["repack 1 rank"]["median"], sizes["repack 2 ranks"]["median"]
    names = [repack_experiment.size_name(r["input"]["bytes"]) for r in runs]
    files = ", ".join(
        f"`docs/{repack_experiment.results_path(r['input']['bytes']).name}`" for r in runs
    )
    lines = [
        f"## {REPACK_TITLE}",
        "",
        *environment_warning(v["hdf5"], v["mpi"], "`make`"),
        "",
        "Converting a subfiled file (a master of virtual datasets over two subfiles) into one "
        "conventional HDF5 file, the same input for both tools: a VPIC-IO file written by "
        f"`h5subfile vpic --subfiles 2`, of {', '.join(names[:-1])} and {names[-1]}. Measured "
        "with `benchmarks/repack_experiment.py` (below), which writes every run's time, "
        f"machine, versions and load average to {files}. Commands: `h5repack -l CONTI IN OUT` "
        "(Debian's hdf5-tools, serial), the same again (the null comparison), and `mpiexec -n P "
        "h5subfile repack IN OUT --subfiles 1 --quiet` at P = 1 and 2. Each time is the whole "
        "command, process start to exit (both pay their start-up; h5subfile's bytecode is "
        "compiled before the runs, as an installed package has it), after an untimed `sync`, "
        "the output removed after each run; the commands run in an order shuffled anew each "
        "repetition. Before timing, both outputs were checked value for value against the input "
        "with plain h5py (`tests/interop/repack_check.py`). Ratio = h5repack's time / this "
        "command's (above 1: faster than h5repack); in brackets the range of the "
        "per-repetition ratios.",
        "",
        "### By size",
        "",
        *_repack_by_size(runs),
        "",
    ]
    for number, run in enumerate(runs, start=1):
        lines += [
            f"### {repack_experiment.size_name(run['input']['bytes'])} input",
            "",
            *_repack_run(run, repack_figure(run), f"R{number}"),
        ]
    lines += [
        "Why, as far as can be told:",
        "",
        *_repack_reasons(smallest),
        f"- **Size.** Start-up is paid once: on the {names[-1]} input it is {startup:.2f} s of "
        f"{one:.2f} s (1 rank), so the copy itself took about {one - startup:.2f} s against "
        f"{ref:.2f} s for h5repack's whole run.",
        "- **One output file.** Both ranks write the same conventional file, so their writes "
        "share one file's write path (on ext4 a buffered write holds the file's lock for its "
        f"whole length): on the {names[-1]} input 2 ranks took {two:.2f} s against {one:.2f} s "
        "for 1.",
        "- **Reading while writing.** `repack` writes behind by default (README, *Repack: "
        "subfiled <-> conventional*): each slab goes to a writer thread without a copy while "
        "the rank reads the next one, so a rank's reads and writes overlap; h5repack reads and "
        "writes in turn.",
        "",
        "Where repack should win by more: many ranks on several nodes with a parallel file "
        "system, where the copy is I/O bound and h5repack's single process reads and writes "
        "everything alone; not measured here (one node, 2 cores). Beyond speed, `repack` does "
        "what h5repack cannot: any HDF5 file into subfiles with a chosen plan, and the "
        "conventional file for parallel-HDF5 readers without a serial pass.",
    ]
    return "\n".join(lines).rstrip("\n")


# Summary ----------------------------------------------------------------------------------------
def paper_summary(result: dict) -> list[tuple[str, str, str]]:
    """(question, answer, section title) rows from docs/benchmarks-results.json."""
    pe = paper_experiment
    samples, _ = pe.collect(result["runs"])
    groups = pe.groups_of(result)
    title = PAPER_TITLE
    out = []
    vpic = [g for g in groups if g.startswith("VPIC") and "without" in g]
    against_phdf5: dict[str, list[str]] = {"write": [], "read": []}
    against_raw = []
    nulls = []
    for g in vpic:
        ranks = f"[{g.split(', ')[1]}]({anchor(g)})"  # each number one click from its table
        for text, a, b in pe.vpic_ratios(samples, g, groups[g]):
            if text.startswith("best subfiling / best parallel"):
                for access in ("write", "read"):
                    r = pe.fmt_ratio(pe.ratio(samples, g, a, b, access))
                    against_phdf5[access].append(f"{ranks}: **{r}**")
            elif text.startswith("best subfiling ("):
                against_raw.append(
                    f"{ranks}: **{pe.fmt_ratio(pe.ratio(samples, g, a, b, 'write'))}**"
                )
    for g in groups:
        if g.startswith("VPIC"):
            for text, a, b in pe.vpic_ratios(samples, g, groups[g]):
                if text.startswith("null"):
                    for access in ("write", "read"):
                        nulls += list(pe.ratio(samples, g, a, b, access)[1:])
    size = next(g for g in groups if g.startswith("Data size"))
    mib = 32 * pe.parse_count(pe.SIZES[-1]) // pe.MIB
    one = f"h5subfile, subfiling factor 1, {mib} MiB/rank"
    raw = f"raw POSIX, file per process, {mib} MiB/rank"
    transfer = next(g for g in groups if g.startswith("Transfer"))
    small = [
        (a, pe.fmt_ratio(pe.ratio(samples, transfer, a, b, "write")))
        for _, a, b in pe.transfer_ratios(groups[transfer])
        if a.endswith(", 64 KiB")
    ]
    if against_phdf5["write"]:
        out.append(
            (
                "VPIC-IO write, 32 MiB per rank, no fsync: best h5subfile subfiling factor / "
                "best parallel HDF5 way (above 1: h5subfile faster)",
                "; ".join(against_phdf5["write"]),
                title,
            )
        )
        out.append(
            (
                "BD-CATS-IO read, same runs: h5subfile / parallel HDF5",
                "; ".join(against_phdf5["read"]),
                title,
            )  # fmt: skip
        )
    out.append(
        (
            "VPIC-IO write, 32 MiB per rank, no fsync: best h5subfile / raw POSIX file per "
            "process (below 1: h5subfile slower)",
            "; ".join(against_raw),
            title,
        )
    )
    if one in groups[size]:
        out.append(
            (
                f"At {mib} MiB per rank (4 ranks): h5subfile subfiling factor 1 / raw POSIX "
                "file per process",
                f"write **{pe.fmt_ratio(pe.ratio(samples, size, one, raw, 'write'))}**, "
                f"read **{pe.fmt_ratio(pe.ratio(samples, size, one, raw, 'read'))}**",
                f"{title} » {size}",
            )
        )
    out.append(
        (
            "64 KiB transfers (4 ranks): h5subfile / raw POSIX, shared file, write",
            "; ".join(f"{a.split(', ')[1]}: **{r}**" for a, r in small),
            f"{title} » {transfer}",
        )
    )
    out.append(
        (
            "Noise: the same raw POSIX configuration twice in one repetition (null comparison)",
            f"per-repetition ratios from **{min(nulls):.2f}** to **{max(nulls):.2f}**: single "
            "runs mean nothing, read medians",
            title,
        )
    )
    return out


def metadata_summary(record: dict) -> list[tuple[str, str, str]]:
    """Rows from the latest run of docs/metadata-scaling.json (whatever its rank counts)."""
    md = metadata_scaling
    if not record["runs"]:
        return []
    label, run = list(record["runs"].items())[-1]
    runs, key = run["scaling"], "metadata_seconds"
    out = []
    title = f"Metadata at scale » {label}"  # the latest run's table
    counts = sorted(
        {
            r["ranks"]
            for r in runs
            if md.values(runs, r["ranks"], md.FPP, key)
            and any(md.values(runs, r["ranks"], c, key) for c in (md.PHDF5_IND, md.PHDF5_COLL))
        }
    )
    if counts:
        top = counts[-1]
        best = min(
            (c for c in (md.PHDF5_IND, md.PHDF5_COLL) if md.values(runs, top, c, key)),
            key=lambda c: md.median_of(runs, top, c, key),
        )
        cells = [
            f"{c} {md.cell(md.values(runs, top, c, key), 3)} s"
            for c in md.SCALING
            if md.values(runs, top, c, key)
        ]
        out.append(
            (
                f"Metadata time at {top} ranks (oversubscribed, {label}): h5subfile against "
                "parallel HDF5",
                "; ".join(cells)
                + "; file per process / best parallel HDF5 = "
                + md.cell(md.paired(runs, top, md.FPP, best, key)),
                title,
            )
        )
    for line in md.targets(run):
        if line.startswith("| file per process: metadata time grows"):
            measured = line.split(" | ")[1]
            out.append(
                (
                    f"Growth of file per process's metadata time, 32 to 128 ranks ({label}; "
                    "target at most x5)",
                    measured,
                    title,
                )
            )
    if run["whole"]:
        whole = run["whole"]
        answers = [
            f"{ours.split(', ')[1]}: {p.split(', ')[1]} / h5subfile = "
            f"{md.cell(md.paired(whole, 2, p, ours, 'observed_seconds'))}"
            for ours in (md.DEFAULT, md.FPP)
            for p in (md.PHDF5_IND, md.PHDF5_COLL)
            if md.paired(whole, 2, p, ours, "observed_seconds")
        ]
        out.append(
            (
                "Whole VPIC-IO write at 2 ranks (default plan: one file on one node; file per "
                "process) against parallel HDF5 (above 1: h5subfile faster)",
                "; ".join(answers),
                title,
            )
        )
    return out


def storage_summary(result: dict) -> list[tuple[str, str, str]]:
    se = storage_experiment
    runs = result["runs"]
    base = se.median(runs, "compression", "none", "write_rate")
    write_vs = {f: se.median(runs, "compression", f, "write_rate") / base for f in se.FILTERS[1:]}
    agg = se.agg_rows(runs)
    aggregated = [w for _, label, w, _ in agg if "aggregator" in label]
    null = [w for _, label, w, _ in agg if label.startswith("direct (null")]
    title = "Storage strategies"
    return [
        (
            "Compression at 2 ranks: write rate with a filter / without (medians)",
            f"**{min(write_vs.values()):.2f}** ({min(write_vs, key=write_vs.__getitem__)}) to "
            f"**{max(write_vs.values()):.2f}** ({max(write_vs, key=write_vs.__getitem__)}): "
            "every filter slower",
            title,
        ),
        (
            "Aggregation (two-phase I/O) / direct writes, 32 MiB per rank (medians)",
            f"**{min(aggregated):.2f}** to **{max(aggregated):.2f}** (null comparison "
            f"{min(null):.2f} to {max(null):.2f}): direct is faster on one node",
            title,
        ),
    ]


def repack_summary(runs: list[dict]) -> list[tuple[str, str, str]]:
    crossover = "; ".join(
        f"{key.split(' ', 1)[1]}: {repack_crossover(runs, key)}" for key in REPACK_COMMANDS
    )
    return [
        (
            "Repack a subfiled file into one conventional file: from which size `h5subfile "
            "repack` beats `h5repack -l CONTI`",
            crossover,
            REPACK_TITLE,
        )
    ] + [
        (
            f"Repack a {run['input']['bytes'] / 2**20:.0f} MiB subfiled file: h5repack's time / "
            "`h5subfile repack`'s (above 1: `h5subfile repack` faster)",
            _repack_verdicts(run),
            REPACK_TITLE,
        )
        for run in runs
    ]


def master_summary(data: dict) -> list[tuple[str, str, str]]:
    fpp = [r for r in data["rows"] if r["grouping"] == "file per process"]
    big = max(fpp, key=lambda r: r["mappings"])
    few = min(data["rows"], key=lambda r: (r["mappings"], -r["ranks"]))
    return [
        (
            f"Opening a master of {big['ranks']} ranks: CPU ms, file per process against "
            f"{few['grouping']}",
            f"{big['mappings']} mappings **{ms(big, 'open')}** ms; {few['mappings']} mappings "
            f"**{ms(few, 'open')}** ms",
            MASTER_TITLE,
        )
    ]


def open_summary(data: dict) -> list[tuple[str, str, str]]:
    top, first = open_scaling.target_row(data), data["rows"][0]
    return [
        (
            f"Opening for reading: {top['ranks']} ranks against {first['ranks']} (wall; rank 0 "
            "CPU)",
            f"**{open_scaling.ratio_text(top)}** wall; **{top['cpu_root_ratio']:.2f}x** rank 0 CPU",
            open_scaling.TITLE,
        )
    ]


def whole_summary(data: dict) -> list[tuple[str, str, str]]:
    rounds = data["rounds"]
    cells = [
        f"{label.split(' / ')[0].removeprefix('parallel HDF5, ')} / "
        f"{label.split(' / ')[1].removeprefix('h5subfile, ')} "
        f"**{checksum_cost.cell(data['ratios'][label]['observed'], 2)}** (above 1 in "
        f"{data['above_one'][label]} of {rounds} rounds)"
        for label, *_ in whole_write.RATIOS
    ]
    return [
        (
            f"In one job, rounds alternated: the whole VPIC-IO write at {data['ranks']} ranks, "
            "parallel HDF5 / h5subfile (above 1: h5subfile faster)",
            "; ".join(cells),
            whole_write.TITLE,
        )
    ]


def checksum_summary(data: dict) -> list[tuple[str, str, str]]:
    cells = [
        f"{checksum_cost.PLAN_LABELS[r['plan']].split(' (')[0]} "
        f"**{checksum_cost.cell(checksum_cost.cost(r), 2)}** (null "
        f"{checksum_cost.cell(checksum_cost.null(r), 2)})"
        for r in data["results"]
    ]
    return [
        (
            f"Checksums on the VPIC write at {data['ranks']} ranks: time with them / without "
            "hashing (target at most 1.03)",
            "; ".join(cells),
            checksum_cost.TITLE,
        )
    ]


def profile_summary(data: dict) -> list[tuple[str, str, str]]:
    ratios = data["ratios"]
    return [
        (
            f"Profiling the VPIC write at {data['ranks']} ranks: time profiled / off (targets: "
            "counters at most 1.02, trace at most 1.05)",
            "; ".join(
                f"{label} **{checksum_cost.cell(ratios[label]['observed'], 3)}**"
                for label in ("counters / off", "trace / off", "null: off' / off")
            ),
            profile_cost.TITLE,
        )
    ]


def summary(data: dict[str, dict]) -> str:
    paper = data["paper"]
    m = paper["machine"]
    heavy = metadata_heavy.latest_labels(data["heavy"])
    rows = (
        paper_summary(paper)
        + write_patterns.latest_summary_rows(pattern_series(data))
        + write_behind.summary_rows(data["behind"])
        + profile_summary(data["profile"])
        + checksum_summary(data["checksums"])
        + metadata_summary(data["metadata"])
        + whole_summary(data["whole"])
        + metadata_heavy.summary_rows(data["heavy"], heavy)
        + read_patterns.summary_rows(data["reads"])
        + storage_summary(data["storage"])
        + repack_summary(repack_runs(data))
        + master_summary(data["master"])
        + open_summary(data["open"])
        + undeclared.summary_rows(data["undeclared"])
        + write_slices.summary_rows(data["slices"])
    )
    other = sorted(
        {
            " ".join(f"HDF5 {v['hdf5']}, {v['mpi'].replace('Version:', '')}".split())
            for v in [paper["versions"]]
            + [r["versions"] for r in data["metadata"]["runs"].values()]
        }
    )
    lines = [
        SUMMARY_BEGIN,
        "## Summary",
        "",
        f"All on one machine: `{m['hostname']}`, a {m['cores']}-core VM with one local disk, "
        "**shared with other jobs while measuring**; **every run above "
        f"{m['cores']} ranks is oversubscribed** (more ranks than cores), and writes land in "
        "the page cache. Cells: **median** (min-max) over repetitions; ratios are per "
        "repetition. Each row is computed from the table of the section it links to.",
        "",
        "| question | answer | section |",
        "|---|---|---|",
    ]
    for question, answer, title in rows:
        # a row from one table of a section: "section » table's heading" links to the table
        section, _, heading = title.partition(" » ")
        short = SHORT.get(section, section.split(":")[0])
        link = f"[{short}]({anchor(section)})"
        if heading:
            link = f"[{short}, *{heading}*]({anchor(heading)})"
        lines.append(f"| {question} | {answer} | {link} |")
    lines += [
        "",
        "The first section and *Metadata at scale* ran with "
        + " / ".join(other)
        + f" (`make phdf5`), not with HDF5 {MAKE_HDF5} and {MAKE_MPI} that `make` installs; "
        "each section says which software it ran with.",
        SUMMARY_END,
    ]
    return "\n".join(lines)


# The documents ----------------------------------------------------------------------------------
_REGENERATE = """Generated by `benchmarks/report.py` from the saved results in `docs/*.json`; do not edit by
hand. Regenerate {both} and the figures (no measurement, a few seconds):

```sh
.venv/bin/python benchmarks/report.py
```

`tests/unit/test_benchmarks_doc.py` checks that {this} exactly what the data gives."""

HEADER = (
    """# Benchmarks

Today's numbers, one section per measure, each with its latest table and the command that
measures it again; the summary on top. The series that measured past changes before and after
(each with its two commits) are in [BENCHMARKS-HISTORY.md](BENCHMARKS-HISTORY.md).

"""
    + _REGENERATE.format(both="this document, the history", this="this file is")
    + """ How
each section was measured, with this repository's own tools (the scripts of the first section
and of *Metadata at scale* save their JSON and then rebuild this document; after the others run
`report.py`):

| section | data file | measured with |
|---|---|---|
| [VPIC-IO, BD-CATS-IO and IOR patterns]({paper}) | `docs/benchmarks-results.json` | `make phdf5 && .venv-phdf5/bin/python benchmarks/paper_experiment.py --reps 5` |
| [Write patterns against their baselines]({patterns_latest}) | `docs/write-patterns*.json` | `.venv/bin/python benchmarks/write_patterns.py --checkout BASE=/tmp/base/src --checkout NEW=src --reps 5 --json docs/write-patterns-NAME.json` (BASE: a worktree of the commit before) |
| [Writing behind, chosen call by call]({behind}) | `docs/write-behind.json` | `.venv/bin/python benchmarks/write_behind.py --ranks 2 --rounds 5 --particles 4194304 8388608 --compute 0.2 0.5 --warm 4 --json docs/write-behind.json` |
| [Cost of profiling]({profile}) | `docs/profile-cost.json` | `.venv/bin/python benchmarks/profile_cost.py --ranks 2 --rounds 40 --json docs/profile-cost.json` |
| [Cost of the checksums]({checksums}) | `docs/checksum-cost.json` | `.venv/bin/python benchmarks/checksum_cost.py --ranks 2 --rounds 15 --json docs/checksum-cost.json` |
| [Write system call sizes]({slices}) | `docs/write-slices.json` | `.venv/bin/python benchmarks/write_slices.py --reps 12 --json docs/write-slices.json` |
| [Cost of a collective call]({collective}) | `docs/recorded-results.json` | `benchmarks/collective_experiment.py`, `benchmarks/collective_cost.py` (in the section) |
| [Metadata at scale]({metadata}) | `docs/metadata-scaling.json` | `make phdf5 && .venv-phdf5/bin/python benchmarks/metadata_scaling.py --label LABEL` |
| [Whole write at 2 ranks, in one job]({whole}) | `docs/whole-write.json` | `make phdf5 && .venv-phdf5/bin/python benchmarks/whole_write.py --rounds 15 --json docs/whole-write.json` |
| [Metadata-heavy files]({heavy}) | `docs/metadata-heavy.json` | `make phdf5 && .venv-phdf5/bin/python benchmarks/metadata_heavy.py --base-src /tmp/base/src --reps 3 --label LABEL` (and `--ranks 2 --scale 10`; BASE: `git archive` of the commit before, its `src`) |
| [Reading masters against conventional files]({reads}) | `docs/read-patterns.json` | `.venv/bin/python benchmarks/read_patterns.py --checkout NEW=src --checkout BASE=/tmp/base/src --ranks 4 16 64 --reps 5` |
| [Storage strategies]({storage}) | `docs/storage-results.json` | `.venv/bin/python benchmarks/storage_experiment.py --reps 5` |
| [Opening for reading at scale]({open}) | `docs/open-scaling.json` | `.venv/bin/python benchmarks/open_scaling.py --ranks 1 8 64 --writers 64 --json docs/open-scaling.json` |
| [Master size]({master}) | `docs/master-size.json` | `.venv/bin/python benchmarks/master_size.py --repeats 5 --json docs/master-size.json` |
| [Repack]({repack}) | `docs/repack-results-512mib.json`, `-1gib.json`, `-2gib.json` | `.venv/bin/python benchmarks/repack_experiment.py --reps 7 --particles 4Mi`, and with `--particles 8Mi`, `16Mi` |
| [Datasets without declared blocks]({undeclared}) | `docs/undeclared.json` | `.venv/bin/python benchmarks/undeclared.py --ranks 2 --rounds 15 --json docs/undeclared.json` |

Every figure shows the median over repetitions with the minimum and maximum as whiskers or
error bars."""
)

HISTORY_HEADER = (
    """# Benchmarks: history

The measurements of past changes, each before and after in one series with its commits, and
the earlier runs of measures whose latest run is in [BENCHMARKS.md](BENCHMARKS.md) (the
reference: today's numbers). Oldest first within each kind.

"""
    + _REGENERATE.format(both="this file, docs/BENCHMARKS.md", this="this file is")
    + """ How
each section was measured (BASE: a worktree of the commit before the change; every
write-pattern series runs `benchmarks/write_patterns.py`, whose exact arguments each section
shows):

| section | data file | measured with |
|---|---|---|
| [Engine refactor]({engine}) | `docs/recorded-results.json` | by hand: two installations alternated, commands in the section |
| [Integrity]({integrity}) | `docs/recorded-results.json` | by hand: `h5subfile vpic` runs of two checkouts alternated (in the section) |
| [Overlapping writes with compute]({async_}) | `docs/async-overlap.json` | `.venv/bin/python benchmarks/async_overlap.py --ranks 2 --rounds 5 --compute 0.5 0.2 --json docs/async-overlap.json` |
| [Declared paths after datasets without blocks]({regression}) | `docs/recorded-results.json` | by hand: two checkouts alternated run by run (commands in the section) |
| [Metadata at scale]({metadata}) | `docs/metadata-scaling.json` | every run: `make phdf5 && .venv-phdf5/bin/python benchmarks/metadata_scaling.py --label LABEL` |
| [Metadata-heavy files]({heavy}) | `docs/metadata-heavy.json` | every run: `make phdf5 && .venv-phdf5/bin/python benchmarks/metadata_heavy.py --base-src /tmp/base/src --reps 3 --label LABEL` |
| [Reading masters after merged mappings]({reads_merged}) | `docs/read-patterns-merged.json` | `.venv/bin/python benchmarks/read_patterns.py --checkout NEW=src --checkout BASE=/tmp/base/src --ranks 4 16 64 --reps 5` (BASE: e9c0b8d) |
| [Reading masters after each call chose its way of writing]({reads_ways}) | `docs/read-patterns-ways.json` | `.venv/bin/python benchmarks/read_patterns.py --checkout NEW=src --checkout BASE=/tmp/base/src --ranks 4 16 --reps 5` (BASE: 971a10f) |
| [Reading masters after boxes were checked as plain numbers at open]({reads_boxes}) | `docs/read-patterns-boxes.json` | `.venv/bin/python benchmarks/read_patterns.py --checkout NEW=src --checkout BASE=/tmp/base/src --ranks 4 16 64 --reps 5` (BASE: de7fdce) |
{series}"""
)

#: The write-pattern series (docs/write-patterns*.json), each one change before and after.
PATTERN_SERIES = (
    "patterns",
    "patterns_overlap",
    "patterns_trust",
    "patterns_trust_big",
    "patterns_quiet",
    "patterns_metadata",
    "patterns_metadata_vpic",
    "patterns_scales",
    "patterns_scales_vpic",
    "patterns_one_round",
    "patterns_proven",
    "patterns_announced",
    "patterns_master_attrs",
    "patterns_creation_trim",
    "patterns_offsets",
    "patterns_merged",
    "patterns_consolidated",
    "patterns_ways",
    "patterns_next_piece",
    "patterns_next_piece_vpic",
    "patterns_reads",
    "patterns_folder_fsync",
)


def pattern_series(data: dict[str, dict]) -> list[dict]:
    return [data[key] for key in PATTERN_SERIES]


def in_history(title: str) -> str:
    """A link from the reference document to a section of the history."""
    return f"[{title}]({HISTORY_MARKDOWN.name}{anchor(title)})"


def anchors(data: dict[str, dict]) -> dict[str, str]:
    rec = data["recorded"]
    return {
        "paper": anchor(PAPER_TITLE),
        "patterns_latest": anchor(write_patterns.LATEST_TITLE),
        "behind": anchor(write_behind.TITLE),
        "storage": anchor("Storage strategies"),
        "engine": anchor(rec["engine"]["title"]),
        "collective": anchor(rec["collective"]["title"]),
        "integrity": anchor(rec["integrity"]["title"]),
        "checksums": anchor(checksum_cost.TITLE),
        "profile": anchor(profile_cost.TITLE),
        "async_": anchor(async_overlap.TITLE),
        "metadata": anchor("Metadata at scale"),
        "whole": anchor(whole_write.TITLE),
        "master": anchor(MASTER_TITLE),
        "open": anchor(open_scaling.TITLE),
        "repack": anchor(REPACK_TITLE),
        "undeclared": anchor(undeclared.TITLE),
        "regression": anchor(rec["learned_regression"]["title"]),
        "slices": anchor(write_slices.TITLE),
        "heavy": anchor(metadata_heavy.TITLE),
        "reads_merged": anchor(data["reads_merged"]["title"]),
        "reads_ways": anchor(data["reads_ways"]["title"]),
        "reads_boxes": anchor(data["reads_boxes"]["title"]),
        "reads": anchor(read_patterns.TITLE),
    }


def build(data: dict[str, dict]) -> str:
    """The whole of docs/BENCHMARKS.md, the reference, from the loaded JSON files."""
    rec = data["recorded"]
    parts = [
        HEADER.format(**anchors(data)),
        summary(data),
        paper_experiment.render(data["paper"]),
        write_patterns.render_latest(
            pattern_series(data),
            lambda series: in_history(series.get("title", write_patterns.TITLE)),
        ),
        write_behind.render(data["behind"]),
        profile_cost.render(data["profile"]),
        checksum_cost.render(data["checksums"]),
        write_slices.render(data["slices"]),
        recorded(rec["collective"]),
        metadata_scaling.render(data["metadata"], latest_only=True),
        whole_write.render(data["whole"]),
        metadata_heavy.render(data["heavy"], metadata_heavy.latest_labels(data["heavy"])),
        read_patterns.render(data["reads"]),
        storage_experiment.render(data["storage"]),
        open_scaling.render(data["open"]),
        master(data["master"]),
        repack(repack_runs(data)),
        undeclared.render(data["undeclared"]),
    ]
    return "\n\n".join(parts) + "\n"


def build_history(data: dict[str, dict]) -> str:
    """The whole of docs/BENCHMARKS-HISTORY.md, from the same files."""
    rec = data["recorded"]
    series = sorted(pattern_series(data), key=lambda d: d["facts"]["started"])
    rows = "\n".join(
        f"| [{d.get('title', write_patterns.TITLE)}]({anchor(d.get('title', write_patterns.TITLE))}) "
        f"| `docs/{DATA[key]}` | `write_patterns.py`, commits {d['commits'].get(d['order'][0]) or '-'} "
        f"and {d['commits'].get(d['order'][-2], '?')} |"
        for key, d in sorted(
            ((k, data[k]) for k in PATTERN_SERIES), key=lambda kd: kd[1]["facts"]["started"]
        )
    )
    parts = [
        HISTORY_HEADER.format(series=rows, **anchors(data)),
        "<!-- engine:begin -->\n" + recorded(rec["engine"]) + "\n<!-- engine:end -->",
        recorded(rec["integrity"]),
        async_overlap.render(data["async"]),
        recorded(rec["learned_regression"]),
        metadata_scaling.render(data["metadata"]),
        metadata_heavy.render(data["heavy"]),
        read_patterns.render(data["reads_merged"]),
        read_patterns.render(data["reads_ways"]),
        read_patterns.render(data["reads_boxes"]),
        *(write_patterns.render(d) for d in series),
    ]
    return "\n\n".join(parts) + "\n"


def draw(data: dict[str, dict], folder: Path = FIGURES) -> None:
    """Every figure of the document, from the same data."""
    paper_experiment.draw(data["paper"], folder)
    storage_experiment.draw(data["storage"], folder)
    metadata_scaling.plot(data["metadata"], folder / "metadata_scaling.png")
    for rep in repack_runs(data):
        labels = list(rep["times"])
        bars(
            folder / repack_figure(rep),
            f"Repack of a {rep['input']['bytes'] / 2**20:.0f} MiB VPIC-IO file",
            [REPACK_LABELS.get(x, x).replace("`", "") for x in labels],
            {"whole command": [rep["times"][x] for x in labels]},
            "seconds (median; whiskers: min-max over repetitions; log scale)",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    parser.add_argument("--no-figures", action="store_true", help="only the Markdown")
    args = parser.parse_args(argv)
    data = load()
    documents = {MARKDOWN: build(data), HISTORY_MARKDOWN: build_history(data)}
    if args.check:
        stale = [path for path, text in documents.items() if path.read_text() != text]
        for path in stale:
            print(f"{path} is out of date: run benchmarks/report.py", file=sys.stderr)
        return int(bool(stale))
    for path, text in documents.items():
        path.write_text(text)
    if not args.no_figures:
        draw(data)
    print(
        f"wrote {MARKDOWN}, {HISTORY_MARKDOWN}" + ("" if args.no_figures else f" and {FIGURES}"),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

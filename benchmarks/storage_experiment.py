"""Measure h5subfile's storage strategies; write their section of docs/BENCHMARKS.md.

Three groups, every configuration repeated ``--reps`` times in a shuffled order (seeded), with
an untimed ``sync`` before each run, medians and ratios against a baseline of the same run:

- compression: VPIC-IO (``h5subfile vpic``) at 2 ranks with every filter; ratio = bytes of data
  / bytes on disk; write and read (``h5subfile bdcats``) throughput against no compression;
- parallel compression: the same total data compressed by 1 rank and by 2 ranks (gzip, zstd),
  speedup = median time on 1 rank / median time on 2 ranks;
- aggregation and alignment at P = 2, 4, 8: direct writes (twice: the null comparison),
  two-phase writes and reads with 1, 2 and k aggregators per subfile of k ranks, 1 MiB
  alignment; ratios against the direct path.

usage: python benchmarks/storage_experiment.py [--reps 5] [--render docs/storage-results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BEGIN, END = "<!-- storage:begin -->", "<!-- storage:end -->"
FILTERS = ("none", "gzip", "gzip+shuffle", "lzf", "zstd", "lz4", "blosc", "blosc2", "bitshuffle")
COMPRESSION_PARTICLES = 2 << 20  # per rank: 64 MiB
AGGREGATION_PARTICLES = 1 << 20  # per rank: 32 MiB


def compression_flags(name: str) -> list[str]:
    if name == "none":
        return []
    if name == "gzip+shuffle":
        return ["--compression", "gzip", "--shuffle"]
    return ["--compression", name]


def configs() -> list[dict]:
    out = []
    for name in FILTERS:
        out.append(
            dict(
                group="compression",
                label=name,
                ranks=2,
                particles=COMPRESSION_PARTICLES,
                write=compression_flags(name),
                read=[],
            )
        )
    total = 4 << 20
    for name in ("gzip", "zstd"):
        for ranks in (1, 2):
            for grouping in ("node", "rank"):
                out.append(
                    dict(
                        group="parallel",
                        label=f"{name}, {ranks} rank(s), subfiles={grouping}",
                        ranks=ranks,
                        particles=total // ranks,
                        write=["--compression", name, "--subfiles", grouping],
                        read=None,
                    )
                )
    for ranks in (2, 4, 8):
        k = min(ranks, 4)
        base = ["--ranks-per-subfile", str(k)]
        variants = [("direct", [], []), ("direct (null)", [], [])]
        for count in sorted({1, 2, k}):
            flags = ["--aggregators", str(count), "--buffer-size", "16m"]
            variants.append((f"{count} aggregator(s)", flags, flags))
        variants.append(("alignment 1 MiB", ["--alignment", "1m"], []))
        for label, write, read in variants:
            out.append(
                dict(
                    group=f"aggregation P={ranks}",
                    label=label,
                    ranks=ranks,
                    particles=AGGREGATION_PARTICLES,
                    write=base + write,
                    read=read,
                )
            )
    return out


def run_json(command: list[str]) -> dict:
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def disk_bytes(path: Path) -> int:
    total = path.stat().st_size
    folder = path.with_suffix(".subfiles")
    if folder.exists():
        total += sum(p.stat().st_size for p in folder.iterdir())
    return total


def run_one(config: dict, workdir: Path) -> dict:
    path = workdir / "out.h5"
    mpiexec = [str(BIN / "mpiexec"), "-n", str(config["ranks"]), str(BIN / "h5subfile")]
    os.sync()  # untimed: no run pays for the previous run's dirty pages
    write = run_json(
        mpiexec
        + [
            "vpic",
            str(path),
            "--particles",
            str(config["particles"]),
            "--steps",
            "1",
            "--json",
            *config["write"],
        ]
    )
    result = {
        "write_seconds": write["observed_seconds"],
        "write_rate": write["observed_rate_mib_s"],
        "write_raw_seconds": write["raw_seconds"],
        "data_bytes": write["total_bytes"],
        "disk_bytes": disk_bytes(path),
    }
    if config["read"] is not None:
        os.sync()
        read = run_json(mpiexec + ["bdcats", str(path), "--json", *config["read"]])
        result.update(read_seconds=read["observed_seconds"], read_rate=read["observed_rate_mib_s"])
    shutil.rmtree(path.with_suffix(".subfiles"), ignore_errors=True)
    path.unlink(missing_ok=True)
    return result


def measure(reps: int, seed: int, groups: list[str] | None = None) -> dict:
    plan = [c for c in configs() if groups is None or c["group"] in groups]
    runs = []
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="h5subfile-storage-", dir=ROOT) as tmp:
        for rep in range(reps):
            order = list(range(len(plan)))
            rng.shuffle(order)
            for done, index in enumerate(order):
                config = plan[index]
                print(
                    f"[rep {rep + 1}/{reps}, {done + 1}/{len(order)}] {config['group']}: "
                    f"{config['label']}",
                    file=sys.stderr,
                    flush=True,
                )
                runs.append(dict(config, repetition=rep, **run_one(config, Path(tmp))))
    import h5py
    import hdf5plugin

    return {
        "machine": {
            "hostname": platform.node(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
        },
        "versions": {
            "h5py": h5py.version.version,
            "hdf5": h5py.version.hdf5_version,
            "hdf5plugin": hdf5plugin.version,
        },
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "reps": reps,
        "seed": seed,
        "runs": runs,
    }


def median(runs: list[dict], group: str, label: str, key: str) -> float:
    values = [r[key] for r in runs if r["group"] == group and r["label"] == label and key in r]
    return statistics.median(values) if values else float("nan")


def spread(runs: list[dict], group: str, label: str, key: str) -> str:
    values = [r[key] for r in runs if r["group"] == group and r["label"] == label and key in r]
    return f"{min(values):.0f}-{max(values):.0f}" if values else "-"


def render(result: dict) -> str:
    runs = result["runs"]
    m = result["machine"]
    lines = [
        BEGIN,
        "## Storage strategies (issue #4)",
        "",
        f"Measured {result['when']} on {m['hostname']} ({m['cores']} cores, {m['platform']}; one "
        f"disk, page cache shared with other jobs), h5py {result['versions']['h5py']}, HDF5 "
        f"{result['versions']['hdf5']}, hdf5plugin {result['versions']['hdf5plugin']}. "
        f"{result['reps']} repetitions of every configuration in a shuffled order with a `sync` "
        "before each run; medians, ratios of medians of the same run. Rates are h5bench's "
        "observed rates (data bytes / time from open to close). Regenerate with "
        "`.venv/bin/python benchmarks/storage_experiment.py --reps 5`.",
        "",
        f"### Compression (VPIC-IO, 2 ranks x {COMPRESSION_PARTICLES >> 20} Mi particles, "
        "default plan: one subfile per node)",
        "",
        "| filter | ratio (data / disk) | write MiB/s (min-max) | read MiB/s (min-max) | "
        "write vs none | read vs none |",
        "|---|---|---|---|---|---|",
    ]
    group = "compression"
    base_w = median(runs, group, "none", "write_rate")
    base_r = median(runs, group, "none", "read_rate")
    for name in FILTERS:
        data = median(runs, group, name, "data_bytes")
        disk = median(runs, group, name, "disk_bytes")
        w = median(runs, group, name, "write_rate")
        r = median(runs, group, name, "read_rate")
        lines.append(
            f"| {name} | {data / disk:.2f} | {w:.0f} ({spread(runs, group, name, 'write_rate')})"
            f" | {r:.0f} ({spread(runs, group, name, 'read_rate')}) | {w / base_w:.2f} | "
            f"{r / base_r:.2f} |"
        )
    lines += [
        "",
        "### Parallel compression: 1 rank vs 2 ranks, same data (128 MiB)",
        "",
        "Whole write (open to close, h5bench's observed time) and its data path alone "
        "(h5bench's raw time: compressing, moving chunks, writing them; the slowest rank).",
        "",
        "| filter | grouping | 1 rank (s) | 2 ranks (s) | speedup | data path: 1 rank (s) | "
        "2 ranks (s) | speedup | target >= 1.8 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("gzip", "zstd"):
        for grouping in ("node", "rank"):
            one, two = (
                median(
                    runs, "parallel", f"{name}, {n} rank(s), subfiles={grouping}", "write_seconds"
                )
                for n in (1, 2)
            )
            raw1, raw2 = (
                median(
                    runs,
                    "parallel",
                    f"{name}, {n} rank(s), subfiles={grouping}",
                    "write_raw_seconds",
                )
                for n in (1, 2)
            )
            met = (
                "yes"
                if one / two >= 1.8
                else ("data path only" if raw1 / raw2 >= 1.8 else "**no**")
            )
            lines.append(
                f"| {name} | {grouping} | {one:.2f} | {two:.2f} | {one / two:.2f} | "
                f"{raw1:.2f} | {raw2:.2f} | {raw1 / raw2:.2f} | {met} |"
            )
    lines += [
        "",
        f"### Aggregation and alignment ({AGGREGATION_PARTICLES >> 20} Mi particles = "
        "32 MiB per rank, k = min(P, 4) ranks per subfile)",
        "",
        "| P | configuration | write MiB/s | read MiB/s | write / direct | read / direct |",
        "|---|---|---|---|---|---|",
    ]
    for ranks in (2, 4, 8):
        group = f"aggregation P={ranks}"
        labels = sorted(
            {r["label"] for r in runs if r["group"] == group},
            key=lambda label: (not label.startswith("direct"), label),
        )
        base_w = median(runs, group, "direct", "write_rate")
        base_r = median(runs, group, "direct", "read_rate")
        for label in labels:
            w = median(runs, group, label, "write_rate")
            r = median(runs, group, label, "read_rate")
            lines.append(
                f"| {ranks} | {label} | {w:.0f} | {r:.0f} | {w / base_w:.2f} | {r / base_r:.2f} |"
            )
    lines += ["", *NOTES, END]
    return "\n".join(lines)


NOTES = [
    "### Reading these numbers",
    "",
    "- The null comparison (direct vs direct) shows the noise: ratios within its distance of",
    "  1.00 are not differences.",
    "- Two-phase I/O copies every byte twice (pack, unpack) and adds one `Alltoallv` per",
    "  `buffer_size` round. On one node with a page cache, writes cost as little as a memory",
    "  copy, so the direct path (every rank writes its own bytes straight from its buffer) is",
    "  faster here, and it is the default (`aggregators` unset). Aggregation pays where many",
    "  writers per file contend for locks or small writes (Lustre/GPFS, hundreds of ranks per",
    "  file): set `aggregators` to the number of OSTs the subfile is striped over.",
    "- Alignment costs nothing measurable here (holes between datasets are sparse) and is off",
    "  by default; on Lustre or GPFS set it to the stripe or block size.",
    "- Parallel compression: with gzip (CPU-bound, ~27 MiB/s per core here) two ranks write",
    "  the same data 1.8-1.9x faster than one, for the default grouping (one subfile, the",
    "  leader stores both ranks' chunks) and for file per process alike; an earlier run of this",
    "  script gave 1.73 and 1.95, so +-0.1 is the noise of this number. zstd compresses at",
    "  ~400 MiB/s per core, so its whole write takes 0.3-0.4 s, most of it fixed costs (opening",
    "  files, the master) and the leader's serial chunk writes: the speedup is lower (1.2-1.6).",
    "- Compression ratios are those of the VPIC-IO kernel's synthetic values (hashes of the",
    "  particle index: nearly incompressible, except after byte shuffling); real particle data",
    "  compresses better. Throughput is what matters here: the ranks compress in parallel, so",
    "  fast filters (lz4, blosc, bitshuffle, zstd) cost little against writing raw bytes.",
]


def publish(result: dict, path: Path) -> None:
    section = render(result)
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "BENCHMARKS.md")
    parser.add_argument("--results", type=Path, default=ROOT / "docs" / "storage-results.json")
    parser.add_argument("--render", type=Path, help="rebuild the section from saved results")
    parser.add_argument(
        "--groups",
        nargs="*",
        help="measure only these groups (e.g. parallel) and replace their runs "
        "in the saved results",
    )
    args = parser.parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
    elif args.groups:
        result = json.loads(args.results.read_text())
        fresh = measure(args.reps, args.seed, args.groups)
        result["runs"] = [r for r in result["runs"] if r["group"] not in args.groups] + fresh[
            "runs"
        ]
        args.results.write_text(json.dumps(result, indent=1))
    else:
        result = measure(args.reps, args.seed)
        args.results.write_text(json.dumps(result, indent=1))
    publish(result, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

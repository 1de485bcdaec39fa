"""Reading masters as analysis tools read them: plain h5py on files written by h5subfile the way
h5py programs write them, against the same data repacked into one conventional file
(docs/BENCHMARKS.md, "Reading masters against conventional files").

Each write pattern of :data:`PATTERNS` (4 datasets of 32 MiB each: 1-D slabs, 2-D tiles,
round-robin rows of 1,024 elements) is written at each ``--ranks`` count (subfiles: 2 at 4
ranks, 4 at 16, 8 at 64: the square root, as the issue that asked for this measured) by ``mpiexec -n P`` with each checkout's
``src`` first on PYTHONPATH (``--checkout NAME=SRC``, say BASE for the commit before a change and
NEW for this one). The first checkout's file is repacked into one conventional file
(``h5subfile repack --subfiles 1``) and copied (``conventional again``: the null comparison).
Every file is read once, untimed (the page cache warm); then each repetition reads every file
once, in an order shuffled anew, each read a fresh process of plain h5py (this Python's wheel)
timing inside it, each measure the best of 3 in that process:

- ``open``: open the file, list its datasets and their shapes;
- ``whole``: every dataset whole;
- ``rows``: 64 slabs along the first axis per dataset, each 1/512 of it;
- ``columns``: 64 single columns per 2-D dataset;
- ``elements``: one element of each writer's block per dataset.

and, for each master, ``h5subfile``: the same whole reads through ``h5subfile.File`` (1 rank,
opening included, imports not).
Cells are medians (min-max) over repetitions of per-repetition ratios: a file's time over the
conventional file's in the same repetition (1.0: as fast). The number of VDS mappings of each
master is counted too. Results go to ``--json`` (default docs/read-patterns.json); the Markdown
is printed. Run:

    git worktree add /tmp/base <commit before>
    .venv/bin/python benchmarks/read_patterns.py --checkout NEW=src --checkout BASE=/tmp/base/src \\
        --ranks 4 16 64 --reps 5
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docplot import run_facts  # noqa: E402
from write_patterns import cell  # noqa: E402

TITLE = "Reading masters against conventional files"
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONVENTIONAL, AGAIN = "conventional", "conventional again"
OPS = ("open", "whole", "rows", "columns", "elements")
TARGETS = {"open": 2.0, "whole": 1.2, "rows": 1.2, "columns": 1.2, "elements": 1.2}
#: Each pattern: how it is named in the tables.
PATTERNS = {
    "slabs": "1-D slabs",
    "tiles": "2-D tiles",
    "rows": "round-robin rows of 1,024",
}

WRITE = """
import sys, numpy as np
from mpi4py import MPI
import h5subfile as hs
comm = MPI.COMM_WORLD
r, P = comm.rank, comm.size
path, pattern, subfiles = sys.argv[1], sys.argv[2], int(sys.argv[3])
N = 2048  # each dataset 32 MiB of float64: 2048 x 2048, or 4 Mi elements in 1-D
with hs.File(path, "w", comm=comm, subfiles=subfiles) as f:
    for k in range(4):
        if pattern == "slabs":
            d = f.create_dataset(f"d{k}", (N * N,), "f8")
            a, b = r * N * N // P, (r + 1) * N * N // P
            d[a:b] = np.arange(a, b, dtype="f8") + k
        elif pattern == "tiles":
            q = int(round(P ** 0.5))
            t = N // q
            i, j = divmod(r, q)
            d = f.create_dataset(f"d{k}", (N, N), "f8")
            cells = np.arange(i * t, i * t + t)[:, None] * N + np.arange(j * t, j * t + t)
            d[i * t:i * t + t, j * t:j * t + t] = cells + k
        else:
            d = f.create_dataset(f"d{k}", (N * N // 1024, 1024), "f8")
            mine = np.arange(r, N * N // 1024, P)
            d[r::P] = mine[:, None] * 1024.0 + np.arange(1024) + k
"""

READ = """
import json, sys, time
kind, path, writers = sys.argv[1], sys.argv[2], int(sys.argv[3])
TRIES = 3  # each measure's best of 3 in this process


def best(fn):
    found = []
    for _ in range(TRIES):
        began = time.perf_counter()
        fn()
        found.append(time.perf_counter() - began)
    return min(found)


if kind == "h5subfile":
    from mpi4py import MPI
    import h5subfile as hs

    File = hs.File  # loaded now: the timed part reads, it imports nothing
    MPI.COMM_WORLD.Barrier()
    f = File(path, "r")
    names = list(f)
    f.close()

    def whole():
        with File(path, "r") as f:
            for name in names:
                f[name][...]

    print(json.dumps({"h5subfile": best(whole)}))
    sys.exit()
import h5py

f = None


def opened():
    global f, datasets
    if f is not None:
        f.close()
    f = h5py.File(path, "r")
    datasets = [f[name] for name in f]
    [d.shape for d in datasets]


def whole():
    for d in datasets:
        d[...]


def rows():
    for d in datasets:
        n = d.shape[0]
        for i in range(64):
            d[i * (n // 64):i * (n // 64) + max(n // 512, 1)]


def columns():
    for d in datasets:
        if d.ndim == 2:
            for i in range(64):
                d[:, i * (d.shape[1] // 64)]


def elements():
    for d in datasets:
        n = d.shape[0]
        for w in range(writers):
            if d.ndim == 1:  # the first element of each writer's slab
                d[w * n // writers]
            elif d.shape[0] == d.shape[1]:  # the corner of each tile
                q = int(round(writers ** 0.5))
                i, j = divmod(w, q)
                d[i * n // q, j * n // q]
            else:  # the first row of each writer
                d[w, 0]


times = {"open": best(opened)}
for name, fn in (("whole", whole), ("rows", rows), ("columns", columns), ("elements", elements)):
    times[name] = best(fn)
f.close()
print(json.dumps(times))
"""

MAPPINGS = """
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(sum(len(f[n].virtual_sources()) if f[n].is_virtual else 0 for n in f))
"""


def _run(command: list[str], src: Path | None = None) -> str:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src.resolve())
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


def subfiles_for(ranks: int) -> int:
    """The subfiles of a file written by ``ranks``: 2 for 4, 4 for 16, 8 for 64 (the issue's)."""
    return max(2, round(ranks**0.5))


def write_files(
    folder: Path, pattern: str, ranks: int, checkouts: dict[str, Path]
) -> dict[str, Path]:
    """Each checkout's master of ``pattern`` at ``ranks``, the first one repacked and copied."""
    files = {}
    for name, src in checkouts.items():
        path = folder / name.replace(" ", "_") / "master.h5"
        path.parent.mkdir(parents=True)
        _run(
            [str(BIN / "mpiexec"), "-n", str(ranks), sys.executable, "-c", WRITE, str(path)]
            + [pattern, str(subfiles_for(ranks))],
            src,
        )
        files[name] = path
    first = next(iter(checkouts.values()))
    conventional = folder / "conventional.h5"
    _run(
        [sys.executable, "-m", "h5subfile", "repack", str(files[next(iter(files))])]
        + [str(conventional), "--subfiles", "1"],
        first,
    )
    again = folder / "conventional_again.h5"
    shutil.copyfile(conventional, again)
    files[CONVENTIONAL], files[AGAIN] = conventional, again
    return files


def read(kind: str, path: Path, writers: int, src: Path) -> dict[str, float]:
    return json.loads(_run([sys.executable, "-c", READ, kind, str(path), str(writers)], src))


def measure(args: argparse.Namespace, checkouts: dict[str, Path]) -> dict[str, Any]:
    first = next(iter(checkouts.values()))
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"cases": []}
    for ranks in args.ranks:
        for pattern in args.patterns:
            if pattern == "tiles" and round(ranks**0.5) ** 2 != ranks:
                continue
            with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
                files = write_files(Path(tmp), pattern, ranks, checkouts)
                mappings = {
                    name: int(_run([sys.executable, "-c", MAPPINGS, str(path)]))
                    for name, path in files.items()
                }
                for path in files.values():  # warm the page cache, untimed
                    read("h5py", path, ranks, first)
                reps = []
                for _ in range(args.reps):
                    order = list(files)
                    rng.shuffle(order)
                    rep: dict[str, dict[str, float]] = {}
                    for name in order:
                        rep[name] = read("h5py", files[name], ranks, first)
                        if name in checkouts:
                            rep[name].update(read("h5subfile", files[name], ranks, checkouts[name]))
                    reps.append(rep)
                    print(f"{pattern} {ranks}: {_brief(rep)}", file=sys.stderr, flush=True)
            results["cases"].append(
                dict(pattern=pattern, ranks=ranks, mappings=mappings, reps=reps)
            )
    return results


def _brief(rep: dict[str, dict[str, float]]) -> str:
    base = rep[CONVENTIONAL]
    return "; ".join(
        f"{name} whole {times['whole'] / base['whole']:.2f}x"
        for name, times in rep.items()
        if name != CONVENTIONAL
    )


def ratios(case: dict, name: str, op: str) -> list[float]:
    """Per repetition: ``name``'s time for ``op`` over the conventional file's."""
    found = []
    for rep in case["reps"]:
        top, bottom = rep[name].get(op), rep[CONVENTIONAL]["whole" if op == "h5subfile" else op]
        if top is not None and bottom:
            found.append(top / bottom)
    return found


def render(data: dict) -> str:
    checkouts = data["checkouts"]
    facts = data["facts"]
    lines = [
        f"## {data.get('title', TITLE)}",
        "",
        "Plain h5py (this environment's wheel) reading masters written by h5subfile the way "
        "h5py programs write them (each rank its part of 4 datasets of 32 MiB: `d[a:b] = x`, "
        "tiles `d[i:i+t, j:j+t] = x`, rows `d[rank::size] = x`), against the same data "
        "repacked into one conventional file (`h5subfile repack --subfiles 1`), page cache warm "
        f"(each file read once first, untimed), {data['reps']} repetitions, the files read in "
        "an order shuffled anew each repetition, each read a fresh process timing inside "
        "it. Cells: the master's time over the conventional file's in the same repetition, "
        "median (min-max); 1.00 is as fast, above 1 slower. *conventional again* is a copy of "
        "the conventional file: the null comparison. *h5subfile*: the same whole reads "
        "through `h5subfile.File` at 1 rank, over plain h5py's whole reads of the conventional "
        "file. Targets (the issue's): at most 1.2 for whole datasets and slabs, 2 for open. "
        "Measured with:",
        "",
        "```sh",
        "git worktree add /tmp/base <commit before>",
        ".venv/bin/python benchmarks/read_patterns.py "
        + " ".join(f"--checkout {k}={v}" for k, v in data["commands"].items())
        + f" --ranks {' '.join(map(str, data['ranks']))} --reps {data['reps']}",
        "```",
        "",
        f"- machine: {facts['machine']}, {facts['cpus']} cores; started "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(facts['started']))}; load average "
        f"{facts['load_before'][0]:.2f} before, {facts['load_after'][0]:.2f} after",
        f"- versions: {facts['versions']}",
        f"- checkouts: {', '.join(f'{k} ({v})' for k, v in checkouts.items())}",
        "- writers above 2 ranks are oversubscribed (more ranks than cores); the reads are "
        "one process each",
        "",
    ]
    header = ["pattern", "ranks", "file", "VDS mappings", *OPS, "h5subfile"]
    lines += [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for case in data["cases"]:
        for name in [*checkouts, AGAIN]:
            cells = [cell(ratios(case, name, op)) for op in OPS]
            if case["pattern"] != "tiles" and case["pattern"] != "rows":
                cells[OPS.index("columns")] = "-"
            own = cell(ratios(case, name, "h5subfile")) if name in checkouts else "-"
            lines.append(
                f"| {PATTERNS[case['pattern']]} | {case['ranks']} | {name} | "
                f"{case['mappings'][name]} | " + " | ".join(cells) + f" | {own} |"
            )
    if data.get("notes"):  # what the table says (written once the run was read)
        lines += ["", *(f"- {note}" for note in data["notes"])]
    return "\n".join(lines)


def summary_rows(data: dict) -> list[tuple[str, str, str]]:
    """One row: each pattern's whole, row-slab and open ratios for the last checkout given
    first (the one measured), with the null comparison's range."""
    name = next(iter(data["checkouts"]))
    parts = []
    for case in data["cases"]:
        whole, rows, opened = (
            statistics.median(ratios(case, name, op)) for op in ("whole", "rows", "open")
        )
        parts.append(
            f"{PATTERNS[case['pattern']]}, {case['ranks']} ranks: whole **{whole:.2f}**, "
            f"row slabs **{rows:.2f}**, open **{opened:.2f}**"
        )
    nulls = {
        op: [statistics.median(ratios(case, AGAIN, op)) for case in data["cases"]]
        for op in ("whole", "rows", "open")
    }
    question = (
        f"Plain h5py reading masters ({name}) / the same data in one conventional file "
        "(target: at most 1.2 for whole datasets and slabs, 2 for open; above 1 slower)"
    )
    answer = "; ".join(parts) + (
        " (null, a copy of the conventional file, its medians: "
        + ", ".join(
            f"{op} {min(values):.2f}-{max(values):.2f}"
            for op, values in zip(("whole", "row slabs", "open"), nulls.values())
        )
        + ")"
    )
    return [(question, answer, data.get("title", TITLE))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkout",
        action="append",
        required=True,
        help="NAME=SRC: a checkout's src folder (the first is also repacked as the baseline)",
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--patterns", nargs="+", default=list(PATTERNS), choices=list(PATTERNS))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "read-patterns.json")
    parser.add_argument("--render", action="store_true", help="only print the saved Markdown")
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.json.read_text())))
        return 0
    commands = dict(item.split("=", 1) for item in args.checkout)
    checkouts = {name: Path(src) for name, src in commands.items()}
    load, started = os.getloadavg(), time.time()
    results = measure(args, checkouts)
    facts = run_facts(load, started)
    import h5py

    facts["versions"] = f"h5py {h5py.version.version}, HDF5 {h5py.version.hdf5_version}"
    commits = {
        name: _run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"])
        for name, src in checkouts.items()
    }
    data = dict(
        title=TITLE,
        facts=facts,
        commands=commands,
        checkouts=commits,
        ranks=args.ranks,
        reps=args.reps,
        **results,
    )
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    print(render(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How long buffered writes into the page cache take by the size of each system call
(docs/BENCHMARKS.md, "Write system call sizes"): why h5subfile cuts its writes into calls of at
most ``WRITE_SLICE`` bytes unless the plan's ``transfer_size`` says otherwise.

One process writes VPIC-IO steps of fresh arrays (8 arrays of 16 MiB, made anew before each
step, as a simulation's are) into a file with ``os.pwrite`` calls of each size in turn, three
steps per size (what a size's calls set off in the kernel is then mostly paid by that size's
own steps, not by the next size's), the sizes' order rotating each repetition; the file is
truncated every few GiB (untimed).
Reads are timed the same way, from a 128 MiB file in the page cache.

Run (the JSON feeds ``benchmarks/report.py``):

    .venv/bin/python benchmarks/write_slices.py --reps 12 --json docs/write-slices.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docplot import run_facts  # noqa: E402

TITLE = "Write system call sizes"
SIZES = [256 << 10, 1 << 20, 1280 << 10, 1536 << 10, 2 << 20, 4 << 20, 16 << 20]
ARRAYS, ARRAY = 8, 16 << 20  # bytes: one 128 MiB step
STEPS = 3  # steps written in a row with each size


def _write(fd: int, arrays: list[np.ndarray], offset: int, size: int) -> float:
    started = time.perf_counter()
    for array in arrays:
        view = memoryview(array).cast("B")
        for at in range(0, len(view), size):
            part = view[at : at + size]
            os.pwrite(fd, part, offset)
            offset += len(part)
    return time.perf_counter() - started


def measure(reps: int, folder: Path) -> dict[str, dict[int, list[float]]]:
    path = folder / "slices.bin"
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    writes: dict[int, list[float]] = {s: [] for s in SIZES}
    reads: dict[int, list[float]] = {s: [] for s in SIZES}
    try:
        offset = 0
        for rep in range(reps):
            order = SIZES[rep % len(SIZES) :] + SIZES[: rep % len(SIZES)]
            for size in order:
                for step in range(STEPS):
                    rng = np.random.default_rng(rep * 100 + step * 10 + size)
                    arrays = [rng.random(ARRAY // 4, dtype=np.float32) for _ in range(ARRAYS)]
                    writes[size].append(_write(fd, arrays, offset, size))
                    offset += ARRAYS * ARRAY
                    if offset >= 3 << 30:
                        os.ftruncate(fd, 0)
                        offset = 0
        os.ftruncate(fd, 0)
        data = np.random.default_rng(1).integers(0, 256, ARRAYS * ARRAY, dtype=np.uint8)
        os.pwrite(fd, data, 0)
        buffer = memoryview(np.empty_like(data)).cast("B")
        for rep in range(reps):
            order = SIZES[rep % len(SIZES) :] + SIZES[: rep % len(SIZES)]
            for size in order:
                started = time.perf_counter()
                for at in range(0, len(buffer), size):
                    os.preadv(fd, [buffer[at : at + size]], at)
                reads[size].append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return {"write": writes, "read": reads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    facts = run_facts(os.getloadavg(), time.time())
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parents[1]) as folder:
        found = measure(args.reps, Path(folder))
    data = {
        "facts": facts,
        "reps": args.reps,
        "step_bytes": ARRAYS * ARRAY,
        "times": {kind: {str(k): v for k, v in by.items()} for kind, by in found.items()},
    }
    print(render(data))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


def _label(size: int) -> str:
    return f"{size >> 20} MiB" if size % (1 << 20) == 0 else f"{size >> 10} KiB"


def _cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def render(data: dict) -> str:
    facts = data["facts"]
    step = data["step_bytes"] >> 20
    writes, reads = data["times"]["write"], data["times"]["read"]
    rows = [
        f"| {_label(int(size))} | {_cell(writes[size])} | {_slow(writes[size])} | "
        f"{_cell(reads[size])} |"
        for size in writes
    ]
    small = [statistics.median(xs) for size, xs in writes.items() if int(size) <= 1536 << 10]
    large = [statistics.median(xs) for size, xs in writes.items() if int(size) > 1536 << 10]
    sliced = statistics.median(writes[str(1280 << 10)])
    return "\n".join(
        [
            f"## {TITLE}",
            "",
            f"One process writes {step} MiB steps of fresh arrays ({ARRAYS} of "
            f"{ARRAY >> 20} MiB, made anew before each step, as a simulation's are) with "
            f"`os.pwrite` calls of each size in turn, {STEPS} steps per size (the sizes' order "
            "rotating each repetition), into the page cache; reads the same from a file in the "
            f"page cache. {data['reps']} repetitions; seconds per step, median (min-max) over "
            "every step. Measured with:",
            "",
            "```sh",
            ".venv/bin/python benchmarks/write_slices.py --reps 10 --json docs/write-slices.json",
            "```",
            "",
            f"- machine: {facts['machine']}, {facts['cpus']} cores; load before "
            + ", ".join(f"{x:.2f}" for x in facts["load_before"]),
            "",
            "| bytes per call | write s | steps over 0.1 s | read s |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Writing, the median step took {min(small):.3f}-{max(small):.3f} s in calls of at "
            f"most 1.5 MiB and {min(large):.3f}-{max(large):.3f} s in larger ones (up to "
            f"{max(large) / sliced:.1f} times the 1.25 MiB calls' median); every size has slow "
            "steps (likely this VM's page allocation: a first touch of memory is slow), larger "
            "calls more of them. Reading, the size does not matter. h5subfile therefore writes its "
            "data files in calls of at most 1.5 MiB (`WRITE_SLICE`) unless the plan's "
            "`transfer_size` says otherwise; `bench -a posix` keeps IOR's one call per transfer.",
        ]
    )


def _slow(xs: list[float]) -> str:
    return f"{sum(x > 0.1 for x in xs)} of {len(xs)}"


def summary_rows(data: dict) -> list[tuple[str, str, str]]:
    writes = data["times"]["write"]
    cells = "; ".join(
        f"{_label(int(size))}: **{statistics.median(xs):.3f}** s" for size, xs in writes.items()
    )
    return [
        (
            f"Writing a {data['step_bytes'] >> 20} MiB step of fresh arrays into the page "
            "cache, by bytes per system call (median s)",
            cells,
            TITLE,
        )
    ]


if __name__ == "__main__":
    main()

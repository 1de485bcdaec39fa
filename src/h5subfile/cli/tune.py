"""``h5subfile tune DIR``: find the plan that writes fastest in DIR with this job's ranks, keep
it as a tuning profile for ``--plan auto`` (docs/TUNING.md). Run under mpiexec with the rank
count of the real job."""

from __future__ import annotations

import argparse
import re
from typing import Any

from ..units import parse_size
from .common import add_progress_flags, count_at_least, int_at_least, print_json, progress_line

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$")


def duration(text: str) -> float:
    """An argparse type: seconds from ``90``, ``90s``, ``5m`` or ``1h``."""
    match = _DURATION.match(text.lower())
    if not match:
        raise ValueError(f"expected a duration such as 90s, 5m or 1h, got {text!r}")
    value, unit = float(match.group(1)), match.group(2) or "s"
    seconds = value * {"s": 1, "m": 60, "min": 60, "h": 3600}[unit]
    if seconds <= 0:
        raise ValueError(f"the budget must be positive, got {text!r}")
    return seconds


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "tune",
        help="find the fastest plan for this job and keep it for --plan auto",
        description="Write a realistic pattern (VPIC-IO's step by default) in DIR with plans "
        "from the plan's search space, interleaved and repeated, and recommend one only when "
        "it beats the default by more than the measured noise (a null comparison in every "
        "round). Prints the ranked plans and saves a tuning profile keyed by file system, "
        "mount and rank/node count, which --plan auto (File(..., plan='auto')) then uses. "
        "Run it under mpiexec with the real job's rank count (docs/TUNING.md).",
    )
    parser.add_argument("folder", help="where the trial files are written (and deleted)")
    parser.add_argument(
        "--budget", type=duration, default=None, help="stop searching after this long (5m)"
    )
    parser.add_argument(
        "--repetitions",
        type=int_at_least(3),
        default=5,
        help="times each plan of a round is written (interleaved)",
    )
    parser.add_argument(
        "--particles",
        type=count_at_least(1),
        default=1 << 20,
        help="VPIC-IO particles per rank: 8 datasets of 4 bytes per particle",
    )
    parser.add_argument(
        "--transfer",
        type=parse_size,
        default=None,
        help="bytes per write call, k/m/g binary as in IOR (default: each dataset's block whole)",
    )
    parser.add_argument(
        "--like",
        metavar="PROFILE.json",
        default=None,
        help="write as many bytes per rank as the job of this write profile (--profile DIR "
        "of vpic, File(..., profile=DIR)) instead of --particles",
    )
    parser.add_argument("--fsync", action="store_true", help="time writes made durable")
    parser.add_argument(
        "--exhaustive",
        action="store_true",
        help="try every point of the space instead of coordinate descent (the reference)",
    )
    parser.add_argument("--no-save", action="store_true", help="do not save a tuning profile")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_progress_flags(parser)
    parser.set_defaults(run=run)


def render(result: Any, fs: Any, ranks: int, pattern: str, rows: int = 15) -> str:
    """The ranked table and the recommendation, as rank 0 prints them."""
    from ..tune.space import label

    lines = [
        f"tuned {ranks} rank(s) on {fs.name} ({fs.mount}): {pattern}; {result.trials} trials "
        f"in {result.seconds:.0f} s{', stopped: ' + result.stopped if result.stopped else ''}",
        "",
        "| plan | median s | min s | max s | time / default (range) | trials |",
        "|---|---|---|---|---|---|",
    ]
    for row in result.rows[:rows]:
        plan = label(row.plan) if row.plan else "default"
        lines.append(
            f"| {plan} | {row.median:.3f} | {row.min:.3f} | {row.max:.3f} | "
            f"{row.ratio:.2f} ({row.ratio_min:.2f}-{row.ratio_max:.2f}) | {row.trials} |"
        )
    if len(result.rows) > rows:
        lines.append(f"({len(result.rows) - rows} more plans measured)")
    lines.append("")
    if result.recommendation:
        plan = label(result.recommendation)
        lines.append(
            f"recommended: {plan}: {100 * result.margin:.0f} % less time than the default "
            f"(per-repetition ratios {result.spread[0]:.2f}-{result.spread[1]:.2f}, noise "
            f"{100 * result.noise:.0f} %)"
        )
    else:
        lines.append(result.reason)
    return "\n".join(lines)


def _pattern(args: argparse.Namespace) -> Any:
    """What each trial writes: VPIC-IO's step of --particles, or as much as --like's job."""
    import json

    from ..errors import PlanError
    from ..io.regular import read_regular
    from ..tune.tuning import Pattern, pattern_like

    if args.like:
        try:
            like = pattern_like(json.loads(read_regular(args.like, "profile")), args.fsync)
        except (OSError, ValueError, PlanError) as exc:  # unreadable, not JSON, not a profile
            raise PlanError(f"--like {args.like}: {exc}") from None
        transfer = args.transfer or like.block
        if like.block % transfer:
            raise ValueError(f"--transfer {transfer}: must divide a dataset's block ({like.block})")
        return Pattern(8, like.block, transfer, args.fsync)
    block = 4 * args.particles
    transfer = args.transfer or block
    if block % transfer or transfer % 8:
        raise ValueError(
            f"--transfer {transfer}: must divide a dataset's block ({block} bytes) and be a "
            "multiple of 8"
        )
    return Pattern(8, block, transfer, args.fsync)


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from ..io.tuning_profiles import profile_dir
    from ..tune.tuning import save_result, tune

    comm = MPI.COMM_WORLD
    pattern = _pattern(args)
    save_to = None if args.no_save else profile_dir()  # checked writable before the search
    with progress_line(args, comm.rank) as progress:
        result, fs = tune(
            comm,
            args.folder,
            pattern,
            args.repetitions,
            args.budget,
            args.exhaustive,
            progress,
            save_to,
        )
    saved = None if save_to is None else save_result(comm, result, fs, save_to)
    if comm.rank == 0:
        if args.json:
            print_json(
                {
                    "filesystem": fs.name,
                    "mount": fs.mount,
                    "ranks": comm.size,
                    "pattern": pattern.describe(comm.size),
                    "profile": saved,
                    **result.to_dict(),
                }
            )
        else:
            print(render(result, fs, comm.size, pattern.describe(comm.size)), flush=True)
            if saved:
                print(f"tuning profile: {saved} (used by --plan auto)", flush=True)
    return 0

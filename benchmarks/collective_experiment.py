"""Before/after of the agreed collective calls (docs/BENCHMARKS.md, "Cost of a collective call").

``python benchmarks/collective_experiment.py --baseline ../main`` runs, for each rank count,
``--repeats`` rounds of: the baseline checkout (A), this checkout (B) and the baseline again
(A', the null comparison), in an order rotated every round, each a VPIC-IO write
(``h5subfile vpic``) through its own ``.venv``; then ``collective_cost.py`` under each
checkout. Prints a Markdown table of medians and ratios (B / A, and A' / A for the noise).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NULL = "A'"  # the baseline again


def run(root: Path, ranks: int, args: list[str]) -> dict:
    venv = root / ".venv" / "bin"
    command = [str(venv / "mpiexec"), "-n", str(ranks), *args]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def vpic(root: Path, ranks: int, folder: Path, particles: str, steps: int) -> float:
    """Observed write seconds (first open to last close) of one VPIC-IO run."""
    venv = root / ".venv" / "bin"
    path = folder / "run.h5"
    args = [str(venv / "h5subfile"), "vpic", str(path), "--particles", particles]
    result = run(root, ranks, [*args, "--steps", str(steps), "--json", "--quiet"])
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    folder.mkdir()
    return float(result["observed_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="checkout with a .venv")
    parser.add_argument("--candidate", type=Path, default=HERE.parent)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--particles", default="1Mi")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    checkouts = {"A": args.baseline.resolve(), "B": args.candidate.resolve()}
    checkouts[NULL] = checkouts["A"]
    rows = []
    for ranks in args.ranks:
        seconds: dict[str, list[float]] = {label: [] for label in checkouts}
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "vpic"
            folder.mkdir()
            for repeat in range(args.repeats):
                order = list(checkouts)
                order = order[repeat % 3 :] + order[: repeat % 3]
                for label in order:
                    t = vpic(checkouts[label], ranks, folder, args.particles, args.steps)
                    seconds[label].append(t)
        cost = {
            label: run(
                root,
                ranks,
                [
                    str(root / ".venv/bin/python"),
                    str(HERE / "collective_cost.py"),
                    "--calls",
                    str(args.calls),
                ],
            )
            for label, root in checkouts.items()
            if label != NULL
        }
        rows.append((ranks, seconds, cost))
        print(json.dumps({"ranks": ranks, "seconds": seconds, "cost": cost}), flush=True)
    print()
    print(
        "| ranks | VPIC write s, A (before) | B (after) | A' (before again) | B / A | A' / A "
        "| per call us: blocking allreduce (before) | agree, before | call round, after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for ranks, seconds, cost in rows:
        med = {label: statistics.median(v) for label, v in seconds.items()}
        print(
            f"| {ranks} | {med['A']:.3f} | {med['B']:.3f} | {med[NULL]:.3f} "
            f"| {med['B'] / med['A']:.2f} | {med[NULL] / med['A']:.2f} "
            f"| {cost['A']['allreduce']['us_per_call']:.1f} "
            f"| {cost['A']['agree']['us_per_call']:.1f} "
            f"| {cost['B']['call']['us_per_call']:.1f} |"
        )


if __name__ == "__main__":
    main()

"""Several APIs of one run side by side: bandwidth per API and its ratio to the first API.

The APIs ran in turns (repetition i of every API before repetition i+1 of any), so repetition
i of two APIs met the same state of the machine: a ratio's spread is taken over those pairs.
Ratio = median(API) / median(first API); its range = min and max of the per-repetition ratios.
"""

from __future__ import annotations

import statistics
from typing import Any

from .driver import PhaseResult

HEADER = (
    f"{'access':<8}{'api':<9}{'median(MiB/s)':>14}{'min(MiB/s)':>12}{'max(MiB/s)':>12}"
    f"{'ratio':>9}{'ratio min-max':>16}"
)


def compare(results: list[tuple[str, list[PhaseResult]]]) -> list[dict[str, Any]]:
    """One row per access (write, read) and API: bandwidth median, min, max over repetitions
    and the ratio to the first API (median and per-repetition min-max)."""
    rows: list[dict[str, Any]] = []
    if not results:
        return rows
    for access in ("write", "read"):
        base = {r.iteration: r.bw_mib for r in results[0][1] if r.access == access}
        if not base:
            continue
        for api, phases in results:
            bws = {r.iteration: r.bw_mib for r in phases if r.access == access}
            pairs = [bws[i] / base[i] for i in sorted(bws) if base.get(i, 0) > 0]
            median, first = statistics.median(bws.values()), statistics.median(base.values())
            rows.append(
                {
                    "access": access,
                    "api": api,
                    "repetitions": len(bws),
                    "median_mib_s": median,
                    "min_mib_s": min(bws.values()),
                    "max_mib_s": max(bws.values()),
                    "ratio": median / first if first > 0 else None,
                    "ratio_min": min(pairs, default=None),
                    "ratio_max": max(pairs, default=None),
                }
            )
    return rows


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render(rows: list[dict[str, Any]], repetitions: int) -> str:
    """The comparison table (text), after every API's own IOR output."""
    if not rows:
        return "Comparison: no results"
    first = rows[0]["api"]
    lines = [
        f"Comparison of APIs ({repetitions} repetition(s), run in turns; ratio = median "
        f"bandwidth / {first}'s, with the range of per-repetition ratios):",
        HEADER,
    ]
    for row in rows:
        spread = f"{_ratio(row['ratio_min'])}-{_ratio(row['ratio_max'])}"
        lines.append(
            f"{row['access']:<8}{row['api']:<9}{row['median_mib_s']:>14.2f}"
            f"{row['min_mib_s']:>12.2f}{row['max_mib_s']:>12.2f}"
            f"{_ratio(row['ratio']):>9}{spread:>16}"
        )
    return "\n".join(lines)

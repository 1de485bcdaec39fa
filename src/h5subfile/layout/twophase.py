"""Two-phase I/O planning (pure): which bytes move between which ranks and aggregators, round by
round, so that each aggregator writes (or reads) its part of a file in large contiguous pieces
holding at most ``buffer_size`` bytes at a time.

Every rank computes the same plan from the same gathered runs (no extra communication). The
bytes of a file that some rank writes (or reads) are its *covered* bytes; they are split evenly
between the file's aggregators (each gets a *domain*), and each domain is consumed in *windows*
of at most ``buffer_size`` covered bytes, one window per round. Gaps between covered bytes (HDF5
metadata between datasets) are never written.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: A rank's byte run: (file index, byte offset in the file, number of bytes).
Run = tuple[int, int, int]


@dataclass(frozen=True)
class Piece:
    """Bytes of one rank's run that belong to one window."""

    rank: int
    run: int  # index into that rank's runs
    run_offset: int  # first byte, relative to the run
    window_offset: int  # where they go in the window's buffer
    nbytes: int


@dataclass
class Window:
    """What one aggregator holds in one round: spans of one file, and the pieces filling them."""

    aggregator: int
    file: int
    round: int
    spans: list[tuple[int, int, int]] = field(
        default_factory=list
    )  # (file offset, window offset, n)
    size: int = 0
    pieces: list[Piece] = field(default_factory=list)


def covered_intervals(runs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge (offset, nbytes) runs into disjoint sorted [start, end) intervals."""
    merged: list[list[int]] = []
    for offset, nbytes in sorted(runs):
        if nbytes <= 0:
            continue
        if merged and offset <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], offset + nbytes)
        else:
            merged.append([offset, offset + nbytes])
    return [(a, b) for a, b in merged]


def _windows_of_file(
    file: int, intervals: list[tuple[int, int]], aggregators: Sequence[int], buffer_size: int
) -> list[Window]:
    total = sum(b - a for a, b in intervals)
    count = len(aggregators)
    windows: list[Window] = []
    # Walk the covered bytes once, cutting at domain boundaries and at window boundaries.
    position = 0  # covered bytes consumed so far
    interval, inside = 0, 0  # current interval and bytes consumed in it
    for index, aggregator in enumerate(aggregators):
        domain_end = (index + 1) * total // count
        round_number = 0
        while position < domain_end:
            window = Window(aggregator, file, round_number)
            limit = min(position + buffer_size, domain_end)
            while position < limit:
                start, end = intervals[interval]
                take = min(end - start - inside, limit - position)
                window.spans.append((start + inside, window.size, take))
                window.size += take
                position += take
                inside += take
                if inside == end - start:
                    interval, inside = interval + 1, 0
            windows.append(window)
            round_number += 1
    return windows


def plan_two_phase(
    runs: Sequence[Sequence[Run]],
    aggregators: Mapping[int, Sequence[int]],
    buffer_size: int,
) -> list[list[Window]]:
    """Rounds of windows for the ranks' ``runs`` (``runs[r]`` is rank r's list).

    ``aggregators[file]`` lists the ranks aggregating each file. Within a round, windows are in
    (file, aggregator order) order and each window's pieces in (rank, run, offset) order; both
    sides of every exchange rely on that order.
    """
    by_file: dict[int, list[tuple[int, int]]] = {}
    for rank_runs in runs:
        for file, offset, nbytes in rank_runs:
            by_file.setdefault(file, []).append((offset, nbytes))
    rounds: list[list[Window]] = []
    for file in sorted(by_file):
        windows = _windows_of_file(
            file, covered_intervals(by_file[file]), aggregators[file], buffer_size
        )
        spans = sorted((s[0], s[0] + s[2], s[1], w) for w in windows for s in w.spans)
        ends = [end for _, end, _, _ in spans]
        for rank, rank_runs in enumerate(runs):
            for run_index, (run_file, offset, nbytes) in enumerate(rank_runs):
                if run_file != file or nbytes <= 0:
                    continue
                at = bisect.bisect_right(ends, offset)
                while at < len(spans) and spans[at][0] < offset + nbytes:
                    start, end, window_offset, window = spans[at]
                    lo, hi = max(start, offset), min(end, offset + nbytes)
                    window.pieces.append(
                        Piece(rank, run_index, lo - offset, window_offset + lo - start, hi - lo)
                    )
                    at += 1
        for window in windows:
            while len(rounds) <= window.round:
                rounds.append([])
            rounds[window.round].append(window)
    return rounds

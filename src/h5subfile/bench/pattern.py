"""The data written by the benchmark: every 8-byte word says who wrote it and where, so a
check (-W/-R) catches misplaced, stale or torn transfers."""

from __future__ import annotations

import numpy as np


def transfer_words(transfer: int, writer: int, iteration: int) -> np.ndarray:
    """The body of every transfer of ``writer`` in ``iteration`` (uint64 words)."""
    words = np.arange(transfer // 8, dtype=np.uint64)
    words += np.uint64((writer << 36) + (iteration << 56))
    return words


def tag(segment: int, index: int) -> np.uint64:
    """The first word of each transfer: which segment and which transfer of the block."""
    return np.uint64((1 << 63) | (segment << 32) | index)


def stamp(words: np.ndarray, segment: int, index: int) -> None:
    words[0] = tag(segment, index)


def check(got: np.ndarray, body: np.ndarray, segment: int, index: int) -> bool:
    return bool(got[0] == tag(segment, index)) and bool(np.array_equal(got[1:], body[1:]))

"""Collective calls as the ranks name them: :class:`Call`, its hash, and the texts that name
ranks and files in messages; pure (no MPI)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """A collective call, as the ranks agree on it at its start.

    ``name``, ``seq`` (its number on its file) and ``file`` (absolute: files open together on
    one communicator share its rounds) must be the same on every rank, else they are out of step.
    ``args``, when given, must be the same too (the datasets of a write...), else it is an
    argument mismatch. ``detail`` is only shown in messages. ``earlier`` and ``values`` digest
    the metadata calls made since the file's last collective call (engine/ledger.py), whose
    structures (``earlier_calls``, shown when they differ) must match too; values may differ.
    """

    name: str
    seq: int
    detail: str = ""
    args: str | None = None
    file: str = ""
    earlier: int = 0
    values: int = 0
    earlier_calls: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.name}{' ' + self.detail if self.detail else ''} (call #{self.seq})"


def call_hash(text: str) -> int:
    """A positive 62-bit hash of ``text``, the same in every process (unlike ``hash``)."""
    return digest_int(hashlib.blake2b(text.encode(), digest_size=8).digest())


def digest_int(digest: bytes) -> int:
    """A digest as a positive 62-bit int (it travels in an int64 MAX-reduction with its
    negation, so 0 stays free to mean "nothing")."""
    return (int.from_bytes(digest, "little") >> 2) or 1


def ranks_text(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) <= 8:
        return "ranks " + ", ".join(map(str, ranks))
    return f"{len(ranks)} ranks: {ranks[0]}, {ranks[1]}, ... {ranks[-1]}"


def by_value(values: Sequence[T]) -> list[tuple[T, list[int]]]:
    """Each distinct value with the ranks that hold it, in order of first appearance."""
    grouped: dict[T, list[int]] = {}
    for rank, value in enumerate(values):
        grouped.setdefault(value, []).append(rank)
    return list(grouped.items())


def files_text(files: Sequence[str]) -> str:
    named = sorted({f for f in files if f})
    return f" on {', '.join(named)}" if named else ""

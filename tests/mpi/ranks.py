"""Helpers for tests that run on every rank of a job."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from mpi4py import MPI

T = TypeVar("T")


def on_root(comm: MPI.Comm, work: Callable[[], T]) -> T:
    """Collective: run ``work()`` on rank 0; its result, or its exception, on every rank."""
    result: Any = None
    error: BaseException | None = None
    if comm.rank == 0:
        try:
            result = work()
        except Exception as exc:  # noqa: BLE001 - raised again on every rank
            error = exc
    result, error = comm.bcast((result, error))
    if error is not None:
        raise error
    return result


def plain_h5py(comm: MPI.Comm, code: str, *args: str) -> str:
    """Collective: what Python ``code`` (plain h5py, no h5subfile) prints when run with
    ``args`` in a separate process on rank 0; its stripped output on every rank."""
    return on_root(
        comm,
        lambda: subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
        ).stdout.strip(),
    )


def same_on_every_rank(comm: MPI.Comm, value: T, what: str = "value") -> T:
    """Collective: assert that ``value`` is equal on every rank; return it."""
    __tracebackhide__ = True
    values = comm.allgather(value)
    assert all(v == values[0] for v in values), f"{what} differs between ranks: {values}"
    return value


class raises_on_every_rank:
    """Collective context manager: the block raises exactly ``kind`` (``pytest.raises``) whose
    message holds every fragment, with the same type and message on every rank.

    The ranks compare what they raised before anything is asserted, so a rank where the block
    did not raise cannot leave the others waiting.
    """

    def __init__(self, comm: MPI.Comm, kind: type[BaseException], *fragments: str) -> None:
        self.comm, self.kind, self.fragments = comm, kind, fragments

    def __enter__(self) -> pytest.ExceptionInfo:
        self.raises = pytest.raises(self.kind)
        return self.raises.__enter__()

    def __exit__(self, kind: type | None, value: BaseException | None, tb: Any) -> bool:
        __tracebackhide__ = True  # failures point at the test's with statement
        raised = ("did not raise", "") if kind is None else (kind.__name__, str(value))
        everyone = self.comm.allgather(raised)
        if not self.raises.__exit__(kind, value, tb):  # DID NOT RAISE, or another exception
            return False
        message = str(value)
        wrong = [f"{f!r} is not in the message" for f in self.fragments if f not in message]
        if kind is not self.kind:
            wrong.insert(0, f"expected exactly {self.kind.__name__}, got {kind.__name__}")
        if any(r != everyone[0] for r in everyone):
            wrong.append(f"not identical on every rank: {everyone}")
        if wrong:
            raise AssertionError("; ".join(wrong) + f"\nmessage: {message}") from None
        return True


class DoneAtTest:
    """A stand-in request that completes at its ``n``-th test (local: no MPI)."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.sending = True  # what a star round says while a message of its rank is queued

    def Test(self) -> bool:  # noqa: N802 - MPI.Request's name
        self.left -= 1
        return self.left <= 0

"""Parsing human-friendly counts, byte sizes and durations for the API and the CLI.

:func:`parse_count` takes ``1024``, ``4M`` (10**6) and ``8Mi`` (2**20); :func:`parse_size`
bytes with k/m/g (binary, as IOR); :func:`parse_duration` seconds (``0.5s``, ``500ms``, ``0.5``).
"""

from __future__ import annotations

import math
import re

_SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_IEC = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_NUMBER = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([a-zA-Z]*)\s*$")


def _split(text: str | int) -> tuple[float, str]:
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"expected a non-negative number, got {text}")
        return float(text), ""
    match = _NUMBER.match(str(text))
    if not match:
        raise ValueError(f"cannot read {text!r} as a number (examples: 1024, 4M, 8Mi, 2Gi)")
    return float(match.group(1)), match.group(2).lower()


def _whole(value: float, text: str | int) -> int:
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)


def parse_count(text: str | int) -> int:
    """Parse a count: ``1024``, ``4M`` (4*10**6, SI), ``8Mi`` (8*2**20, binary).

    Suffixes ``k M G T`` are decimal, ``Ki Mi Gi Ti`` are binary; case does not matter.
    """
    value, suffix = _split(text)
    if suffix in _SI:
        return _whole(value * _SI[suffix], text)
    if suffix in _IEC:
        return _whole(value * _IEC[suffix], text)
    raise ValueError(f"unknown suffix {suffix!r} in {text!r}: use k, M, G (10**3...) or Ki, Mi, Gi")


def parse_size(text: str | int) -> int:
    """Parse a byte size as IOR does: ``k``, ``m``, ``g`` are binary (``1m`` = 1048576 bytes).

    ``KiB``/``MiB``/``GiB`` and ``KB``/``MB``/``GB`` are accepted and also binary, as in IOR.
    """
    value, suffix = _split(text)
    suffix = suffix.removesuffix("b").removesuffix("i")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}.get(suffix)
    if scale is None:
        raise ValueError(f"unknown size suffix in {text!r}: use k, m, g (binary, as in IOR)")
    return _whole(value * scale, text)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0}


def parse_duration(text: str | float) -> float:
    """Parse a duration in seconds: ``0.5``, ``"0.5"``, ``"0.5s"``, ``"500ms"``, ``"250us"``,
    ``"2min"`` (h5bench writes its compute time as ``"1 s"``); never negative."""
    if isinstance(text, bool):
        raise ValueError(f"expected a duration such as 0.5s or 500ms, got {text!r}")
    if isinstance(text, (int, float)):
        if not math.isfinite(text) or text < 0:
            raise ValueError(f"expected a non-negative duration, got {text}")
        return float(text)
    match = _DURATION.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _SECONDS:
        raise ValueError(
            f"cannot read {text!r} as a duration (examples: 0.5, 0.5s, 500ms, 250us, 2min)"
        )
    return float(match.group(1)) * _SECONDS[unit]


def format_bytes(nbytes: float) -> str:
    """Format a byte count with a binary unit, e.g. ``'128.000 MiB'``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.3f} {unit}"
    return f"{int(nbytes)} B"

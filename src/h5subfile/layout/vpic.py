"""VPIC-IO's file layout, as h5bench defines it: each time step is a group ``Timestep_<s>``
holding eight 1-D datasets, in this order. One table for the kernel that writes it and the
planner that sizes it on paper."""

from __future__ import annotations

import numpy as np

#: (name, dtype) of the datasets of one step, in h5bench's order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("x", "f4"),
    ("y", "f4"),
    ("z", "f4"),
    ("px", "f4"),
    ("py", "f4"),
    ("pz", "f4"),
    ("id_1", "i4"),
    ("id_2", "f4"),
)
BYTES_PER_PARTICLE = sum(np.dtype(t).itemsize for _, t in FIELDS)  # 32


def step_name(step: int) -> str:
    return f"Timestep_{step}"

"""Memory touched before each timed run (untimed), so that a run's page cache comes from memory
the virtual machine's host has backed.

On a virtual machine whose host takes back the memory the guest frees (free page reporting:
``/sys/module/page_reporting``), the first touch of such a page faults it in on the host again:
about 2 us per 4 KiB page on the machine these benchmarks ran on (touching 21 GiB once took 49 s
of system time). A run writing 0.5-2 GiB into the page cache then paid from nothing to over a
second more, depending on which free pages it got, and runs of one configuration varied 2-4x.
Touching a few GiB right before a run, in a process of its own that frees them at once, hands
the run pages the host has just backed (the guest reports free pages after about two seconds).
Every configuration compared gets the same treatment.
"""

from __future__ import annotations

import os
import subprocess
import sys

REPORTING = "/sys/module/page_reporting"
TOUCH = (
    "import numpy as n, sys; a = n.empty(int(float(sys.argv[1]) * 2**30), n.uint8); a[::4096] = 1"
)


def reports_free_pages() -> bool:
    """Whether this kernel hands freed memory back to its host (free page reporting)."""
    return os.path.isdir(REPORTING)


def warm_memory(gib: float) -> None:
    """Touch ``gib`` GiB in a process of its own, then free them (untimed; nothing when 0)."""
    if gib > 0:
        subprocess.run([sys.executable, "-c", TOUCH, str(gib)], check=True)

"""``h5subfile demo``: the main job (``make demo``).

VPIC-IO with 4 ranks three ways (subfiling with 2 subfiles, one shared file, file per process),
then BD-CATS-IO with 3 ranks on each with verification, a check with plain h5py, and one table.
It drives ``mpiexec`` itself, so it runs as a plain command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from ..errors import H5SubfileError
from ..mpi.launch import mpiexec
from ..units import format_bytes, parse_count
from .common import (
    Profiling,
    UsageError,
    add_profile_flags,
    count_at_least,
    int_at_least,
    launched_size,
    profile_flags,
    profiling,
)

WAYS = (
    ("subfiling, 2 subfiles", ["--subfiles", "2"], "subfiled.h5"),
    ("one shared file", ["--subfiles", "1"], "shared.h5"),
    ("file per process", ["--subfiles", "rank"], "per_rank.h5"),
)


def add_parser(verbs: Any) -> None:
    parser = verbs.add_parser(
        "demo",
        help="run the demo: VPIC-IO three ways, BD-CATS-IO, one table",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument(
        "--keep",
        "--dir",
        metavar="DIR",
        default=None,
        help="write the files into DIR and keep them there (default: a temporary folder, removed "
        "at the end)",
    )
    parser.add_argument(
        "--particles",
        type=count_at_least(1),
        default=parse_count("1Mi"),
        help="particles per writer rank (default 1Mi = 32 MiB per rank per step)",
    )
    parser.add_argument("--steps", type=int_at_least(1), default=2, help="time steps (default 2)")
    parser.add_argument(
        "--writers",
        type=int_at_least(2),
        default=4,
        help="ranks writing with VPIC-IO (at least 2: one way writes 2 subfiles)",
    )
    parser.add_argument(
        "--readers", type=int_at_least(1), default=3, help="ranks reading back with BD-CATS-IO"
    )
    add_profile_flags(parser, "every write and read of the tour (DIR/NAME.h5.write.json...)")
    parser.set_defaults(run=run)


def run_mpi(launcher: str, ranks: int, args: list[str]) -> dict[str, Any]:
    """Run ``h5subfile ARGS --json`` on ``ranks`` ranks: its JSON, or its error, one line."""
    command = [launcher, "-n", str(ranks), sys.executable, "-m", "h5subfile", *args, "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        said = [line for line in result.stderr.splitlines() if ": error: " in line]
        why = said[0].split(": error: ", 1)[1] if said else " ".join(result.stderr.split())[-500:]
        raise H5SubfileError(
            f"'h5subfile {args[0]}' on {ranks} ranks failed (status {result.returncode}): {why}"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def files_of(master: str) -> tuple[int, int]:
    """(number of files, total bytes) of a master and its subfile folder."""
    from ..layout.names import subfile_folder

    paths = [master]
    folder = subfile_folder(master)
    if os.path.isdir(folder):
        paths += [os.path.join(folder, n) for n in sorted(os.listdir(folder))]
    return len(paths), sum(os.path.getsize(p) for p in paths)


def check_with_h5py(master: str, expected_length: int) -> str:
    """Open the master with plain h5py (no h5subfile) in a separate process."""
    code = (
        "import h5py, sys\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    d = f['Timestep_0/x']\n"
        "    print(d.shape[0], 'virtual' if d.is_virtual else 'contiguous', float(d[-1]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, master], capture_output=True, text=True, check=True
    ).stdout.split()
    if int(out[0]) != expected_length:
        raise H5SubfileError(
            f"plain h5py sees {out[0]} particles in {master}, expected {expected_length}"
        )
    return out[1]


def run(args: argparse.Namespace) -> int:
    """Check the arguments and the launcher before anything runs; write into ``--keep DIR``
    (kept) or a temporary folder (removed at the end, whatever happens)."""
    if launched_size() > 1:
        raise UsageError(
            "run the demo as a plain command (h5subfile demo): it launches mpiexec itself"
        )
    profiled = profiling(args)
    try:
        launcher = mpiexec()
    except RuntimeError as exc:
        raise H5SubfileError(str(exc)) from None
    if args.keep is None:
        with tempfile.TemporaryDirectory(prefix="h5subfile-demo-") as folder:
            return tour(args, launcher, folder, kept=False, profiled=profiled)
    try:
        os.makedirs(args.keep, exist_ok=True)
    except OSError as exc:
        raise H5SubfileError(f"cannot make {args.keep}: {exc.strerror or exc}") from None
    return tour(args, launcher, args.keep, kept=True, profiled=profiled)


def tour(
    args: argparse.Namespace, launcher: str, folder: str, kept: bool, profiled: Profiling
) -> int:
    """The three writes, the reads and the table, in ``folder`` (each profiled into
    ``profiled.folder`` when it is set)."""
    where = folder if kept else "a temporary folder (removed at the end; keep them: --keep DIR)"
    print(
        f"h5subfile demo: VPIC-IO with {args.writers} ranks, {args.particles} particles per rank,"
        f" {args.steps} step(s); BD-CATS-IO with {args.readers} ranks; files in {where}",
        flush=True,
    )
    rows = []
    for label, flags, name in WAYS:
        master = os.path.join(folder, name)
        print(f"  {label}: writing...", end="", flush=True)
        write = run_mpi(
            launcher,
            args.writers,
            [
                "vpic",
                master,
                "--particles",
                str(args.particles),
                "--steps",
                str(args.steps),
                *flags,
                *profile_flags(args),
            ],
        )
        print(" reading and verifying...", end="", flush=True)
        read = run_mpi(
            launcher,
            args.readers,
            ["bdcats", master, "--pattern", "full", "--verify", *profile_flags(args)],
        )
        nfiles, nbytes = files_of(master)
        storage = check_with_h5py(master, args.particles * args.writers)
        print(f" done (plain h5py sees a {storage} dataset)", flush=True)
        rows.append((label, nfiles, nbytes, write, read))
    header = (
        f"{'way':<24}{'files':>6}{'bytes':>14}{'write s':>9}{'write MiB/s':>13}"
        f"{'read s':>8}{'read MiB/s':>12}  verified"
    )
    print()
    print(header)
    print("-" * len(header))
    for label, nfiles, nbytes, write, read in rows:
        print(
            f"{label:<24}{nfiles:>6}{format_bytes(nbytes):>14}"
            f"{write['observed_seconds']:>9.3f}{write['observed_rate_mib_s']:>13.1f}"
            f"{read['observed_seconds']:>8.3f}{read['observed_rate_mib_s']:>12.1f}  yes"
        )
    print()
    print("Times are observed completion times (open to close, max over ranks); rates are MiB/s.")
    print("On a shared machine they vary 2-3x between runs; compare ways only side by side.")
    total = sum(nbytes for _, _, nbytes, _, _ in rows)
    if kept:
        master = os.path.join(folder, WAYS[0][2])
        print(f"Files: {format_bytes(total)} in {folder}  (inspect with: h5subfile info {master})")
    else:
        print(f"Files: {format_bytes(total)} written, now removed (keep them with --keep DIR)")
    profiled.announce(args, 0)
    return 0

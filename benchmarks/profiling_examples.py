"""The example reports of docs/PROFILING.md (*Reading a report*): the same VPIC-IO write at 4
ranks in three layouts, each profiled with a trace, each report drawn into
``docs/figures/profiling/<layout>/`` (``report.md`` and its pictures).

Run (after ``make``; 4 ranks, oversubscribed on a 2-core machine):

    .venv/bin/python benchmarks/profiling_examples.py [--phdf5-darshan LIBDARSHAN]

With ``--phdf5-darshan`` (the ``libdarshan.so`` of a Darshan runtime built against the MPI of
``make phdf5``'s ``.venv-phdf5``) it also writes the same data through parallel HDF5 (``vpic
--api phdf5``, one shared file) under Darshan with DXT, and draws that log the same way into
``parallel-hdf5/``.

Layouts: ``subfiles-2`` (subfiling: 2 ranks per subfile), ``one-file`` (``--subfiles 1``: one
shared file, the master) and ``file-per-process`` (``--subfiles rank``). Parallel HDF5's own
writes are not profiled by h5subfile (they do not go through its counting): a Darshan log of
such a run is drawn the same way with ``h5subfile report LOG.darshan``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LAYOUTS = {"subfiles-2": "2", "one-file": "1", "file-per-process": "rank"}


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--particles", default="1Mi", help="per rank")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "profiling")
    parser.add_argument("--phdf5-darshan", type=Path, default=None, metavar="LIBDARSHAN")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for name, subfiles in LAYOUTS.items():
            folder = Path(scratch) / name
            folder.mkdir()
            command = [str(BIN / "mpiexec"), "-n", str(args.ranks), str(BIN / "h5subfile")]
            command += ["vpic", str(folder / "run.h5"), "--particles", args.particles]
            command += ["--steps", str(args.steps), "--subfiles", subfiles, "--quiet"]
            command += ["--profile", str(folder / "profile"), "--profile-trace", "100000"]
            run(command)
            target = args.out / name
            shutil.rmtree(target, ignore_errors=True)
            profile = folder / "profile" / "run.h5.write.json"
            run([str(BIN / "h5subfile"), "report", str(profile), "--out", str(target)])
            print(f"{name}: {target / 'report.md'}")
        if args.phdf5_darshan is not None:
            phdf5(args, Path(scratch) / "parallel-hdf5")


def phdf5(args: argparse.Namespace, folder: Path) -> None:
    """The same write through parallel HDF5 under Darshan (DXT on), its log's report."""
    venv = ROOT / ".venv-phdf5" / "bin"
    if not (venv / "h5subfile").exists():
        sys.exit("parallel HDF5 needs `make phdf5` (.venv-phdf5)")
    folder.mkdir()
    log = folder / "phdf5.darshan"
    command = [str(venv / "mpiexec"), "-n", str(args.ranks)]
    command += ["-genv", "LD_PRELOAD", str(args.phdf5_darshan), "-genv", "DARSHAN_LOGFILE"]
    command += [str(log), "-genv", "DXT_ENABLE_IO_TRACE", "1"]
    # every rank's own record of the shared file (for the per-rank pictures), and not the
    # Python installation's files that every rank reads while starting
    command += ["-genv", "DARSHAN_DISABLE_SHARED_REDUCTION", "1", "-genv", "DARSHAN_EXCLUDE_DIRS"]
    skipped = [ROOT / ".venv-phdf5", ROOT / "src", Path(sys.base_prefix), Path("/usr")]
    command += [",".join(map(str, skipped)), str(venv / "h5subfile"), "vpic"]
    command += [str(folder / "run.h5"), "--api", "phdf5", "--particles", args.particles]
    command += ["--steps", str(args.steps), "--quiet"]
    run(command)
    target = args.out / "parallel-hdf5"
    shutil.rmtree(target, ignore_errors=True)
    run([str(BIN / "h5subfile"), "report", str(log), "--out", str(target)])
    print(f"parallel-hdf5: {target / 'report.md'}")


if __name__ == "__main__":
    main()

"""Writing a metadata-heavy file, as real models write their output: h5subfile against parallel
HDF5 and serial h5py.

The file: ``--groups`` groups (times ``--scale``) of ``--datasets`` small float64 datasets
(``--elements`` each) with ``--attrs`` attributes per dataset (strings, floats, integers and
small arrays in turn), ``--group-attrs`` attributes per group and ``--root-attrs`` on the file;
50 x 20 x 10 by default (1,000 datasets, 10,000 attributes of datasets). One program writes
it, the way an h5py ``mpio`` program does: ``create_group``, ``create_dataset(name, shape,
dtype)``, ``attrs[name] = value`` one at a time on every rank, and each rank writing its share
of every dataset by hyperslab (``d[a:b] = x``; inside ``with d.collective:`` with
``--collective``). It runs in these ways, each one process job:

- ``h5subfile``: ``h5subfile.File(path, "w", comm=comm)`` (default plan) under ``mpiexec -n P``
  with this checkout's ``src`` first on PYTHONPATH, run twice per repetition, the second time as
  ``h5subfile again`` (the null comparison);
- ``h5subfile (base)``, with ``--base-src DIR``: the same with another checkout's ``src`` (made
  with ``git worktree add /tmp/base COMMIT``, say) on PYTHONPATH, for before/after in one run;
- ``parallel HDF5``: ``h5py.File(path, "w", driver="mpio", comm=comm)`` with the parallel-HDF5
  environment (``make phdf5``: ``.venv-phdf5/bin/python`` under its ``mpiexec``), left out with
  a message when that environment is missing or incomplete;
- ``serial h5py``: one process writing everything with plain ``h5py.File(path, "w")`` (this
  Python's h5py, the one h5subfile builds on), measured at every rank count alike.

Each job's time is taken inside it, on rank 0, with ``time.perf_counter`` from after a barrier
to after the file is closed (``seconds``; the slowest rank's is kept too; every module is
imported before the barrier: ``h5subfile.File``, which ``import h5subfile`` loads on first use,
is looked up there too), and around the whole process by this script (``wall_seconds``:
start-up, imports and MPI set-up included). Every job gets a fresh folder and an untimed
``sync`` before it; at each rank count one untimed warm-up job per way comes first (its file
read back and checked), then every repetition runs every way once in a new shuffled order; at
the end, the file of each way's last repetition is read back by plain h5py in a separate
process (every dataset's values, every attribute's value and count), so that no broken
writer is timed unnoticed.

Run (2 and 8 ranks by default; ``make phdf5`` first for the parallel-HDF5 side):

    .venv/bin/python benchmarks/metadata_heavy.py --label "after"
    .venv/bin/python benchmarks/metadata_heavy.py --base-src /tmp/base/src --label "before/after"

(the second with ``/tmp/base`` made by ``git worktree add /tmp/base COMMIT``). Run by
``.venv-phdf5/bin/python`` instead, every way uses that environment's HDF5 and MPI (Debian's),
as parallel HDF5 does; run by ``.venv/bin/python``, h5subfile and serial h5py use the wheels'
(the tables say when the two sides' builds differ). ``--scale 10`` writes 10 times as many
groups; ``--ranks 2 --reps 1 --groups 3`` is a quick look. Results are kept in
docs/metadata-heavy.json under ``--label`` (a new label adds a run, the same label replaces it)
and printed as Markdown tables; ``--render`` prints them for every run kept (or the ``--label``
given) without measuring, for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from docplot import mpi_name

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "metadata-heavy.json"
BIN = Path(sys.executable).parent
TIMEOUT = 3600  # seconds per job: a hung job is killed, and recorded as failed

H5SUBFILE, AGAIN, BASE = "h5subfile", "h5subfile again", "h5subfile (base)"
PHDF5, SERIAL = "parallel HDF5", "serial h5py"
#: Every way, in the order of the tables.
WAYS = (H5SUBFILE, AGAIN, BASE, PHDF5, SERIAL)

#: What the writing program and the checking program share: names and values of the file.
COMMON = """
import json, os, sys, time
import numpy as np


def group_name(g):
    return f"group{g:05d}"


def dataset_name(d):
    return f"var{d:04d}"


def values(g, d, n):
    return np.arange(n, dtype="f8") + (g * 100_000 + d) * n


def attribute(g, d, k):
    kind = k % 4  # as models label their variables: names and units, scalars, ranges
    if kind == 0:
        return f"attribute {k} of {g}/{d}"
    if kind == 1:
        return g * 1000.0 + d + k / 8
    if kind == 2:
        return g * 100_000 + d * 100 + k
    return np.array([k, g, d], dtype="f8")


kind, path = sys.argv[1], sys.argv[2]
groups, datasets, attributes, elements, group_attrs, root_attrs = map(int, sys.argv[3:9])
"""

#: Run by every rank (one process for ``serial``): argv = kind (h5subfile, mpio, serial), the
#: file, the sizes, 1 for collective writes. Prints, on rank 0, one JSON line: rank 0's
#: seconds from after a barrier to after the close, the slowest rank's, and the versions.
JOB = (
    COMMON
    + """
collective = sys.argv[9] == "1"
if kind == "serial":
    comm, rank, size = None, 0, 1
else:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
import h5py

if kind == "h5subfile":
    import h5subfile

    File = h5subfile.File  # imported now, as h5py's is: the timed part writes, it imports nothing

    def open_file():
        return File(path, "w", comm=comm)

elif kind == "mpio":

    def open_file():
        return h5py.File(path, "w", driver="mpio", comm=comm)

else:

    def open_file():
        return h5py.File(path, "w")

start, stop = rank * elements // size, (rank + 1) * elements // size


def write(f):
    for k in range(root_attrs):
        f.attrs[f"root_{k}"] = attribute(-1, -1, k)
    for g in range(groups):
        group = f.create_group(group_name(g))
        for k in range(group_attrs):
            group.attrs[f"group_{k}"] = attribute(g, -1, k)
        for d in range(datasets):
            dset = group.create_dataset(dataset_name(d), (elements,), "f8")
            x = values(g, d, elements)[start:stop]
            if collective and comm is not None:
                with dset.collective:
                    dset[start:stop] = x
            else:
                dset[start:stop] = x
            for k in range(attributes):
                dset.attrs[f"attr_{k}"] = attribute(g, d, k)


if comm is not None:
    comm.Barrier()
began = time.perf_counter()
with open_file() as f:
    write(f)
took = time.perf_counter() - began
slowest = took if comm is None else comm.allreduce(took, op=MPI.MAX)
if rank == 0:
    versions = dict(
        python=sys.executable,
        h5py=h5py.version.version,
        hdf5=h5py.version.hdf5_version,
        h5py_mpi=bool(h5py.get_config().mpi),
        numpy=np.__version__,
    )
    if comm is not None:
        import mpi4py

        versions.update(mpi4py=mpi4py.__version__, mpi=MPI.Get_library_version().splitlines()[0])
    if kind == "h5subfile":
        source = os.path.dirname(os.path.dirname(os.path.realpath(h5subfile.__file__)))
        versions.update(h5subfile=h5subfile.__version__, h5subfile_source=source)
    print(json.dumps(dict(seconds=took, slowest_rank_seconds=slowest, versions=versions)))
"""
)

#: Run by plain h5py in a process of its own: argv as JOB's (kind unused). Prints one JSON line:
#: the problems found (at most 20) and the numbers of datasets and attributes read (h5subfile's
#: reserved attributes, named ``h5subfile...``, not counted).
CHECK = (
    COMMON
    + """
import h5py

problems, counted = [], dict(datasets=0, attributes=0)


def same(got, want):
    if isinstance(want, str):
        return (got.decode() if isinstance(got, bytes) else got) == want
    return np.array_equal(np.asarray(got), np.asarray(want))


def attributes_right(obj, count, g, d, prefix):
    # h5subfile's own records (docs/FORMAT.md: names starting with h5subfile are reserved)
    found = sum(not name.startswith("h5subfile") for name in obj.attrs)
    counted["attributes"] += found
    if found != count:
        problems.append(f"{obj.name}: {found} attributes, not {count}")
    for k in range(count):
        name = f"{prefix}_{k}"
        if name not in obj.attrs:
            problems.append(f"{obj.name}: no attribute {name}")
        elif not same(obj.attrs[name], attribute(g, d, k)):
            want = attribute(g, d, k)
            problems.append(f"{obj.name}.attrs[{name!r}] = {obj.attrs[name]!r}, not {want!r}")


try:
    with h5py.File(path, "r") as f:
        attributes_right(f, root_attrs, -1, -1, "root")
        if len(f) != groups:
            problems.append(f"{len(f)} groups, not {groups}")
        for g in range(groups):
            if len(problems) >= 20:
                break
            group = f.get(group_name(g))
            if group is None:
                problems.append(f"no group {group_name(g)}")
                continue
            attributes_right(group, group_attrs, g, -1, "group")
            if len(group) != datasets:
                problems.append(f"{group.name}: {len(group)} members, not {datasets}")
            for d in range(datasets):
                dset = group.get(dataset_name(d))
                if dset is None:
                    problems.append(f"{group.name}: no dataset {dataset_name(d)}")
                    continue
                data = dset[()]
                counted["datasets"] += 1
                if data.dtype != np.float64 or not np.array_equal(data, values(g, d, elements)):
                    problems.append(f"{dset.name}: wrong values ({data.dtype}, {data.shape})")
                attributes_right(dset, attributes, g, d, "attr")
except Exception as error:
    problems.append(f"{type(error).__name__}: {error}")
print(json.dumps(dict(counted, problems=problems[:20])))
"""
)


def sizes(args: argparse.Namespace) -> list[str]:
    """The file's shape, as JOB and CHECK take it."""
    shape = (args.groups * args.scale, args.datasets, args.attrs, args.elements)
    return [str(n) for n in (*shape, args.group_attrs, args.root_attrs)]


def launch(command: list[str], env: dict[str, str]) -> tuple[int | None, str, str]:
    """Run ``command`` in a session of its own: (exit status, stdout, stderr); a job still running
    after TIMEOUT seconds is killed with every process it started (status None)."""
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            return None, out, err + f"\nkilled after {TIMEOUT} s"
        return process.returncode, out, err


def job(way: dict[str, Any], ranks: int, folder: Path, args: argparse.Namespace) -> dict:
    """One write of the file by ``way`` in a fresh ``folder`` (kept, for a check): the program's
    record, the process's wall time and the load average before it."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    program = [way["python"], "-c", JOB, way["kind"], str(folder / "heavy.h5"), *sizes(args)]
    program.append("1" if args.collective else "0")
    command = program if way["kind"] == "serial" else [way["mpiexec"], "-n", str(ranks), *program]
    os.sync()  # untimed: no job pays for the previous job's dirty pages
    load = os.getloadavg()[0]
    started = time.perf_counter()
    status, out, err = launch(command, way["env"])
    wall = time.perf_counter() - started
    if status != 0:
        error = err.strip()[-2000:] or f"exit status {status}"
        return dict(error=error, wall_seconds=wall, load=load)
    try:
        record = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        error = f"no result printed: {out[-500:]}{err[-1500:]}"
        return dict(error=error, wall_seconds=wall, load=load)
    return dict(record, wall_seconds=wall, load=load)


def check(folder: Path, args: argparse.Namespace) -> list[str]:
    """The problems plain h5py finds reading back the file written in ``folder`` (none: right)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-c", CHECK, "check", str(folder / "heavy.h5"), *sizes(args)]
    status, out, err = launch(command, env)
    if status != 0:
        return [f"the check failed: {err.strip()[-1000:]}"]
    found = json.loads(out.strip().splitlines()[-1])
    expected = int(sizes(args)[0]) * int(args.datasets)
    if not found["problems"] and found["datasets"] != expected:
        return [f"{found['datasets']} datasets read, not {expected}"]
    return list(found["problems"])


def wrong_source(way: dict[str, Any], versions: dict[str, Any]) -> list[str]:
    """Why an h5subfile job did not run the source it was given (none: it did)."""
    if way["kind"] != "h5subfile" or versions.get("h5subfile_source") == way["src"]:
        return []
    return [f"h5subfile imported from {versions.get('h5subfile_source')}, not {way['src']}"]


def source_folder(folder: Path) -> Path:
    """A checkout's ``src`` folder (given the checkout or its ``src``), holding h5subfile."""
    for candidate in (folder / "src", folder):
        if (candidate / "h5subfile" / "__init__.py").is_file():
            return candidate.resolve()
    raise SystemExit(f"--base-src {folder}: no h5subfile package in it or in its src folder")


def phdf5_side(venv: Path) -> tuple[dict[str, Any] | None, str]:
    """The parallel-HDF5 way, or None and why not."""
    python, launcher = venv / "bin" / "python", venv / "bin" / "mpiexec"
    if not python.exists() or not launcher.exists():
        return None, f"{venv} is missing or not finished (run `make phdf5`)"
    probe = "import h5py, mpi4py; assert h5py.get_config().mpi, 'h5py built without MPI'"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"{python} has no parallel h5py ({last}); run `make phdf5`"
    return dict(kind="mpio", python=str(python), mpiexec=str(launcher), env=env), ""


def ways(args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every way this run measures (name: kind, python, mpiexec, environment), and the
    messages about the ways left out."""
    launcher = BIN / "mpiexec"
    mpiexec = str(launcher) if launcher.exists() else shutil.which("mpiexec") or "mpiexec"

    def h5subfile(src: Path) -> dict[str, Any]:
        env = dict(os.environ, PYTHONPATH=str(src))
        return dict(kind="h5subfile", python=sys.executable, mpiexec=mpiexec, env=env, src=str(src))

    found = {H5SUBFILE: h5subfile(ROOT / "src"), AGAIN: h5subfile(ROOT / "src")}
    if args.base_src:
        found[BASE] = h5subfile(source_folder(args.base_src))
    skipped = []
    if args.no_phdf5:
        skipped.append(f"{PHDF5}: left out (--no-phdf5)")
    else:
        side, why = phdf5_side(args.phdf5_venv)
        if side:
            found[PHDF5] = side
        else:
            skipped.append(f"{PHDF5}: left out, {why}")
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found[SERIAL] = dict(kind="serial", python=sys.executable, env=plain)
    return found, skipped


def git(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return done.stdout.strip()


def commit_of(folder: Path) -> str:
    """The commit checked out in ``folder`` (read only), with a note of local changes."""
    head = git("rev-parse", "--short", "HEAD", cwd=folder)
    if not head:
        return "(not a git checkout)"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", cwd=folder))
    return head + (" (with local changes)" if dirty else "")


def machine() -> dict[str, Any]:
    import platform
    import socket

    return dict(
        hostname=socket.gethostname(),
        nproc=os.cpu_count(),
        platform=platform.platform(),
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    )


def measure(args: argparse.Namespace, run: dict, found: dict[str, dict], save: Any) -> None:
    """At each rank count: a warm-up job per way (checked), the repetitions in shuffled orders,
    then the check of each way's last file; every job appended to ``run`` and saved."""
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="h5subfile-metadata-heavy-", dir=args.workdir) as tmp:
        for ranks in args.ranks:
            order = list(found)
            rng.shuffle(order)
            for name in order:  # untimed: bytecode, page cache; a broken writer stops here
                folder = Path(tmp) / f"warm-up-{ranks}-{WAYS.index(name)}"
                result = job(found[name], ranks, folder, args)
                if "error" in result:
                    problems = [result["error"]]
                else:
                    run["sides"].setdefault(name, result["versions"])
                    problems = wrong_source(found[name], result["versions"]) or check(folder, args)
                shutil.rmtree(folder, ignore_errors=True)
                run["checks"].append(
                    dict(ranks=ranks, way=name, stage="warm-up", problems=problems)
                )
                save()
                if problems:
                    raise SystemExit(f"{name} at {ranks} ranks, warm-up: {problems[0]}")
            kept: dict[str, Path] = {}
            for rep in range(args.reps):
                order = list(found)
                rng.shuffle(order)
                for name in order:
                    folder = Path(tmp) / f"P{ranks}-rep{rep}-{WAYS.index(name)}"
                    result = job(found[name], ranks, folder, args)
                    result.pop("versions", None)
                    if rep == args.reps - 1 and "error" not in result:
                        kept[name] = folder  # read back at the end
                    else:
                        shutil.rmtree(folder, ignore_errors=True)
                    result.update(ranks=ranks, way=name, repetition=rep)
                    run["jobs"].append(result)
                    shown = result.get("error", "").strip().splitlines()[-1:] or [
                        f"{result['seconds']:.3f} s open to close (slowest rank "
                        f"{result['slowest_rank_seconds']:.3f} s), "
                        f"process {result['wall_seconds']:.2f} s"
                    ]
                    print(f"[P={ranks} rep {rep + 1}/{args.reps}] {name}: {shown[0]}", flush=True)
                    save()
            for name, folder in kept.items():
                problems = check(folder, args)
                shutil.rmtree(folder, ignore_errors=True)
                run["checks"].append(dict(ranks=ranks, way=name, stage="end", problems=problems))
                verdict = f"WRONG: {problems[0]}" if problems else "read back right"
                print(f"[P={ranks} check] {name}: {verdict}", flush=True)
                save()


# Rendering ------------------------------------------------------------------------------------
def samples(run: dict, ranks: int, way: str, key: str = "seconds") -> list[float]:
    return [j[key] for j in run["jobs"] if j["ranks"] == ranks and j["way"] == way and key in j]


def cell(values: list[float], digits: int = 3) -> str:
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"**{mid:.{digits}f}** ({low:.{digits}f}-{high:.{digits}f})"


def ratio(run: dict, ranks: int, top: str, bottom: str) -> str:
    """Ratio of the medians of two ways' open-to-close times."""
    a, b = samples(run, ranks, top), samples(run, ranks, bottom)
    if not a or not b or statistics.median(b) <= 0:
        return "-"
    return f"{statistics.median(a) / statistics.median(b):.2f}"


def paired(run: dict, ranks: int, top: str, bottom: str) -> str:
    """Per-repetition ratios top / bottom (both ran in the same repetition): median (min-max)."""
    by = {
        (j["way"], j["repetition"]): j["seconds"]
        for j in run["jobs"]
        if j["ranks"] == ranks and "seconds" in j
    }
    reps = sorted({rep for _, rep in by})
    found = [by[(top, r)] / by[(bottom, r)] for r in reps if (top, r) in by and (bottom, r) in by]
    return cell(found, 2) if found else "-"


def side_line(name: str, versions: dict[str, Any]) -> str:
    text = f"h5py {versions['h5py']} with HDF5 {versions['hdf5']}"
    if "mpi" in versions:
        text += f", {mpi_name(versions['mpi'])} (mpi4py {versions['mpi4py']})"
    if "h5subfile" in versions:
        text += f", h5subfile {versions['h5subfile']} from `{versions['h5subfile_source']}`"
    return f"  - {name}: {text}; `{versions['python']}`"


def render_run(label: str, run: dict) -> list[str]:
    s, m = run["settings"], run["machine"]
    mode = "inside `with d.collective:`" if s["collective"] else "independent"
    load = ", ".join(f"{x:.2f}" for x in run["load_before"])
    lines = [
        f"### {label}",
        "",
        f"- commit `{run['commit']}` ({run['subject']}); measured {run['started']} to "
        f"{run.get('finished', '(unfinished)')}",
        f"- machine: {m['hostname']}, {m['nproc']} cores, {m['memory_gib']} GiB, {m['platform']}; "
        f"load average (1, 5, 15 min) before: {load}",
        f"- file: {s['groups'] * s['scale']} groups x {s['datasets']} datasets x {s['attrs']} "
        f"attributes, {s['group_attrs']} attributes per group, {s['root_attrs']} on the file; "
        f"{s['elements']} float64 elements per dataset, each rank writing its share by "
        f"hyperslab ({mode}); {s['reps']} repetition(s), each in a new shuffled order",
        "- software:",
        *(side_line(name, run["sides"][name]) for name in WAYS if name in run["sides"]),
    ]
    ours, theirs = run["sides"].get(H5SUBFILE), run["sides"].get(PHDF5)
    if ours and theirs and (ours["hdf5"], ours.get("mpi")) != (theirs["hdf5"], theirs.get("mpi")):
        lines.append(
            f"- **h5subfile and parallel HDF5 ran on different builds** (HDF5 {ours['hdf5']} "
            f"and {theirs['hdf5']}, {mpi_name(ours.get('mpi', '?'))} and "
            f"{mpi_name(theirs.get('mpi', '?'))}); run this script with `.venv-phdf5/bin/python` "
            "for the same HDF5 and MPI on both sides"
        )
    if run.get("base_commit"):
        lines.append(f"- base: `{s['base_src']}` at commit `{run['base_commit']}`")
    lines += [f"- {note}" for note in run.get("skipped", []) + run.get("notes", [])]
    for ranks in s["ranks"]:
        present = [w for w in WAYS if samples(run, ranks, w) or samples(run, ranks, w, "error")]
        if not present:
            continue
        count = "1 process" if ranks == 1 else f"{ranks} ranks"
        over = " (oversubscribed)" if ranks > (m["nproc"] or ranks) else ""
        lines += [
            "",
            f"{count}{over}; seconds, **median** (min-max); ratios of the medians of the open "
            "to close times:",
            "",
            "| way | open to close, s | process wall, s | / parallel HDF5 | / serial h5py | jobs |",
            "|---|---|---|---|---|---|",
        ]
        for way in present:
            jobs = [j for j in run["jobs"] if j["ranks"] == ranks and j["way"] == way]
            failed = sum("error" in j for j in jobs)
            shown = f"{len(jobs)}" + (f" ({failed} failed)" if failed else "")
            name = f"{way} (1 process)" if way == SERIAL else way
            lines.append(
                f"| {name} | {cell(samples(run, ranks, way))} "
                f"| {cell(samples(run, ranks, way, 'wall_seconds'), 2)} "
                f"| {ratio(run, ranks, way, PHDF5)} | {ratio(run, ranks, way, SERIAL)} | {shown} |"
            )
        lines.append("")
        pairs = [(H5SUBFILE, BASE, "after / before"), (AGAIN, H5SUBFILE, "null comparison")]
        for top, bottom, what in pairs:
            if top in present and bottom in present:
                lines.append(
                    f"- {what} ({top} / {bottom}), per repetition: "
                    f"{paired(run, ranks, top, bottom)}"
                )
        checks = [c for c in run["checks"] if c["ranks"] == ranks]
        wrong = [c for c in checks if c["problems"]]
        if wrong:
            lines += [
                f"- **read back WRONG**: {c['way']} ({c['stage']}): {c['problems'][0]}"
                for c in wrong
            ]
        elif checks:
            lines.append(
                "- read back by plain h5py (every value and attribute): right for every way "
                "(warm-up and last repetition)"
            )
    return lines


TITLE = "Metadata-heavy files"


def summary_rows(record: dict, labels: list[str] | None = None) -> list[tuple[str, str, str]]:
    """The summary's rows, one per run (or per run of ``labels``): h5subfile / parallel HDF5 at
    each rank count, with the base checkout's where it ran, and the null comparison."""
    runs = record.get("runs", {})
    return [row for label in (labels or list(runs)) for row in _summary(label, runs[label])]


def _summary(label: str, run: dict) -> list[tuple[str, str, str]]:
    s = run["settings"]
    parts = []
    for ranks in s["ranks"]:
        if not samples(run, ranks, H5SUBFILE):
            continue
        text = f"{ranks} ranks: **{ratio(run, ranks, H5SUBFILE, PHDF5)}**"
        if samples(run, ranks, BASE):
            text += f" (before: {ratio(run, ranks, BASE, PHDF5)})"
        if samples(run, ranks, AGAIN):
            text += f", null {paired(run, ranks, AGAIN, H5SUBFILE).split(' ')[0].strip('*')}"
        parts.append(text)
    question = (
        f"Writing a model's metadata-heavy file ({s['groups'] * s['scale']} groups x "
        f"{s['datasets']} datasets x {s['attrs']} attributes), h5subfile's time / parallel "
        f"HDF5's ({label})"
    )
    return [(question, "; ".join(parts), TITLE)]


def latest_labels(record: dict) -> list[str]:
    """The latest run at the usual size and the latest 10x larger one (the reference document's
    runs; the others are in docs/BENCHMARKS-HISTORY.md)."""
    labels = list(record.get("runs", {}))
    larger = [x for x in labels if x.startswith("10x")]
    usual = [x for x in labels if not x.startswith("10x")]
    return [group[-1] for group in (usual, larger) if group]


def render(record: dict, labels: list[str] | None = None) -> str:
    """The section: every run, or only ``labels`` (then with a pointer to the others)."""
    chosen = {x: record["runs"][x] for x in labels} if labels else record["runs"]
    lines = [
        f"## {TITLE}",
        "",
        "Generated by `benchmarks/metadata_heavy.py` from docs/metadata-heavy.json. The time to "
        "write a file of many groups, small datasets and attributes (h5py `mpio` style: each "
        "rank writes its share of every dataset, every rank sets every attribute), from before "
        "the open to after the close, taken on rank 0 after a barrier; the process wall time "
        "adds start-up, imports and MPI set-up. Every way runs once per repetition in a shuffled "
        "order, a fresh folder and an untimed `sync` before each job.",
    ]
    if labels:
        lines += [
            "",
            "The latest runs follow; the earlier ones, each with its commit, are in "
            "[BENCHMARKS-HISTORY.md](BENCHMARKS-HISTORY.md#metadata-heavy-files).",
        ]
    for name, run in chosen.items():
        lines += ["", *render_run(name, run)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default=None, help="this run's name (default: the commit)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--reps", type=int, default=5, help="repetitions per rank count")
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--datasets", type=int, default=20, help="per group")
    parser.add_argument("--attrs", type=int, default=10, help="per dataset")
    parser.add_argument("--elements", type=int, default=100, help="float64 per dataset")
    parser.add_argument("--group-attrs", type=int, default=2, help="per group")
    parser.add_argument("--root-attrs", type=int, default=4, help="on the file")
    parser.add_argument("--scale", type=int, default=1, help="times as many groups")
    parser.add_argument(
        "--collective", action="store_true", help="write inside `with d.collective:`"
    )
    parser.add_argument(
        "--base-src", type=Path, default=None, help="another checkout's src: h5subfile (base)"
    )
    parser.add_argument("--phdf5-venv", type=Path, default=ROOT / ".venv-phdf5")
    parser.add_argument("--no-phdf5", action="store_true", help="leave parallel HDF5 out")
    parser.add_argument("--seed", type=int, default=20260311, help="of the shuffled orders")
    parser.add_argument("--workdir", type=Path, default=None, help="where the files go (TMPDIR)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSON kept")
    parser.add_argument("--render", action="store_true", help="only print the Markdown")
    args = parser.parse_args()
    record = json.loads(args.results.read_text()) if args.results.exists() else {"runs": {}}
    if args.render:
        if args.label and args.label not in record["runs"]:
            print(f"no run {args.label!r} in {args.results}", file=sys.stderr)
            return 1
        print(render(record, args.label))
        return 0
    found, skipped = ways(args)
    for message in skipped:
        print(message, file=sys.stderr)
    commit = commit_of(ROOT)
    label = args.label or f"commit {commit}"
    run: dict[str, Any] = dict(
        commit=commit,
        subject=git("log", "-1", "--format=%s")[:100],
        machine=machine(),
        load_before=list(os.getloadavg()),
        started=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        settings={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        ways={name: {k: v for k, v in way.items() if k != "env"} for name, way in found.items()},
        skipped=skipped,
        sides={},
        jobs=[],
        checks=[],
    )
    if args.base_src:
        run["base_commit"] = commit_of(source_folder(args.base_src))
    record["runs"].pop(label, None)
    record["runs"][label] = run

    def save() -> None:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(record, indent=1) + "\n")

    measure(args, run, found, save)
    run.update(finished=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    run.update(load_after=list(os.getloadavg()))
    save()
    print()
    print(render(record, [label]))
    print(f"\nkept in {args.results} under {label!r}", file=sys.stderr)
    wrong = [c for c in run["checks"] if c["problems"]]
    return 1 if wrong or any("error" in j for j in run["jobs"]) else 0


if __name__ == "__main__":
    sys.exit(main())

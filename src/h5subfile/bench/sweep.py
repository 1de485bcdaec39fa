"""Sweeps: run a matrix of benchmark configurations and plot them.

The matrix comes from a TOML file (see ``benchmarks/sweep.toml``)::

    title = "IOR-style sweep"
    repetitions = 3            # every configuration once per repetition, shuffled (seed = 1,
                               # shuffle = true), each run after an untimed sync
    ranks = [2, 4]
    apis = ["posix", "mpiio", "hdf5", "subfile", "phdf5"]
    block = "4m"
    transfer = ["64k", "1m"]
    segments = 2
    iterations = 1
    fsync = false
    reorder = true
    file_per_proc = [false, true]      # posix, mpiio, hdf5
    collective = [false, true]         # mpiio, phdf5
    ranks_per_subfile = [1, 2, 4]      # subfile (factors above the rank count are skipped)
    hints = ["none", "romio9"]         # mpiio, phdf5: "none", "romio9" or {key = "value"}

Each configuration runs as ``mpiexec -n P <python> -m h5subfile bench ... --json`` (a sweep
itself is not run under mpiexec). Results go to ``results.json`` with every run's full record,
and PNG plots are drawn from the medians over repetitions.

Before the first run, matplotlib is checked (``plots.require``) and the APIs that cannot run
here are named once and left out, so that hours of runs never end in an error.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..mpi.launch import mpiexec
from ..units import parse_size
from .options import APIS, ROMIO9

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


@dataclass(frozen=True)
class Config:
    """One point of the matrix."""

    api: str
    ranks: int
    transfer: int
    block: int
    segments: int = 1
    iterations: int = 1
    fsync: bool = False
    reorder: bool = False
    file_per_proc: bool = False
    collective: bool = False
    ranks_per_subfile: int | None = None
    hint_set: str = "none"
    hints: tuple[tuple[str, str], ...] = ()
    extra: tuple[str, ...] = field(default=())

    @property
    def variant(self) -> str:
        """A short label of everything but ranks and sizes, e.g. ``mpiio -c [cb_enable_ds_auto]``."""
        parts = [self.api]
        if self.file_per_proc:
            parts.append("-F")
        if self.collective:
            parts.append("-c")
        if self.ranks_per_subfile is not None:
            parts.append(f"k={self.ranks_per_subfile}")
        if self.hint_set != "none":
            parts.append(f"[{self.hint_set}]")
        return " ".join(parts)

    def arguments(self, test_file: str) -> list[str]:
        args = [
            "bench",
            "-a",
            self.api,
            "-b",
            str(self.block),
            "-t",
            str(self.transfer),
            "-s",
            str(self.segments),
            "-i",
            str(self.iterations),
            "-o",
            test_file,
            "--quiet",
        ]
        args += ["-e"] * self.fsync + ["-C"] * self.reorder + ["-F"] * self.file_per_proc
        args += ["-c"] * self.collective
        if self.ranks_per_subfile is not None:
            args += ["--ranks-per-subfile", str(self.ranks_per_subfile)]
        for key, value in self.hints:
            args += ["--hint", f"{key}={value}"]
        return args + list(self.extra)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def hint_sets(spec: Any) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    sets: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for item in _list(spec if spec is not None else ["none"]):
        if item == "none":
            sets.append(("none", ()))
        elif item == "romio9":
            sets.extend(ROMIO9)
        elif isinstance(item, dict):
            label = ",".join(f"{k}={v}" for k, v in item.items())
            sets.append((label, tuple(sorted((k, str(v)) for k, v in item.items()))))
        else:
            raise ValueError(f"hints entry {item!r}: use 'none', 'romio9' or a table of hints")
    return sets


def expand(spec: dict[str, Any]) -> list[Config]:
    """Every configuration of a sweep description."""
    apis = _list(spec.get("apis", list(APIS)))
    unknown = set(apis) - set(APIS)
    if unknown:
        raise ValueError(f"unknown API(s) {sorted(unknown)} in the sweep; known: {APIS}")
    common = dict(
        block=parse_size(spec.get("block", "4m")),
        segments=int(spec.get("segments", 1)),
        iterations=int(spec.get("iterations", 1)),
        fsync=bool(spec.get("fsync", False)),
        reorder=bool(spec.get("reorder", False)),
    )
    configs = []
    for ranks, api, transfer in itertools.product(
        _list(spec.get("ranks", [2])), apis, _list(spec.get("transfer", ["1m"]))
    ):
        base = dict(common, api=api, ranks=int(ranks), transfer=parse_size(transfer))
        fpp = (
            _list(spec.get("file_per_proc", [False]))
            if api in ("posix", "mpiio", "hdf5")
            else [False]
        )
        coll = _list(spec.get("collective", [False])) if api in ("mpiio", "phdf5") else [False]
        hints = hint_sets(spec.get("hints")) if api in ("mpiio", "phdf5") else [("none", ())]
        factors: list[int | None] = [None]
        if api == "subfile":
            factors = [
                int(k) for k in _list(spec.get("ranks_per_subfile", [1])) if int(k) <= int(ranks)
            ]
        for f, c, (label, pairs), k in itertools.product(fpp, coll, hints, factors):
            if base["block"] % base["transfer"]:
                continue
            configs.append(
                Config(
                    **base,
                    file_per_proc=bool(f),
                    collective=bool(c),
                    ranks_per_subfile=k,
                    hint_set=label,
                    hints=pairs,
                )
            )
    return configs


def _job_environment() -> dict[str, str]:
    """This process's environment without an MPI launcher's variables, so that each run's
    mpiexec starts a job of its own (a sweep started under ``mpiexec -n 1`` inherits them)."""
    prefixes = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_LOCAL")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def run_one(config: Config, workdir: str, timeout: float = 1800) -> dict[str, Any]:
    """Run one configuration under mpiexec; return its JSON record (or an 'unavailable' one)."""
    json_path = os.path.join(workdir, "run.json")
    if os.path.exists(json_path):
        os.remove(json_path)
    command = [
        mpiexec(),
        "-n",
        str(config.ranks),
        sys.executable,
        "-m",
        "h5subfile",
        *config.arguments(os.path.join(workdir, "testFile")),
        "--json",
        json_path,
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=_job_environment()
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    if not os.path.exists(json_path):
        return {"unavailable": result.stdout.strip() or "no result", "iterations": []}
    with open(json_path) as handle:
        return json.load(handle)


def medians(runs: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, float]]:
    """Median bandwidth (MiB/s) per (variant, ranks, transfer) and access, over all runs."""
    samples: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        cfg = run["config"]
        key = (
            Config(
                **{**cfg, "hints": tuple(map(tuple, cfg["hints"])), "extra": tuple(cfg["extra"])}
            ).variant,
            cfg["ranks"],
            cfg["transfer"],
        )
        for row in run["record"].get("iterations", []):
            samples[key][row["access"]].append(row["bw_mib_s"])
    return {k: {a: statistics.median(v) for a, v in accs.items()} for k, accs in samples.items()}


def unavailable_apis(apis: set[str]) -> dict[str, str]:
    """Why each API of ``apis`` cannot run here (the runs use this same Python), asked before
    the sweep starts so that its counter counts only runs that happen. Does not start MPI."""
    import mpi4py

    mpi4py.rc.initialize = mpi4py.rc.finalize = False  # this process only launches jobs
    from .backends import BACKENDS

    reasons = {api: BACKENDS[api].unavailable() for api in sorted(apis)}
    return {api: reason for api, reason in reasons.items() if reason}


def run_sweep(path: str, out: str | None = None, progress: bool = False) -> int:
    """Run the sweep described in ``path``; write results.json and plots into ``out``.

    ``progress``: a line per run on stderr (``h5subfile bench --sweep`` decides it as every
    verb does, ``progress.progress_wanted``).
    """
    from . import plots
    from .report import machine, versions

    with open(path, "rb") as handle:
        spec = tomllib.load(handle)
    configs = expand(spec)
    plots.require()  # before hours of runs, not after them
    unavailable = unavailable_apis({c.api for c in configs})
    for reason in unavailable.values():
        print(reason, file=sys.stderr, flush=True)
    configs = [c for c in configs if c.api not in unavailable]
    repetitions = int(spec.get("repetitions", 1))
    out = out or os.path.splitext(os.path.basename(path))[0] + "-results"
    os.makedirs(out, exist_ok=True)
    runs = _run_all(spec, configs, repetitions, unavailable, progress)
    result = {
        "sweep": spec,
        "machine": machine(),
        "versions": versions(""),
        "unavailable": unavailable,
        "runs": runs,
    }
    with open(os.path.join(out, "results.json"), "w") as handle:
        json.dump(result, handle, indent=1, default=str)
    written = plots.draw_all(result, medians(runs), out, spec.get("title", os.path.basename(path)))
    total = len(configs) * repetitions
    print(
        f"sweep: {len(runs)} of {total} run(s) done; results in "
        f"{os.path.join(out, 'results.json')}; plots: {', '.join(written) or 'none'}"
    )
    for reason in unavailable.values():
        print(reason)
    return 0


def _run_all(
    spec: dict[str, Any],
    configs: list[Config],
    repetitions: int,
    unavailable: dict[str, str],
    show: bool,
) -> list[dict[str, Any]]:
    """Every configuration once per repetition, shuffled anew each repetition (no
    configuration always follows the same one); a line per run, numbered 1..total."""
    runs: list[dict[str, Any]] = []
    total = len(configs) * repetitions
    done = 0
    order = list(configs)
    shuffle = random.Random(int(spec.get("seed", 1)))
    with tempfile.TemporaryDirectory(prefix="h5subfile-sweep-", dir=spec.get("workdir")) as work:
        for repetition in range(repetitions):
            if spec.get("shuffle", True):
                shuffle.shuffle(order)
            for config in order:
                if config.api in unavailable:  # found unavailable by an earlier run
                    continue
                done += 1
                os.sync()  # untimed: no run pays for the previous run's dirty pages
                record = run_one(config, work)
                where = f"[{done}/{total}] {config.variant} P={config.ranks} t={config.transfer // 1024}KiB"
                if record.get("unavailable"):
                    unavailable[config.api] = record["unavailable"]
                    if show:
                        print(f"{where}: {record['unavailable']}", file=sys.stderr, flush=True)
                    continue
                runs.append({"config": asdict(config), "repetition": repetition, "record": record})
                if show:
                    rates = ", ".join(
                        f"{a} {s['median_mib']:.1f}" for a, s in record["summary"].items()
                    )
                    print(f"{where}: {rates} MiB/s", file=sys.stderr, flush=True)
    return runs

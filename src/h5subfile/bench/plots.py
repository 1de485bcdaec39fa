"""Pictures of a sweep (matplotlib, PNG): every plot readable on its own, with title, axes with
units, rank count, machine and date."""

from __future__ import annotations

import os
from typing import Any

_PREFIX = [""]  # file name prefix of the current draw_all call


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plots need matplotlib: pip install matplotlib") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def require() -> None:
    """Raise ImportError, saying how to install it, unless matplotlib can be imported."""
    _pyplot()


def _stamp(result: dict[str, Any]) -> str:
    m = result["machine"]
    return f"{m['hostname']} ({m['cores']} cores), {m['date'][:10]}"


def _save(fig: Any, out: str, name: str, written: list[str]) -> None:
    name = _PREFIX[0] + name
    fig.tight_layout()
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110)
    written.append(name)


def draw_all(
    result: dict[str, Any],
    table: dict[tuple[Any, ...], dict[str, float]],
    out: str,
    title: str,
    prefix: str = "",
) -> list[str]:
    """Draw every plot the data allows (``table``: the sweep's median bandwidths,
    :func:`.sweep.medians`); return the file names written (``prefix`` + name)."""
    plt = _pyplot()
    _PREFIX[0] = prefix
    written: list[str] = []
    if not table:
        return written
    stamp = _stamp(result)
    ranks_all = sorted({k[1] for k in table})
    transfers = sorted({k[2] for k in table})
    top_ranks = ranks_all[-1]

    _vs_factor(plt, table, ranks_all, out, written, title, stamp)
    _vs_transfer(plt, table, transfers, top_ranks, out, written, title, stamp)

    # 3. bars per API (the CURIE study's Table 2), largest rank count and transfer size
    transfer = transfers[-1]
    variants = sorted(
        k[0] for k in table if k[1] == top_ranks and k[2] == transfer and "[" not in k[0]
    )
    if variants:
        _bars(
            plt,
            table,
            variants,
            top_ranks,
            transfer,
            out,
            written,
            f"{title}: every API — {top_ranks} ranks, transfer {transfer // 1024} KiB — {stamp}",
            "bandwidth_per_api.png",
        )

    # 4. the nine romio_cb / romio_ds hint configurations (CURIE), for mpiio and phdf5
    hinted = sorted(
        k[0] for k in table if k[1] == top_ranks and k[2] == transfer and "[cb_" in k[0]
    )
    if hinted:
        _romio(
            plt,
            table,
            hinted,
            top_ranks,
            transfer,
            out,
            written,
            f"{title}: the nine romio_cb / romio_ds hint configurations — {top_ranks} ranks, "
            f"transfer {transfer // 1024} KiB — {stamp}",
        )
    return written


def _vs_factor(
    plt: Any,
    table: dict[Any, Any],
    ranks_all: list[int],
    out: str,
    written: list[str],
    title: str,
    stamp: str,
) -> None:
    """Bandwidth vs subfiling factor, one line per rank count (the paper's Figs. 10-13)."""
    factor_keys = [k for k in table if k[0].startswith("subfile k=")]
    if factor_keys:
        transfer = max(k[2] for k in factor_keys)
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, access in zip(axes, ("write", "read")):
            for ranks in ranks_all:
                points = sorted(
                    (int(k[0].split("k=")[1]), table[k].get(access))
                    for k in factor_keys
                    if k[1] == ranks and k[2] == transfer
                )
                points = [(x, y) for x, y in points if y is not None]
                if points:
                    ax.plot(*zip(*points), marker="o", label=f"{ranks} ranks")
                    fpp = table.get(("posix -F", ranks, transfer), {}).get(access)
                    if fpp:
                        ax.axhline(
                            fpp,
                            linestyle=":",
                            color=ax.lines[-1].get_color(),
                            label=f"raw POSIX file per process, {ranks} ranks",
                        )
            ax.set_xscale("log", base=2)
            ax.set_xlabel("subfiling factor (ranks per subfile)")
            ax.set_ylabel(f"{access} bandwidth (MiB/s)")
            ax.set_title(f"{access}, transfer {transfer // 1024} KiB")
            ax.legend(fontsize=7)
        fig.suptitle(f"{title}: bandwidth vs subfiling factor — {stamp}")
        _save(fig, out, "bandwidth_vs_subfiling_factor.png", written)
        plt.close(fig)


def _vs_transfer(
    plt: Any,
    table: dict[Any, Any],
    transfers: list[int],
    top_ranks: int,
    out: str,
    written: list[str],
    title: str,
    stamp: str,
) -> None:
    """Bandwidth vs transfer size at the largest rank count (the Lustre tuning slides)."""
    if len(transfers) > 1:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        variants = sorted({k[0] for k in table if k[1] == top_ranks and "[" not in k[0]})
        for ax, access in zip(axes, ("write", "read")):
            for variant in variants:
                points = [
                    (t / 1024, table[(variant, top_ranks, t)].get(access))
                    for t in transfers
                    if (variant, top_ranks, t) in table
                ]
                points = [(x, y) for x, y in points if y is not None]
                if len(points) > 1:
                    ax.plot(*zip(*points), marker="o", label=variant)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("transfer size (KiB)")
            ax.set_ylabel(f"{access} bandwidth (MiB/s)")
            ax.set_title(f"{access}, {top_ranks} ranks")
            ax.legend(fontsize=7)
        fig.suptitle(f"{title}: bandwidth vs transfer size — {stamp}")
        _save(fig, out, "bandwidth_vs_transfer_size.png", written)
        plt.close(fig)


def _romio(
    plt: Any,
    table: dict,
    variants: list[str],
    ranks: int,
    transfer: int,
    out: str,
    written: list[str],
    title: str,
) -> None:
    """One panel per family (API and collective or not), one bar pair per hint configuration."""
    import numpy as np

    families: dict[str, list[str]] = {}
    for variant in variants:
        families.setdefault(variant.split(" [")[0], []).append(variant)
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 4.6), squeeze=False)
    for ax, (family, members) in zip(axes[0], sorted(families.items())):
        labels = [m.split("[")[1].rstrip("]").replace("_ds_", "\nds_") for m in members]
        x = np.arange(len(members))
        for offset, access in ((-0.2, "write"), (0.2, "read")):
            ax.bar(
                x + offset,
                [table[(m, ranks, transfer)].get(access, 0) for m in members],
                width=0.4,
                label=access,
            )
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
        ax.set_title(family, fontsize=9)
        ax.set_ylabel("bandwidth (MiB/s), median")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    _save(fig, out, "romio_hints.png", written)
    plt.close(fig)


def _bars(
    plt: Any,
    table: dict,
    variants: list[str],
    ranks: int,
    transfer: int,
    out: str,
    written: list[str],
    title: str,
    name: str,
) -> None:
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(variants) + 3), 4.6))
    x = np.arange(len(variants))
    for offset, access in ((-0.2, "write"), (0.2, "read")):
        values = [table[(v, ranks, transfer)].get(access, 0) for v in variants]
        ax.bar(x + offset, values, width=0.4, label=access)
    ax.set_xticks(x, variants, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("bandwidth (MiB/s), median over repetitions")
    ax.set_title(title, fontsize=9)
    ax.legend()
    _save(fig, out, name, written)
    plt.close(fig)

"""Pieces shared by the CLI verbs: plan flags, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..plan import PLAN_FIELDS


def add_plan_flags(
    parser: argparse.ArgumentParser,
    only: tuple[str, ...] | None = None,
    skip: tuple[str, ...] = (),
) -> None:
    """One flag per plan field (``--subfiles``, ``--aggregators``, ``--fsync``...)."""
    group = parser.add_argument_group("plan (also settable by environment variables)")
    for field in PLAN_FIELDS:
        if (only is not None and field.name not in only) or field.name in skip:
            continue
        if field.switch:
            group.add_argument(
                field.flag,
                action="store_true",
                default=None,
                help=f"{field.help} (env {field.env})",
            )
        else:
            group.add_argument(field.flag, default=None, help=f"{field.help} (env {field.env})")


def plan_arguments(args: argparse.Namespace) -> dict[str, Any]:
    return {
        field.name: getattr(args, field.name) for field in PLAN_FIELDS if hasattr(args, field.name)
    }


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()

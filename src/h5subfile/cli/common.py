"""Pieces shared by the CLI verbs: plan flags, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..plan import PLAN_FIELDS


def add_plan_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per plan field (``--subfiles``, ``--ranks-per-subfile``, ``--fsync``)."""
    for field in PLAN_FIELDS:
        if field.name == "fsync":
            parser.add_argument(field.flag, action="store_true", default=None, help=field.help)
        else:
            parser.add_argument(field.flag, default=None, help=f"{field.help} (env {field.env})")


def plan_arguments(args: argparse.Namespace) -> dict[str, Any]:
    return {field.name: getattr(args, field.name) for field in PLAN_FIELDS}


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()

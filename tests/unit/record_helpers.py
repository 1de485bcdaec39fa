"""What the tests of layout records share."""

from __future__ import annotations

from typing import Any


def without_format_4_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """``dataclasses.asdict`` of a layout record without the fields format 4 added, where they
    are at their defaults: a record that uses none of them is stored as format 3 stored it."""
    data = {k: v for k, v in data.items() if not (k in ("learned", "maxshape") and not v)}
    for extent in data["extents"]:
        for piece in extent["pieces"]:
            for key, default in (("stride", ()), ("count", ()), ("rank", -1)):
                if piece[key] == default:
                    del piece[key]
    return data

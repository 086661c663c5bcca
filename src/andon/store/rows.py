"""Rows as the store hands them out, and its clock, shared by the backend and its mixins:
:func:`now` (ISO-8601 UTC, milliseconds) and :func:`row_dict` (JSON columns decoded)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


_JSON_COLUMNS = {"definition", "evidence", "data", "usage", "errors", "document", "spec",
                 "downgraded_because"}


def row_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` as a dict, its JSON columns (``_JSON_COLUMNS``) decoded."""
    out = dict(row)
    for key in _JSON_COLUMNS & out.keys():
        if isinstance(out[key], str):
            out[key] = json.loads(out[key])
    return out

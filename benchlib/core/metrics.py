"""What a run reports, computed the same way for every trainer and study."""

from __future__ import annotations

from typing import Any

from benchlib.errors import RecordError


def without_params(metrics: dict[str, Any], params: Any) -> dict[str, Any]:
    """What a worker reported, less the names that are the study's parameters (a record
    keeps a name in one place); a reported value that differs from the asked one is an
    error, not a metric."""
    fields = getattr(params, "__dataclass_fields__", params)
    out = {}
    for name, value in metrics.items():
        if name not in fields:
            out[name] = value
        elif value != getattr(params, name, fields[name]):
            raise RecordError(f"{name}: the run reported {value!r}, "
                             f"{getattr(params, name, fields[name])!r} was asked for")
    return out

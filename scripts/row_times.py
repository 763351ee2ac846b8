"""Where a sweep's row time goes, from papermill's own timestamps in the executed notebooks:

    python scripts/row_times.py outputs/runs

One line per executed notebook: its total, the kernel's start (papermill's start to the
first cell), the imports cell, the cells after it, and the rest (papermill writing the
notebook, the kernel's shutdown). Prints nothing it did not read."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

PARAMETER_TAGS = {"parameters", "injected-parameters"}


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def row(path: Path) -> tuple[str, float, float, float, float, float] | None:
    nb = json.loads(path.read_text())
    run = nb.get("metadata", {}).get("papermill", {})
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    timing = [c["metadata"].get("papermill", {}) for c in code]
    if not run.get("duration") or not timing or not timing[0].get("start_time"):
        return None
    kernel = (_when(timing[0]["start_time"]) - _when(run["start_time"])).total_seconds()
    durations = [t.get("duration") or 0.0 for t in timing]
    tags = [set(c["metadata"].get("tags", [])) for c in code]
    first = next((i for i, c in enumerate(code) if not tags[i] & PARAMETER_TAGS
                  and "import " in "".join(c["source"])), None)  # the imports cell
    imports = durations[first] if first is not None else 0.0
    work = sum(durations) - imports
    return (f"{path.parent.name}/{path.name}", run["duration"], kernel, imports, work,
            run["duration"] - kernel - imports - work)


def main(folder: str) -> None:
    rows = [r for p in sorted(Path(folder).rglob("*.ipynb")) if ".tmp." not in p.name
            for r in [row(p)] if r]
    print(f"{'notebook':44} {'total':>6} {'kernel':>6} {'imports':>7} {'cells':>6} {'rest':>6}")
    for name, *seconds in rows:
        print(f"{name:44} " + " ".join(f"{s:6.1f}" for s in seconds))
    if rows:
        total = [sum(r[i] for r in rows) for i in range(1, 6)]
        print(f"{f'all {len(rows)} rows':44} " + " ".join(f"{s:6.1f}" for s in total))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "outputs/runs")

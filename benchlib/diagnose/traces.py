"""Holistic Trace Analysis (HTA, the optional `traces` extra) over a run's Kineto traces,
one per rank (`details.trace_dir`, left by a DDP run with `export_trace`): its temporal
breakdown (the GPU idle, computing, or doing the rest: communication and copies) and how
much of the communication kernels' time computation overlapped, as `benchlib diagnose`'s
evidence lines beside benchlib's own (the comm hook, benchlib.distributed.comm_timer).

HTA reads GPU kernels only. On a CPU trace (holistictraceanalysis 0.5.0, measured here on
2 gloo ranks) its temporal breakdown raises IndexError and its overlap is 0/0, NaN, so a
trace without kernels gets one line saying so and HTA is not run. HTA runs in its own
process (`python -m benchlib.diagnose.traces DIR` prints one JSON object): importing it
points the root logger at stdout, and it parses the ranks in a forked pool. HTA missing,
failing or past TIMEOUT_S is one evidence line, never the end of a diagnosis.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchlib.errors import BenchlibError

INSTALL = "pip install -c constraints.txt -e '.[traces]'"
TIMEOUT_S = 300
GPU_KERNEL = re.compile(r'"cat":\s*"kernel"')  # how Kineto files a CUDA kernel


def trace_files(folder: Path) -> list[Path]:
    """The rank traces in `folder`, as HTA's TraceAnalysis(trace_dir=...) finds them."""
    return sorted(p for p in folder.glob("*") if p.suffix in (".json", ".gz"))


def has_gpu_kernels(path: Path) -> bool:
    if path.suffix == ".gz":
        import gzip

        with gzip.open(path, "rt") as f:
            return bool(GPU_KERNEL.search(f.read()))
    return bool(GPU_KERNEL.search(path.read_text()))


def evidence(trace_dir: str) -> list[str]:
    """The lines a diagnosis gets from the traces in `trace_dir` (one, where HTA cannot say
    anything: no traces, no GPU kernels, HTA not installed or failing)."""
    files = trace_files(Path(trace_dir))
    if not files:
        return [f"traces: none in {trace_dir} (moved or deleted?)"]
    where = f"{len(files)} rank trace{'s' if len(files) > 1 else ''} in {trace_dir}"
    if not any(has_gpu_kernels(f) for f in files):
        return [f"traces: {where} hold no GPU kernels; HTA's temporal and overlap breakdowns "
                "are for CUDA runs, the figures above are benchlib's own"]
    try:
        found = breakdown_in_subprocess(Path(trace_dir))
    except Exception as e:  # HTA's trouble is a line of evidence, not diagnose's end
        return [f"traces: HTA failed on {where}: {type(e).__name__}: {e}"]
    if "missing" in found:
        return [f"traces: {where}; HTA is not installed ({found['missing']}): its temporal "
                f"and overlap breakdowns come with `{INSTALL}`"]
    return lines(found["ranks"], where)


def lines(ranks: list[dict[str, Any]], where: str) -> list[str]:
    """HTA's figures per rank as two lines: the median over ranks, with their range."""
    def pct(name: str) -> str:
        values = [r[name] for r in ranks if r.get(name) is not None]
        if not values:
            return "n/a"
        mid = f"{statistics.median(values):.0f}%"
        return mid if len(values) == 1 else f"{mid} ({min(values):.0f}-{max(values):.0f}%)"

    how = "the median" + (f" of {len(ranks)} ranks (their range)" if len(ranks) > 1 else "")
    out = [f"HTA temporal breakdown ({where}, {how}): GPU idle {pct('idle_pct')}, computing "
           f"{pct('compute_pct')}, communicating or copying {pct('non_compute_pct')}"]
    if any(r.get("overlap_pct") is not None for r in ranks):
        out.append(f"HTA: computation overlapped {pct('overlap_pct')} of the communication "
                   "kernels' time (what backward hid of the all-reduce, as the GPU ran it)")
    else:
        out.append("HTA: no communication kernels in the traces (one rank, or no all-reduce)")
    return out


def breakdown_in_subprocess(folder: Path) -> dict[str, Any]:
    """`breakdown(folder)` in a process of its own: its JSON, or an error naming HTA's last
    line of output."""
    done = subprocess.run([sys.executable, "-m", "benchlib.diagnose.traces", str(folder)],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchlibError(f"exit {done.returncode}: {said}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _number(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def breakdown(folder: Path) -> dict[str, Any]:
    """HTA's temporal breakdown and comm/comp overlap of the traces in `folder`, per rank,
    in percent; {"missing": why} where HTA does not import."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError as e:
        return {"missing": str(e)}
    analysis = TraceAnalysis(trace_dir=str(folder))
    temporal = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    overlap = analysis.get_comm_comp_overlap(visualize=False).set_index("rank")
    return {"ranks": [{"rank": int(rank),
                       "idle_pct": _number(temporal.at[rank, "idle_time_pctg"]),
                       "compute_pct": _number(temporal.at[rank, "compute_time_pctg"]),
                       "non_compute_pct": _number(temporal.at[rank, "non_compute_time_pctg"]),
                       "overlap_pct": _number(overlap.at[rank, "comp_comm_overlap_pctg"])}
                      for rank in temporal.index]}


def main(argv: list[str]) -> int:
    with contextlib.redirect_stdout(sys.stderr):  # HTA's log lines; stdout is the result's
        found = breakdown(Path(argv[0]))
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

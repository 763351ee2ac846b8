"""The Slurm client commands a sweep calls: sbatch, scancel, squeue, scontrol; a refusal
is a SlurmError with Slurm's own last line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchlib.errors import SlurmError


def _run(argv: list[str], timeout_s: float = 60) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as e:
        raise SlurmError(f"{argv[0]}: not found; is Slurm installed here (the client "
                         "commands sbatch, squeue, scontrol)?") from e
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        raise SlurmError(f"{' '.join(argv[:2])} failed ({out.returncode}): "
                         f"{said[-1] if said else 'no message'}")
    return out.stdout


def submit(script_path: Path) -> str:
    """sbatch --parsable; returns the job id."""
    return _run(["sbatch", "--parsable", str(script_path)]).strip().split(";")[0]


def cancel(job_id: str) -> None:
    _run(["scancel", job_id])


def queued(job_id: str) -> dict[str, str]:
    """Array task index (or job id) -> state, for what is still in the queue."""
    out = _run(["squeue", "-h", "-r", "-j", job_id, "-o", "%K %T"])
    states = {}
    for line in out.splitlines():
        index, state = line.split()
        states[index if index not in ("N/A", "") else job_id] = state
    return states


def final_states(job_id: str) -> dict[str, str]:
    """Array task index -> final JobState, from `scontrol show job` (kept for MinJobAge)."""
    try:
        out = _run(["scontrol", "-o", "show", "job", job_id])
    except SlurmError:
        return {}
    states = {}
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        states[fields.get("ArrayTaskId", job_id)] = fields.get("JobState", "UNKNOWN")
    return states

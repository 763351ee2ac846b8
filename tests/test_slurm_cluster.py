"""The project's two-node Slurm test cluster (scripts/slurm-cluster.sh), used for real."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def run(args, env, timeout=60, **kwargs) -> subprocess.CompletedProcess:
    """Run a command against the cluster; fail with its output when it fails."""
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout,
                         check=False, **kwargs)
    assert out.returncode == 0, f"{args} exited {out.returncode}:\n{out.stdout}{out.stderr}"
    return out


def job_fields(job_id: str, env) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, ExitCode, ...)."""
    text = run(["scontrol", "show", "job", "-o", job_id], env).stdout
    return dict(field.split("=", 1) for field in text.split() if "=" in field)


def wait_for_job(job_id: str, env, timeout_s: float = 60) -> dict[str, str]:
    """Poll squeue until the job has left the queue; return its final scontrol fields."""
    deadline = time.monotonic() + timeout_s
    while run(["squeue", "-h", "-j", job_id], env).stdout.strip():
        assert time.monotonic() < deadline, f"job {job_id} still queued after {timeout_s} s"
        time.sleep(0.2)
    return job_fields(job_id, env)


def test_srun_runs_one_task_on_each_node_and_they_see_their_hostnames(slurm_cluster):
    out = run(["srun", "-N2", "-n2", "hostname"], slurm_cluster)
    assert sorted(out.stdout.split()) == ["n1", "n2"]


def test_a_job_sees_its_slurm_variables_and_its_first_host(slurm_cluster):
    script = ('echo "$SLURM_PROCID $SLURM_NTASKS $SLURM_NNODES $(hostname) '
              '$(scontrol show hostnames "$SLURM_NODELIST" | head -1)"')
    out = run(["srun", "-N2", "-n2", "sh", "-c", script], slurm_cluster)
    lines = sorted(out.stdout.splitlines())
    assert lines == ["0 2 2 n1 n1", "1 2 2 n2 n1"]


def test_each_node_resolves_the_other_by_name(slurm_cluster):
    script = 'echo "$(hostname) $(getent hosts n1 n2 | wc -l)"'
    out = run(["srun", "-N2", "-n2", "sh", "-c", script], slurm_cluster)
    assert sorted(out.stdout.splitlines()) == ["n1 2", "n2 2"]


def test_sbatch_job_writes_to_the_shared_filesystem_and_completes(slurm_cluster, tmp_path):
    marker = tmp_path / "job-ran"
    script = tmp_path / "job.sh"
    script.write_text(f'#!/bin/sh\nsrun sh -c \'echo "$SLURM_PROCID $(hostname)"\' > {marker}\n')
    submitted = run(["sbatch", "--parsable", "-N2", "-n2", "-o", str(tmp_path / "job.out"),
                     str(script)], slurm_cluster, cwd=tmp_path)
    job_id = submitted.stdout.strip().split(";")[0]
    assert job_id.isdigit()
    job = wait_for_job(job_id, slurm_cluster)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0")
    assert sorted(marker.read_text().splitlines()) == ["0 n1", "1 n2"]


def test_a_failing_batch_job_is_reported_failed_with_its_exit_code(slurm_cluster, tmp_path):
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    submitted = run(["sbatch", "--parsable", "-o", str(tmp_path / "fail.out"), str(script)],
                    slurm_cluster, cwd=tmp_path)
    job = wait_for_job(submitted.stdout.strip().split(";")[0], slurm_cluster)
    assert (job["JobState"], job["ExitCode"]) == ("FAILED", "3:0")


ALLREDUCE = """
import os, subprocess, torch, torch.distributed as dist

first = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_NODELIST"]],
                       capture_output=True, text=True, check=True).stdout.split()[0]
port = 20000 + int(os.environ["SLURM_JOB_ID"]) % 10000
os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=os.environ["SLURM_NTASKS"],
                  MASTER_ADDR=first, MASTER_PORT=str(port))
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(os.uname().nodename, dist.get_rank(), dist.get_world_size(), first, int(t.item()))
dist.destroy_process_group()
"""


def test_gloo_all_reduce_across_the_two_nodes(slurm_cluster):
    out = run(["srun", "-N2", "-n2", PYTHON, "-c", ALLREDUCE], slurm_cluster, timeout=120)
    # rank r contributes r + 1: 1 + 2 = 3 on both ranks; rank 0 on n1, the master host.
    assert sorted(out.stdout.splitlines()) == ["n1 0 2 n1 3", "n2 1 2 n1 3"]

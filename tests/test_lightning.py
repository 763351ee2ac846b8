"""benchlib.workers.lightning for real, on CPU with gloo: one process; torchrun with two
agents; srun's layout; a layout that would hang; a failing rank. Each run is a few toynet
steps on generated FashionMNIST. Lightning's own launcher across two "nodes" is notebook
30's row in tests/test_study_sweeps.py (one launch serves both)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchlib.distributed.lightning_env import global_rank, layout
from benchlib.errors import UsageError
from benchlib.launch.argv import torchrun_argv
from benchlib.launch.launcher import free_port
from benchlib.launch.protocol import JOINED

WORKER = [sys.executable, "-m", "benchlib.workers.lightning"]
LAYOUT_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
               "MASTER_ADDR", "MASTER_PORT", "PL_GLOBAL_SEED")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any launcher's layout, one thread per rank (2 cores)."""
    env = {k: v for k, v in os.environ.items()
           if k not in LAYOUT_VARS and not k.startswith(("SLURM_", "TORCHELASTIC_"))}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def train_args(small_data: Path, log_dir: Path, *extra: str) -> list[str]:
    return ["1", "--path", str(small_data), "--dataset", "fashion-mnist", "--model", "toynet",
            "--max-steps", "8", "--warmup-steps", "2", "--device", "cpu", "--timeout", "60",
            "--log-dir", str(log_dir), "--result", str(log_dir / "result.json"), *extra]


def run(commands: list[tuple[list[str], dict[str, str]]], log_dir: Path,
        timeout_s: float = 90) -> list[int]:
    """Start every command at once (output to launcher-<i>.log), wait for all; exit codes."""
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for i, (argv, env) in enumerate(commands):
        with open(log_dir / f"launcher-{i}.log", "w") as out:
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True))
    deadline = time.monotonic() + timeout_s
    try:
        return [p.wait(max(deadline - time.monotonic(), 0.1)) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        pytest.fail(f"still running after {timeout_s} s:\n{logs(log_dir)}")


def logs(log_dir: Path) -> str:
    return "\n".join(f"== {f.name}\n{f.read_text(errors='replace')}"
                     for f in sorted(log_dir.glob("*.log")))


def result(log_dir: Path, codes: list[int]) -> dict:
    assert codes == [0] * len(codes), logs(log_dir)
    return json.loads((log_dir / "result.json").read_text())


def check_rank_logs(log_dir: Path, world_size: int) -> None:
    for rank in range(world_size):
        text = (log_dir / f"rank{rank}.log").read_text()
        assert text.startswith(f"rank {rank}/{world_size} "), text
        assert JOINED in text


@pytest.mark.distributed
def test_one_process_measures_every_epoch_of_every_repeat(small_data, tmp_path):
    # the seed's spellings: --gpus, --batch_size, --num_workers
    args = train_args(small_data, tmp_path, "--gpus", "1", "--batch_size", "32",
                      "--num_workers", "0", "--epochs", "2", "--repeats", "2")
    args[0] = "2"  # TOTAL_EPOCHS, given the seed's way too
    start = time.monotonic()
    out = result(tmp_path, run([(WORKER + args, clean_env())], tmp_path))
    m = out["metrics"]
    assert m["world_size"] == 1 and m["nnodes"] == 1 and m["devices_per_node"] == 1
    assert m["global_batch"] == 32 and m["backend_used"] is None
    assert m["strategy"] == "single_device" and m["cluster_environment"] == "LightningEnvironment"
    assert m["lightning_version"].startswith("2.")
    # sane: more than 100 samples/s, and fewer than 1 TFLOP/s on two CPU cores
    assert 100 < m["samples_per_s"] and m["samples_per_s"] * m["flops_per_sample"] < 1e12
    assert m["samples_per_s_p10"] <= m["samples_per_s"] <= m["samples_per_s_p90"]
    assert 0 < m["data_s"] and 0 < m["compute_s"] and 0 < m["batch_s"] < m["epoch_s"]
    assert 0 < m["startup_s"] < time.monotonic() - start and m["loss_last"] > 0
    # memory as the DDP trainer reports it: the window's peak RSS (a CPU), fp32 parameters
    assert m["peak_rss_bytes"] > 0 and m["peak_bytes"] == m["peak_rss_bytes"]
    assert m["param_bytes"] == 4 * m["model_params"] and m["other_bytes"] > 0
    epochs = out["details"]["epochs"]
    assert [(e["repeat"], e["epoch"]) for e in epochs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert m["samples_per_s_n"] == 4 and all(e["steps"] == 8 for e in epochs)
    for e in epochs:  # one batch of 32 per mean step time (data + compute)
        assert e["samples_per_s"] * (e["data_s"] + e["compute_s"]) == pytest.approx(32)
    assert set(out["details"]["startup_rank0"]) == {"imports_s", "prepare_s", "launch_and_join_s",
                                                    "to_first_step_s"}
    assert (tmp_path / "rank0.log").read_text().startswith("rank 0/1 (local 0) on ")


@pytest.mark.distributed
def test_torchrun_with_two_agents_runs_two_nodes(small_data, tmp_path):
    port = free_port()
    args = train_args(small_data, tmp_path, "--devices", "1", "--nnodes", "2")
    agents = [(torchrun_argv("lightning", args, 1, port, nnodes=2, node_rank=n,
                             rdzv_id=f"test-{port}"), clean_env()) for n in range(2)]
    m = result(tmp_path, run(agents, tmp_path))["metrics"]
    assert m["world_size"] == 2 and m["nnodes"] == 2 and m["backend_used"] == "gloo"
    assert m["cluster_environment"] == "TorchElasticEnvironment" and m["samples_per_s"] > 100
    check_rank_logs(tmp_path, 2)


def slurm_env(procid: int, ntasks: int, per_node: int, nnodes: int, **extra: str) -> dict[str, str]:
    """What srun sets for one task of a job step (on one host here)."""
    return clean_env(SLURM_JOB_ID="4242", SLURM_JOB_NAME="test", SLURM_NODELIST="localhost",
                     SLURM_NTASKS=str(ntasks), SLURM_NTASKS_PER_NODE=str(per_node),
                     SLURM_NNODES=str(nnodes), SLURM_PROCID=str(procid),
                     SLURM_LOCALID=str(procid % per_node), SLURM_NODEID=str(procid // per_node),
                     **extra)


@pytest.mark.distributed
def test_two_slurm_tasks_run_as_slurm_would_start_them(small_data, tmp_path):
    port = str(free_port())  # else Lightning derives it from the job id
    args = train_args(small_data, tmp_path, "--devices", "2")
    tasks = [(WORKER + args, slurm_env(r, 2, 2, 1, MASTER_PORT=port)) for r in range(2)]
    m = result(tmp_path, run(tasks, tmp_path))["metrics"]
    assert m["cluster_environment"] == "SLURMEnvironment"
    assert m["world_size"] == 2 and m["devices_per_node"] == 2 and m["nnodes"] == 1
    check_rank_logs(tmp_path, 2)


@pytest.mark.distributed
@pytest.mark.parametrize("flags, expected", [
    (["--devices", "2"], ("devices: 2 per node, but Slurm runs 1 task(s) per node "
                          "(--ntasks-per-node=1); Lightning needs one task per device: "
                          "pass --devices 1 or srun --ntasks-per-node=2")),
    (["--nnodes", "2"], ("nnodes: 2, but the Slurm job step has 1 node(s) (--nodes=1); "
                         "pass --nnodes 1 or srun --nodes=2")),
])
def test_a_slurm_layout_lightning_would_hang_on_is_refused_in_one_line(tmp_path, flags, expected):
    # refused before any process group is waited for: a layout let through would wait
    # for the missing rank for the worker's 300 s --timeout, and `timeout` fails the test
    # long before (100 s: room for a start-up several times its quiet length)
    out = subprocess.run([*WORKER, "1", "--path", str(tmp_path), "--device", "cpu", *flags,
                          "--timeout", "300", "--log-dir", str(tmp_path)],
                         env=slurm_env(0, 1, 1, 1), capture_output=True, text=True,
                         timeout=100, check=False)
    line = f"benchlib.workers.lightning: {expected}\n"
    assert out.returncode == 2 and out.stderr == line, out.stdout + out.stderr
    assert (tmp_path / "rank0.log").read_text().endswith(line)  # where launch() points
    assert not (tmp_path / "result.json").exists()


@pytest.mark.distributed
def test_a_failing_rank_stops_the_run_and_leaves_its_marker(small_data, tmp_path):
    # one node of two devices: Lightning's launcher starts rank 1 itself
    args = train_args(small_data, tmp_path, "--devices", "2", "--fail-at-step", "3",
                      "--fail-rank", "1", "--timeout", "300")  # the later --timeout wins
    # the failure stops the run: rank 0, left in a collective, would wait out its 300 s
    # --timeout, and run() fails the test at 150 s (room for start-up on shared cores)
    [code] = run([(WORKER + args, clean_env())], tmp_path, timeout_s=150)
    assert code != 0
    failed = json.loads((tmp_path / "rank1.failed").read_text())
    assert failed["error"] == "InjectedFailure: injected failure at step 3 on rank 1"
    log = (tmp_path / "rank1.log").read_text()
    assert log.startswith("rank 1/2 (local 1) on ") and "Traceback" in log
    assert "injected failure at step 3 on rank 1" in log
    assert not (tmp_path / "result.json").exists()
    # rank 0, if it failed too (its peer closed the connection), failed later
    if (tmp_path / "rank0.failed").exists():
        assert json.loads((tmp_path / "rank0.failed").read_text())["time"] >= failed["time"]

    def left():
        return [p for p in psutil.process_iter(["cmdline", "status"])
                if str(tmp_path) in " ".join(p.info["cmdline"] or [])
                and p.info["status"] != psutil.STATUS_ZOMBIE]

    deadline = time.monotonic() + 10
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == []


# layout() and global_rank() are pure: each launcher's variables as plain dicts

TORCHRUN = {"TORCHELASTIC_RUN_ID": "x", "RANK": "3", "LOCAL_RANK": "1", "GROUP_RANK": "1",
            "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1234"}


def test_layout_takes_devices_and_nodes_from_torchrun_when_not_given():
    where = layout(TORCHRUN, None, None)
    assert (where.environment, where.rank, where.local_rank, where.node_rank) == \
        ("TorchElasticEnvironment", 3, 1, 1)
    assert (where.devices, where.nnodes, where.world_size) == (2, 2, 4)


def test_layout_refuses_a_torchrun_world_that_differs_from_devices_times_nodes():
    with pytest.raises(UsageError, match=r"^nnodes: 3 nodes x 2 devices is 6 ranks, but "
                                         r"torchrun's world size is 4; pass --nnodes 2"):
        layout(TORCHRUN, 2, 3)
    with pytest.raises(UsageError, match=r"^devices: 4 per node, but torchrun started 2 "):
        layout(TORCHRUN, 4, 1)


def test_layout_places_a_local_rank_that_lightning_started_on_its_node():
    env = {"NODE_RANK": "1", "LOCAL_RANK": "2", "WORLD_SIZE": "8", "MASTER_ADDR": "h",
           "MASTER_PORT": "1234"}
    assert global_rank(env, 4) == 6
    where = layout(env, 4, 2)
    assert (where.environment, where.rank, where.world_size) == ("LightningEnvironment", 6, 8)


def test_layout_needs_master_and_node_rank_for_several_nodes_without_a_launcher():
    with pytest.raises(UsageError, match=r"^MASTER_PORT: not set; for 2 nodes"):
        layout({"MASTER_ADDR": "h", "NODE_RANK": "0"}, 1, 2)
    with pytest.raises(UsageError, match=r"^NODE_RANK: 2 is not in 0..1"):
        layout({"MASTER_ADDR": "h", "MASTER_PORT": "1", "NODE_RANK": "2"}, 1, 2)


def test_an_interactive_slurm_job_is_not_taken_for_srun():
    env = {"SLURM_NTASKS": "1", "SLURM_JOB_NAME": "interactive", "SLURM_PROCID": "0"}
    assert layout(env, 2, 1).environment == "LightningEnvironment"
    with pytest.raises(UsageError, match=r"^ntasks-per-node: Slurm runs 4 tasks without"):
        layout({"SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_JOB_NAME": "x"}, 2, 2)

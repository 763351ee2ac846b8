"""Several nodes on one host (real torchrun agents, c10d rendezvous on 127.0.0.1), the
Slurm commands benchlib renders, and the layout checks made before anything starts. Two
agents forming one job of two nodes is notebook 30's row in tests/test_study_sweeps.py."""

import shlex
import time

import pytest

from benchlib.config import MultinodeLightningConfig
from benchlib.errors import ConfigError, LaunchError, UsageError
from benchlib.launch.argv import local_env, torchrun_argv
from benchlib.launch.launcher import free_port, launch
from benchlib.launch.supervise import start as start_process
from benchlib.launch.supervise import supervise
from benchlib.slurm.capacity import check_layout
from benchlib.slurm.sbatch import training_script
from benchlib.studies import multinode_lightning
from benchlib.studies.multinode_lightning import launches


def ddp_args(*extra):
    return ["--dataset", "synthetic", "--model", "simplecnn", "--image-size", "32",
            "--batch-size", "8", "--max-steps", "6", "--warmup-steps", "2", "--device", "cpu",
            "--timeout", "60", *extra]


@pytest.mark.distributed
def test_a_node_that_never_joins_fails_within_the_join_timeout_even_if_its_agent_is_stuck(
        tmp_path):
    """Node 1's agent hangs and ignores SIGTERM, so node 1 never joins: node 0's agent fails
    within its join timeout, and the error must not wait out the 35 s that a torchrun agent
    is given to stop its workers (there are none yet)."""
    argv = torchrun_argv("ddp", ddp_args(), 1, free_port(), nnodes=2, node_rank=0,
                         rdzv_id="stuck", join_timeout_s=5)
    agent = start_process(argv, tmp_path / "launcher-node0.log", "torchrun agent of node 0",
                          None, None)
    stuck = start_process(["sh", "-c", "trap '' TERM; sleep 120"], tmp_path / "launcher-node1.log",
                          "torchrun agent of node 1", None, None)
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"torchrun agent of node 0: not all 2 nodes "
                       r"joined the rendezvous at 127\.0\.0\.1:\d+ within its join timeout"):
        supervise([agent, stuck], tmp_path, timeout_s=120)
    # the 5 s join timeout plus torchrun's start-up, which shared cores can stretch several
    # times; not torchrun's default join timeout (600 s), nor supervise's 120 s
    assert time.monotonic() - start < 100
    # timed from the failed agent's last log line (its exit), so that how long torchrun
    # took to start does not count: the stuck agent is given 2 s, not stop()'s 35 s grace
    after_exit_s = time.time() - (tmp_path / "launcher-node0.log").stat().st_mtime
    assert after_exit_s < 20
    assert stuck.popen.poll() is not None  # and it was stopped (SIGKILL)


@pytest.mark.parametrize("launcher", ["mp_spawn", "tcp", "single"])
def test_launchers_of_one_node_refuse_several(tmp_path, launcher):
    with pytest.raises(UsageError, match=f"nnodes: {launcher} starts one node; for 2 use one of "
                                         "torchrun, lightning, srun"):
        launch("ddp", ddp_args(), tmp_path, launcher, nproc=1, nnodes=2)
    assert not (tmp_path / "rank0.log").exists()


def test_srun_outside_a_slurm_job_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(UsageError, match="launcher: srun needs a Slurm allocation"):
        launch("ddp", ddp_args(), tmp_path, "srun", nproc=1, nnodes=2)


def test_local_launches_do_not_inherit_a_slurm_or_torchrun_layout():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "RANK": "3", "LOCAL_RANK": "1",
           "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "n1", "PATH": "/bin", "OMP_NUM_THREADS": "2",
           "SLURMD_NODENAME": "n1"}
    assert local_env(env) == {"PATH": "/bin", "OMP_NUM_THREADS": "2"}


def test_multinode_config_names_what_to_change():
    with pytest.raises(ConfigError, match="launcher: lightning is Lightning's own launcher; "
                                          "trainer ddp starts with torchrun or srun"):
        MultinodeLightningConfig(trainer="ddp", launcher="lightning")
    with pytest.raises(ConfigError, match="trainer: 'keras' is not one of lightning, ddp"):
        MultinodeLightningConfig(trainer="keras")
    with pytest.raises(ConfigError, match="nnodes: must be >= 1, got 0"):
        MultinodeLightningConfig(nnodes=0)
    with pytest.raises(ConfigError, match="nproc_per_node: 64 ranks asked for on this host"):
        multinode_lightning.preflight(MultinodeLightningConfig(device="cpu", nnodes=2, nproc_per_node=32))


def test_lightning_gets_its_layout_and_not_the_ddp_only_flags():
    [lightning] = launches(MultinodeLightningConfig(trainer="lightning", nnodes=3, nproc_per_node=2))
    params = lightning.params
    assert (params["devices"], params["nnodes"]) == (2, 3)
    assert "backend" not in params and "log_interval" not in params
    assert (lightning.worker, lightning.nnodes, lightning.nproc) == ("lightning", 3, 2)
    assert lightning.options == {"join_timeout_s": 120, "srun_torchrun": False}
    [ddp] = launches(MultinodeLightningConfig(trainer="ddp"))
    assert "devices" not in ddp.params and ddp.options["srun_torchrun"] is True


# ------------------------------------------------------------------ rendered Slurm scripts

def srun_line(text: str) -> str:
    """The script's srun command, without the status capture around it."""
    [line] = [s for s in text.splitlines() if s.startswith("srun ")]
    return line.removesuffix(" || status=$?")


def test_every_value_in_a_rendered_script_stays_a_string():
    hostile = "data; rm -rf ~ $(reboot) `id`"
    text = training_script("ddp", 2, 4, ["--path", hostile], "logs/%j.log",
                           check_capacity=False)
    srun = srun_line(text)
    assert shlex.split(srun)[-1] == hostile  # one argument, nothing for the shell
    assert '--rdzv-id "$SLURM_JOB_ID"' in srun  # benchlib's own shell, expanded by it
    assert '--rdzv-endpoint "$head_node:29500"' in srun
    with pytest.raises(ConfigError, match=r"partition: 'gpu; rm -rf ~' may only hold letters"):
        training_script("ddp", 2, 4, [], "x.log", partition="gpu; rm -rf ~",
                        check_capacity=False)


def test_rendered_scripts_start_one_agent_per_node_or_one_task_per_device():
    ddp = training_script("ddp", 2, 4, [], "x.log", gpu=True, check_capacity=False)
    assert "#SBATCH --ntasks-per-node=1" in ddp and "#SBATCH --gpus-per-node=4" in ddp
    assert "benchlib.launch.agent --nnodes 2 --rdzv-backend c10d" in ddp
    assert "--kill-on-bad-exit=1" in ddp and "--nproc-per-node 4" in ddp
    light = training_script("lightning", 2, 4, [], "x.log", requeue=True,
                            check_capacity=False)
    assert "#SBATCH --ntasks-per-node=4" in light and "#SBATCH --requeue" in light
    assert srun_line(light).endswith("-m benchlib.workers.lightning --devices 4 --nnodes 2")
    elastic = training_script("elastic", 2, 4, [], "x.log", requeue=True, max_restarts=3,
                              check_capacity=False)
    assert "--max-restarts 3 -m benchlib.workers.elastic" in elastic and "#SBATCH --requeue" in elastic


def _run_script(tmp_path, requeue: bool, srun_exit: int, sigterm: bool = False):
    """The rendered ddp script under bash, with an srun that exits `srun_exit` (after a
    second) and an scontrol that records what it is asked; SIGTERM to the script while
    srun runs, if asked. Its exit status and the scontrol calls."""
    import os
    import signal
    import subprocess

    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(parents=True)
    (bin_dir / "srun").write_text(f"#!/bin/sh\ntouch {tmp_path}/started\nsleep 1\nexit {srun_exit}\n")
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\n[ "$1" = show ] && echo n1 && exit 0\n'
                                      f'echo "$@" >> {calls}\n')
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    script = tmp_path / "job.sbatch"
    script.write_text(training_script("ddp", 1, 1, [], "x.log", requeue=requeue,
                                      check_capacity=False))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "n1"}
    proc = subprocess.Popen(["bash", str(script)], env=env, stderr=subprocess.PIPE, text=True)
    if sigterm:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():  # the script reached its (fake) srun
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, calls.read_text() if calls.exists() else "", err


def test_a_preempted_step_makes_the_script_exit_75_and_requeue_only_when_asked(tmp_path):
    code, calls, err = _run_script(tmp_path / "a", requeue=True, srun_exit=75)
    assert (code, calls) == (75, "requeue 7\n")
    assert err.strip().splitlines()[-1] == ("benchlib: preempted (step exit 75); exit 75: "
                                            "requeued to resume")
    code, calls, err = _run_script(tmp_path / "b", requeue=False, srun_exit=75)
    assert (code, calls) == (75, "")
    code, calls, _ = _run_script(tmp_path / "c", requeue=True, srun_exit=1)  # a crash
    assert (code, calls) == (1, "")
    code, calls, _ = _run_script(tmp_path / "d", requeue=True, srun_exit=0)
    assert (code, calls) == (0, "")


def test_sigterm_to_the_script_waits_for_the_step_then_exits_75_and_requeues(tmp_path):
    # srun's own status after a preemption may be a killed task's (137) rather than 75
    code, calls, err = _run_script(tmp_path / "a", requeue=True, srun_exit=137, sigterm=True)
    assert (code, calls) == (75, "requeue 7\n"), err
    assert "benchlib: SIGTERM: waiting for the ranks to checkpoint" in err


def test_layouts_that_would_hang_or_cannot_fit_are_refused_with_what_to_change():
    with pytest.raises(ConfigError, match="ntasks_per_node: 1 with devices 4: Lightning under "
                                          "Slurm starts one task per device; set ntasks-per-node = 4"):
        check_layout("lightning", 2, 4, ntasks_per_node=1)
    with pytest.raises(ConfigError, match="ntasks_per_node: 4 with devices 4: srun torchrun "
                                          "starts one agent per node"):
        check_layout("ddp", 2, 4, ntasks_per_node=4)
    with pytest.raises(ConfigError, match=r"world_size: 6 != nodes 2 x devices 4 = 8"):
        check_layout("ddp", 2, 4, world_size=6)
    with pytest.raises(ConfigError, match="devices: 8 per node asked for, but the partition's "
                                          "smallest node has 4 GPUs; use devices <= 4"):
        check_layout("lightning", 2, 8, gpu=True, capacity={"cpus": 64, "gpus": 4})
    with pytest.raises(ConfigError, match="nodes: 3 asked for, but the partition has 2; "
                                          "use nodes <= 2"):
        check_layout("ddp", 3, 1, capacity={"nodes": 2, "cpus": 2, "gpus": 0})
    assert check_layout("lightning", 2, 4, ntasks_per_node=4) == 4


def test_an_agent_started_by_hand_whose_other_node_never_joins_ends_with_one_line(tmp_path):
    """`python -m benchlib.launch.agent` (torchrun's own arguments) on one node of two: the
    line the launcher API gives, not torchrun's RendezvousTimeoutError traceback."""
    import subprocess

    port = free_port()
    argv = torchrun_argv("doctor", ["--device", "cpu"], 1, port, nnodes=2, node_rank=0,
                         rdzv_id="alone", join_timeout_s=3)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"torchrun: not all 2 nodes joined the rendezvous at 127.0.0.1:{port} within its join "
        "timeout (3 s); start a torchrun agent with the same --rdzv-endpoint and --rdzv-id on "
        f"every node (or lower --nnodes), and check that 127.0.0.1:{port} is reachable from "
        "them")

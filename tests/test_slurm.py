"""benchlib on a real two-node Slurm cluster (scripts/slurm-cluster.sh: nodes n1, n2):
sweeps as job arrays, the rendered sbatch scripts, layouts refused before submitting."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlib.records import results
from benchlib.runs.params import load_plan
from benchlib.slurm import arrays

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parent.parent


def benchlib(env, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "benchlib", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def benchlib_here(monkeypatch, capsys):
    """`benchlib ARGS` run in this process under `env`, as `benchlib()` runs it in one of
    its own: for the commands here that are answered without a job of theirs (refused, or
    polling one), whose own interpreter (0.2-0.8 s of CPU each) is not what they test."""
    from benchlib.cli import main

    def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
        with monkeypatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            mp.chdir(ROOT)
            capsys.readouterr()
            code = main(list(args))
            captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)
    return run


def wait_for(env, job_id: str, timeout_s: float = 300) -> str:
    """Poll squeue until the job left the queue; its final state from scontrol."""
    deadline = time.monotonic() + timeout_s
    while subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True,
                         text=True).stdout.strip():
        assert time.monotonic() < deadline, f"job {job_id} still queued after {timeout_s} s"
        time.sleep(0.5)
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=env, capture_output=True,
                         text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)["JobState"]


def submit_training(env, tmp_path, trainer: str, worker_args: str, nodes: int = 2) -> tuple[str, Path]:
    logs = tmp_path / "logs"
    args = (f"--dataset synthetic --model simplecnn --image-size 32 --batch-size 8 --max-steps 6 "
            f"--warmup-steps 2 --device cpu --timeout 90 --log-dir {logs} "
            f"--result {logs / 'result.json'} {worker_args}")
    rendered = benchlib(env, "slurm-script", trainer, "--nodes", str(nodes), "--devices", "1",
                        "--output", str(tmp_path / "%j.log"), "--worker-args", args, "--submit")
    assert rendered.returncode == 0, rendered.stderr
    return rendered.stdout.strip(), logs


def plan(tmp_path, rows: str) -> Path:
    path = tmp_path / "multinode.yaml"
    path.write_text(
        "name: mn_slurm\nnotebook: notebooks/30_multinode_lightning.ipynb\n"
        "defaults: {launcher: srun, dataset: synthetic, model: simplecnn, batch_size: 8, "
        "max_steps: 6, warmup_steps: 2, device: cpu, epochs: 1, nnodes: 2, timeout_s: 240}\n"
        f"table:\n{rows}")
    return path


def test_rows_become_one_array_per_allocation_shape(tmp_path):
    rows = load_plan(plan(tmp_path, "  - {trainer: ddp}\n  - {trainer: ddp, nnodes: 1}\n"
                                    "  - {trainer: lightning}\n"
                                    "  - {trainer: lightning, nproc_per_node: 2}\n"
                                    "  - {trainer: ddp, device: auto, nproc_per_node: 2}\n"))
    groups = arrays.shape_groups([r.params for r in rows])  # a partition without GPUs: auto runs on CPU
    assert groups == {(2, 1, 0): [0, 2, 4], (1, 1, 0): [1], (2, 2, 0): [3]}
    shape = (2, 1, 0)
    script = arrays.array_script("mn_slurm", groups[shape], shape, tmp_path, tmp_path, None, None)
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in script
    assert "#SBATCH --array=0,2,4\n" in script and "#SBATCH --exclusive\n" in script
    assert "--gpus-per-node" not in script
    # where the partition has GPUs, a device: auto row asks for one per rank on each node
    groups = arrays.shape_groups([r.params for r in rows], partition_gpus=4)
    assert groups[(2, 1, 2)] == [4]
    script = arrays.array_script("mn_slurm", [4], (2, 1, 2), tmp_path, tmp_path, None, None)
    assert "#SBATCH --gpus-per-node=2\n" in script
    assert arrays.index_ranges([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"


def test_a_preempted_array_task_exits_75_and_requeues_only_with_requeue(tmp_path):
    """The sweep's array tasks end like a training script when Slurm preempts them (the
    same lines, run for real in test_multinode's preemption tests)."""
    asked = arrays.array_script("s", [0], (1, 1, 0), tmp_path, tmp_path, None, None, requeue=True)
    assert "#SBATCH --requeue\n" in asked and 'scontrol requeue "$SLURM_JOB_ID"' in asked
    assert "trap 'preempted=1;" in asked and "    exit 75\n" in asked
    assert 'slurm-task' in asked.split("trap", 1)[1]  # the task runs inside the trap
    plain = arrays.array_script("s", [0], (1, 1, 0), tmp_path, tmp_path, None, None)
    assert "scontrol requeue" not in plain and "    exit 75\n" in plain


def test_a_sweep_runs_as_job_arrays_and_its_rows_use_srun_over_the_allocation(
        slurm_cluster, tmp_path, benchlib_here):
    """Three rows in two arrays, one per allocation shape, each row's ranks on its nodes.
    While they wait, squeue fails for 3 s, as it does while slurmctld restarts: the sweep
    goes on polling. (One sweep asserts both: a Slurm sweep costs this suite some 30 s.)"""
    import shutil

    real = shutil.which("squeue", path=slurm_cluster["PATH"])
    down = tmp_path / "controller-down"
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "squeue"
    wrapper.write_text(f"#!/bin/sh\nif [ -e {down} ]; then echo 'squeue: error: Unable to contact "
                       f"slurm controller' >&2; exit 1; fi\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    env = {**slurm_cluster, "BENCHLIB_OUTPUTS": str(tmp_path / "out"),
           "PATH": f"{tmp_path / 'bin'}:{slurm_cluster['PATH']}"}
    table = plan(tmp_path, "  - {trainer: ddp}\n  - {trainer: lightning}\n"
                           "  - {trainer: ddp, nnodes: 1}\n")
    down.touch()
    sweep = subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", str(table),
                              "--executor", "slurm", "--no-progress"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "out" / "slurm").glob("*/job_ids")):  # submitted, now polling
        assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
        time.sleep(0.2)
    time.sleep(3)
    assert sweep.poll() is None  # still polling through the failures
    down.unlink()
    out, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, out + err
    assert "3 ok, 0 failed, 0 skipped" in out
    records = results.load_results(tmp_path / "out" / "results")
    assert len(records) == 3 and set(records["status"]) == {"ok"}
    jobs = {}
    for run_id in records["run_id"]:
        record = results.find_record(tmp_path / "out" / "results", "mn_slurm", run_id)
        nnodes = record["params"]["nnodes"]
        assert record["metrics"]["world_size"] == nnodes  # every node of the row trained
        executor = record["executor"]
        assert executor["name"] == "slurm" and executor["node"] in ("n1", "n2")
        jobs.setdefault(nnodes, set()).add(executor["job_id"])
        assert (tmp_path / "out" / record["executed_notebook"]).stat().st_size > 0
        train_logs = Path(record["metrics"]["log_dir"]) / "train"
        hosts = {(train_logs / f"rank{r}.log").read_text().split(" on ")[1].split(",")[0]
                 for r in range(nnodes)}
        assert hosts == ({"n1", "n2"} if nnodes == 2 else {executor["node"]})
    # one array per shape: the 1-node row did not hold two nodes
    assert len(jobs[2]) == 1 and len(jobs[1]) == 1 and jobs[1] != jobs[2]
    [sweep_dir] = (tmp_path / "out" / "slurm").iterdir()
    assert sorted(p.name for p in sweep_dir.glob("*.sbatch")) == ["array-1x1.sbatch",
                                                                  "array-2x1.sbatch"]
    assert "#SBATCH --nodes=1\n" in (sweep_dir / "array-1x1.sbatch").read_text()
    again = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--no-progress")
    assert "0 ok, 0 failed, 3 skipped" in again.stdout  # nothing submitted twice


def test_a_failing_row_is_recorded_with_its_slurm_log(slurm_cluster, tmp_path, benchlib_here):
    env = {**slurm_cluster, "BENCHLIB_OUTPUTS": str(tmp_path / "out")}
    table = plan(tmp_path, "  - {trainer: ddp, dataset: mydataset, model: toynet, "
                           "path: /nonexistent/data}\n")
    swept = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--no-progress")
    # data missing where the row looks: refused before anything is queued
    assert swept.returncode == 2 and "path: /nonexistent/data has no mydataset data" in swept.stderr
    assert not (tmp_path / "out" / "slurm").exists()
    # data that passes the check but cannot be read: the row fails on its node
    data = tmp_path / "broken"
    data.mkdir()
    (data / "mydataset.npz").write_text("not an npz")
    (data / "manifest.json").write_text(json.dumps({"mydataset": {
        "source": "generated", "samples": {"train": 300}, "files": ["mydataset.npz"]}}))
    table = plan(tmp_path, "  - {trainer: ddp, dataset: mydataset, model: toynet, "
                           f"path: {data}}}\n")
    swept = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--no-progress")
    assert swept.returncode == 1 and "0 ok, 1 failed" in swept.stdout
    (record,) = [json.loads(p.read_text())
                 for p in (tmp_path / "out" / "results" / "mn_slurm").glob("*.json")]
    log = Path(record["error"]["log"])
    assert record["status"] == "failed" and log.name == "row-0.log" and log.exists()
    assert f"Slurm log: {log}" in swept.stderr
    message = record["error"]["message"]  # "rank R on nX exited with code 1; log: ..."
    assert " on n" in message and "load_mydataset" in Path(message.split("log: ")[1]).read_text()


def test_lightning_across_two_nodes_with_a_task_per_device(slurm_cluster, tmp_path):
    job_id, logs = submit_training(slurm_cluster, tmp_path, "lightning", "")
    assert wait_for(slurm_cluster, job_id) == "COMPLETED", (tmp_path / f"{job_id}.log").read_text()
    metrics = json.loads((logs / "result.json").read_text())["metrics"]
    assert metrics["world_size"] == 2 and metrics["cluster_environment"] == "SLURMEnvironment"
    assert "on n2" in (logs / "rank1.log").read_text()


def test_srun_torchrun_with_a_c10d_rendezvous_across_two_nodes(slurm_cluster, tmp_path):
    job_id, logs = submit_training(slurm_cluster, tmp_path, "ddp", "")
    assert wait_for(slurm_cluster, job_id) == "COMPLETED", (tmp_path / f"{job_id}.log").read_text()
    assert json.loads((logs / "result.json").read_text())["metrics"]["world_size"] == 2
    assert "rank 0/2 (local 0) on n1, from torchrun, master n1:" in (logs / "rank0.log").read_text()
    assert "rank 1/2 (local 0) on n2, from torchrun" in (logs / "rank1.log").read_text()


def test_a_hostile_parameter_reaches_the_worker_as_one_string(slurm_cluster, tmp_path):
    pwned = tmp_path / "pwned"
    job_id, logs = submit_training(slurm_cluster, tmp_path, "ddp",
                                   f"--path '/nowhere; touch {pwned}' --dataset mydataset "
                                   "--model toynet", nodes=1)
    assert wait_for(slurm_cluster, job_id) == "FAILED"
    assert not pwned.exists()
    assert "/nowhere; touch" in (logs / "rank0.log").read_text()  # the worker got it verbatim


def queued_jobs(env: dict[str, str]) -> set[str]:
    """The ids of the jobs in the queue, an array by its own id (`%F`): a pending array shows
    as `6_[0]` and, once started, as `6_0`, the same job (not their elapsed times, which move)."""
    return set(subprocess.run(["squeue", "-h", "-o", "%F"], env=env, capture_output=True,
                              text=True, check=True).stdout.split())


def test_a_layout_the_nodes_cannot_hold_fails_before_anything_is_submitted(slurm_cluster, tmp_path,
                                                                          benchlib_here):
    env = {**slurm_cluster, "BENCHLIB_OUTPUTS": str(tmp_path / "out")}
    queued_before = queued_jobs(env)
    table = plan(tmp_path, "  - {trainer: lightning, nproc_per_node: 8}\n")
    swept = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--no-progress")
    assert swept.returncode == 2
    assert ("devices: 8 per node asked for, but the partition's smallest node has 2 CPUs "
            "(one process each); use devices <= 2") in swept.stderr
    assert not (tmp_path / "out" / "slurm").exists()
    assert queued_jobs(env) <= queued_before  # nothing submitted (a running job's clock moves)
    rendered = benchlib_here(env, "slurm-script", "lightning", "--nodes", "2", "--devices", "3")
    assert rendered.returncode == 2 and "devices: 3 per node asked for" in rendered.stderr
    # more nodes than the partition has: sbatch would take it and leave it pending forever
    table = plan(tmp_path, "  - {trainer: ddp}\n  - {trainer: ddp, nnodes: 3}\n")
    swept = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--no-progress")
    assert swept.returncode == 2
    assert "nodes: 3 asked for, but the partition has 2; use nodes <= 2" in swept.stderr
    assert not (tmp_path / "out" / "slurm").exists()
    rendered = benchlib_here(env, "slurm-script", "ddp", "--nodes", "3", "--devices", "1")
    assert rendered.returncode == 2 and "nodes: 3 asked for" in rendered.stderr
    # checked against the partition the sweep goes to, not the default one (one node here)
    table = plan(tmp_path, "  - {trainer: ddp}\n")
    swept = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--partition", "solo",
                     "--no-progress")
    assert swept.returncode == 2
    assert "nodes: 2 asked for, but the partition has 1; use nodes <= 1" in swept.stderr
    assert not (tmp_path / "out" / "slurm").exists()
    assert queued_jobs(env) <= queued_before  # nothing submitted (a running job's clock moves)
    rendered = benchlib_here(env, "slurm-script", "lightning", "--nodes", "2", "--devices", "2",
                        "--ntasks-per-node", "1", "--submit")
    assert rendered.returncode == 2 and rendered.stdout == ""
    assert rendered.stderr.strip() == ("benchlib slurm-script: ntasks_per_node: 1 with devices 2: "
                                       "Lightning "
                                       "under Slurm starts one task per device; set "
                                       "ntasks-per-node = 2")


def test_an_elastic_run_across_two_nodes_survives_a_killed_rank(slurm_cluster, tmp_path):
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    args = (f"--dummy --dummy-size 512 --model toynet --epochs 1 --max-steps 12 --batch-size 16 "
            f"--checkpoint-every 4 --checkpoints-path {ckpt} --resume-or-start --fail-at-step 6 "
            f"--fail-rank 1 --device cpu --timeout 60 --log-dir {logs} --result {logs}/result.json")
    rendered = benchlib(slurm_cluster, "slurm-script", "elastic", "--nodes", "2", "--devices", "1",
                        "--max-restarts", "1", "--output", str(tmp_path / "%j.log"),
                        "--worker-args", args, "--submit")
    job_id = rendered.stdout.strip()
    assert wait_for(slurm_cluster, job_id) == "COMPLETED", (tmp_path / f"{job_id}.log").read_text()
    metrics = json.loads((logs / "result.json").read_text())["metrics"]
    assert metrics["world_size"] == 2 and metrics["final_step"] == 12
    assert metrics["restarts"] == 1 and metrics["steps_redone"] == 2  # killed after 6, resumed at 4
    assert "on n2" in (logs / "rank1.log").read_text()  # the killed rank lived on the other node


def test_a_refused_submission_leaves_no_plan_behind(slurm_cluster, tmp_path, benchlib_here):
    env = {**slurm_cluster, "BENCHLIB_OUTPUTS": str(tmp_path / "out")}
    table = plan(tmp_path, "  - {trainer: ddp}\n")
    swept = benchlib_here(env, "sweep", str(table), "--executor", "slurm", "--partition", "nosuch",
                     "--no-progress")
    assert swept.returncode == 1
    assert swept.stderr.strip().splitlines()[-1] == (
        "benchlib sweep: sbatch --parsable failed (1): sbatch: error: Batch job submission "
        "failed: Invalid partition name specified")
    assert list((tmp_path / "out" / "slurm").iterdir()) == []


def test_a_row_an_earlier_sweep_still_has_queued_is_not_submitted_again(slurm_cluster, tmp_path):
    """The poller stopped (Ctrl-C, a lost login) while its array waits: running the sweep
    again must not queue the row a second time (two tasks would run it into one set of files)."""
    env = {**slurm_cluster, "BENCHLIB_OUTPUTS": str(tmp_path / "out")}
    slurm_dir = tmp_path / "out" / "slurm"
    blocker = subprocess.run(  # both nodes busy, so the sweep's array stays pending
        ["sbatch", "--parsable", "--nodes", "2", "--exclusive", "--output", "/dev/null",
         "--wrap", "sleep 120"], cwd=tmp_path, env=env, capture_output=True, text=True,
        check=True).stdout.strip().split(";")[0]
    table = plan(tmp_path, "  - {trainer: ddp}\n")
    first = subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", str(table), "--executor",
                              "slurm", "--no-progress"], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    job_ids: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not list(slurm_dir.glob("*/job_ids")):
            assert first.poll() is None and time.monotonic() < deadline, "nothing submitted"
            time.sleep(0.2)
        first.kill()  # its poller is gone; its array is still queued
        first.wait()
        job_ids = next(slurm_dir.glob("*/job_ids")).read_text().split()
        again = benchlib(env, "sweep", str(table), "--executor", "slurm", "--no-progress")
        assert again.returncode == 0, again.stdout + again.stderr
        assert (f"1 row(s) already queued or running in Slurm job(s) {job_ids[0]} of an earlier "
                "sweep: not submitted again") in again.stderr
        assert "0 ok, 0 failed, 0 skipped, 1 done or running in another sweep" in again.stdout
        assert len(list(slurm_dir.iterdir())) == 1  # no second submission
    finally:
        subprocess.run(["scancel", blocker, *job_ids], env=env)


def test_a_failing_sinfo_is_said_not_silently_skipped(tmp_path, monkeypatch, capsys):
    from benchlib.slurm.capacity import node_capacity

    shim = tmp_path / "sinfo"  # what sinfo prints while the controller is down
    shim.write_text("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller "
                    "(connect failure)' >&2\nexit 1\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert node_capacity("debug") is None
    assert capsys.readouterr().err == (
        "benchlib: partition capacity not checked (sinfo failed: slurm_load_partitions: Unable "
        "to contact slurm controller (connect failure)); sbatch will judge the layout\n")


def test_doctor_health_over_srun_names_the_slowed_rank_by_its_node(slurm_cluster, tmp_path):
    """`doctor --health --launcher srun` inside an allocation: a rank on each node, the
    node pair's all-reduce, and the rank slowed on purpose named by its Slurm node."""
    done = subprocess.run(
        ["salloc", "--nodes", "2", "--time", "5", sys.executable, "-m", "benchlib", "doctor",
         "--device", "cpu", "--health", "--launcher", "srun", "--nproc", "1", "--slow-rank", "1",
         "--slow-factor", "3", "--timeout", "180", "--outputs", str(tmp_path / "out")],
        cwd=ROOT, env={**slurm_cluster, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^doctor: OK world_size=2 backend=gloo .* hosts=n1,n2 ", done.stdout, re.M)
    assert re.search(r"^doctor: all-reduce 4 MiB between n1 and n2 \(ranks 0, 1\): busbw "
                     r"[0-9.e+-]+ GB/s$", done.stdout, re.M)
    slow = [line for line in done.stdout.splitlines() if line.startswith("doctor: slow device")]
    assert len(slow) == 1 and re.fullmatch(r"doctor: slow device: rank 1 on n2 \(cpu\): \S+ "
                                           r"TFLOP/s, \d+% below the median \S+", slow[0]), slow
    record = json.loads(Path(re.search(r"^record: (.+)$", done.stdout, re.M).group(1)).read_text())
    assert (record["params"]["launcher"], record["params"]["nnodes"]) == ("srun", 2)
    health = record["testbed"]["health"]
    assert [(d["rank"], d["host"]) for d in health["devices"]] == [(0, "n1"), (1, "n2")]
    assert [p["hosts"] for p in health["pairs"]] == [["n1", "n2"]]
    assert [(o["kind"], o["name"]) for o in health["outliers"]] == [("device", "rank 1 on n2 (cpu)")]


def test_allreduce_over_srun_takes_one_rank_on_each_of_two_nodes(slurm_cluster, tmp_path):
    """One rank per node is a valid all-reduce (2 ranks in all), measured across the nodes."""
    done = subprocess.run(
        ["salloc", "--nodes", "2", "--time", "5", sys.executable, "-m", "benchlib", "allreduce",
         "--device", "cpu", "--launcher", "srun", "--nproc", "1", "--max-bytes", "65536",
         "--iters", "2", "--timeout", "180", "--outputs", str(tmp_path / "out")],
        cwd=ROOT, env={**slurm_cluster, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^peak busbw [0-9.]+ GB/s at \d+ B, 2 ranks, gloo$", done.stdout, re.M)
    record = json.loads(Path(re.search(r"^record: (.+)$", done.stdout, re.M).group(1)).read_text())
    assert (record["params"]["nnodes"], record["params"]["nproc_per_node"]) == (2, 1)
    assert record["metrics"]["busbw_gbps"] > 0

"""Real processes on CPU: torchrun, mp.spawn and tcp:// ranks with gloo."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from benchlib.errors import LaunchError, UsageError
from benchlib.launch.launcher import free_port, launch
from benchlib.launch.supervise import start as start_process
from benchlib.launch.supervise import supervise
from benchlib.workers.allreduce import bus_factor
from benchlib.workers.bootstrap import ABORT_AT_EXIT, ABORT_IN_INIT_ONCE

pytestmark = pytest.mark.distributed


def train_args(small_data, *extra):
    return ["--path", str(small_data), "--dataset", "mydataset", "--model", "toynet",
            "--batch-size", "16", "--max-steps", "6", "--warmup-steps", "2", "--device", "cpu",
            "--timeout", "60", *extra]


@pytest.fixture(scope="module")
def retried_run(small_data, tmp_path_factory):
    """launcher -> (its launch, its folder): the two-rank DDP run of train_args whose rank 1
    crashes (SIGABRT) inside init_process_group on the first attempt, launched once per
    launcher and read by two tests: test_a_rank_that_crashes_while_joining_is_retried_once,
    and test_two_rank_ddp_runs_with_each_launcher, which reads the second attempt. That
    attempt is the plain run: the launcher starts every rank again, on its logs cleared
    (_clear_logs), with the marker file there so that no rank aborts; the retry test checks
    that exactly that happened (one retry, of rank 1's injected abort)."""
    runs = {}

    def run(launcher: str):
        if launcher not in runs:
            folder = tmp_path_factory.mktemp(f"retried-{launcher}")
            once = folder / "aborted-once"
            out = launch("ddp", train_args(small_data), folder / "logs", launcher, nproc=2,
                         timeout_s=120, env={**os.environ, ABORT_IN_INIT_ONCE: str(once)})
            runs[launcher] = (out, folder)
        return runs[launcher]

    return run


@pytest.mark.parametrize("launcher", ["torchrun", "mp_spawn", "tcp"])
def test_two_rank_ddp_runs_with_each_launcher(small_data, tmp_path, launcher, retried_run):
    if launcher == "mp_spawn":  # mp.spawn's parent does not retry a joining crash: a plain run
        out = launch("ddp", train_args(small_data), tmp_path / "logs", launcher, nproc=2,
                     timeout_s=120)
        logs = tmp_path / "logs"
    else:
        out, folder = retried_run(launcher)
        logs = folder / "logs"
    m = out.result["metrics"]
    assert m["world_size"] == 2 and m["backend_used"] == "gloo" and m["global_batch"] == 32
    assert m["samples_per_s"] > 0 and m["threads_per_rank"] == 1  # 2 cores / 2 ranks
    assert (m["topology"], m["host_count"]) == ("one host", 1)  # both ranks here: loopback
    for rank in (0, 1):
        log = (logs / f"rank{rank}.log").read_text()
        assert f"rank {rank}/2 (local {rank})" in log  # on a 2-GPU host: GPU 0 and GPU 1
    if launcher == "torchrun":  # the agent's own files stay with the run, not in /tmp
        assert list((logs / "torchrun").glob("*/attempt_0"))


def test_a_failing_rank_stops_the_run_is_named_with_its_log_and_is_never_retried(small_data,
                                                                               tmp_path):
    """A rank that fails after joining (at step 3, an exception) ends the run at once, is
    the one named, and is not started again as a crash while joining would be."""
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:  # a later --timeout wins over train_args' 60
        launch("ddp", train_args(small_data, "--fail-at-step", "3", "--fail-rank", "1",
                                 "--timeout", "300"),
               tmp_path / "logs", "torchrun", nproc=2, timeout_s=300)
    err = info.value
    # the failure stopped the run: rank 0 waiting out its 300 s collective timeout, or
    # launch its own 300 s, would take longer; 150 s leaves start-up room on shared cores
    assert time.monotonic() - start < 150
    assert err.rank == 1 and err.exit_code == 1 and err.host == socket.gethostname()
    assert err.log_path == tmp_path / "logs" / "rank1.log"
    assert "injected failure at step 3 on rank 1" in err.log_path.read_text()
    assert not (tmp_path / "logs" / "retries.log").exists()  # it joined: never retried
    # the rank's last exception line, as its console and the record's error get it
    assert str(err).startswith(f"rank 1 on {socket.gethostname()} exited with code 1: "
                               "InjectedFailure: injected failure at step 3 on rank 1; log: ")

    def left():
        return [p for p in psutil.process_iter(["cmdline", "status"])
                if str(tmp_path / "logs") in " ".join(p.info["cmdline"] or [])
                and p.info["status"] != psutil.STATUS_ZOMBIE]

    deadline = time.monotonic() + 15  # torchrun's agent stops its workers itself
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == []  # rank 0, waiting in a collective, was stopped too


@pytest.mark.parametrize("launcher", ["torchrun", "tcp"])
def test_a_killed_rank_is_named_not_the_rank_it_left_failing(small_data, tmp_path, launcher):
    """SIGKILL (the OOM killer) leaves no mark; rank 0 then fails in gloo and leaves one."""
    with pytest.raises(LaunchError) as info:
        launch("ddp", train_args(small_data, "--fail-at-step", "3", "--fail-rank", "1",
                                 "--fail-how", "kill"),
               tmp_path / "logs", launcher, nproc=2, timeout_s=120)
    err = info.value
    assert (err.rank, err.exit_code) == (1, -9), str(err)
    assert str(err).startswith(f"rank 1 on {socket.gethostname()} exited with code -9; log: ")
    assert "injected failure: rank 1 kills itself" in err.log_path.read_text()


def test_a_failing_tcp_rank_is_named(small_data, tmp_path):
    with pytest.raises(LaunchError, match=r"rank 0 on .* exited with code 1: InjectedFailure: "
                                          r"injected failure at step 2 on rank 0; log: .*rank0.log"):
        launch("ddp", train_args(small_data, "--fail-at-step", "2", "--fail-rank", "0"),
               tmp_path / "logs", "tcp", nproc=2, timeout_s=120)


def test_a_run_past_its_timeout_is_stopped(tmp_path):
    log = tmp_path / "sleep.log"
    proc = start_process([sys.executable, "-c", "import time; time.sleep(60)"], log, "sleeper", 0, None)
    start = time.monotonic()
    with pytest.raises(LaunchError, match="timed out after 1 s; stopped all ranks"):
        supervise([proc], tmp_path, timeout_s=1)
    # the 1 s timeout and a SIGTERM the sleeper dies of: not its 60 s sleep, nor the
    # 35 s that stop() grants a process that ignores SIGTERM
    assert time.monotonic() - start < 30 and proc.popen.poll() is not None


def test_a_port_in_use_or_out_of_range_is_refused_before_launch(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"port: {busy} is in use on 127.0.0.1"):
            launch("doctor", [], tmp_path, "torchrun", nproc=2, port=busy)
    with pytest.raises(UsageError, match="port: must be in 1024-65535, got 99999"):
        launch("doctor", [], tmp_path, "torchrun", nproc=2, port=99999)
    with pytest.raises(UsageError, match="nproc: must be >= 1, got 0"):
        launch("doctor", [], tmp_path, "torchrun", nproc=0)
    assert not (tmp_path / "launcher.log").exists()


def test_doctor_checks_the_sum_through_torchrun_and_tcp_and_a_rerun_reads_no_old_logs(tmp_path):
    """The torchrun launch goes into a folder where a failed run left its logs (a rank 7
    that failed with exit code 3): that launch must not read them, and the sum is the same
    whatever a folder held before."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "launcher.log").write_text(
        "host : old\n rank : 7 (local_rank: 7)\n exitcode : 3\n")
    (tmp_path / "a" / "rank7.log").write_text("old failure")
    out = launch("doctor", ["--device", "cpu"], tmp_path / "a", "torchrun", nproc=2,
                 timeout_s=60)
    assert not (tmp_path / "a" / "rank7.log").exists()
    assert "exitcode : 3" not in (tmp_path / "a" / "launcher.log").read_text()
    assert out.result["metrics"]["ok"] is True and out.result["metrics"]["latency_s"] > 0
    assert "all_reduce sum=3.0 expected=3.0" in out.result["details"]["line"]
    port = free_port()
    ranks = [subprocess.Popen([sys.executable, "-m", "benchlib", "doctor", "--init-method",
                               f"tcp://127.0.0.1:{port}", "--rank", str(r), "--world-size", "2",
                               "--device", "cpu", "--timeout", "60"],
                              stdout=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=90)[0] for p in ranks]
    assert all(p.returncode == 0 for p in ranks)
    assert all("doctor: OK world_size=2 backend=gloo" in o for o in outs)


def test_allreduce_reports_busbw_as_nccl_tests_define_it(tmp_path):
    # tcp ranks, not torchrun's: the figures are the subject, not the launcher (no agent)
    out = launch("allreduce", ["--device", "cpu", "--max-bytes", str(2**18), "--iters", "3"],
                 tmp_path, "tcp", nproc=2, timeout_s=60)
    sizes = out.result["details"]["sizes"]
    assert [r["bytes"] for r in sizes] == [1024, 4096, 16384, 65536, 262144]
    for r in sizes:
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * bus_factor(2))
    assert bus_factor(2) == 1.0 and bus_factor(8) == pytest.approx(1.75)


@pytest.mark.parametrize("extra, message", [
    (["--max-bytes", "512"], "max_bytes: must be >= 1024, got 512"),
    (["--iters", "0"], "iters: must be >= 1, got 0"),
    (["--nproc", "1"], "nproc: all-reduce needs at least 2 ranks, got 1"),
    (["--device", "cpu", "--backend", "nccl"], "backend: nccl needs CUDA devices"),
])
def test_cli_allreduce_bad_input_exits_2_before_launch(tmp_path, capsys, extra, message):
    from benchlib.cli import main

    assert main(["allreduce", "--outputs", str(tmp_path / "out"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "logs").exists()


def test_ranks_die_with_the_process_that_launched_them(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from pathlib import Path
from benchlib.launch.supervise import start

p = start([sys.executable, "-c", "import time; time.sleep(120)"],
          Path({str(tmp_path / 'child.log')!r}), "child", 0, None)
print(p.popen.pid, flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert psutil.pid_exists(child)
    parent.kill()  # SIGKILL: no chance to clean up, like a kernel killed by a timeout
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the launched process outlived its launcher")


@pytest.mark.parametrize("launcher", ["torchrun", "tcp"])
def test_a_rank_that_crashes_while_joining_is_retried_once(launcher, retried_run):
    out, folder = retried_run(launcher)
    assert (folder / "aborted-once").exists() and out.result["metrics"]["launch_retries"] == 1
    retries = (folder / "logs" / "retries.log").read_text()
    assert "attempt 1: rank 1 on" in retries and "exited with code -6" in retries


def test_a_rank_that_crashes_in_teardown_after_the_result_keeps_the_run(small_data, tmp_path):
    out = launch("ddp", train_args(small_data), tmp_path / "logs", "tcp", nproc=2,
                 timeout_s=120, env={**os.environ, ABORT_AT_EXIT: "1"})
    m = out.result["metrics"]
    assert m["world_size"] == 2 and m["samples_per_s"] > 0 and m["launch_retries"] == 0
    assert m["teardown_crash"].startswith("rank 1 on ") and "exited with code -6" in m["teardown_crash"]
    assert "after rank 0 wrote its result: run kept" in (tmp_path / "logs" / "teardown.log").read_text()


TORCHRUN_SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
benchlib.workers.ddp FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_10:00:01
  host      : vm
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 202)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_10:00:01
  host      : vm
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 201)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 201
============================================================
"""


def test_the_rank_torchrun_stopped_with_sigterm_is_never_blamed(tmp_path):
    """Seen once under load: torchrun observed rank 0 (which it had SIGTERMed because rank 1
    failed) first, and the error blamed rank 0."""
    import json
    import subprocess

    from benchlib.launch import supervise

    log = tmp_path / "launcher.log"
    log.write_text(TORCHRUN_SUMMARY)
    (tmp_path / "rank1.failed").write_text(json.dumps({"time": 1.0, "host": "vm", "error": "x"}))
    (tmp_path / "rank1.log").write_text("rank 1/2 (local 1) on vm, from torchrun\n")
    agent = subprocess.Popen(["sh", "-c", "exit 1"])
    agent.wait()
    rank, host, code, path = supervise._failed_rank(
        supervise.Process("torchrun agent", None, agent, log), tmp_path)
    assert (rank, host, code, path) == (1, "vm", 1, tmp_path / "rank1.log")


def _doctor_as_rank(rank: int, port: int) -> subprocess.CompletedProcess:
    """`benchlib doctor` as one rank of two at tcp://127.0.0.1:PORT, with a 3 s timeout."""
    return subprocess.run([sys.executable, "-m", "benchlib", "doctor", "--init-method",
                           f"tcp://127.0.0.1:{port}", "--rank", str(rank), "--world-size", "2",
                           "--timeout", "3", "--device", "cpu"],
                          capture_output=True, text=True, timeout=120)


def test_a_tcp_rank_whose_port_never_answers_ends_after_its_timeout_with_one_line():
    """Something that accepts connections and never speaks holds the port: torch's own
    timeout does not end that wait; the join's watchdog does, saying what it waited for."""
    with socket.socket() as deaf:
        deaf.bind(("127.0.0.1", 0))
        deaf.listen(8)
        port = deaf.getsockname()[1]
        done = _doctor_as_rank(1, port)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"rank 1: no process group at 127.0.0.1:{port} within 3 s (timeout): the other 1 "
        "rank(s) never joined, or something that is not a rendezvous holds that port")


def test_rank_0_whose_port_is_taken_says_so_in_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _doctor_as_rank(0, port)
    assert done.returncode == 2
    assert done.stderr == (f"benchlib.workers.doctor: init_method: port {port} on 127.0.0.1 is "
                           "already in use, so rank 0 cannot host the rendezvous there; pick a "
                           "free port (tcp://HOST:PORT, --port or MASTER_PORT)\n")


def test_the_test_only_faults_are_not_worker_flags():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "benchlib.workers.ddp", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--abort" not in out and "--fail-at-step" in out  # notebook 35 uses --fail-at-step


def test_a_plain_worker_refusing_its_input_says_one_line_with_exit_2_and_a_marker(tmp_path):
    """The bootstrap every worker shares: a BenchlibError inside the work is one line
    (in the rank's log and on the terminal), the rank's failure marker, exit 2, no result."""
    done = subprocess.run([sys.executable, "-m", "benchlib.workers.allreduce", "--device", "cpu",
                           "--log-dir", str(tmp_path), "--result", str(tmp_path / "result.json")],
                          capture_output=True, text=True, timeout=120, check=False)
    line = ("benchlib.workers.allreduce: world_size: all-reduce bandwidth needs at least 2 "
            "ranks (or one with --group-of-one: busbw is then 0, algbw the local copy)\n")
    assert done.returncode == 2 and done.stderr == line, done.stdout + done.stderr
    log = (tmp_path / "rank0.log").read_text()
    assert log.startswith("rank 0/1 (local 0) on ") and log.endswith(line)
    assert "Traceback" not in log
    marker = json.loads((tmp_path / "rank0.failed").read_text())
    assert marker["error"].startswith("ConfigError: world_size: all-reduce bandwidth needs")
    assert not (tmp_path / "result.json").exists()


# ---------------------------------------------------------------- preemption, every door

def _cli_allreduce(tmp_path) -> subprocess.Popen:
    """`benchlib allreduce` over 2 torchrun ranks that would run for minutes, once both
    ranks are measuring."""
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "allreduce", "--nproc", "2",
                             "--device", "cpu", "--max-bytes", "1024", "--iters", "10000000",
                             "--timeout", "120", "--outputs", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = list((tmp_path / "out" / "logs").glob("*/rank1.log"))
        if logs and "joined the process group" in logs[0].read_text():
            return proc
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the ranks never started")


def _agent_of(proc: subprocess.Popen) -> psutil.Process | None:
    """The torchrun agent the command started (None: not yet)."""
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "benchlib.launch.agent" in " ".join(child.cmdline()):
                return child
        except psutil.Error:  # gone, or a zombie, meanwhile
            continue
    return None


def _left_behind(tmp_path) -> list[str]:
    """Processes still running whose command line names this test's folder."""
    time.sleep(1)
    left = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(p.info["cmdline"] or [])
            if str(tmp_path) in line and p.status() != psutil.STATUS_ZOMBIE:
                left.append(line)
        except psutil.Error:
            continue
    return left


def test_cli_allreduce_given_sigterm_stops_its_ranks_and_exits_75_in_one_line(tmp_path):
    """Slurm's notice before it ends a job, to the command itself: 75 ("run it again") as
    the docs say, not 143; its ranks stopped; no record; and no checkpoint claimed."""
    proc = _cli_allreduce(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "benchlib allreduce: stopped by SIGTERM (preempted): what it started was stopped, "
        "nothing was recorded and there is no checkpoint; exit 75: run it again")
    assert not list((tmp_path / "out" / "results").glob("*/*.json"))
    assert _left_behind(tmp_path) == []


def test_an_allreduce_agent_given_sigterm_claims_no_checkpoint(tmp_path):
    """Only the torchrun agent gets SIGTERM: it and the command exit 75, and neither says
    the ranks wrote a checkpoint (allreduce keeps none)."""
    proc = _cli_allreduce(tmp_path)
    agent = _agent_of(proc)
    agent.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "wrote a checkpoint" not in err
    assert last.startswith("benchlib allreduce: torchrun agent on ")
    assert "was preempted (SIGTERM); its ranks stopped without a checkpoint: run it again; " \
        "log: " in last
    said = next((tmp_path / "out" / "logs").glob("*/launcher.log")).read_text().strip()
    assert said.splitlines()[-1] == ("torchrun: stopped by SIGTERM (preempted); its ranks "
                                     "stopped without a checkpoint; exit 75: run it again")
    assert _left_behind(tmp_path) == []


def test_doctor_as_rank_0_of_two_alone_ends_with_one_line_after_its_timeout():
    """The other rank never starts: rank 0, hosting the rendezvous, says how many joined
    and what to start, not torch's DistStoreError traceback."""
    port = free_port()
    done = _doctor_as_rank(0, port)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"benchlib.workers.doctor: rank 0: no process group at 127.0.0.1:{port} within 3 s: "
        f"1 of 2 ranks joined; start the other rank(s) with --init-method "
        f"tcp://127.0.0.1:{port} --world-size 2 --rank R, and check that 127.0.0.1:{port} "
        "is reachable from their hosts")


def test_doctor_as_rank_1_with_no_rank_0_ends_with_one_line_after_its_timeout():
    port = free_port()  # nothing listens there
    done = _doctor_as_rank(1, port)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    # torch's connect retries give up after the timeout; on a loaded machine the join's
    # watchdog (5 s later) has been seen to speak first: one line either way
    assert done.stderr.strip().splitlines()[-1] in (
        f"benchlib.workers.doctor: rank 1: nothing answered at 127.0.0.1:{port} within 3 s: "
        "start rank 0 there (it hosts the rendezvous), and check that 127.0.0.1:"
        f"{port} is reachable from this host",
        f"rank 1: no process group at 127.0.0.1:{port} within 3 s (timeout): the other 1 "
        "rank(s) never joined, or something that is not a rendezvous holds that port")


def test_an_agent_given_sigterm_before_it_can_handle_it_is_a_preemption_not_retried(tmp_path):
    """SIGTERM while the agent is still importing torch ends it with -15 (no handler yet):
    that is a preemption too (75), not a crash while joining to start again."""
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "allreduce", "--nproc", "2",
                             "--device", "cpu", "--max-bytes", "1024", "--timeout", "120",
                             "--outputs", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    agent = None
    while agent is None and time.monotonic() < deadline:
        agent = _agent_of(proc)
        time.sleep(0.01)
    assert agent is not None, proc.communicate()
    agent.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert "Traceback" not in err and not list((tmp_path / "out" / "logs").glob("*/retries.log"))
    assert "was preempted (SIGTERM); its ranks stopped without a checkpoint: run it again" \
        in err.strip().splitlines()[-1]

"""The elastic trainer with real processes on CPU: a rank killed mid-run under torchrun
--max-restarts, SIGTERM (preemption), corrupted checkpoints, and bad input.

Tolerance: the interrupted run resumes the exact state (weights, momentum, LR schedule,
RNG states, data order from the same batch of the same epoch), and two gloo ranks
all-reduce in a fixed order, so its losses are expected to be bit-identical to the
uninterrupted run's; the tests allow 1e-6 relative."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlib.core.models import ToyNet
from benchlib.errors import PREEMPTED_EXIT_CODE
from benchlib.launch.argv import torchrun_argv
from benchlib.launch.launcher import free_port
from benchlib.trainers import checkpoint, elastic_timeline

pytestmark = pytest.mark.distributed

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
PROG = "benchlib.workers.elastic"
REL = 1e-6


def fashion_args(small_data, out: Path, *extra: str) -> list[str]:
    """2 ranks x 16 samples, 10 steps per epoch, 2 epochs, a checkpoint every 4 steps and
    at each epoch's end (steps 4, 8, 10, 12, 16, 20), validation on the test split; the
    folder by seed 001's spelling of the flag (`--checkpoints-path`)."""
    return ["--dataset", "fashion-mnist", "--path", str(small_data), "--val-path", str(small_data),
            "--model", "toynet", "--batch-size", "16", "--max-steps", "10", "--epochs", "2",
            "--checkpoint-every", "4", "--lr", "0.05", "--lr-schedule", "cosine", "--seed", "3",
            "--device", "cpu", "--log-interval", "0", "--timeout", "60",
            "--checkpoints-path", str(out / "ckpt"), "--log-dir", str(out / "logs"),
            "--result", str(out / "result.json"), *extra]


def dummy_args(out: Path, *extra: str) -> list[str]:
    return ["--dummy", "--model", "toynet", "--dummy-size", "96", "--batch-size", "16",
            "--epochs", "1", "--checkpoint-every", "2", "--device", "cpu", "--log-interval", "0",
            "--checkpoint-path", str(out / "ckpt"), "--log-dir", str(out / "logs"),
            "--result", str(out / "result.json"), *extra]


def torchrun(args: list[str], max_restarts: int) -> subprocess.CompletedProcess:
    argv = torchrun_argv("elastic", args, 2, free_port(), max_restarts=max_restarts)
    return subprocess.run(argv, check=False, env=ENV, capture_output=True, text=True, timeout=240)


def worker(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", PROG, *args], check=False, env=ENV,
                          capture_output=True, text=True, timeout=120)


def steps(result: dict, attempt: int | None = None) -> dict[int, float]:
    """step -> loss, of one attempt or of the last attempt that ran each step."""
    return {e["step"]: e["loss"] for e in result["details"]["timeline"]
            if e["event"] == "step" and attempt in (None, e["attempt"])}


def wait_for_steps(folder: Path, n: int, proc: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        events = elastic_timeline.read_timeline(folder / elastic_timeline.TIMELINE)
        if sum(e["event"] == "step" for e in events) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {n} steps within {timeout_s} s (exit code {proc.poll()})")


@pytest.fixture(scope="module")
def uninterrupted(small_data, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("uninterrupted")
    done = torchrun(fashion_args(small_data, out), max_restarts=0)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "result.json").read_text()), out


def single_args(out: Path, *extra: str) -> list[str]:
    """dummy_args as notebook 35 spells the data set (`--dataset dummy`, not `--dummy`),
    with notebook 35's fault injection: 150 ms more per step on rank 0, slow_epoch (1x in
    the first and only epoch)."""
    return ["--dataset", "dummy", *(a for a in dummy_args(out) if a != "--dummy"),
            "--inject-step-delay-ms", "150", "--delay-rank", "0",
            "--inject-delay-pattern", "slow_epoch", *extra]


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> Path:
    """A finished one-process run (single_args): checkpoints of steps 4 and 6 are kept,
    its result in result.json. One launch for the tests of `--dataset dummy`, of the
    injected delay, of a finished run launched again and of the checkpoints it leaves:
    the delay only slows the steps (no checkpoint, loss or position depends on it), and
    `--dataset dummy` is `--dummy` (the checkpoints record the data set as "dummy" either
    way), so the tests that resume or refuse its checkpoints with `--dummy` read them as
    they would a plain `--dummy` run's."""
    out = tmp_path_factory.mktemp("single")
    done = worker(single_args(out))
    assert done.returncode == 0, done.stderr[-2000:]
    return out


# ---------------------------------------------------------------- restarts


def test_a_killed_rank_is_restarted_resumes_and_ends_with_the_uninterrupted_loss(
        small_data, tmp_path, uninterrupted):
    clean, _ = uninterrupted
    done = torchrun(fashion_args(small_data, tmp_path, "--fail-at-step", "15", "--fail-rank", "1"),
                    max_restarts=1)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "failed (exitcode:" in done.stderr  # torchrun saw the attempt fail (rank 0 or 1 first)
    result = json.loads((tmp_path / "result.json").read_text())
    m = result["metrics"]
    assert m["restarts"] == 1 and m["attempts"] == 2
    assert m["steps_redone"] == 15 - 12  # the last checkpoint before step 15 is step 12
    assert [r["cause"] for r in result["details"]["restarts"]] == ["failure"]
    assert m["recovery_s"] > 0 and m["final_step"] == clean["metrics"]["final_step"] == 20
    assert m["loss_last"] == pytest.approx(clean["metrics"]["loss_last"], rel=REL)
    # every step, the redone ones included, took the loss the uninterrupted run took
    reference, first, second = steps(clean), steps(result, 0), steps(result, 1)
    assert sorted(first) == list(range(1, 16)) and sorted(second) == list(range(13, 21))
    assert first == pytest.approx({s: reference[s] for s in first}, rel=REL)
    assert second == pytest.approx({s: reference[s] for s in second}, rel=REL)
    assert m["best_acc1_pct"] == pytest.approx(clean["metrics"]["best_acc1_pct"], rel=REL)
    # memory as the DDP trainer reports it: the window's peak RSS (a CPU), fp32 parameters
    assert m["peak_rss_bytes"] > 0 and m["peak_bytes"] == m["peak_rss_bytes"]
    assert m["param_bytes"] == 4 * m["model_params"] and m["other_bytes"] > 0
    rank1 = (tmp_path / "logs" / "rank1.log").read_text()  # appended by both attempts
    assert "injected failure: rank 1 kills itself after step 15" in rank1
    assert "resumed from" in rank1 and "step-00000012.pt: step 12, epoch 1, batch 2" in rank1
    assert not list((tmp_path / "logs").glob("rank*.failed"))  # the recovered failure is not blamed
    assert [p.name for p in checkpoint.listed(tmp_path / "ckpt")] == ["step-00000020.pt",
                                                                       "step-00000016.pt"]


def test_a_rank_killed_during_an_async_save_resumes_from_the_checkpoint_before_it(
        small_data, tmp_path, uninterrupted):
    """dcp_async, rank 1 killed inside its background write of step 12's checkpoint: that
    checkpoint is left partial and never taken; torchrun restarts the ranks, they resume
    from step 10's, and end where the uninterrupted (torch.save) run ended."""
    clean, _ = uninterrupted
    done = torchrun(fashion_args(small_data, tmp_path, "--checkpoint", "dcp_async",
                                 "--fail-at-step", "12", "--fail-rank", "1"), max_restarts=1)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    m = result["metrics"]
    assert m["restarts"] == 1 and m["resumed_from_step"] == 10
    # training went on beside the write: rank 1 died a step or two past 12, all redone from 10
    [row] = result["details"]["restarts"]
    assert row["last_step_before"] >= 12 and m["steps_redone"] == row["last_step_before"] - 10
    rank1, rank0 = ((tmp_path / "logs" / f"rank{r}.log").read_text() for r in (1, 0))
    assert "injected failure: rank 1 killed during the asynchronous save of step 12" in rank1
    assert re.search(r"removed \S+step-00000012, left by a writer that was killed", rank0)
    assert "step-00000010: step 10, epoch 1, batch 0" in rank0  # never the partial step 12
    saved = [(e["attempt"], e["step"]) for e in result["details"]["timeline"]
             if e["event"] == "checkpoint"]
    assert saved == [(0, 4), (0, 8), (0, 10), (1, 12), (1, 16), (1, 20)]
    assert m["loss_last"] == pytest.approx(clean["metrics"]["loss_last"], rel=REL)
    assert steps(result, 1) == pytest.approx({s: steps(clean)[s] for s in range(11, 21)}, rel=REL)
    found = checkpoint.latest(tmp_path / "ckpt")
    assert (found.step, found.kind) == (20, "dcp")
    assert m["checkpoint_mode"] == "dcp_async" and m["checkpoints_written"] == 6
    assert m["restore_s"] > 0 and 0 < m["first_step_after_restart_s"] < m["recovery_s"]
    assert m["checkpoint_total_s_n"] == 6 and m["checkpoint_blocking_s"] > 0


def test_sigterm_to_one_rank_stops_both_at_one_step_torchrun_exits_75_and_the_resume_redoes_nothing(
        small_data, tmp_path):
    """torchrun (no restarts) over 2 ranks, SIGTERM to rank 1 only: both stop at the same
    step boundary and exit 75, and so does torchrun, with its one line; launched again as
    that line says (`--resume`), the run redoes no step and finishes. One launch for what
    torchrun says of preempted ranks and for what the ranks do (a torchrun restart after a
    preemption resumes by the same checkpoint as a relaunch; the restarts that torchrun
    itself makes are the killed-rank tests')."""
    args = fashion_args(small_data, tmp_path, "--epochs", "6", "--max-steps", "0",
                        "--checkpoint-every", "0")
    argv = torchrun_argv("elastic", args, 2, free_port(), max_restarts=0)
    proc = subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for_steps(tmp_path / "ckpt", 3, proc)
        rank1 = re.search(r"pid (\d+)", (tmp_path / "logs" / "rank1.log").read_text())[1]
        os.kill(int(rank1), signal.SIGTERM)  # rank 0 is not told: it learns at the step boundary
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == PREEMPTED_EXIT_CODE, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("torchrun: ")
    assert "run it again to resume" in err.strip().splitlines()[-1]
    assert checkpoint.latest(tmp_path / "ckpt") is not None  # and the ranks checkpointed
    logs = [(tmp_path / "logs" / f"rank{r}.log").read_text() for r in (0, 1)]
    stopped = [int(re.search(r"preempted at step (\d+)", log)[1]) for log in logs]
    assert stopped[0] == stopped[1]
    assert "exiting with code 75" in logs[0] and "exiting with code 75" in logs[1]

    done = torchrun(fashion_args(small_data, tmp_path, "--epochs", "6", "--max-steps", "0",
                                 "--checkpoint-every", "0", "--resume"), max_restarts=0)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    [restart] = result["details"]["restarts"]
    assert restart["cause"] == "preempted" and restart["steps_redone"] == 0
    assert restart["resumed_from_step"] == restart["last_step_before"] == stopped[0]
    assert result["metrics"]["final_step"] == 6 * 19  # 600 samples / 2 ranks / 16 per batch


def test_sigterm_writes_a_checkpoint_at_the_logged_step_exits_75_and_resume_finishes(tmp_path):
    args = dummy_args(tmp_path, "--dummy-size", "8000", "--checkpoint-every", "0",
                      "--resume-or-start")  # an empty folder: starts fresh
    proc = subprocess.Popen([sys.executable, "-m", PROG, *args], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_steps(tmp_path / "ckpt", 5, proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == PREEMPTED_EXIT_CODE == 75
    finally:
        proc.kill()
    log = (tmp_path / "logs" / "rank0.log").read_text()
    step = int(re.search(r"preempted at step (\d+): checkpoint", log)[1])
    found = checkpoint.latest(tmp_path / "ckpt")
    assert found.step == step and 5 <= step < 500
    ToyNet().load_state_dict(checkpoint.load(found)["model"])  # every key and shape
    assert not (tmp_path / "result.json").exists()  # an unfinished run leaves no record

    done = worker(dummy_args(tmp_path, "--dummy-size", "8000", "--checkpoint-every", "0",
                             "--resume"))
    assert done.returncode == 0, done.stderr[-2000:]
    m = json.loads((tmp_path / "result.json").read_text())["metrics"]
    assert m["final_step"] == 500 and m["restarts"] == 1 and m["steps_redone"] == 0
    assert m["resumed_from_step"] == step


# ---------------------------------------------------------------- corrupted checkpoints


def _save(folder: Path, step: int, keep: int = 2) -> checkpoint.Checkpoint:
    state = {"model": ToyNet().state_dict(), "position": {"step": step}}
    return checkpoint.save(folder, state, {"step": step, "model": "toynet"}, keep)


def test_save_keeps_the_newest_checkpoints_and_leaves_no_temporary_file(tmp_path):
    for step in (2, 4, 6):
        _save(tmp_path, step)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-00000004.json", "step-00000004.pt", "step-00000006.json", "step-00000006.pt"]
    assert checkpoint.latest(tmp_path).step == 6


def test_a_run_resumed_past_a_damaged_checkpoint_keeps_its_own_and_drops_the_damaged_one(tmp_path):
    for step in (4, 8, 12):
        _save(tmp_path, step)
    (tmp_path / "step-00000012.pt").write_bytes(b"garbage")
    assert checkpoint.latest(tmp_path, warn=lambda _: None).step == 8  # resumed from 8
    _save(tmp_path, 10)  # the resumed run's next one: 12 must not push 8 out, nor outrank 10
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["step-00000008.pt",
                                                            "step-00000010.pt"]
    assert checkpoint.latest(tmp_path).step == 10


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_corrupted_latest_checkpoint_is_passed_over_for_the_previous(tmp_path, damage):
    _save(tmp_path, 4)
    newest = _save(tmp_path, 6).path
    data = newest.read_bytes()
    if damage == "truncate":  # what a full disk or a killed copy leaves
        newest.write_bytes(data[: len(data) // 2])
    else:  # the same size, some bytes flipped in the middle
        middle = len(data) // 2
        newest.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle:middle + 64])
                           + data[middle + 64:])
    warnings = []
    found = checkpoint.latest(tmp_path, warn=warnings.append)
    assert found.step == 4
    ToyNet().load_state_dict(checkpoint.load(found)["model"])
    [warning] = warnings
    assert str(newest) in warning and "using the previous one" in warning
    assert ("truncated" if damage == "truncate" else "sha256") in warning


def test_a_checkpoint_whose_sidecar_was_never_written_is_not_taken(tmp_path):
    _save(tmp_path, 4)
    _save(tmp_path, 6).path.with_suffix(".json").unlink()  # killed between the two renames
    assert checkpoint.latest(tmp_path).step == 4


def test_resume_passes_over_a_corrupted_latest_checkpoint_with_a_warning_in_the_log(
        single_run, tmp_path):
    shutil.copytree(single_run / "ckpt", tmp_path / "ckpt")
    newest = tmp_path / "ckpt" / "step-00000006.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    done = worker(dummy_args(tmp_path, "--resume", "--epochs", "2"))
    assert done.returncode == 0, done.stderr[-2000:]
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert re.search(r"warning: checkpoint \S+step-00000006.pt is corrupt \(truncated", log)
    m = json.loads((tmp_path / "result.json").read_text())["metrics"]
    assert m["resumed_from_step"] == 4 and m["final_step"] == 12


# ---------------------------------------------------------------- bad input


def refused(done: subprocess.CompletedProcess) -> str:
    """The one-line error of a run refused as bad input."""
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{PROG}: ")
    return line


def test_resume_with_no_checkpoint_exits_2_and_says_how_to_start_fresh(tmp_path):
    line = refused(worker(dummy_args(tmp_path, "--resume")))
    assert "resume: no usable checkpoint in" in line and "--resume-or-start" in line
    assert line in (tmp_path / "logs" / "rank0.log").read_text()  # also in the rank's log
    assert not (tmp_path / "result.json").exists()
    assert not checkpoint.listed(tmp_path / "ckpt")


def test_a_checkpoint_of_another_model_is_refused_with_the_reason(single_run, tmp_path):
    args = dummy_args(single_run, "--resume", "--model", "simplecnn", "--image-size", "28")
    line = refused(worker([*args, "--log-dir", str(tmp_path / "logs")]))
    assert "was written with model 'toynet', this run has model 'simplecnn'" in line


def test_a_checkpoint_of_another_world_size_is_refused_with_the_reason(
        small_data, uninterrupted, tmp_path):
    _, out = uninterrupted  # two ranks wrote it; one process asks to resume it
    args = fashion_args(small_data, out, "--resume")
    line = refused(worker([*args, "--log-dir", str(tmp_path / "logs"),
                           "--result", str(tmp_path / "result.json")]))
    assert "world_size 2, this run has world_size 1" in line and "same number of ranks" in line


def test_a_fresh_start_into_a_folder_of_checkpoints_is_refused(single_run, tmp_path):
    line = refused(worker([*dummy_args(single_run), "--log-dir", str(tmp_path / "logs")]))
    assert "checkpoint_path:" in line and "already holds a checkpoint (step 6)" in line


def test_an_unwritable_checkpoints_path_is_refused_before_training(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    args = dummy_args(tmp_path)
    args[args.index("--checkpoint-path") + 1] = str(tmp_path / "a-file" / "ckpt")
    line = refused(worker(args))
    assert "checkpoint_path: cannot write to" in line and "Not a directory" in line
    assert "checkpoint at step" not in (tmp_path / "logs" / "rank0.log").read_text()


def test_recoveries_are_read_from_the_timeline_of_all_attempts():
    events = [{"event": "start", "attempt": 0, "t": 0.0},
              *({"event": "step", "attempt": 0, "step": s, "t": float(s)} for s in (1, 2, 3)),
              {"event": "start", "attempt": 1, "t": 9.0, "resumed_from_step": None},  # no step
              {"event": "start", "attempt": 2, "t": 20.0, "resumed_from_step": 2},
              {"event": "step", "attempt": 2, "step": 3, "t": 23.5},
              {"event": "preempted", "attempt": 2, "step": 3, "t": 24.0},
              {"event": "start", "attempt": 3, "t": 30.0, "resumed_from_step": 3},
              {"event": "step", "attempt": 3, "step": 4, "t": 31.0}]
    rows = elastic_timeline.recoveries(events)
    assert [(r["cause"], r["steps_redone"], r["recovery_s"]) for r in rows] == [
        ("failure", 0, None), ("failure", 1, 20.5), ("preempted", 0, 7.5)]
    # until the resumed attempt started (restart, imports, loading), the rest its first step
    assert [r["restart_s"] for r in rows] == [6.0, 17.0, 6.5]


def test_a_timeline_begun_before_the_checkpoint_modes_summarizes_its_saves():
    """A run resumed across the upgrade: its first saves named their time save_s."""
    step = {"event": "step", "attempt": 0, "step_s": 1.0, "data_s": 0.1, "samples": 8, "loss": 1.0}
    events = [{"event": "start", "attempt": 0, "t": 0.0},
              {**step, "step": 1, "t": 1.0}, {**step, "step": 2, "t": 2.0},
              {"event": "checkpoint", "attempt": 0, "step": 2, "t": 2.5, "save_s": 0.5},
              {**step, "step": 3, "t": 3.5},
              {"event": "checkpoint", "attempt": 0, "step": 3, "t": 4.0, "blocking_s": 0.3,
               "total_s": 0.4, "rank_bytes": [100, 0], "staged_bytes": 100},
              {"event": "end", "attempt": 0, "step": 3, "t": 4.0}]
    m, _ = elastic_timeline.summarize_run(events, 0)
    assert m["checkpoints_written"] == 2 and m["checkpoint_s"] == pytest.approx(0.4)
    assert m["checkpoint_stall_share"] == pytest.approx(0.8 / 4.0)
    assert m["checkpoint_bytes"] == 100  # the one save that counted its bytes


def test_a_run_preempted_at_its_last_step_summarizes_after_the_resume():
    """SIGTERM at the last step: the next launch resumes, trains nothing and ends; its
    restart has no recovery to time (this was a KeyError in rank 0's result)."""
    events = [{"event": "start", "attempt": 0, "t": 0.0},
              *({"event": "step", "attempt": 0, "step": s, "t": float(s), "samples": 8,
                 "step_s": 1.0, "data_s": 0.1, "loss": 1.0} for s in (1, 2, 3)),
              {"event": "preempted", "attempt": 0, "step": 3, "t": 3.5},
              {"event": "start", "attempt": 1, "t": 9.0, "resumed_from_step": 3},
              {"event": "end", "attempt": 1, "t": 9.5}]
    metrics, rows = elastic_timeline.summarize_run(events, warmup_steps=1)
    assert [(r["cause"], r["recovery_s"], r["restart_s"]) for r in rows] == \
        [("preempted", None, 6.0)]
    assert (metrics["restarts"], metrics["recovery_s"], metrics["restart_s"]) == (1, 0.0, 0.0)


def test_a_finished_run_launched_again_says_it_is_complete_and_keeps_its_result(
        single_run, tmp_path):
    """A requeued job or a second submission after the last step: no KeyError, exit 0.
    The finished run is single_run, copied; launched again as it was first launched."""
    shutil.copytree(single_run, tmp_path, dirs_exist_ok=True)
    done = json.loads((single_run / "result.json").read_text())["metrics"]
    again = worker(single_args(tmp_path, "--resume-or-start"))
    assert again.returncode == 0, again.stderr[-2000:]
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert "the run is complete: its checkpoint is step 6, the last of 1 epochs" in log
    m = json.loads((tmp_path / "result.json").read_text())["metrics"]
    assert m["final_step"] == done["final_step"] == 6 and m["restarts"] == 0
    assert m["attempts"] == 2 and m["loss_last"] == done["loss_last"]


def test_an_injected_step_delay_slows_every_step_and_the_result_says_so(single_run):
    """Notebook 35's fault injection reaches the elastic worker as notebook 20's reaches
    the DDP one: each step takes the delay longer, and the figures say they are not the
    model's. single_run injects 150 ms on rank 0, slow_epoch (1x in the first epoch)."""
    m = json.loads((single_run / "result.json").read_text())["metrics"]
    assert (m["injected_step_delay_ms"], m["injected_delay_rank"],
            m["injected_delay_pattern"]) == (150.0, 0, "slow_epoch")
    assert 0.15 <= m["step_s"] < 0.6  # the first epoch's steps: not yet the slow epoch's 4x


def test_dataset_dummy_is_seed_001s_dummy_as_notebook_35_names_it(single_run):
    """single_run names its data set `--dataset dummy`."""
    m = json.loads((single_run / "result.json").read_text())["metrics"]
    assert m["final_step"] == 6 and m["global_batch"] == 16  # 96 random images, batch 16


def test_a_torchrun_stopped_by_sigterm_exits_75_not_1(tmp_path):
    """SIGTERM to torchrun (no restarts) once 3 steps are done: it passes the signal to its
    rank, which checkpoints and exits 75, and torchrun exits 75 too, with its one line.
    One rank: the agent passes the signal to every rank alike, and its way out
    (SignalException) does not depend on how many there are; SIGTERM to one of 2 ranks
    is the test above."""
    args = dummy_args(tmp_path, "--dummy-size", "100000", "--checkpoint-every", "0")
    argv = torchrun_argv("elastic", args, 1, free_port(), max_restarts=0)
    proc = subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for_steps(tmp_path / "ckpt", 3, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == PREEMPTED_EXIT_CODE, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("torchrun: ")
    assert "run it again to resume" in err.strip().splitlines()[-1]
    assert checkpoint.latest(tmp_path / "ckpt") is not None  # and the rank checkpointed


def test_preemption_is_a_75_with_the_rest_75_or_stopped_by_torchrun():
    from benchlib.launch.agent import preempted

    assert preempted([75]) and preempted([75, 75]) and preempted([-15, 75])
    assert not preempted([-15]) and not preempted([75, 1]) and not preempted([75, -9])
    assert not preempted([])

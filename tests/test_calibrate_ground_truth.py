"""`benchlib calibrate --ground-truth`: the training worker, launched as a study launches it
(1 rank; 2 ranks under torchrun with gloo), with a known delay in a pattern that varies by
step, epoch and rank (a slow warm-up, a heavy tail, a slow epoch, a slow rank); the
figures its result holds and the parent's own clock recover the truth, each within the
bound, and a method blind to the pattern would miss it."""

import contextlib
import io
import json

import pytest
import torch

from benchlib.cli.main import main
from benchlib.core import delays
from benchlib.errors import ConfigError
from benchlib.studies import ground_truth as gt
from benchlib.trainers import ddp_flags

# The command's bound is 2% (docs/method.md). Here the truth's base step (2-16 ms of a
# ~110 ms step) is measured in a launch of its own while other tests load the 2 shared
# cores, and load that changes between two launches has moved it by up to ~12 ms (a median
# step 12% over a 100 ms truth in a full suite on 28 Nov 2026): the suite injects 200 ms
# and passes `--tolerance 0.10`,
# the bound docs/method.md states for it, and the command must pass with it. Every case's
# misreading (a warm-up counted, the median step, the mean over epochs, the fast rank)
# misses by more than twice that (25% to 141% at 10 steps an epoch), so each case can fail.
LOADED_BOUND = 0.10


@pytest.fixture(scope="module")
def ground_truth(tmp_path_factory):
    """`calibrate --ground-truth` once, every pattern, 10 steps an epoch of 200 ms each
    and more (sleeps: wall time, not CPU), so that the base step's drift under the suite's
    load stays inside the bound: (exit, printed, checks)."""
    folder = tmp_path_factory.mktemp("gt")
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setenv("BENCHLIB_OUTPUTS", str(folder / "outputs"))
        code = main(["calibrate", "--ground-truth", "--steps", "10", "--delay-ms", "200",
                     "--tolerance", str(LOADED_BOUND), "--json", str(folder / "gt.json")])
    return code, out.getvalue(), json.loads((folder / "gt.json").read_text())["ground_truth"]


def test_every_pattern_is_recovered_by_the_figure_it_tests(ground_truth):
    code, printed, checks = ground_truth
    assert code == 0, printed  # the command's own verdict: every check within the bound
    by = {(c["pattern"], c["ranks"], c["check"].rpartition(": ")[2]) for c in checks}
    for pattern, ranks, figure in [
            ("uniform", 1, "worker's samples/s"), ("uniform", 2, "parent's clock"),
            ("slow_warmup", 1, "warmup_s"), ("heavy_tail", 1, "batch_s"),
            ("slow_epoch", 1, "worker's samples/s"), ("slow_rank", 2, "rank_skew"),
            ("slow_rank", 2, "slowest rank")]:
        assert (pattern, ranks, figure) in by, (pattern, ranks, figure)
    for c in checks:
        assert c["passed"] and abs(c["error"]) <= LOADED_BOUND, c
        assert c["injected_step_delay_ms"] == 200.0 and c["injected_delay_pattern"] == c["pattern"]
        if "samples/s" in c["check"] or "clock" in c["check"]:
            # the same worker without the delay (its base run) misses the truth by far
            assert not gt.check("", c["expected"], c["base_samples_per_s"],
                                       LOADED_BOUND)["passed"]
            assert f"error {c['error']:+.2%}: pass" in printed
    misread = {c["pattern"]: c["misread_error"] for c in checks if "misread" in c}
    assert set(misread) == {"slow_warmup", "heavy_tail", "slow_epoch", "slow_rank"}
    assert all(abs(e) > 2 * LOADED_BOUND for e in misread.values()), misread
    workers = [c for c in checks if c["check"].endswith("worker's samples/s")]
    parents = [c for c in checks if c["check"].endswith("parent's clock")]
    for worker, parent in zip(workers, parents):  # two clocks on the same run
        assert parent["measured"] == pytest.approx(worker["measured"], rel=0.02)


def test_each_patterns_truth_and_what_a_blind_method_would_read():
    """100 ms, a 5 ms base, 13 steps an epoch, 3 warm-up: the truths by hand."""
    d, b, timed = 0.1, 0.005, 10
    uniform = gt.truth("uniform", 100.0, b, 13, 1)
    assert uniform["samples_per_s"] == pytest.approx(8 / (d + b))
    assert uniform["with_warmup"] == pytest.approx(uniform["samples_per_s"])
    warm = gt.truth("slow_warmup", 100.0, b, 13, 1)
    assert warm["samples_per_s"] == pytest.approx(8 / (d + b))
    assert warm["warmup_s"] == pytest.approx(3 * (5 * d + b))
    assert warm["with_warmup"] == pytest.approx(8 * 13 / (3 * (5 * d + b) + timed * (d + b)))
    tail = gt.truth("heavy_tail", 100.0, b, 13, 1)  # steps 4 and 9 of 3..12: 6x
    assert tail["samples_per_s"] == pytest.approx(8 * timed / (8 * (d + b) + 2 * (6 * d + b)))
    assert tail["batch_s"] == pytest.approx(d + b)
    epoch = gt.truth("slow_epoch", 100.0, b, 13, 1)
    assert epoch["samples_per_s"] == pytest.approx(8 / (d + b))
    assert epoch["mean_over_epochs"] == pytest.approx((2 * 8 / (d + b) + 8 / (4 * d + b)) / 3)
    rank = gt.truth("slow_rank", 100.0, b, 13, 2)
    assert rank["samples_per_s"] == pytest.approx(16 / (2 * d + b))
    assert rank["rank_skew"] == pytest.approx((2 * d + b) / (d + b))
    assert rank["fast_rank_rate"] == pytest.approx(16 / (d + b))


def test_the_delay_pattern_is_the_one_the_truth_assumes(monkeypatch):
    factors = [delays.delay_factor("heavy_tail", i, 0, 3, False) for i in range(10)]
    assert factors == [1, 1, 1, 1, 6, 1, 1, 1, 1, 6]
    assert [delays.delay_factor("slow_warmup", i, 2, 3, False) for i in range(5)] == [5, 5, 5, 1, 1]
    assert [delays.delay_factor("slow_epoch", 0, e, 3, False) for e in range(3)] == [1, 4, 1]
    assert (delays.delay_factor("slow_rank", 0, 0, 3, True),
            delays.delay_factor("slow_rank", 0, 0, 3, False)) == (2, 1)
    cpu = torch.device("cpu")
    slow = delays.StepDelay.of_rank(10.0, cpu, "slow_rank", 3, -1, 1, 2)
    fast = delays.StepDelay.of_rank(10.0, cpu, "slow_rank", 3, -1, 0, 2)
    alone = delays.StepDelay.of_rank(10.0, cpu, "uniform", 3, 1, 0, 2)
    assert (slow.slow, fast.slow, alone.ms) == (True, False, 0.0)  # delay_rank 1: not rank 0
    slept = []
    monkeypatch.setattr(delays.time, "sleep", slept.append)
    epoch = delays.StepDelay(10.0, cpu, "slow_epoch", 3)
    epoch.start_epoch()
    epoch()
    epoch.at(1, 5)  # a loop that keeps its own place (the elastic trainer, resumed mid-epoch)
    epoch()
    epoch.start_epoch()  # epoch 2
    epoch()
    assert slept == [0.01, 0.04, 0.01]
    with pytest.raises(ConfigError, match=r"^inject_delay_pattern: 'bursty' is not one of "
                                          r"uniform, slow_warmup, heavy_tail, slow_epoch, "
                                          r"slow_rank$"):
        delays.StepDelay(10.0, cpu, "bursty")


def test_a_check_passes_within_two_percent_and_fails_beyond():
    assert gt.check("x", 100.0, 101.9)["passed"]
    assert gt.check("x", 100.0, 98.1)["passed"]
    assert not gt.check("x", 100.0, 102.1)["passed"]
    assert not gt.check("x", 100.0, 97.9)["passed"]


def test_a_negative_delay_is_refused_naming_the_flag():
    args = ddp_flags.parser("single").parse_args(["--inject-step-delay-ms=-1"])
    with pytest.raises(ConfigError, match=r"^inject_step_delay_ms: must be >= 0, got -1.0$"):
        ddp_flags.check_args(args)


def test_the_ground_truth_needs_a_delay(outputs, capsys):
    assert main(["calibrate", "--ground-truth", "--delay-ms", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "benchlib calibrate: delay_ms: must be > 0 (the truth the figures are checked "
        "against), got 0.0")


@pytest.mark.parametrize("flags, message", [
    (["--patterns", "uniform,bursty"], "patterns: 'bursty' is not one of uniform, slow_warmup, "
                                       "heavy_tail, slow_epoch, slow_rank"),
    (["--tolerance", "2"], "tolerance: must be between 0 and 1 (0.02: 2%), got 2.0"),
    (["--steps", "8"], "steps: must be > 8 (the warm-up steps of each epoch, and a heavy tail's "
                       "period), got 8"),
])
def test_a_bad_pattern_tolerance_or_window_is_one_line_before_any_launch(outputs, capsys, flags,
                                                                         message):
    assert main(["calibrate", "--ground-truth", *flags]) == 2
    assert capsys.readouterr().err.strip() == f"benchlib calibrate: {message}"
    assert not (outputs / "logs").exists()  # nothing launched, nothing half-written

"""`benchlib calibrate --ground-truth`: the training worker, launched as a study launches it
(1 rank; 2 ranks under torchrun with gloo), with a known delay in every step; the samples/s
its result holds and the parent's own clock over the timed windows recover the truth."""

import json

import pytest

from benchlib.cli.main import main
from benchlib.errors import ConfigError
from benchlib.studies import calibrate
from benchlib.trainers import ddp_flags

# The command's bound is 2%. Here the truth's base step (2-16 ms of a ~110 ms step) is
# measured in a launch of its own while other tests load the 2 shared cores, and load that
# changes between two launches has moved it by up to ~7 ms (errors of 5.2% and 6.4% seen in
# full suites on 27 Nov 2026, which launch more ranks beside it than before): 8% bounds
# that, and still fails a delay not applied (the figure is then 10-50x the truth) or a
# per-rank figure taken for the global one (2x).
LOADED_BOUND = 0.08


def test_the_workers_figure_and_the_parents_clock_recover_the_injected_delay(outputs, capsys):
    figures = outputs / "gt.json"
    code = main(["calibrate", "--ground-truth", "--steps", "13", "--json", str(figures)])
    printed = capsys.readouterr().out
    checks = json.loads(figures.read_text())["ground_truth"]
    assert [c["ranks"] for c in checks] == [1, 1, 2, 2]
    for c in checks:
        assert abs(c["error"]) <= LOADED_BOUND, c
        assert c["expected"] == pytest.approx(
            c["ranks"] * 8 / (c["delay_ms"] / 1e3 + c["base_step_s"]))
        # the worker's result says that its steps were slowed on purpose
        assert c["injected_step_delay_ms"] == 100.0
        # the same worker without the delay (its base run) misses the truth by far
        assert not calibrate.check("", c["expected"], c["base_samples_per_s"])["passed"]
        assert f"error {c['error']:+.2%}: {'pass' if c['passed'] else 'FAIL'}" in printed
    for worker, parent in zip(checks[::2], checks[1::2]):  # two clocks on the same run
        assert parent["measured"] == pytest.approx(worker["measured"], rel=0.02)
    assert code == (0 if all(c["passed"] for c in checks) else 1)


def test_a_check_passes_within_two_percent_and_fails_beyond():
    assert calibrate.check("x", 100.0, 101.9)["passed"]
    assert calibrate.check("x", 100.0, 98.1)["passed"]
    assert not calibrate.check("x", 100.0, 102.1)["passed"]
    assert not calibrate.check("x", 100.0, 97.9)["passed"]


def test_a_negative_delay_is_refused_naming_the_flag():
    args = ddp_flags.parser("single").parse_args(["--inject-step-delay-ms=-1"])
    with pytest.raises(ConfigError, match=r"^inject_step_delay_ms: must be >= 0, got -1.0$"):
        ddp_flags.check_args(args)


def test_the_ground_truth_needs_a_delay(outputs, capsys):
    assert main(["calibrate", "--ground-truth", "--delay-ms", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "benchlib calibrate: delay_ms: must be > 0 (the truth the figures are checked "
        "against), got 0.0")

import math
import time

import numpy as np
import pytest

from benchlib.core.stats import median_ci95, quantile, summarize
from benchlib.core.timing import StepClock, StepMarks


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_quantile_matches_numpy(q):
    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3])
    assert quantile(values, q) == pytest.approx(np.quantile(values, q))


def test_summary_is_median_with_spread_and_an_interval_around_it():
    values = [10.0, 11.0, 9.0, 10.5, 30.0, 9.5, 10.2]  # one outlier
    s = summarize(values, "samples_per_s")
    assert s["samples_per_s"] == 10.2  # the median ignores the outlier; a mean would not
    assert s["samples_per_s_p10"] <= s["samples_per_s"] <= s["samples_per_s_p90"]
    assert s["samples_per_s_ci95_low"] <= s["samples_per_s"] <= s["samples_per_s_ci95_high"]
    assert s["samples_per_s_n"] == 7
    assert (s["samples_per_s_ci95_low"], s["samples_per_s_ci95_high"]) == median_ci95(sorted(values))


def test_the_95_percent_interval_covers_the_true_median_about_95_percent_of_the_time():
    """What the interval claims, checked where the truth is known: 200 seeded samples of
    7-20 values from a skewed distribution (lognormal, as step times are) whose median is
    100. A percentile bootstrap of the median covers it ~93% of the time at these sizes;
    an interval of the mean (skewed: mean 165) or an 80% one covers it far less often,
    the bare range nearly always."""
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(200):
        values = 100.0 * np.exp(rng.normal(0.0, 1.0, int(rng.integers(7, 21))))
        low, high = median_ci95(values.tolist(), seed=trial)
        covered += low <= 100.0 <= high
    assert 0.85 <= covered / 200 <= 0.99


def test_interval_is_reproducible_and_undefined_for_one_value():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert median_ci95(values) == median_ci95(values)
    assert all(math.isnan(v) for v in median_ci95([1.0]))


def test_cpu_clock_is_the_plain_monotonic_clock_and_a_cuda_one_is_synchronized():
    # on CPU nothing to wait for: the bare clock, not a wrapper that costs a call per read
    assert StepClock("cpu").now is time.perf_counter and StepClock(None).now is time.perf_counter
    # a CUDA device gets the synchronizing reader (built, not called: no GPU needed)
    assert StepClock("cuda:1").now is not time.perf_counter
    assert StepMarks("cpu").cuda is False and StepMarks("cuda").cuda is True


def test_step_marks_read_seconds_that_an_independent_clock_agrees_with():
    """50 ms measured by the marks, inside the same 50 ms as seen by the system's
    real-time clock (a different clock from perf_counter): seconds, not ms or ns, and
    never less than the sleep."""
    marks = StepMarks("cpu")
    outer_start = time.time()
    a = marks.mark()
    time.sleep(0.05)
    b = marks.mark()
    outer_s = time.time() - outer_start
    marks.wait()
    assert 0.05 <= marks.seconds(a, b) <= outer_s + 0.001  # 1 ms for time.time's resolution


def test_fewer_than_five_values_get_their_range_not_a_95_percent_interval():
    from benchlib.core.stats import spread_text

    few = summarize([10.0, 12.0, 11.0], "x")
    assert math.isnan(few["x_ci95_low"]) and math.isnan(few["x_ci95_high"])
    assert (few["x_min"], few["x_max"], few["x_n"]) == (10.0, 12.0, 3)
    assert spread_text(few, "x", ".1f") == "range 10.0-12.0, n=3"
    five = summarize([10.0, 12.0, 11.0, 10.5, 11.5], "x")
    assert spread_text(five, "x", ".1f").startswith("95% CI ") and five["x_ci95_low"] <= 11.0


def test_values_from_inside_one_process_get_no_95_percent_interval():
    """Epochs or repeats of one launch share its luck: however many, no bootstrap
    interval is claimed for them; the same values from separate launches get one."""
    from benchlib.core import throughput
    from benchlib.core.stats import spread_text

    values = [10.0, 12.0, 11.0, 10.5, 11.5, 10.8]
    inside = summarize(values, "x", independent=False)
    assert math.isnan(inside["x_ci95_low"]) and inside["x_n"] == 6
    assert spread_text(inside, "x", ".1f") == "range 10.0-12.0, n=6"
    assert spread_text(summarize(values, "x"), "x", ".1f").startswith("95% CI ")
    epochs = [{"samples_per_s": v, "epoch_s": 1.0, "batch_s": 0.1, "data_s": 0.01,
               "compute_s": 0.09, "loss_last": 1.0} for v in values]
    assert math.isnan(throughput.run_figures(epochs)["samples_per_s_ci95_low"])

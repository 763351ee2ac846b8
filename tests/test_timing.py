import math
import time

import numpy as np
import pytest

from benchlib.core.timing import StepClock, median_ci95, quantile, summarize


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
    assert s["samples_per_s_ci95_high"] < 30.0 and s["samples_per_s_n"] == 7


def test_interval_is_reproducible_and_undefined_for_one_value():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert median_ci95(values) == median_ci95(values)
    assert all(math.isnan(v) for v in median_ci95([1.0]))


def test_cpu_clock_is_the_plain_monotonic_clock():
    clock = StepClock("cpu")
    assert clock.now is time.perf_counter
    a = clock.now()
    time.sleep(0.01)
    assert clock.now() - a >= 0.01


def test_fewer_than_five_values_get_their_range_not_a_95_percent_interval():
    from benchlib.core.timing import spread_text

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
    from benchlib.core.timing import spread_text

    values = [10.0, 12.0, 11.0, 10.5, 11.5, 10.8]
    inside = summarize(values, "x", independent=False)
    assert math.isnan(inside["x_ci95_low"]) and inside["x_n"] == 6
    assert spread_text(inside, "x", ".1f") == "range 10.0-12.0, n=6"
    assert spread_text(summarize(values, "x"), "x", ".1f").startswith("95% CI ")
    epochs = [{"samples_per_s": v, "epoch_s": 1.0, "batch_s": 0.1, "data_s": 0.01,
               "compute_s": 0.09, "loss_last": 1.0} for v in values]
    assert math.isnan(throughput.run_figures(epochs)["samples_per_s_ci95_low"])

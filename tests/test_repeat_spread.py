"""Where the same row has records of both repeat modes, the analysis shows both spreads
(p10-p90 over the median) side by side with a sentence computed from them: a direction
only where a bootstrap 95% interval of their ratio excludes 1."""

import numpy as np
import pandas as pd
from test_analysis import dist_rows, records

from benchlib.analysis import dp_vs_ddp, framework_comparison, multinode_lightning, repeat_spread
from benchlib.core.intervals import spread_ratio_interval


def ddp(mode, median, p10, p90, n, keep=True, **over):
    """A record of `mode` whose n values (epochs, or launches) run evenly from p10 to p90,
    kept as results.frame reads them from its details unless `keep` is False."""
    values = {repeat_spread.VALUES[mode or "epoch"]: tuple(p10 + (p90 - p10) * i / (n - 1)
                                                           for i in range(n))} if keep else {}
    return dist_rows(strategy="ddp", nproc_per_node=2.0, devices=2.0, global_batch=64.0,
                     samples_per_s=median, samples_per_s_p10=p10, samples_per_s_p90=p90,
                     samples_per_s_min=p10, samples_per_s_max=p90, samples_per_s_n=float(n),
                     repeat_mode=mode, **values, **over)


def test_both_spreads_are_shown_for_a_row_measured_both_ways():
    df = records([dist_rows(), ddp("epoch", 100.0, 98.0, 102.0, 6, epochs=6.0, repeats=1.0),
                  ddp("process", 100.0, 90.0, 110.0, 6, epochs=2.0, repeats=6.0)])
    spreads = dp_vs_ddp.spreads(dp_vs_ddp.runs(df))
    assert len(spreads) == 1
    line = spreads.iloc[0]
    assert (line["epoch_spread"], line["process_spread"]) == (0.04, 0.2)
    assert (line["epoch_n"], line["process_n"]) == (6, 6)
    text = dp_vs_ddp.conclusions(dp_vs_ddp.runs(df))
    assert ("- Repeats of strategy ddp, launcher torchrun, devices 2, model pyramidnet, "
            "dataset cifar10: spread (p10-p90 over the median) 4.0% over 6 epochs of one "
            "launch, 20.0% over 6 launches: the spread across launches is 5.0x the spread "
            "inside one (95% interval 2.03-12.11), so an interval from epochs understates how "
            "much a rerun moves.") in text


def test_the_sentence_flips_when_the_launches_agree_more_than_the_epochs():
    df = records([ddp("epoch", 100.0, 85.0, 115.0, 6), ddp("process", 100.0, 95.0, 105.0, 5)])
    text = dp_vs_ddp.conclusions(dp_vs_ddp.runs(df))
    assert ("the spread inside one launch is 3.0x the spread across launches (95% interval "
            "0.12-0.79)") in text
    same = records([ddp("epoch", 100.0, 95.0, 105.0, 6), ddp("process", 100.0, 94.5, 105.5, 5)])
    assert ("not enough values to tell: no direction, and not shown the same (ratio 1.10, 95% "
            "interval 0.38-2.56, n=5 a side; about 47 values a side would tell whether they "
            "are the same within 1.5x)") in dp_vs_ddp.conclusions(dp_vs_ddp.runs(same))


def test_no_direction_below_five_values_or_without_the_values():
    few = records([ddp("epoch", 100.0, 98.0, 102.0, 6), ddp("process", 100.0, 80.0, 120.0, 4)])
    assert ("cannot tell which is wider (ratio 10.00; an interval needs 5+ values a side)"
            ) in dp_vs_ddp.conclusions(dp_vs_ddp.runs(few))
    unkept = records([ddp("epoch", 100.0, 98.0, 102.0, 6, keep=False),
                      ddp("process", 100.0, 80.0, 120.0, 6, keep=False)])
    assert ("cannot tell which is wider (ratio 10.00; the records keep no per-epoch and "
            "per-launch values to give an interval from)"
            ) in dp_vs_ddp.conclusions(dp_vs_ddp.runs(unkept))


def test_identical_spreads_at_six_values_get_no_direction_in_95_percent_of_trials():
    # measured (400 trials, lognormal 5% noise on both sides): a direction in 0.020 of
    # trials at n=6 (0.028 at 5 and at 10); the old fixed 1.25 band left "about the same"
    # in 0.647 at n=6. A spread 2x (3x) the other is found in 0.16 (0.41) of trials at n=6.
    rng = np.random.default_rng(6)
    directions = 0
    for trial in range(400):
        launches, epochs = (tuple(100 * np.exp(rng.normal(0, 0.05, 6))) for _ in range(2))
        low, high = spread_ratio_interval(launches, epochs, seed=trial)
        text = repeat_spread.wider(1.0, low, high, 6)
        directions += not text.startswith(("not enough values", "the same", "cannot tell"))
    assert directions / 400 <= 0.05


def test_a_true_2x_ratio_of_spreads_is_never_called_the_same():
    """Holding 1 is not sameness: at 6 values a side, a spread twice the other gave an
    interval holding 1 in 176 of 200 trials (issue 43); none of them may read "the same"."""
    rng = np.random.default_rng(43)
    said = {"same": 0, "wider": 0, "not enough": 0}
    for trial in range(200):
        launches = tuple(100 * np.exp(rng.normal(0, 0.10, 6)))
        epochs = tuple(100 * np.exp(rng.normal(0, 0.05, 6)))
        low, high = spread_ratio_interval(launches, epochs, seed=trial)
        text = repeat_spread.wider(2.0, low, high, 6)
        said["same" if text.startswith("the same") else
             "not enough" if text.startswith("not enough") else "wider"] += 1
    assert said["same"] == 0 and said["not enough"] > 100  # mostly too few values, as measured


def test_equal_spreads_with_enough_values_are_called_the_same():
    """The same rule does call two equal spreads the same once there are enough values:
    with 300 a side (what the sentence asks for at n=6 is of that order), in at least 9 of
    10 trials, and never wider."""
    rng = np.random.default_rng(7)
    same = 0
    for trial in range(20):
        launches, epochs = (tuple(100 * np.exp(rng.normal(0, 0.05, 300))) for _ in range(2))
        low, high = spread_ratio_interval(launches, epochs, seed=trial)
        text = repeat_spread.wider(1.0, low, high, 300)
        assert not text.startswith("the spread")
        same += text.startswith("the same within 1.5x")
    assert same >= 18


def test_no_spread_sentence_without_both_modes_of_the_same_row():
    one_mode = records([ddp("process", 100.0, 90.0, 110.0, 6), ddp(None, 100.0, 98.0, 102.0, 6,
                                                                       batch_size=64.0)])
    assert dp_vs_ddp.spreads(dp_vs_ddp.runs(one_mode)).empty
    assert "Repeats of" not in dp_vs_ddp.conclusions(dp_vs_ddp.runs(one_mode))
    # a record from before repeat_mode counts as epoch; another model is another row
    old = records([ddp(None, 100.0, 98.0, 102.0, 6), ddp("process", 100.0, 90.0, 110.0, 6)])
    assert len(dp_vs_ddp.spreads(dp_vs_ddp.runs(old))) == 1
    other = records([ddp("epoch", 100.0, 98.0, 102.0, 6),
                     ddp("process", 100.0, 90.0, 110.0, 6, model="simplecnn")])
    assert dp_vs_ddp.spreads(dp_vs_ddp.runs(other)).empty


def test_a_record_of_launches_is_compared_as_launches_not_epochs():
    df = records([ddp("process", 150.0, 140.0, 160.0, 3),
                  dist_rows(strategy="dp", nproc_per_node=2.0, devices=2.0, samples_per_s=100.0,
                            samples_per_s_min=95.0,
                            samples_per_s_max=105.0, samples_per_s_n=3.0, repeat_mode="process")])
    assert "n=3 launches each; a direction needs" in dp_vs_ddp.conclusions(dp_vs_ddp.runs(df))


def test_multinode_and_framework_show_the_spreads_too():
    def mn(mode, p10, p90):
        values = tuple(p10 + (p90 - p10) * i / 4 for i in range(5))
        return {"notebook": "30_multinode_lightning.ipynb", "table": "m", "trainer": "ddp",
                "launcher": "torchrun", "dataset": "fashion-mnist", "model": "toynet",
                "depth": 20.0, "alpha": 48.0, "batch_size": 32.0, "device": "cpu", "nnodes": 1.0,
                "nproc_per_node": 2.0, "world_size": 2.0, "global_batch": 64.0, "epoch_s": 1.0,
                "launch_s": 5.0, "device_name": "cpu", "samples_per_s": 100.0,
                "samples_per_s_p10": p10, "samples_per_s_p90": p90, "samples_per_s_n": 5.0,
                "repeat_mode": mode, repeat_spread.VALUES[mode]: values}
    runs = multinode_lightning.runs(records([mn("epoch", 99.0, 101.0), mn("process", 90.0, 110.0)]))
    assert "the spread across launches is 10.0x" in multinode_lightning.conclusions(runs)

    def fw(mode, p10, p90):
        values = tuple(p10 + (p90 - p10) * i / 4 for i in range(5))
        return {"notebook": "40_framework_comparison.ipynb", "table": "f", "arch": "resnet18",
                "dataset": "synthetic", "image_size": 64.0, "batch_size": 8.0,
                "nproc_per_node": 1.0, "precision": "fp32", "channels_last": False,
                "compile": False, "samples_per_s": 10.0, "samples_per_s_p10": p10,
                "samples_per_s_p90": p90, "samples_per_s_n": 5.0, "mfu": None,
                "device_name": "cpu", "repeat_mode": mode, "repeats": 5.0,
                repeat_spread.VALUES[mode]: values}
    runs = framework_comparison.runs(records([fw("epoch", 9.9, 10.1), fw("process", 9.0, 11.0)]))
    assert len(framework_comparison.spreads(runs)) == 1
    assert "the spread across launches is 10.0x" in framework_comparison.conclusions(runs)


def test_spread_is_p10_to_p90_over_the_median():
    assert repeat_spread.relative_spread(pd.Series(
        {"samples_per_s": 200.0, "samples_per_s_p10": 190.0, "samples_per_s_p90": 230.0})) == 0.2

"""How often to save (issue 41): Young/Daly's interval and the goodput formula against a
simulated run with failures at known times; `benchlib project --mtbf`; the checkpoint
figures a record carries, and the checkpoint parameters. Pure: no process is started."""

import math

import numpy as np
import pytest

from benchlib.cli import project
from benchlib.config import FaultToleranceConfig
from benchlib.config.checkpoint import CheckpointConfig, parse_duration
from benchlib.core import checkpoint_cost, goodput
from benchlib.errors import ConfigError
from benchlib.records import results

HOUR = 3600.0


def failures(mtbf_s: float, n: int, seed: int) -> np.ndarray:
    """Failure times of a Poisson process: known before the run, each a surprise to it."""
    return np.cumsum(np.random.default_rng(seed).exponential(mtbf_s, size=n))


@pytest.mark.parametrize("cost_s, mtbf_s, restart_s", [(20.0, 12 * HOUR, 120.0),
                                                       (2.5, 2 * HOUR, 30.0)])
def test_the_goodput_measured_in_a_simulated_run_is_the_formulas(cost_s, mtbf_s, restart_s):
    """About 2,000 failures a run at five intervals around Young's, the run's own among
    them: the goodput the run measured within 0.002 of the formula's, and Young's interval
    the best of the five, as the formula says."""
    best = goodput.young_daly_interval_s(cost_s, mtbf_s)
    assert best == pytest.approx(math.sqrt(2 * cost_s * mtbf_s))
    measured = {}
    for interval in (best / 4, best / 2, best, 2 * best, 4 * best):
        run = goodput.simulate(2000 * mtbf_s, interval, cost_s, restart_s,
                               failures(mtbf_s, 4000, seed=1))
        assert run["failures"] > 1500
        assert run["goodput"] == pytest.approx(goodput.goodput(interval, cost_s, mtbf_s, restart_s),
                                               abs=0.002)
        measured[interval] = run["goodput"]
    assert max(measured, key=measured.get) == best


def test_a_run_without_failures_loses_only_its_saves():
    run = goodput.simulate(1000.0, 100.0, 5.0, 60.0, [])
    assert run["wall_s"] == 1000 + 9 * 5  # nine saves: the last stretch ends the run
    assert run["failures"] == 0


def test_a_failure_redoes_the_work_since_the_last_complete_save_and_pays_the_restart():
    """Saves end at 105 and 210; a failure at 250 (40 s past the second) restarts at 310
    from 200 s of work; one during a restart restarts it again."""
    once = goodput.simulate(300.0, 100.0, 5.0, 60.0, [250.0])
    assert once["wall_s"] == pytest.approx(250 + 60 + 100)
    twice = goodput.simulate(300.0, 100.0, 5.0, 60.0, [250.0, 280.0])
    assert twice["wall_s"] == pytest.approx(280 + 60 + 100) and twice["failures"] == 2


def test_the_first_order_formula_says_when_it_no_longer_holds():
    assert goodput.plan(20.0, 12 * HOUR, 120.0)["first_order_holds"]
    assert not goodput.plan(600.0, 1 * HOUR, 300.0)["first_order_holds"]


# ---------------------------------------------------------------- benchlib project --mtbf


def test_project_mtbf_gives_young_daly_from_a_records_measured_cost(outputs, capsys):
    """The newest record with a measured save: C its median blocking seconds, R its
    recovery per restart, its own interval checkpoint_every x step_s."""
    metrics = {"checkpoint_blocking_s": 0.5, "checkpoint_blocking_s_n": 5,
               "checkpoint_blocking_s_p10": 0.4, "checkpoint_blocking_s_p90": 0.7,
               "recovery_s": 60.0, "restarts": 2, "step_s": 0.25}
    rec = results.make_record(run_id="ft-1", table="ft", notebook="35_fault_tolerance.ipynb",
                              params={"checkpoint_every": 4}, env={}, started_at=results.now(),
                              status="ok", metrics=metrics)
    results.write_record(outputs / "results", rec)
    assert project.main(["--mtbf", "12h", "--checkpoint-run", "newest"]) == 0
    out = capsys.readouterr().out
    interval = math.sqrt(2 * 0.5 * 12 * HOUR)
    assert f"interval              {interval:,.1f} s of training" in out
    assert "run ft-1: median of 5 saves, p10-p90 0.4-0.7 s" in out
    assert "30 s  (run ft-1: recovery per restart)" in out
    assert f"{goodput.goodput(interval, 0.5, 12 * HOUR, 30.0):.2%}" in out
    assert f"{goodput.goodput(1.0, 0.5, 12 * HOUR, 30.0):.2%}, a save every 1 s" in out


@pytest.mark.parametrize("argv, says", [
    (["--mtbf", "12 years", "--checkpoint-s", "2"], "mtbf: '12 years' is not a duration"),
    (["--mtbf", "12h"], "checkpoint_s: missing"),
    (["--mtbf", "12h", "--checkpoint-run", "nope"], "checkpoint_run: no ok record nope"),
])
def test_project_mtbf_refuses_bad_input_in_one_line(outputs, capsys, argv, says):
    assert project.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err


def test_durations_read_alike_in_a_config_and_on_the_command_line():
    assert [parse_duration("mtbf", t) for t in ("12h", "30m", "90s", "2d", 45)] == \
        [43200, 1800, 90, 172800, 45]
    with pytest.raises(ConfigError, match="mtbf: '0h' is not a duration above 0"):
        FaultToleranceConfig(mtbf="0h")


def test_the_checkpoint_parameters_name_the_field_and_the_allowed_values():
    with pytest.raises(ConfigError, match="checkpoint: 'orbax' is not one of torch_save, dcp, "
                                          "dcp_async, dcp_async_pinned"):
        FaultToleranceConfig(checkpoint="orbax")
    with pytest.raises(ConfigError, match="checkpoint_every: must be >= 0"):
        CheckpointConfig(checkpoint_every=-1)
    with pytest.raises(ConfigError, match="checkpoint_path: is empty"):
        FaultToleranceConfig(checkpoint_path="")
    assert FaultToleranceConfig().checkpoint_every == 4  # notebook 35's own default


# ---------------------------------------------------------------- the record's figures


def test_the_rate_with_checkpoints_counts_the_stalls_and_leaves_out_the_steps_beside_a_write():
    """1 s steps of 10 samples, a save after every 4th stalling 1 s, the step after each
    save running beside its write at half speed: with checkpoints 40 samples per 6 s of
    each interval, without 10 per second."""
    steps = []
    for i in range(1, 25):
        beside = i % 4 == 1 and i > 1
        steps.append({"samples": 10, "step_s": 2.0 if beside else 1.0, "saved": i % 4 == 0,
                      "stall_s": 1.0 if i % 4 == 0 else 0.0, "writing": beside})
    r = checkpoint_cost.rates(steps)
    assert r["checkpoint_rate_ratio"] == pytest.approx(40 / 6 / 10)
    assert r["checkpoint_rate_ratio_n"] == 6
    assert r["checkpoint_rate_ratio_low"] <= r["checkpoint_rate_ratio"] <= \
        r["checkpoint_rate_ratio_high"]
    assert r["samples_per_s_with_checkpoints"] == pytest.approx(240 / (24 + 5 + 6))


def test_the_figures_are_medians_with_their_spread_and_bytes_per_rank():
    saves = [{"step": s, "blocking_s": b, "total_s": t, "staged_bytes": 2e8,
              "rank_bytes": [100_000_000, 90_000_000]}
             for s, b, t in ((4, 0.1, 1.0), (8, 0.2, 2.0), (12, 0.3, 4.0))]
    m = checkpoint_cost.figures(saves, [0.5, 0.7], "dcp_async")
    assert (m["checkpoint_blocking_s"], m["checkpoint_blocking_s_n"]) == (0.2, 3)
    assert m["checkpoint_blocking_s_p10"] == pytest.approx(0.12)
    assert m["checkpoint_total_s"] == 2.0 and m["checkpoint_mb_per_s"] == 50.0
    assert m["checkpoint_bytes"] == 190_000_000
    assert (m["checkpoint_bytes_rank_max"], m["checkpoint_bytes_rank_min"]) == (1e8, 9e7)
    assert all(not isinstance(v, (list, dict)) for v in m.values())  # a record's metrics
    assert m["checkpoint_staging_gbps"] == pytest.approx(1.0)  # 0.2 GB over 0.2 s
    assert m["restore_s"] == 0.6 and m["checkpoint_stall_s"] == pytest.approx(0.6)

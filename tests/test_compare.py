"""`benchlib compare`: synthetic result sets with a known slowdown in one row and noise
elsewhere; bad input; the notebook and the report."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchlib.cli import main
from benchlib.compare import changes, view
from benchlib.compare.sets import ResultSet
from benchlib.records import results, testbed

BASE_ENV = {"hostname": "node7", "cpu_model": "Xeon", "gpus": [], "python": "3.12.3",
            "packages": {"torch": "2.14.1", "benchlib": "0.1.0"}, "torch_cuda": None,
            "allocator": {"name": "glibc", "glibc_tunables": ""}, "env_vars": {}}
NEW_ENV = {**BASE_ENV, "packages": {"torch": "2.15.0", "benchlib": "0.1.0"}}
SLOW_ROW = {"num_workers": 1, "dataset": "mydataset"}


def write_set(results_dir, label, env, *, slow=1.0, repeats=7, noise=0.02, seed=0,
              study="bench_io", key="repeats", metric="samples_per_s", rows=None,
              data_path="/data/a", launches=5):
    """One result set: `launches` records per row (as `sweep --force` adds them), each
    with `repeats` per-repeat values around a known level with `noise` relative spread;
    SLOW_ROW's values multiplied by `slow`."""
    rng = np.random.default_rng(seed)
    bed = testbed.from_env(env, commit="c0ffee")
    rows = rows or [{"num_workers": w, "dataset": d} for w in (0, 1, 2)
                    for d in ("fashion-mnist", "mydataset")]
    for i, params in enumerate(rows):
        level = 100.0 * (i + 1) * (slow if params == SLOW_ROW else 1.0)
        params = {**params, "path": data_path}
        for launch in range(launches):
            vals = level * (1 + noise * rng.standard_normal(repeats))
            rec = results.make_record(
                run_id=results.run_id_for(study, "nb", params, bed["id"]) + f"-{label}-{launch}",
                table=study, notebook="10_single_device_io.ipynb", params=params, env=env,
                started_at=results.now(), status="ok", metrics={metric: float(np.median(vals))},
                details={key: [{metric: float(v), "repeat": r} for r, v in enumerate(vals)]},
                label=label, testbed=bed)
            results.write_record(results_dir, rec)
    return bed


@pytest.fixture
def two_sets(outputs):
    """base and new: six rows, 7 repeats each with 2% noise; new is 20% slower on one row."""
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV, seed=1)
    write_set(rdir, "new", NEW_ENV, slow=0.8, seed=2)
    return rdir


def test_a_known_20_percent_slowdown_in_one_row_is_flagged_and_nothing_else(two_sets):
    for threshold in (0.05, 0.10):
        c = changes.compare_sets("base", "new", two_sets, threshold)
        assert len(c.rows) == 6 and c.only_base == c.only_new == 0
        assert set(c.rows["launches"]) == {"5/5"} and set(c.rows["n_base"]) == {35}
        slower = c.slower
        assert list(slower["row"]) == ["dataset=mydataset, num_workers=1"]
        assert slower.iloc[0]["ratio"] == pytest.approx(0.8, abs=0.03)
        assert slower.iloc[0]["speed_high"] < 1 / (1 + threshold)
        assert set(c.rows["verdict"]) <= {"slower", "no change", "inconclusive"}
        assert c.exit_code() == 1
    # the slow row comes first, the interval holds the true ratio
    first = c.rows.iloc[0]
    assert first["verdict"] == "slower" and first["ci95_low"] < 0.8 < first["ci95_high"]


def launch_effect_values(rng, trials, rows=10, launches=5, epochs=3, launch_sigma=0.05,
                         epoch_sigma=0.01):
    """values[trial, row, launch, epoch] around 100: each launch its own lognormal offset
    (`launch_sigma`), and small iid noise between the epochs inside it."""
    offset = np.exp(rng.normal(0, launch_sigma, (trials, rows, launches, 1)))
    return 100 * offset * np.exp(rng.normal(0, epoch_sigma, (trials, rows, launches, epochs)))


def in_memory_set(label, values):
    """A result set of values[row, launch, epoch] without files: one record a launch."""
    bed = testbed.from_env(BASE_ENV, commit="c0ffee")
    records = [results.make_record(
        run_id=f"{label}-{row}-{launch}", table="bench_io", notebook="10_single_device_io.ipynb",
        params={"row": row}, env=BASE_ENV, started_at=results.now(), status="ok",
        metrics={"samples_per_s": float(np.median(epochs))},
        details={"epochs": [{"samples_per_s": float(v), "repeat": launch} for v in epochs]},
        label=label, testbed=bed) for row, launched in enumerate(values)
        for launch, epochs in enumerate(launched)]
    return ResultSet(label, Path("/nowhere") / label, records)


def naive_any_direction(base, new, threshold, resamples=400, seed=0):
    """Per trial: does the naive rule name a direction in any row? Every epoch of every
    launch taken as an independent value (one bootstrap over all of them), a 95%
    interval per row, no correction for the rows tested together."""
    rng = np.random.default_rng(seed)
    trials = len(base)

    def boot(v):  # (trials, values) -> (trials, resamples) medians
        picks = rng.integers(0, v.shape[1], (trials, resamples, v.shape[1]))
        return np.median(v[np.arange(trials)[:, None, None], picks], axis=-1)

    named = np.zeros(trials, bool)
    for row in range(base.shape[1]):
        speed = boot(new[:, row].reshape(trials, -1)) / boot(base[:, row].reshape(trials, -1))
        low, high = np.percentile(speed, [2.5, 97.5], axis=-1)
        named |= (high < 1 / (1 + threshold)) | (low > 1 + threshold)
    return named.mean()


def test_launch_to_launch_noise_fools_a_naive_rule_not_the_corrected_one():
    """Identical setups, 10 rows, 5 launches a side, each launch off by its own 5%
    (lognormal) with 1% noise between its 3 epochs, `--threshold 2%`, 100 seeded trials:
    the naive rule names a direction somewhere in most trials; compare (launches resampled,
    Holm across the 10 rows) in at most 5% of them, give or take the simulation's 2%."""
    trials, threshold = 100, 0.02
    rng = np.random.default_rng(23)
    base, new = launch_effect_values(rng, trials), launch_effect_values(rng, trials)
    # measured: 0.54 naive; 0.03 corrected; 0.11 with launches resampled but no correction
    # (before issue 23 item 4). 200 trials: 0.55, 0.045, 0.145.
    assert naive_any_direction(base, new, threshold) > 0.30
    named = held = 0
    for t in range(trials):
        c = changes.compare(in_memory_set("a", base[t]), in_memory_set("b", new[t]),
                             threshold, resamples=400)
        assert c.tests == 10
        named += c.rows["verdict"].isin(["slower", "faster"]).any()
        # a row whose interval clears the bound but not the correction is shown inconclusive,
        # and only rows shown slower fail the call
        demoted = c.rows[c.rows["why"].str.startswith("not after Holm")]
        assert (demoted["verdict"] == "inconclusive").all()
        assert ((demoted["speed_high"] < 1 / (1 + threshold))
                | (demoted["speed_low"] > 1 + threshold)).all()
        held += len(demoted) > 0
        assert c.exit_code() == int(len(c.slower) > 0)
    assert named / trials <= 0.05 + 0.02
    assert held >= 5  # measured: 8 trials whose uncorrected intervals named a row


def test_a_real_20_percent_slowdown_in_one_row_of_ten_is_still_found():
    """The same launch-to-launch noise, one row of ten 20% slower, 30 seeded trials: the
    corrected rule names that row slower in nearly every trial, another row in few."""
    trials = 30
    rng = np.random.default_rng(7)
    base, new = launch_effect_values(rng, trials), launch_effect_values(rng, trials)
    new[:, 3] *= 0.8
    found = others = 0
    for t in range(trials):
        c = changes.compare(in_memory_set("a", base[t]), in_memory_set("b", new[t]), 0.02)
        found += list(c.slower["row"]) == ["row=3"]
        others += c.rows.loc[c.rows["row"] != "row=3", "verdict"].isin(["slower", "faster"]).any()
    # measured: found in 29 of 30 trials; another row named in 2 (family-wise, 5% allowed)
    assert found / trials >= 0.9 and others / trials <= 0.1


def test_one_launch_on_a_side_gets_an_interval_but_no_verdict(outputs):
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV, launches=1)
    write_set(rdir, "new", NEW_ENV, slow=0.5, seed=3)
    c = changes.compare_sets("base", "new", rdir)
    assert set(c.rows["verdict"]) == {"inconclusive"} and c.exit_code() == 0
    slow = c.rows[c.rows["row"] == "dataset=mydataset, num_workers=1"].iloc[0]
    assert slow["ci95_high"] < 0.6 and slow["why"] == "1 launch"  # clear, but one launch
    assert "inconclusive (1 launch)" in view.table(c)["verdict"].tolist()
    assert any("come from fewer than 5 launches on a side" in s for s in view.sentences(c))


def test_epochs_that_name_their_repeat_are_launches():
    record = {"metrics": {"samples_per_s": 2.0}, "details": {"epochs": [
        {"samples_per_s": 1.0, "repeat": 0}, {"samples_per_s": 2.0, "repeat": 0},
        {"samples_per_s": 3.0, "repeat": 1}, {"samples_per_s": float("nan"), "repeat": 1}]}}
    assert changes.launches(record, "samples_per_s") == [[1.0, 2.0], [3.0]]
    assert changes.launches({"metrics": {"x": 1}, "details": {}}, "samples_per_s") == []
    repeats = {"metrics": {}, "details": {"repeats": [{"total_s": 1.0, "repeat": 0},
                                                      {"total_s": 2.0, "repeat": 1}]}}
    assert changes.launches(repeats, "total_s") == [[1.0, 2.0]]  # one process's repeats


def test_a_time_metric_is_slower_when_it_grows(outputs):
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV, key="epochs", metric="epoch_s", seed=1)
    write_set(rdir, "new", NEW_ENV, key="epochs", metric="epoch_s", seed=2, slow=1.25)
    c = changes.compare_sets("base", "new", rdir, metrics=["epoch_s"])
    assert list(c.slower["row"]) == ["dataset=mydataset, num_workers=1"]
    assert c.slower.iloc[0]["speed"] == pytest.approx(0.8, abs=0.03)
    assert view.change_text(c.slower.iloc[0]["speed"]).endswith("slower")


def test_fewer_than_five_repeats_give_the_range_and_inconclusive_never_an_interval(outputs):
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV, repeats=3, launches=1)
    write_set(rdir, "new", NEW_ENV, repeats=3, slow=0.5, seed=5, launches=1)
    c = changes.compare_sets("base", "new", rdir)
    assert set(c.rows["verdict"]) == {"inconclusive"} and c.exit_code() == 0
    row = c.rows.iloc[0]
    assert row["ci95_low"] is None or math.isnan(row["ci95_low"])
    text = view.interval_text(row)
    assert text.startswith("n=3/3 <5, range ") and row["range_low"] <= row["ratio"] <= row["range_high"]
    assert any("fewer than 5 values" in s for s in view.sentences(c))


def test_records_of_one_row_in_a_set_pool_as_launches():
    base = [[100.0, 101, 99, 100, 102]]
    new = [[90.0, 91, 89, 90, 92], [110.0, 111, 109, 110, 112]]  # two launches disagree
    one_launch = changes.ratio_interval(base, [new[0] + new[1]])
    two_launches = changes.ratio_interval(base, new)
    assert two_launches.n_new == 10 and two_launches.ratio == one_launch.ratio
    width = lambda r: r.high - r.low  # noqa: E731
    assert width(two_launches) >= width(one_launch)  # launch-to-launch spread is counted


def test_verdicts_against_the_threshold():
    assert changes.direction_verdict(0.80, 0.90, 0.05) == "slower"
    assert changes.direction_verdict(1.06, 1.20, 0.05) == "faster"
    assert changes.direction_verdict(0.97, 1.03, 0.05) == "no change"
    assert changes.direction_verdict(0.90, 1.01, 0.05) == "inconclusive"  # spans the threshold
    assert changes.direction_verdict(None, None, 0.05) == "inconclusive"
    assert changes.direction_verdict(0.80, 0.90, 0.05, n_launches=1) == "inconclusive"
    assert changes.parse_threshold("5%") == 0.05 and changes.parse_threshold("0.1") == 0.1
    for bad in ("150%", "0", "x", "1.5"):
        with pytest.raises(changes.UsageError, match="threshold: "):
            changes.parse_threshold(bad)


def test_cli_prints_the_table_and_what_changed_and_exits_1_on_a_slowdown(two_sets, capsys):
    assert main(["compare", "base", "new"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("base: base (30 ok records on node7, ")
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("study"))
    assert "ratio" in lines[header] and "95% interval" in lines[header]
    assert "mydataset, num_workers=1" in lines[header + 1] and "slower" in lines[header + 1]
    assert "testbed torch" in out and "2.14.1 -> 2.15.0" in out
    assert "Slower beyond 10% with 95% confidence: bench_io dataset=mydataset, num_workers=1" in out
    assert ("6 of them (rows x metrics with 5+ launches a side) tested for a direction "
            "together; the verdicts are corrected for that (Holm, family-wise alpha 0.05)." in out)
    assert main(["compare", "base", "new", "--study", "bench_io", "--threshold", "30%"]) == 0
    assert "No row is slower beyond 30%" in capsys.readouterr().out
    # the study's name in the registry (config/studies.py) picks the same rows as the table's
    assert main(["compare", "base", "new", "--study", "single_device_io"]) == 1
    assert "Slower beyond 10% with 95% confidence: bench_io" in capsys.readouterr().out


def test_two_outputs_folders_compare_and_the_data_path_is_not_part_of_a_row(tmp_path, capsys):
    write_set(tmp_path / "laptop" / "results", "mine", BASE_ENV, data_path="/home/me/data")
    write_set(tmp_path / "cluster" / "results", "theirs", NEW_ENV, slow=0.8, seed=3,
              data_path="/shared/data")
    assert main(["compare", str(tmp_path / "laptop"), str(tmp_path / "cluster")]) == 1
    out = capsys.readouterr().out
    assert "base: mine (" in out and "new:  theirs (" in out and "1 slower" in out
    # a results folder works too
    assert main(["compare", str(tmp_path / "laptop" / "results"), str(tmp_path / "cluster")]) == 1


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("benchlib compare: ")
    return err[-1]


def test_bad_input_gets_one_line_and_exit_2(two_sets, capsys):
    assert main(["compare", "base", "base"]) == 2
    assert "BASE and NEW are both result set base" in one_line_error(capsys)
    assert main(["compare", "base", "nosuch"]) == 2
    line = one_line_error(capsys)
    assert "nosuch: no result set with that label in" in line
    assert "result sets here: new (30 ok), base (30 ok)" in line
    write_set(two_sets, "other", BASE_ENV, study="elsewhere")
    assert main(["compare", "base", "other"]) == 2
    assert ("no rows in common: base has tables bench_io, other has elsewhere"
            in one_line_error(capsys))
    assert main(["compare", "base", "new", "--metric", "loss"]) == 2
    assert "metric: 'loss' has no direction to compare" in one_line_error(capsys)
    assert main(["compare", "base", "new", "--study", "nope"]) == 2
    assert ("study: 'nope' is in neither set; studies: bench_io, single_device_io"
            in one_line_error(capsys))
    assert main(["compare", "base", "new", "--threshold", "1.5"]) == 2
    assert "threshold: '1.5' must be a percentage" in one_line_error(capsys)


def test_a_truncated_record_is_skipped_with_a_warning_naming_it(two_sets, capsys):
    broken = two_sets / "bench_io" / "0123456789ab.json"
    broken.write_text('{"run_id": "0123456789ab", "stud')
    assert main(["compare", "base", "new"]) == 1
    captured = capsys.readouterr()
    assert captured.err.count(f"benchlib: skipped {broken}: not valid JSON") == 1
    assert "1 slower" in captured.out


def test_a_set_holding_one_row_from_two_testbeds_is_refused(outputs, capsys):
    rdir = outputs / "results"
    write_set(rdir, "mixed", BASE_ENV)
    write_set(rdir, "mixed", NEW_ENV)
    write_set(rdir, "new", NEW_ENV)
    assert main(["compare", "mixed", "new"]) == 2
    assert "from 2 testbeds" in one_line_error(capsys)


def test_the_environment_diff_names_versions_and_allocator(outputs):
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV)
    tuned = {**BASE_ENV, "allocator": {"name": "glibc", "glibc_tunables": "x=1"},
             "env_vars": {"OMP_NUM_THREADS": "2", "SLURM_JOB_ID": "7"}}
    write_set(rdir, "tuned", tuned, seed=4)
    diff = {w: (b, a) for w, b, a in changes.compare_sets("base", "tuned", rdir).env_diff}
    assert diff["testbed allocator"] == ("glibc", "glibc (x=1)")
    assert diff["$OMP_NUM_THREADS"] == ("-", "2")
    assert "$SLURM_JOB_ID" not in diff and "testbed torch" not in diff


def test_the_default_pair_is_the_newest_set_and_the_newest_older_one_sharing_a_row(outputs):
    rdir = outputs / "results"
    write_set(rdir, "first", BASE_ENV)
    write_set(rdir, "second", BASE_ENV, seed=3)
    write_set(rdir, "unrelated", BASE_ENV, study="elsewhere")
    assert changes.default_pair(rdir) == ("first", "second")  # "unrelated" shares no row
    c = changes.compare_sets("", "", rdir)
    assert (c.base.label, c.new.label) == ("first", "second")


def test_trend_shows_one_rows_metric_in_every_set(outputs):
    rdir = outputs / "results"
    for i, label in enumerate(("v1", "v2", "v3")):
        write_set(rdir, label, BASE_ENV, seed=i, slow=1 - 0.1 * i)
    c = changes.compare_sets("v1", "v3", rdir)
    key, metric = view.most_changed(c)
    assert json.loads(key)["params"] == SLOW_ROW and metric == "samples_per_s"
    history = view.trend(rdir, key, metric)
    assert list(history["label"]) == ["v1", "v2", "v3"] and set(history["n"]) == {35}
    assert history[metric].is_monotonic_decreasing
    assert (history["low"] <= history[metric]).all() and (history[metric] <= history["high"]).all()
    trend_ax = view.trend_plot(history, metric, key)
    forest_ax = view.forest_plot(c)
    for ax in (trend_ax, forest_ax):  # every plot says what it shows, in units
        assert ax.get_title() and (ax.get_xlabel() or ax.get_ylabel())
    assert trend_ax.get_ylabel() == "samples_per_s" and "(>1: faster)" in forest_ax.get_xlabel()


def test_the_threshold_default_is_the_same_in_the_cli_and_the_notebook():
    from benchlib.config import CompareConfig

    assert CompareConfig().threshold == changes.DEFAULT_THRESHOLD


@pytest.mark.notebook
def test_the_report_publishes_the_compare_notebook_when_two_sets_exist(two_sets, outputs):
    from benchlib.report import publish

    page = publish.build(outputs).read_text()
    assert 'href="compare.html">new against base</a>' in page
    assert "<th>set</th>" in page  # the study table says which set a run is in
    html = (outputs / "report" / "compare.html").read_text()
    assert "Slower beyond 10% with 95% confidence: bench_io dataset=mydataset, num_workers=1" in html
    assert "2.15.0" in html and "<img" in html  # the env diff, the forest and trend plots
    assert "from benchlib import" not in html


@pytest.mark.notebook
def test_the_report_has_no_compare_page_with_one_set(outputs):
    from benchlib.report import publish

    write_set(outputs / "results", "only", BASE_ENV)
    page = publish.build(outputs, analysis=True).read_text()
    assert "compare.html" not in page and not (outputs / "report" / "compare.html").exists()


def test_records_of_the_wrong_shape_are_skipped_with_a_warning_naming_each(two_sets, capsys):
    from conftest import write_wrong_shapes

    good = next(r for r in results.read_records(two_sets) if r["label"] == "new")
    wrong = write_wrong_shapes(two_sets, good)
    assert main(["compare", "base", "new"]) == 1
    captured = capsys.readouterr()
    for path, why in wrong:
        assert captured.err.count(f"benchlib: skipped {path}: {why}\n") == 1
    assert "1 slower" in captured.out


def test_two_to_four_launches_a_side_get_no_verdict(outputs):
    """The one verdict rule: a direction needs 5+ launches a side (issue 23)."""
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV, launches=4)
    write_set(rdir, "new", NEW_ENV, slow=0.5, seed=3, launches=4)
    c = changes.compare_sets("base", "new", rdir)
    assert set(c.rows["verdict"]) == {"inconclusive"} and set(c.rows["why"]) == {"4 launches"}
    assert changes.direction_verdict(0.80, 0.90, 0.05, n_launches=4) == "inconclusive"


NET = """import torch


def build(width={width}):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 10))
"""


def test_an_edit_to_the_users_model_reads_model_changed_and_a_torch_upgrade_stack_changed(
        small_data, outputs, tmp_path, monkeypatch, capsys):
    """The same io row run under two labels in one outputs folder (the second record's run
    id gets its -2), the user's builder (an nn.Sequential: torch's class, torch's file)
    edited between: compare pairs the two by row and says "model changed". The first
    record again on a testbed whose torch is newer says "stack changed", and not "model"."""
    import sys

    module = tmp_path / "mynet.py"
    module.write_text(NET.format(width=16))
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["io", "1", "cpu", "--path", str(small_data), "--dataset", "fashion-mnist",
            "--variant", "preload_batched", "--repeats", "1", "--model", "mynet:build"]
    assert main([*argv, "--label", "before"]) == 0
    module.write_text(NET.format(width=16).replace("torch.nn.ReLU()", "torch.nn.GELU()"))
    monkeypatch.delitem(sys.modules, "mynet")  # a new process would import the edit
    assert main([*argv, "--label", "after"]) == 0
    rdir = outputs / "results"
    before, after = sorted(results.read_records(rdir), key=lambda r: r["label"] != "before")
    assert after["run_id"] == before["run_id"] + "-2"  # one row, two ids
    capsys.readouterr()
    assert main(["compare", "before", "after"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    sha = before["metrics"]["model_source_sha"], after["metrics"]["model_source_sha"]
    assert f"model changed: io (one row) (mynet:build): its identity {sha[0]} -> {sha[1]} " \
        f"(hash of {module}; model_args)" in out
    assert "stack changed" not in out

    upgraded = {**before, "label": "upgraded", "run_id": before["run_id"] + "-torch"}
    upgraded["testbed"] = {**before["testbed"], "id": "an0ther",
                           "identity": {**before["testbed"]["identity"], "torch": "2.99.0"}}
    results.write_record(rdir, upgraded)
    assert main(["compare", "before", "upgraded"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    torch_now = before["testbed"]["identity"]["torch"]
    assert f"stack changed: io (one row) (mynet:build): torch {torch_now} -> 2.99.0." in out
    assert "model changed" not in out


def test_a_record_from_before_the_identity_hash_is_not_read_as_a_model_change():
    from benchlib.compare.sets import row_changes

    def rec(sha, covers=None):
        metrics = {"model_source_sha": sha, **({"model_source": covers} if covers else {})}
        return {"table": "own", "params": {"model": "pkg.net:build"}, "metrics": metrics,
                "testbed": {"identity": {"torch": "2.14.1"}}}
    assert row_changes({"k": [rec("aaaa")]}, {"k": [rec("bbbb", "net.py; model_args")]},
                       {"k": "(one row)"}) == [
        "model identity of own (one row) (pkg.net:build) not compared: a record of it "
        "predates the hash of builder, classes and model_args."]
    assert row_changes({"k": [rec("aaaa", "x")]}, {"k": [rec("aaaa", "x")]}, {}) == []


@pytest.mark.parametrize("metric", ["checkpoint_blocking_s", "checkpoint_total_s", "restore_s"])
def test_save_and_restore_seconds_are_slower_when_they_grow(outputs, metric):
    """A save or a restore that takes 25% longer is a slowdown, as a step time is."""
    rdir = outputs / "results"
    write_set(rdir, "base", BASE_ENV, key="epochs", metric=metric, seed=1)
    write_set(rdir, "new", NEW_ENV, key="epochs", metric=metric, seed=2, slow=1.25)
    c = changes.compare_sets("base", "new", rdir, metrics=[metric])
    assert list(c.slower["row"]) == ["dataset=mydataset, num_workers=1"]
    assert c.slower.iloc[0]["speed"] == pytest.approx(0.8, abs=0.03)

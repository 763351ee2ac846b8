"""The landing page's lines, computed from small hand-made records."""

from __future__ import annotations

import itertools
from pathlib import Path

from benchlib.analysis import common
from benchlib.config import studies
from benchlib.records import testbed
from benchlib.report import landing

_clock = itertools.count()


def env(host: str = "box", gpus: tuple[str, ...] = (), torch: str = "2.14.1",
        driver: str | None = None) -> dict:
    return {"hostname": host, "cpu_model": "Xeon", "cpu_logical": 8,
            "gpus": [{"name": g} for g in gpus], "cuda_available": bool(gpus),
            "torch_cuda": "12.8", "nvidia_driver": driver, "nccl": "2.27.3" if gpus else None,
            "packages": {"torch": torch}, "allocator": {"name": "glibc"}}


def record(table: str, notebook: str, params: dict, metrics: dict | None = None,
           status: str = "ok", error: dict | None = None, **env_args) -> dict:
    """A record of a row of parameter table `table`; its study, as the registry names the
    notebook's."""
    t = next(_clock)
    return {"run_id": f"{table[:4]}{t:04d}", "table": table,
            "study": studies.of_notebook(notebook), "notebook": notebook,
            "params": params, "metrics": metrics or {}, "status": status, "error": error,
            "env": env(**env_args), "started_at": f"2026-01-01T00:{t // 60:02d}:{t % 60:02d}",
            "finished_at": f"2026-01-01T01:{t // 60:02d}:{t % 60:02d}"}


def sps(median: float, p10: float, p90: float, n: int = 12, **more) -> dict:
    return {"samples_per_s": median, "samples_per_s_p10": p10, "samples_per_s_p90": p90,
            "samples_per_s_n": n, "device_name": "cpu", **more}


DIST = "20_dp_vs_ddp.ipynb"
WORK = {"dataset": "cifar10", "model": "pyramidnet", "depth": 20, "alpha": 48,
        "batch_size": 32, "device": "cpu"}


def dist_records(host: str = "box", ddp: float = 113.0) -> list[dict]:
    return [
        record("dp_ddp", DIST, {**WORK, "strategy": "single", "launcher": "torchrun",
                                "nproc_per_node": 1}, sps(100, 99, 101), host=host),
        record("dp_ddp", DIST, {**WORK, "strategy": "ddp", "launcher": "torchrun",
                                "nproc_per_node": 2},
               sps(ddp, ddp - 3, ddp + 4, world_size=2, backend_used="gloo"), host=host),
    ]


def test_ddp_line_gives_the_ratio_over_one_process_with_paired_spread_and_n():
    runs = dist_records()
    [finding] = landing.findings(runs)
    assert finding.claims[0].text() == ("DDP via torchrun on 2 gloo ranks, pyramidnet on "
                                        "cifar10, batch 32, on cpu: 1.13x over one process "
                                        "(p10-p90 1.09-1.18, n=12 epochs each)")
    by_id = {r["run_id"]: r for r in runs}  # a figure names the runs it came from by id
    ddp, single = finding.claims[0].figure.sources
    assert by_id[ddp[1]]["params"]["strategy"] == "ddp" and single == ("baseline", single[1])
    assert by_id[single[1]]["params"]["strategy"] == "single"
    assert finding.testbed.label == "T1" and finding.status == "2 runs, all ok"
    # 2 ranks on a CPU: the records show the cause; notebook 90 says it in the same words
    assert common.SHARED_CORES in finding.caveat


def test_a_study_with_no_ok_run_says_so_and_gives_no_figure():
    runs = [record("dp_ddp", DIST, {**WORK, "strategy": "ddp"}, status="failed",
                   error={"type": "LaunchError", "message": "rank 1 exited with code 1"})
            for _ in range(2)]
    [finding] = landing.findings(runs)
    assert finding.claims == [] and finding.status == "no ok run: 2 failed"
    assert finding.text() == (
        "dp_vs_ddp: Does DDP beat one process and DataParallel here, and by how much? No ok run, "
        "so no figure: 2 failed (first error: LaunchError: rank 1 exited with code 1).")


def test_a_failed_run_is_counted_but_its_numbers_are_never_used():
    runs = dist_records()
    runs.append(record("dp_ddp", DIST, {**WORK, "strategy": "ddp", "launcher": "tcp",
                                        "nproc_per_node": 2}, sps(900, 800, 1000, world_size=2),
                       status="failed", error={"type": "LaunchError", "message": "timed out"}))
    [finding] = landing.findings(runs)
    assert finding.status == "2 of 3 runs ok, 1 failed"
    assert [c.subject for c in finding.claims] == [
        "DDP via torchrun on 2 gloo ranks, pyramidnet on cifar10, batch 32, on cpu"]
    assert "9.00x" not in finding.text() and "tcp" not in finding.text()


def test_two_testbeds_give_two_lines_each_against_its_own_baseline():
    runs = dist_records("a", ddp=113.0) + dist_records("b", ddp=180.0)
    runs[2]["env"]["gpus"] = [{"name": "NVIDIA H100 80GB HBM3"}] * 2  # b has GPUs
    runs[3]["env"]["gpus"] = runs[2]["env"]["gpus"]
    first, second = landing.findings(runs)
    assert (first.testbed.label, second.testbed.label) == ("T1", "T2")
    assert first.claims[0].figure.value == "1.13x" and second.claims[0].figure.value == "1.80x"
    assert second.testbed.device == "2 x NVIDIA H100 80GB HBM3" and first.testbed.device == "cpu"
    by_id = {r["run_id"]: r for r in runs}
    assert {by_id[run]["env"]["hostname"] for _, run in second.claims[0].figure.sources} == {"b"}


def test_a_ratio_without_a_baseline_shows_the_throughput_and_says_why():
    runs = dist_records()[1:]  # no single-process run
    [finding] = landing.findings(runs)
    assert finding.claims[0].text() == (
        "DDP via torchrun on 2 gloo ranks, pyramidnet on cifar10, batch 32, on cpu: 113 "
        "samples/s (p10-p90 110-117, n=12 epochs); no single-process run of the same work "
        "to compare with")


IO = "10_single_device_io.ipynb"


def test_io_line_names_the_fastest_setting_and_how_it_compares_with_the_slowest():
    base = {"dataset": "fashion-mnist", "mode": "train", "device": "cpu", "variant": "raw",
            "model": "toynet", "batch_size": 64}
    runs = [record("io_workers", IO, {**base, "num_workers": w}, sps(v, v * 0.9, v * 1.1, n=3))
            for w, v in [(0, 500.0), (1, 1200.0), (2, 1000.0)]]
    [finding] = landing.findings(runs)
    texts = [c.text() for c in finding.claims]
    assert texts == [
        "fashion-mnist train, toynet, batch 64, on cpu: fastest num_workers=1: 1,200 "
        "samples/s (p10-p90 1,080-1,320, n=3 repeats)",
        "fashion-mnist train, toynet, batch 64, on cpu: num_workers=1 against the slowest, "
        "num_workers=0: 2.40x the samples/s (p10-p90 1.96-2.93, n=3 repeats each)",
    ]
    assert finding.caveat == ""  # one process: nothing shares cores


def test_no_io_speedup_is_published_from_a_steady_rate_that_hides_the_start_up():
    """The issue's slow disk: 8 workers measured 1,549 samples/s steady, 150 over the whole
    epoch (its first batch waited 119 s); no workers 420 steady, 400 over the epoch. The
    steady rates would make 8 workers 3.69x faster; its epoch was 2.7x slower."""
    base = {"dataset": "fashion-mnist", "mode": "train", "device": "cpu",
            "variant": "tensorclass_memmap", "model": "toynet", "batch_size": 64}
    runs = [record("io_workers", IO, {**base, "num_workers": 0},
                   sps(420.0, 400.0, 440.0, n=3, epoch_samples_per_s=400.0, startup_gap=1.05,
                       startup_hidden=False)),
            record("io_workers", IO, {**base, "num_workers": 8},
                   sps(1549.0, 1500.0, 1600.0, n=3, epoch_samples_per_s=150.0, startup_gap=10.3,
                       startup_hidden=True, first_batch_s=119.0))]
    [finding] = landing.findings(runs)
    texts = [c.text() for c in finding.claims]
    assert texts[0].startswith("fashion-mnist train, toynet, batch 64, on cpu: fastest "
                               "num_workers=0: 420 samples/s"), texts
    assert texts[1] == ("fashion-mnist train, toynet, batch 64, on cpu: num_workers=0 against "
                        "the slowest, num_workers=8: 2.67x the samples/s (whole-epoch rates, "
                        "start-up included: a steady rate hides it)"), texts
    assert "3.69" not in " ".join(texts)
    assert finding.caveat.startswith("1 run(s) spent so long starting that the steady rate "
                                     "hides it (e.g. io_w")
    assert "1,549 samples/s steady, 150 over the whole epoch" in finding.caveat


def test_no_training_speedup_is_taken_from_a_steady_rate_that_hides_the_start_up():
    """DDP on 2 ranks whose workers took most of each epoch to start: its speedup over one
    process is of whole-epoch rates, in the table, the headline and the sentences."""
    from benchlib.analysis import dp_vs_ddp
    from benchlib.records import results

    single, ddp = dist_records()
    ddp["metrics"].update(epoch_samples_per_s=30.0, startup_gap=113 / 30, startup_hidden=True,
                          devices=2, threads_per_rank=1)
    single["metrics"].update(epoch_samples_per_s=90.0, startup_gap=100 / 90,
                             startup_hidden=False, devices=1, threads_per_rank=1)
    [finding] = landing.findings([single, ddp])
    assert finding.claims[0].text() == (
        "DDP via torchrun on 2 gloo ranks, pyramidnet on cifar10, batch 32, on cpu: 0.33x over "
        "one process (whole-epoch rates, start-up included: a steady rate hides it)")
    runs = dp_vs_ddp.runs(results.frame([single, ddp]))
    assert set(runs["speedup_of"]) == {"whole epoch"}
    assert runs.set_index("strategy").loc["ddp", "speedup"] == 30.0 / 90.0
    text = dp_vs_ddp.conclusions(runs)
    assert "**speedup 0.33x** (whole-epoch rates, start-up included)" in text
    assert "spent so long starting that the steady rate hides it" in text


def epochs_of(name: str, median: float, p10: float, p90: float, n: int) -> dict:
    return {name: median, f"{name}_p10": p10, f"{name}_p90": p90, f"{name}_n": n}


def test_a_whole_epoch_speedup_carries_its_spread_and_n_and_reads_the_projected_epoch():
    """Whole-epoch ratios were published with no spread and no n. DDP's start-up hides
    behind its steady rate: its speedup is of whole-epoch rates, paired p10 over p90 as the
    steady one is, over the epochs each rate is of. Where a run stopped at max_steps short
    of its data set's epoch, the rate compared is the whole epoch projected for the data
    set, not the cut epoch's."""
    single, ddp = dist_records()
    ddp["metrics"].update(startup_gap=113 / 30, startup_hidden=True, devices=2,
                          threads_per_rank=1, **epochs_of("epoch_samples_per_s", 30, 27, 33, 3))
    single["metrics"].update(startup_gap=100 / 90, startup_hidden=False, devices=1,
                             threads_per_rank=1, **epochs_of("epoch_samples_per_s", 90, 88, 92, 3))
    [finding] = landing.findings([single, ddp])
    assert finding.claims[0].text() == (
        "DDP via torchrun on 2 gloo ranks, pyramidnet on cifar10, batch 32, on cpu: 0.33x over "
        "one process (whole-epoch rates, start-up included: a steady rate hides it) (p10-p90 "
        "0.29-0.38, n=3 epochs each)")
    # the 30 samples/s of a cut epoch; a whole epoch of the data set, projected: 50 and 95
    ddp["metrics"].update(**epochs_of("full_epoch_samples_per_s", 50, 45, 55, 3))
    single["metrics"].update(**epochs_of("full_epoch_samples_per_s", 95, 93, 97, 3))
    [finding] = landing.findings([single, ddp])
    assert "0.53x over one process (whole-epoch rates" in finding.claims[0].text()
    assert "(p10-p90 0.46-0.59, n=3 epochs each)" in finding.claims[0].text()
    assert "over a whole epoch of its data set, projected" in finding.caveat


def test_io_compares_only_within_the_same_data_set_and_mode():
    runs = [record("io_variants", IO, {"dataset": "fashion-mnist", "mode": m, "variant": v,
                                        "device": "cpu", "model": "toynet", "batch_size": 64},
                   sps(s, s, s, n=3))
            for m, v, s in [("traverse", "raw", 1000.0), ("traverse", "preload", 9000.0),
                            ("train", "raw", 400.0), ("train", "preload", 600.0)]]
    [finding] = landing.findings(runs)
    subjects = [c.subject for c in finding.claims]
    work = "toynet, batch 64, on cpu"
    assert subjects == [f"fashion-mnist traverse, {work}: fastest preload",
                        f"fashion-mnist traverse, {work}: preload against the slowest, raw",
                        f"fashion-mnist train, {work}: fastest preload",
                        f"fashion-mnist train, {work}: preload against the slowest, raw"]
    assert [c.figure.value for c in finding.claims] == ["9,000", "9.00x", "600", "1.50x"]


def test_fault_line_gives_recovery_time_and_whether_the_loss_came_back():
    params = {"model": "toynet", "dataset": "fashion-mnist", "nproc_per_node": 2,
              "fail_at_step": 15, "checkpoint_every": 4}
    run = record("fault", "35_fault_tolerance.ipynb", params,
                 {"restarts": 1, "steps_redone": 3, "recovery_s": 7.46, "loss_diff": 0.0,
                  "loss_last": 0.5})
    [finding] = landing.findings([run])
    assert finding.claims[0].text() == (
        "2 ranks, a rank killed after step 15, a torch_save checkpoint every 4, toynet on "
        "fashion-mnist: "
        "7.5 s back to training (n=1 failure); 3 step(s) redone, final loss equal to the "
        "uninterrupted run's")


def test_framework_line_says_mfu_is_unknown_rather_than_inventing_it():
    params = {"arch": "resnet18", "dataset": "synthetic", "image_size": 64, "batch_size": 8,
              "device": "cpu", "precision": "fp32", "channels_last": False, "compile": False}
    one = record("framework", "40_framework_comparison.ipynb", {**params, "nproc_per_node": 1},
                 sps(40.0, 38.0, 41.0, n=3, mfu=None))
    two = record("framework", "40_framework_comparison.ipynb", {**params, "nproc_per_node": 2},
                 sps(60.0, 58.0, 61.0, n=3))
    [finding] = landing.findings([one, two])
    assert finding.claims[0].text() == (
        "resnet18 64px, batch 8, synthetic, fp32 on 1 cpu: 40.0 samples/s (p10-p90 "
        "38.0-41.0, n=3 repeats); MFU unknown: no published peak for this device")
    assert finding.claims[1].figure.value == "1.50x"
    with_peak = record("framework", "40_framework_comparison.ipynb",
                       {**params, "nproc_per_node": 1}, sps(40.0, 38.0, 41.0, n=3, mfu=0.412),
                       gpus=("NVIDIA H100 80GB HBM3",), driver="570.1")
    assert "MFU 41.2%" in landing.findings([with_peak])[0].text()


def test_multinode_line_gives_speedup_over_one_rank_of_the_same_trainer():
    base = {"dataset": "fashion-mnist", "model": "toynet", "batch_size": 32, "device": "cpu",
            "nproc_per_node": 1, "launcher": "torchrun"}
    runs = [record("multinode", "30_multinode_lightning.ipynb",
                   {**base, "trainer": t, "nnodes": n}, sps(v, v - 10, v + 10, n=2, world_size=n))
            for t, n, v in [("ddp", 1, 1000.0), ("ddp", 2, 1500.0), ("lightning", 1, 800.0),
                            ("lightning", 2, 1000.0)]]
    [finding] = landing.findings(runs)
    assert [c.text() for c in finding.claims] == [
        "ddp via torchrun on 2 node(s) x 1, toynet on fashion-mnist, batch 32, on cpu: 1.50x "
        "over 1 rank of ddp (p10-p90 1.48-1.53, n=2 epochs each)",
        "lightning via torchrun on 2 node(s) x 1, toynet on fashion-mnist, batch 32, on cpu: "
        "1.25x over 1 rank of lightning (p10-p90 1.22-1.28, n=2 epochs each)"]


def test_data_prep_says_when_the_data_was_generated():
    run = record("data_prep", "00_data_prep.ipynb", {"dataset": "all"},
                 {"fashion_mnist_samples": 7000, "fashion_mnist_source": "generated",
                  "cifar10_samples": 2457, "cifar10_source": "generated"})
    [finding] = landing.findings([run])
    assert finding.claims[0].text() == "fashion-mnist: 7,000 samples, generated"
    assert "accuracy figures are not" in finding.caveat


def test_a_notebook_without_a_headline_says_so():
    [finding] = landing.findings([record("broken", "trivial.ipynb", {"x": 1})])
    assert finding.claims[0].text() == "1 ok run; no headline figure is defined for trivial.ipynb"


def test_testbed_names_device_cpu_torch_cuda_and_driver():
    rec = record("s", IO, {}, gpus=("NVIDIA H100 80GB HBM3",) * 8, driver="570.133.20")
    rec["testbed"] = testbed.from_env(rec["env"], commit="0123456789abcdef")
    bed = landing.testbed_of(rec)
    assert dict(bed.describe()) == {
        "device": "8 x NVIDIA H100 80GB HBM3", "CPU": "Xeon, 8 logical cores",
        "torch": "2.14.1", "CUDA": "12.8", "driver": "570.133.20", "NCCL": "2.27.3",
        "allocator": "glibc", "benchlib": "unknown (commit 0123456789)", "host": "box",
        "testbed id": rec["testbed"]["id"]}
    cpu_only = landing.testbed_of(record("s", IO, {}))  # a version 1 record: from its env
    assert (cpu_only.device, cpu_only.cuda, cpu_only.driver) == \
        ("cpu", "12.8 build, no CUDA device", "none")


def test_findings_follow_the_notebooks_order():
    runs = dist_records() + [record("data_prep", "00_data_prep.ipynb", {},
                                    {"mydataset_samples": 10, "mydataset_source": "generated"})]
    assert [f.study for f in landing.findings(runs)] == ["data_prep", "dp_vs_ddp"]


def test_a_ratio_above_the_rank_count_is_flagged_with_the_threads_each_run_had():
    runs = dist_records(ddp=955.0)
    runs[0]["metrics"]["threads_per_rank"], runs[1]["metrics"]["threads_per_rank"] = 2, 1
    [finding] = landing.findings(runs)
    assert finding.claims[0].figure.value == "9.55x"
    assert ("1 of these ratios exceed the rank count (e.g. 9.55x with 2x the ranks): more "
            "than linear is not what more ranks give; the baseline ran 2 threads per rank and "
            "this run 1") in finding.caveat
    assert "exceed the rank count" not in landing.findings(dist_records(ddp=190.0))[0].caveat


def test_a_rerun_of_a_row_counts_once_with_its_newest_ok_figure():
    runs = dist_records()
    again = dict(runs[1], run_id=runs[1]["run_id"] + "-2", finished_at="2026-01-01T02:00:00",
                 metrics=sps(150, 147, 154, world_size=2, backend_used="gloo"))
    failed = dict(runs[1], run_id=runs[1]["run_id"] + "-3", finished_at="2026-01-01T03:00:00",
                  status="failed", error={"type": "LaunchError", "message": "timed out"})
    [finding] = landing.findings([*runs, again, failed])
    assert [c.figure.value for c in finding.claims] == ["1.50x"]  # the newest ok, once
    assert finding.status == "3 of 4 runs ok, 1 failed"


def test_projection_line_gives_the_efficiency_at_the_largest_size_and_what_stops_it():
    metrics = {"largest_devices": 1024, "efficiency_largest": 0.447, "stops_at_devices": 8,
               "stops_by": "input", "check_median_abs_error_pct": 8.209,
               "compute_source": "1-GPU row of seed 003 PyTorch batch 128"}
    run = record("scaling_projection", "45_scaling_projection.ipynb", {"compute": "dlperf"}, metrics)
    [finding] = landing.findings([run])
    assert finding.question == "How far would these figures scale, and what stops them?"
    assert finding.claims[0].text() == (
        "projected from 1-GPU row of seed 003 PyTorch batch 128: 45% efficiency at 1,024 "
        "devices; input sets the step from 8 devices; the model itself (not this run) is 8.2% "
        "off seed 003's published 2- and 4-node rows (median)")


def test_dataparallel_line_names_its_devices():
    runs = dist_records()
    runs.append(record("dp_ddp", DIST, {**WORK, "strategy": "dp", "launcher": "torchrun",
                                        "nproc_per_node": 2}, sps(104, 101, 106, devices=2)))
    [finding] = landing.findings(runs)
    dp = next(c.text() for c in finding.claims if c.text().startswith("DataParallel"))
    assert dp.startswith("DataParallel on 2 device(s), pyramidnet on cifar10, batch 32, on "
                         "cpu: 1.04x over one process"), dp


def test_a_spread_over_launches_says_launches_not_epochs():
    """repeat_mode process: each launch is one sample of the spread, and n counts them."""
    process = [{**r, "params": {**r["params"], "repeat_mode": "process"}}
               for r in dist_records()]
    for r in process:
        r["metrics"]["samples_per_s_n"] = 3
    [finding] = landing.findings(process)
    assert finding.claims[0].text().endswith("(p10-p90 1.09-1.18, n=3 launches each)")
    mixed = [dist_records()[0], process[1]]  # 12 epochs of one, 3 launches of the other
    [finding] = landing.findings(mixed)
    assert finding.claims[0].text().endswith("n=3 launches and 12 epochs)")
    [finding] = landing.findings([process[0]])
    assert finding.claims[0].text().endswith("n=3 launches)")


def test_landing_page_and_notebook_90_say_a_headline_with_the_same_function():
    """One analysis stack: the study's own module, through analysis.findings over the same
    selection, gives the sentence; the landing page (line and HTML) and notebook 90's
    findings both show it."""
    import html
    import re

    from benchlib.analysis import findings
    from benchlib.analysis.sections import Records
    from benchlib.records import results
    from benchlib.report import index

    runs = dist_records()
    claims, caveat = findings.headline(studies.named("dp_vs_ddp"), results.frame(runs))
    sentence = findings.sentence(claims, caveat)
    assert sentence.startswith("DDP via torchrun on 2 gloo ranks, pyramidnet on cifar10, batch "
                               "32, on cpu: 1.13x over one process (p10-p90 1.09-1.18, n=12 "
                               "epochs each).")
    assert common.SHARED_CORES in sentence
    [finding] = landing.findings(runs)
    assert sentence in finding.text()
    site = index.Site(Path("/r"), Path("/o"))
    site.records = {r["run_id"]: Path(f"/r/records/{r['run_id']}.json") for r in runs}
    shown = re.sub(r' <span class="src">.*?</span>', "", index.finding(finding, site, [], False))
    page = html.unescape(re.sub(r"<[^>]+>", "", shown))  # the HTML's text, without links
    assert [c.text() for c in claims] == [c.text() for c in finding.claims]
    assert all(c.text() in page for c in claims) and caveat in page
    # notebook 90's frame holds every study: other studies' columns are NaN for these rows,
    # their integer columns floats, and the sentence is still the same
    others = [record("io_workers", IO, {"dataset": "fashion-mnist", "num_workers": w,
                                        "variant": "raw", "mode": "train", "device": "cpu",
                                        "model": "toynet", "batch_size": 64},
                     sps(v, v, v, n=3)) for w, v in [(0, 500.0), (2, 900.0)]]
    others.append(record("data_prep", "00_data_prep.ipynb", {"dataset": "all"},
                         {"cifar10_samples": 2457, "cifar10_source": "generated"}))
    summary = findings.summary(Records(records=[*runs, *others]))
    assert f"*{landing.findings(runs)[0].question}* {sentence}" in summary
    io_line = landing.findings(others[:2])[0]
    assert findings.sentence(io_line.claims, io_line.caveat) in summary
    assert "fastest num_workers=2: 900 samples/s" in summary  # not num_workers=2.0
    assert summary.index("**data_prep**") < summary.index("**single_device_io**") \
        < summary.index("**dp_vs_ddp**")


def test_a_row_whose_newest_rerun_failed_shows_its_newest_ok_run_on_both_pages():
    """Notebook 90 and the landing page read one selection (results.latest_ok): a rerun
    that failed neither hides the row from one of them nor puts its numbers anywhere."""
    from benchlib.analysis import dp_vs_ddp, findings
    from benchlib.analysis.sections import Records

    runs = dist_records()
    failed = dict(runs[1], run_id=runs[1]["run_id"] + "-2", finished_at="2026-01-01T02:00:00",
                  status="failed", metrics={},
                  error={"type": "LaunchError", "message": "rank 1 exited with code 1"})
    both = [*runs, failed]
    records = Records(records=both)
    assert sorted(records.df["run_id"]) == sorted(r["run_id"] for r in runs)
    assert list(records.all["status"]).count("failed") == 1
    table = dp_vs_ddp.table(dp_vs_ddp.runs(records.df))
    assert dict(zip(table["strategy"], table["speedup"])) == {"single": 1.0, "ddp": 1.13}
    [finding] = landing.findings(both)
    assert finding.claims[0].figure.value == "1.13x" and finding.status == "2 of 3 runs ok, 1 failed"
    assert findings.sentence(finding.claims, finding.caveat) in findings.summary(records)


def test_a_headline_speedup_is_the_tables_number_over_the_same_baseline_runs():
    """One speedup rule (common.with_ratio): the landing page's figure is the study frame's
    `speedup`, its spread and its baselines' run ids, and the baselines are those of the
    study's one predicate. Multinode's is one rank in all: a record without world_size
    counts nnodes x nproc_per_node, so its 2-node run is no baseline in either (the table
    once asked world_size == 1, the headline devices or nproc_per_node == 1: 1.50x there,
    1.38x here)."""
    from benchlib.analysis import multinode_lightning
    from benchlib.records import results

    base = {"dataset": "fashion-mnist", "model": "toynet", "batch_size": 32, "device": "cpu",
            "trainer": "ddp", "nproc_per_node": 1}
    runs = [record("multinode", "30_multinode_lightning.ipynb",
                   {**base, "launcher": launcher, "nnodes": nnodes}, metrics)
            for launcher, nnodes, metrics in [
                ("torchrun", 1, sps(1000.0, 990.0, 1010.0, n=2, world_size=1)),
                ("tcp", 1, sps(1200.0, 1180.0, 1230.0, n=2, world_size=1)),
                ("torchrun", 2, sps(1650.0, 1600.0, 1700.0, n=2, world_size=2)),
                ("tcp", 2, sps(1500.0, 1450.0, 1550.0, n=2))]]  # from before world_size
    table = multinode_lightning.runs(results.frame(runs)).set_index("run_id")
    baselines = [runs[0]["run_id"], runs[1]["run_id"]]
    assert sorted(table.index[multinode_lightning.is_baseline(table)]) == sorted(baselines)
    two_nodes = table.loc[runs[2]["run_id"]]
    assert two_nodes["speedup"] == 1650.0 / 1100.0  # over the median of the two baselines
    assert two_nodes["speedup_baselines"].split(",") == baselines
    assert (two_nodes["speedup_p10"], two_nodes["speedup_p90"]) == (1600.0 / 1230.0, 1700.0 / 990.0)
    assert two_nodes["speedup_n"] == 2
    [finding] = landing.findings(runs)
    figures = {c.figure.sources[0][1]: c.figure for c in finding.claims}
    assert sorted(figures) == sorted([runs[2]["run_id"], runs[3]["run_id"]])
    for run_id, figure in figures.items():
        row = table.loc[run_id]
        assert figure.value == f"{row['speedup']:.2f}x"
        assert figure.spread == (f"{row['speedup_p10']:.2f}", f"{row['speedup_p90']:.2f}")
        assert [r for role, r in figure.sources if role == "baseline"] == baselines
    assert figures[runs[2]["run_id"]].text() == (
        "1.50x over 1 rank of ddp (p10-p90 1.30-1.72, n=2 epochs; 2 baselines, 2+2 epochs)")
    assert figures[runs[3]["run_id"]].value == "1.36x"

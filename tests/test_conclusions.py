"""The analysis' sentences follow the records: a comparison names the faster side with its
interval over 5+ launches a side, says "no clear difference" (with n) otherwise, and flips
when the data flips; a caveat appears only when the records show its cause. Small
hand-made frames."""

import pandas as pd
from test_analysis import dist_rows, io_rows, records

from benchlib.analysis import (
    common,
    dp_vs_ddp,
    fault_tolerance,
    multinode_lightning,
    single_device_io,
)
from benchlib.analysis.sides import Side, compare


def spread(sps, low, high, n=3, launches=0, col="samples_per_s"):
    """A record's summary; with `launches`, that many launch figures from low to high (a
    record that keeps `details.launches`, as results.frame reads them)."""
    out = {col: sps, f"{col}_min": low, f"{col}_max": high, f"{col}_n": float(n),
           f"{col}_p10": low, f"{col}_p90": high}
    if launches:
        step = (high - low) / (launches - 1)
        out[f"{col}_launches"] = tuple(low + i * step for i in range(launches))
    return out


def test_compare_states_the_ratio_with_a_bootstrap_ci_from_five_runs_each():
    a = Side("A", 130.0, 120.0, 140.0, 5, "launches", (120.0, 125.0, 130.0, 135.0, 140.0))
    b = Side("B", 100.0, 96.0, 104.0, 5, "launches", (96.0, 98.0, 100.0, 102.0, 104.0))
    text = compare(a, b)
    assert text.startswith("**A x1.30 over B** (95% CI ")
    low, high = (float(x) for x in text.split("95% CI ")[1].split(",")[0].split("-"))
    assert 1.1 < low < 1.3 < high < 1.5
    assert text.endswith("n=5 launches each, beyond the 10% threshold)")
    assert compare(b, a).startswith("**A x1.30 over B**")  # the faster is named first


def test_compare_with_fewer_than_five_launches_gives_the_range_and_no_direction():
    a = Side("A", 130.0, 125.0, 135.0, 1, "epochs", (130.0,), 3)
    b = Side("B", 100.0, 95.0, 105.0, 1, "epochs", (100.0,), 3)
    assert compare(a, b) == ("no clear difference between A and B (A/B 1.30, range 1.19-1.42, "
                             "n=1 launch (3 epochs) each; a direction needs a 95% interval "
                             "from 5+ launches a side)")
    three = Side("A", 130.0, 125.0, 135.0, 3, "launches", (125.0, 130.0, 135.0))
    one = Side("B", 100.0, 100.0, 100.0, 1, "epochs", (100.0,), 1)
    assert compare(three, one) == ("no clear difference between A and B (A/B 1.30, range "
                                   "1.25-1.35, n=3 launches and 1 launch; a direction needs a "
                                   "95% interval from 5+ launches a side)")
    times = compare(Side("raw", 10.0, 9.0, 11.0, 1, "repeats", (10.0,), 3),
                    Side("preload", 2.0, 1.8, 2.2, 1, "repeats", (2.0,), 3),
                    higher_is_better=False)
    assert times.startswith("no clear difference between raw and preload (raw/preload 0.20")


def test_compare_says_no_direction_when_the_interval_excludes_1_but_not_the_threshold():
    a = Side("A", 105.0, 104.0, 106.0, 5, "launches", (104.0, 104.5, 105.0, 105.5, 106.0))
    b = Side("B", 100.0, 99.0, 101.0, 5, "launches", (99.0, 99.5, 100.0, 100.5, 101.0))
    text = compare(a, b)
    assert text.startswith("no clear difference between A and B (A/B 1.05, 95% CI ")
    assert text.endswith("n=5 launches each; within the 10% threshold)")
    assert compare(a, b, threshold=0.02).startswith("**A x1.05 over B** (95% CI ")


def dp_ddp_frame(dp_sps, ddp_sps, launches=5):
    return records([dist_rows(**spread(100.0, 95.0, 105.0)),
                    dist_rows(strategy="dp", nproc_per_node=2.0, devices=2.0, global_batch=64.0,
                              **spread(*dp_sps, launches=launches)),
                    dist_rows(strategy="ddp", nproc_per_node=2.0, devices=2.0, global_batch=64.0,
                              **spread(*ddp_sps, launches=launches))])


def test_dp_vs_ddp_names_the_faster_strategy_and_flips_with_the_data():
    ddp_ahead = dp_vs_ddp.conclusions(dp_vs_ddp.runs(dp_ddp_frame((120, 115, 125), (180, 170, 190))))
    assert ("- 2 device(s), batch 32 per device: **DDP via torchrun x1.50 over DataParallel** "
            "(95% CI ") in ddp_ahead
    assert "n=5 launches each, beyond the 10% threshold)." in ddp_ahead
    one_launch = dp_vs_ddp.conclusions(dp_vs_ddp.runs(
        dp_ddp_frame((120, 115, 125), (180, 170, 190), launches=0)))
    assert ("- 2 device(s), batch 32 per device: no clear difference between DDP via torchrun "
            "and DataParallel (DDP via torchrun/DataParallel 1.50, range 1.36-1.65, n=1 launch "
            "(3 epochs) each; a direction needs a 95% interval from 5+ launches a side).") \
        in one_launch
    dp_ahead = dp_vs_ddp.conclusions(dp_vs_ddp.runs(dp_ddp_frame((180, 170, 190), (120, 115, 125))))
    assert "**DataParallel x1.50 over DDP via torchrun**" in dp_ahead
    close = dp_vs_ddp.conclusions(dp_vs_ddp.runs(dp_ddp_frame((150, 140, 160), (152, 142, 162))))
    assert "no clear difference between DDP via torchrun and DataParallel" in close
    for text in (ddp_ahead, dp_ahead, close):
        assert "what to expect" not in text


def test_dp_vs_ddp_shared_cores_caveat_only_for_several_ranks_on_a_cpu():
    frame = dp_ddp_frame((120, 115, 125), (180, 170, 190))
    assert common.SHARED_CORES in dp_vs_ddp.conclusions(dp_vs_ddp.runs(frame))
    gpu = frame.assign(device="cuda", gpu="NVIDIA H100 80GB HBM3", device_name="NVIDIA H100 80GB HBM3")
    assert common.SHARED_CORES not in dp_vs_ddp.conclusions(dp_vs_ddp.runs(gpu))
    one_rank = frame[frame["devices"] == 1]
    assert common.SHARED_CORES not in dp_vs_ddp.conclusions(dp_vs_ddp.runs(one_rank))


def multinode_frame(light, ddp, **over):
    def row(trainer, world, launcher, stats, launch_s):
        return {"notebook": "30_multinode_lightning.ipynb", "table": "m", "trainer": trainer,
                "launcher": launcher, "dataset": "fashion-mnist", "model": "toynet",
                "depth": 20.0, "alpha": 48.0, "batch_size": 32.0, "device": "cpu",
                "nnodes": float(world), "nproc_per_node": 1.0, "world_size": float(world),
                "global_batch": 32.0 * world, "epoch_s": 1.0, "launch_s": launch_s,
                "device_name": "cpu", **spread(*stats, launches=5), **over}
    return records([row("ddp", 1, "torchrun", (100, 95, 105), 5.0),
                    row("ddp", 2, "torchrun", ddp, 6.0),
                    row("lightning", 2, "lightning", light, 9.0)])


def test_multinode_names_lightning_when_it_beats_raw_ddp():
    lightning_ahead = multinode_lightning.conclusions(multinode_lightning.runs(
        multinode_frame(light=(200, 190, 210), ddp=(150, 140, 160))))
    assert "- 2 x 1: **Lightning x1.33 over raw DDP** (95% CI " in lightning_ahead
    assert ("n=5 launches each, beyond the 10% threshold); launch to result, Lightning +3.0 s "
            "against raw DDP.") in lightning_ahead
    ddp_ahead = multinode_lightning.conclusions(multinode_lightning.runs(
        multinode_frame(light=(150, 140, 160), ddp=(200, 190, 210))))
    assert "**raw DDP x1.33 over Lightning**" in ddp_ahead


def test_the_loopback_caveat_only_when_the_nodes_shared_a_host():
    stats = {"light": (200, 190, 210), "ddp": (150, 140, 160)}
    one = multinode_lightning.conclusions(multinode_lightning.runs(
        multinode_frame(**stats, topology="one host")))
    assert "- The multi-node runs here (2 x 1) put every node on one host" in one
    assert "loopback" in one
    real = multinode_lightning.conclusions(multinode_lightning.runs(
        multinode_frame(**stats, topology="separate hosts")))
    assert "loopback" not in real and "one host" not in real
    # records from before the topology field: a local launcher ran every node here
    assert "loopback" in multinode_lightning.conclusions(multinode_lightning.runs(
        multinode_frame(**stats)))


def test_launch_records_where_the_ranks_ran(tmp_path):
    from benchlib.launch import protocol

    for rank, host in enumerate(["node1", "node2", "node1"]):
        (tmp_path / f"rank{rank}.log").write_text(
            f"rank {rank}/3 (local 0) on {host}, via torchrun\nJOINED\n")
    hosts = protocol.rank_hosts(tmp_path)
    assert protocol.topology(hosts) == {"topology": "separate hosts",
                                        "rank_hosts": "node1,node2", "host_count": 2}
    assert protocol.topology(["h"])["topology"] == "one host"


def fault_row(**over):
    base = {"notebook": "35_fault_tolerance.ipynb", "table": "f", "model": "toynet",
            "dataset": "mydataset", "nproc_per_node": 2.0, "checkpoint_every": 4.0,
            "fail_at_step": 6.0, "restarts": 1.0, "steps_redone": 2.0, "final_step": 8.0,
            "recovery_s": 4.0, "restart_s": 3.0, "redo_s": 0.2, "checkpoint_s": 0.01,
            "loss_last": 2.0, "loss_last_uninterrupted": 2.0, "loss_diff": 0.0,
            "samples_per_s": 100.0}
    return {**base, **over}


def test_fault_tolerance_measures_steps_redone_and_splits_recovery_time():
    within = fault_tolerance.conclusions(fault_tolerance.runs(records([fault_row()])))
    assert ("- Steps redone stayed within restarts x (checkpoint_every - 1) in all 1 run(s) "
            "that restarted (at most 2 redone).") in within
    assert ("- Of 4.0 s of recovery (1 run(s)), 3.0 s (75%) passed before the restarted ranks "
            "were ready") in within
    assert "torchrun starting the processes" not in within
    over = fault_tolerance.conclusions(fault_tolerance.runs(records([fault_row(steps_redone=5.0)])))
    assert ("**More steps redone than a resume from the newest checkpoint should lose** in 1 "
            "of 1 run(s): 5 redone with a checkpoint every 4 and 1 restart(s)") in over
    assert "stayed within" not in over
    first_step = fault_tolerance.conclusions(fault_tolerance.runs(records([fault_row(restart_s=1.0)])))
    assert "1.0 s (25%) passed before" in first_step and "3.0 s on the first step" in first_step
    old = records([{k: v for k, v in fault_row().items() if k != "restart_s"}])
    assert "Of 4.0 s of recovery" not in fault_tolerance.conclusions(fault_tolerance.runs(old))
    none = fault_tolerance.conclusions(fault_tolerance.runs(records([fault_row(restarts=0.0)])))
    assert "Steps redone" not in none and "No restart" in none


def test_fault_tolerance_says_what_each_mode_cost_and_how_often_to_save():
    """Two modes of one run: each save's stall with its spread, when it was durable, the
    restore, and the interval Daly's form gives for the row's MTBF (an asynchronous save
    charged the steps its write slowed); older records, which
    measured no save's figures, add no line."""
    cost = {"checkpoint_bytes": 32e6, "checkpoint_blocking_s_n": 5.0, "restore_s": 0.6,
            "mtbf": "12h", "goodput_at_own_interval": 0.951}
    rows = [fault_row(checkpoint="torch_save", checkpoint_blocking_s=0.9, checkpoint_blocking_s_p10=0.8,
                      checkpoint_blocking_s_p90=1.1, checkpoint_total_s=0.9,
                      checkpoint_cost_s=0.9, daly_interval_s=278.8, goodput_at_daly=0.9937, **cost),
            fault_row(checkpoint="dcp_async", checkpoint_blocking_s=0.1, checkpoint_blocking_s_p10=0.08,
                      checkpoint_blocking_s_p90=0.2, checkpoint_total_s=0.7,
                      checkpoint_cost_s=0.4, daly_interval_s=185.9, goodput_at_daly=0.9958, **cost)]
    text = fault_tolerance.conclusions(fault_tolerance.runs(records(rows)))
    assert ("- dcp_async, 2 ranks, 32.0 MB a checkpoint: a save stalled training **0.1 s** "
            "(p10-p90 0.08-0.2, 5 saves), durable after 0.7 s, restored in 0.6 s; for an MTBF of "
            "12h, save every 186 s of training (Daly), charged 0.4 s a save with the steps its "
            "write slowed: goodput 99.58%, against 95.10% at this run's interval.") in text
    assert "- torch_save, 2 ranks, 32.0 MB a checkpoint: a save stalled training **0.9 s**" in text
    costs = fault_tolerance.costs(fault_tolerance.runs(records(rows)))
    assert list(costs["checkpoint"]) == ["dcp_async", "torch_save"]  # the cheapest stall first
    assert "stalled" not in fault_tolerance.conclusions(fault_tolerance.runs(records([fault_row()])))


def io_frame(raw, preload, memmap=None, launches=5):
    rows = [io_rows(variant="raw", **times(*raw, launches=launches)),
            io_rows(variant="preload", **times(*preload, launches=launches))]
    if memmap:
        rows.append(io_rows(variant="np_memmap", **times(*memmap, launches=launches)))
    return single_device_io.runs(records(rows))


def times(median, low, high, launches=5):
    return spread(median, low, high, launches=launches, col="total_s")


def test_io_says_what_costs_only_when_the_records_show_it():
    decode = single_device_io.conclusions(io_frame((10, 9, 11), (2, 1.8, 2.2), (2.4, 2.2, 2.6)))
    assert ("- FashionMNIST traverse on cpu (1 ep): **preload x5.00 over raw** (95% CI "
            ) in decode
    assert "n=5 launches each, beyond the 10% threshold); raw takes **5.0x** as long as" in decode
    assert ("Decoded arrays read from storage take np_memmap 1.2x preload's time against raw's "
            "5.0x: decoding each item every epoch, not reading from storage, is what costs."
            ) in decode
    unsupported = single_device_io.conclusions(io_frame((10, 9, 11), (2, 1.8, 2.2)))
    assert "**preload x5.00 over raw**" in unsupported and "is what costs" not in unsupported
    one_launch = single_device_io.conclusions(io_frame((10, 9, 11), (2, 1.8, 2.2), (2.4, 2.2, 2.6),
                                                       launches=0))
    assert "no clear difference between preload and raw" in one_launch
    assert "n=1 launch (3 repeats) each" in one_launch and "is what costs" not in one_launch


def test_io_when_preload_does_not_help():
    text = single_device_io.conclusions(io_frame((2.1, 1.9, 2.3), (2.0, 1.8, 2.2), (2.0, 1.9, 2.1)))
    assert "no clear difference between preload and raw" in text
    assert "is what costs" not in text and "over raw" not in text
    slower = single_device_io.conclusions(io_frame((2.0, 1.9, 2.1), (3.0, 2.9, 3.1)))
    assert "**raw x1.50 over preload**" in slower and "is what costs" not in slower


def test_the_seed_003_sentence_states_oneflows_measured_scaling():
    from benchlib.analysis import framework_comparison

    runs = framework_comparison.runs(records([{
        "notebook": "40_framework_comparison.ipynb", "table": "fw", "arch": "resnet18",
        "dataset": "synthetic", "image_size": 32.0, "batch_size": 4.0, "nproc_per_node": 1.0,
        "precision": "fp32", "channels_last": False, "compile": False, "device": "cpu",
        "samples_per_s": 10.0, "mfu": None, "device_name": "cpu"}]))
    text = framework_comparison.conclusions(runs)
    assert ("32 GPUs 16.0x (50%); OneFlow on the same machines 30.1x on 32 (94%).") in text
    assert "almost linearly" not in text


def test_io_pools_only_runs_of_the_same_model_data_size_and_torch():
    rows = [io_rows(num_workers=0.0, samples_per_s=100.0), io_rows(num_workers=2.0, samples_per_s=300.0),
            io_rows(num_workers=0.0, samples_per_s=500.0, torch="2.6.0"),
            io_rows(num_workers=2.0, samples_per_s=200.0, torch="2.6.0")]
    best = single_device_io.best_workers(single_device_io.runs(records(rows)))
    assert best[["torch", "num_workers"]].values.tolist() == [["2.5.1", 2], ["2.6.0", 0]]
    for field, other in (("model", "resnet18"), ("samples", 700.0)):
        mixed = [rows[0], rows[1], {**rows[2], "torch": "2.5.1", field: other},
                 {**rows[3], "torch": "2.5.1", field: other}]
        assert len(single_device_io.best_workers(single_device_io.runs(records(mixed)))) == 2
    ratios = single_device_io.raw_over_preload(single_device_io.runs(records([
        io_rows(total_s=10.0), io_rows(variant="preload", total_s=2.0),
        io_rows(total_s=6.0, torch="2.6.0"), io_rows(variant="preload", total_s=3.0, torch="2.6.0")])))
    assert sorted(ratios.values()) == [2.0, 5.0]


def fw_row(n, sps, **over):
    return {"notebook": "40_framework_comparison.ipynb", "table": "fw", "arch": "resnet18",
            "dataset": "synthetic", "image_size": 32.0, "batch_size": 4.0,
            "nproc_per_node": float(n), "precision": "fp32", "channels_last": False,
            "compile": False, "device": "auto", "samples_per_s": sps, "mfu": None,
            "device_name": "cpu", "host": "h1", "cpu": "EPYC", "gpu": None, **over}


def test_framework_speedup_curves_never_mix_batch_sizes():
    from benchlib.analysis import framework_comparison

    runs = framework_comparison.runs(records([
        fw_row(1, 10.0), fw_row(2, 16.0), fw_row(1, 40.0, batch_size=32.0),
        fw_row(2, 76.0, batch_size=32.0)]))
    curves = framework_comparison.speedup_curves(runs).set_index(["framework", "devices"])
    assert curves.loc[("PyTorch here, fp32, batch 4", 2), "speedup"] == 1.6
    assert curves.loc[("PyTorch here, fp32, batch 32", 2), "speedup"] == 1.9
    assert ("PyTorch (V100, seed 003, batch 32)", 1) in curves.index
    assert not any("batch 128" in f for f, _ in curves.index)


def test_speedup_baselines_match_the_hardware_not_the_device_parameter():
    from benchlib.analysis import framework_comparison

    # "auto" and "cuda" on one GPU host are the same machine: a baseline
    gpu = {"gpu": "NVIDIA H100 80GB HBM3", "device_name": "NVIDIA H100 80GB HBM3"}
    same = framework_comparison.runs(records([fw_row(1, 10.0, device="auto", **gpu),
                                              fw_row(2, 18.0, device="cuda", **gpu)]))
    assert same.set_index("nproc_per_node").loc[2, "speedup"] == 1.8
    # device "cpu" on two hosts (or two CPU models) is two machines: no baseline
    for other in ({"host": "h2"}, {"cpu": "Xeon"}, {"gpu": "NVIDIA H100 80GB HBM3"}):
        runs = framework_comparison.runs(records([fw_row(1, 10.0, device="cpu"),
                                                  fw_row(2, 18.0, device="cpu", **other)]))
        assert pd.isna(runs.set_index("nproc_per_node").loc[2, "speedup"])
    dist = records([dist_rows(**spread(100.0, 95.0, 105.0), host="h1"),
                    dist_rows(strategy="ddp", nproc_per_node=2.0, devices=2.0, host="h2",
                              **spread(150.0, 140.0, 160.0))])
    def ddp_speedup(frame):
        return dp_vs_ddp.runs(frame).set_index("strategy").loc["ddp", "speedup"]
    assert pd.isna(ddp_speedup(dist))
    assert ddp_speedup(dist.assign(host="h1")) == 1.5
    assert pd.isna(ddp_speedup(dist.assign(host="h1", batch_size=[32.0, 64.0])))


def test_load_results_gives_each_record_its_hardware(tmp_path):
    from benchlib.records import results

    env = {"hostname": "node7", "cpu_model": "AMD EPYC 9454",
           "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 2, "packages": {"torch": "2.5.1"}}
    results.write_record(tmp_path, results.make_record(
        run_id="r1", table="s", notebook="n.ipynb", params={}, env=env,
        started_at=results.now(), status="ok"))
    df = results.load_results(tmp_path)
    assert df.loc[0, "hardware"] == "2 x NVIDIA H100 80GB HBM3; AMD EPYC 9454; node7"


def test_dp_vs_ddp_speedup_in_a_frame_of_mixed_studies():
    frame = pd.concat([dp_ddp_frame((120, 115, 125), (180, 170, 190)),
                       records([fw_row(1, 10.0, precision="amp_bf16")])], ignore_index=True)
    runs = dp_vs_ddp.runs(frame).set_index("strategy")
    assert runs.loc["ddp", "speedup"] == 1.8 and runs.loc["dp", "speedup"] == 1.2


def test_on_a_slurm_testbed_the_partition_stands_for_the_host(tmp_path):
    from benchlib.records import results, testbed

    env = {"hostname": "n2", "cpu_model": "EPYC", "gpus": [], "packages": {}}
    bed = testbed._finish({"kind": "slurm", "cluster": "c1", "partition": "gpu"}, "c1-gpu", None)
    for host, run_id in (("n1", "a"), ("n2", "b")):
        results.write_record(tmp_path, results.make_record(
            run_id=run_id, table="s", notebook="n.ipynb", params={}, started_at=results.now(),
            env={**env, "hostname": host}, status="ok", testbed=bed))
    assert set(results.load_results(tmp_path)["hardware"]) == {"cpu; EPYC; c1/gpu"}


def test_fastest_variant_is_named_only_among_runs_of_the_same_work():
    from benchlib.analysis import framework_comparison

    runs = framework_comparison.runs(records([
        fw_row(1, 10.0), fw_row(1, 14.0, precision="amp_bf16"),
        fw_row(1, 90.0, image_size=16.0, precision="amp_bf16", channels_last=True),  # other work
        fw_row(1, 50.0, host="h2", precision="amp_bf16", channels_last=True)]))  # other machine
    lines = framework_comparison.fastest_variants(runs)
    assert lines == ["- Fastest variant on one device for resnet18, batch 4, 32px, synthetic: "
                     "**amp_bf16**, 14.0 samples/s (median); next fp32, 10.0 (2 variants of the "
                     "same work)."]
    assert "+nhwc" not in framework_comparison.conclusions(runs).split("Fastest")[1].split("\n")[0]

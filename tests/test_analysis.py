"""Each study's analysis on small hand-made frames: the tables have the right rows and
numbers, and the sentences say what the numbers say (and flip when they flip)."""

import pandas as pd

from benchlib.analysis import (
    data_prep,
    dp_vs_ddp,
    fault_tolerance,
    framework_comparison,
    multinode_lightning,
    overview,
    single_device_io,
)
from benchlib.analysis.common import with_speedup
from benchlib.config import studies

T0 = pd.Timestamp("2026-01-01 10:00", tz="UTC")


def records(rows: list[dict]) -> pd.DataFrame:
    """What results.load_results gives: one row per run, the common columns filled in (a
    record's `study` as the registry names its notebook's)."""
    base = {"status": "ok", "host": "h1", "duration_s": 1.0, "started_at": T0,
            "finished_at": T0 + pd.Timedelta(minutes=1), "method_version": "1",
            "error": None, "executed_notebook": "runs/x.ipynb"}
    return pd.DataFrame([{**base, "run_id": f"r{i}",
                          **({"study": studies.of_notebook(r["notebook"])} if "notebook" in r
                             else {}), **r} for i, r in enumerate(rows)])


def test_overview_counts_runs_and_failures_per_study():
    df = records([{"study": "a"}, {"study": "a", "status": "failed", "error": "boom"},
                  {"study": "b", "host": "h2"}])
    table = overview.table(df)
    assert table.loc["a", ["runs", "ok", "failed"]].tolist() == [2, 1, 1]
    assert overview.failures(df)["error"].tolist() == ["boom"]
    text = overview.text(df)
    assert text.startswith("**3 runs** in 2 studies: 2 ok, 1 failed, measured on h1, h2")
    assert "Failed runs are listed below" in text
    assert "No records yet" in overview.text(pd.DataFrame())


def test_data_prep_table_and_the_generated_data_caveat():
    df = records([{"study": "data_prep", "fashion_mnist_source": "generated",
                   "fashion_mnist_samples": 700, "fashion_mnist_bytes": 2e6,
                   "mydataset_source": None}])
    table = data_prep.table(df)
    assert table.to_dict("records") == [{"run_id": "r0", "dataset": "fashion-mnist",
                                         "source": "generated", "samples": 700, "MB": 2.0}]
    assert "generated offline" in overview.text(df)
    real = df.assign(fashion_mnist_source="real")
    assert "generated offline" not in overview.text(real)


def io_rows(**over):
    base = {"notebook": "10_single_device_io.ipynb", "table": "io", "device_name": "cpu",
            "model": "toynet", "samples": 70000.0, "torch": "2.5.1",
            "epochs": 1.0, "batch_size": 64.0, "repeats": 3.0, "warmup_steps": 5.0,
            "dataset": "fashion-mnist", "mode": "traverse", "variant": "raw",
            "num_workers": 0.0, "data_source": "generated", "total_s": 10.0, "total_s_p10": 9.0,
            "total_s_p90": 11.0, "samples_per_s": 100.0}
    return {**base, **over}


def test_single_device_io_finds_the_fastest_workers_and_the_raw_over_preload_ratio():
    df = records([io_rows(), io_rows(num_workers=2.0, samples_per_s=300.0),
                  io_rows(variant="preload", total_s=2.0, total_s_p10=1.8, total_s_p90=2.2)])
    io = single_device_io.runs(df)
    assert io["num_workers"].dtype.kind == "i"
    best = single_device_io.best_workers(io)
    assert best[["variant", "num_workers"]].values.tolist() == [["raw", 2]]
    assert single_device_io.raw_over_preload(io) == {("cpu", "toynet", 70000.0, "2.5.1", 1, 64): 5.0}
    text = single_device_io.conclusions(io)
    assert "fastest with **num_workers=2**" in text and "raw takes **5.0x**" in text
    assert "reference: seed 000 measured 15.9x on a GTX 1050" in text  # beside, not judged
    assert "raw" in single_device_io.seed_table(io).index


def test_single_device_io_sentence_flips_with_the_ratio():
    """The measured ratio is the finding; seed 000's figure stands beside it as a reference
    and never turns into a verdict (other hardware, other data path)."""
    for raw_s, said in ((80.0, "40.0x"), (32.0, "16.0x"), (2.2, "1.1x")):
        io = records([io_rows(total_s=raw_s), io_rows(variant="preload", total_s=2.0)])
        text = single_device_io.conclusions(single_device_io.runs(io))
        assert f"raw takes **{said}** as long as preload" in text
        assert "agrees with" not in text and "well below" not in text and "well above" not in text


def dist_rows(**over):
    base = {"notebook": "20_dp_vs_ddp.ipynb", "table": "d", "dataset": "cifar10",
            "model": "pyramidnet", "depth": 20.0, "alpha": 48.0, "batch_size": 32.0,
            "device": "cpu", "strategy": "single", "launcher": "torchrun",
            "nproc_per_node": 1.0, "devices": 1.0, "global_batch": 32.0, "samples_per_s": 100.0,
            "samples_per_s_p10": 90.0, "samples_per_s_p90": 110.0, "batch_s": 0.3,
            "epoch_s": 10.0, "device_name": "cpu", "threads_per_rank": 1.0}
    return {**base, **over}


def test_dp_vs_ddp_speedup_is_against_the_single_run_of_the_same_work():
    df = records([dist_rows(), dist_rows(strategy="ddp", nproc_per_node=2.0, devices=2.0,
                                         global_batch=64.0, samples_per_s=150.0)])
    runs = dp_vs_ddp.runs(df)
    ddp = runs[runs["strategy"] == "ddp"].iloc[0]
    assert ddp["speedup"] == 1.5 and ddp["efficiency"] == 0.75
    table = dp_vs_ddp.table(runs)
    assert table["launcher"].tolist() == ["-", "torchrun"]
    text = dp_vs_ddp.conclusions(runs)
    assert "**DDP via torchrun** on 2 device(s): 150.0 samples/s, **speedup 1.50x**" in text
    assert "Seed 002 on two P100s" in text


def test_multinode_lightning_overhead_pairs_the_same_layout():
    def row(trainer, world, sps, launch_s):
        return {"notebook": "30_multinode_lightning.ipynb", "table": "m", "trainer": trainer,
                "launcher": "torchrun", "dataset": "fashion-mnist", "model": "toynet",
                "depth": 20.0, "alpha": 48.0, "batch_size": 32.0, "device": "cpu",
                "nnodes": float(world), "nproc_per_node": 1.0, "world_size": float(world),
                "global_batch": 32.0 * world, "samples_per_s": sps, "samples_per_s_p10": sps,
                "samples_per_s_p90": sps, "epoch_s": 1.0, "launch_s": launch_s,
                "device_name": "cpu"}
    df = records([row("ddp", 1, 100.0, 5.0), row("ddp", 2, 180.0, 6.0),
                  row("lightning", 1, 90.0, 8.0), row("lightning", 2, 150.0, 9.0)])
    runs = multinode_lightning.runs(df)
    assert runs.set_index(["trainer", "world_size"]).loc[("ddp", 2), "speedup"] == 1.8
    over = multinode_lightning.lightning_overhead(runs).set_index("nnodes")
    assert round(over.loc[2, "overhead"], 3) == 0.2 and over.loc[2, "extra_launch_s"] == 3.0
    text = multinode_lightning.conclusions(runs)
    assert ("- 2 x 1: no clear difference between Lightning and raw DDP (Lightning/raw DDP 0.83, "
            "range 0.83-0.83, n=1 launch each; a direction needs a 95% interval from 5+ launches "
            "a side); launch to result, Lightning +3.0 s against raw DDP.") in text
    epochs = multinode_lightning.epochs(df.assign(epoch=0))
    assert epochs["how"].iloc[0] == "ddp via torchrun" and epochs["devices"].tolist() == [1, 2, 1, 2]
    assert multinode_lightning.epochs(pd.DataFrame()).empty


def test_fault_tolerance_says_whether_the_loss_came_back():
    def row(diff):
        return {"notebook": "35_fault_tolerance.ipynb", "table": "f", "model": "toynet",
                "dataset": "mydataset", "nproc_per_node": 2.0, "checkpoint_every": 4.0,
                "fail_at_step": 6.0, "restarts": 1.0, "steps_redone": 2.0, "final_step": 8.0,
                "recovery_s": 3.5, "redo_s": 0.2, "checkpoint_s": 0.01, "loss_last": 2.0,
                "loss_last_uninterrupted": 2.0 + diff, "loss_diff": diff,
                "samples_per_s": 100.0}
    same = fault_tolerance.conclusions(fault_tolerance.runs(records([row(0.0)])))
    assert "**1 restart(s), 2 step(s) redone, back to training in 3.5 s**" in same
    assert "it ended at the same loss" in same
    other = fault_tolerance.conclusions(fault_tolerance.runs(records([row(0.5)])))
    assert "it ended at a different loss" in other


def test_framework_comparison_scaling_mfu_and_jax_sentences():
    def row(n, sps, **over):
        return {"notebook": "40_framework_comparison.ipynb", "table": "fw", "arch": "resnet18",
                "dataset": "synthetic", "image_size": 32.0, "batch_size": 4.0,
                "nproc_per_node": float(n), "precision": "fp32", "channels_last": False,
                "compile": False, "device": "cpu", "samples_per_s": sps, "mfu": None,
                "device_name": "cpu", "jax_samples_per_s": None, "jax_skipped": "compare_jax is off",
                **over}
    runs = framework_comparison.runs(records([row(1, 10.0), row(2, 16.0)]))
    assert runs.set_index("nproc_per_node").loc[2, "speedup"] == 1.6
    text = framework_comparison.conclusions(runs)
    assert "fp32 on 2 devices: speedup 1.60x, efficiency 80%" in text
    assert "MFU is unknown here" in text and "JAX was not measured here (compare_jax is off)" in text
    curves = framework_comparison.speedup_curves(runs)
    assert "PyTorch here, fp32, batch 4" in set(curves["framework"])
    assert "No framework-comparison runs yet" in framework_comparison.conclusions(pd.DataFrame())


def test_with_speedup_without_a_baseline_gives_nan_not_an_error():
    runs = pd.DataFrame({"k": ["a", "b"], "n": [2, 2], "samples_per_s": [10.0, 20.0]})
    out = with_speedup(runs, ["k"], runs["n"] == 1, "n")
    assert out["speedup"].isna().all()


def test_io_seed_table_keeps_runs_that_differ_only_in_data_size():
    """Two `benchlib io` runs of the same setting on 6000 and 3000 images share every
    column of seed 000's table but the data size: the table names the size (only when it
    varies) instead of failing with "Index contains duplicate entries"."""
    df = records([io_rows(samples=6000.0, total_s=8.0, total_s_p10=7.5, total_s_p90=8.5),
                  io_rows(samples=3000.0, total_s=4.0, total_s_p10=3.5, total_s_p90=4.5)])
    io = single_device_io.runs(df)
    table = single_device_io.seed_table(io)
    assert table.to_dict("index") == {"raw": {
        "fashion-mnist, traverse (1 ep, s, cpu, 3000 samples)": "4 (3.5-4.5)",
        "fashion-mnist, traverse (1 ep, s, cpu, 6000 samples)": "8 (7.5-8.5)"}}
    assert "Measured on cpu" in single_device_io.conclusions(io)
    one_size = single_device_io.seed_table(io[io["samples"] == 6000])
    assert list(one_size.columns) == ["fashion-mnist, traverse (1 ep, s, cpu)"]
    other_set = single_device_io.runs(records([io_rows(samples=6000.0),
                                               io_rows(dataset="mydataset", samples=300.0)]))
    assert list(single_device_io.seed_table(other_set).columns) == [  # sizes of two data sets
        "fashion-mnist, traverse (1 ep, s, cpu)", "mydataset, traverse (1 ep, s, cpu)"]
    # any SETUP value that varies is named, so no two runs ever share a cell
    mixed = single_device_io.runs(records([io_rows(), io_rows(model="simplecnn", batch_size=32.0),
                                           io_rows(torch="2.6.0")]))
    assert single_device_io.seed_table(mixed).shape == (1, 3)
    # a record without a data source (None) joins the sentences, not a sort of str and None
    unknown = single_device_io.runs(records([io_rows(), io_rows(data_source=None)]))
    assert "data: generated." in single_device_io.conclusions(unknown)


def test_a_section_that_cannot_be_computed_says_why_and_the_others_stand():
    def broken(df):
        yield "before the failure"
        raise ValueError("Index contains duplicate entries, cannot reshape")

    from benchlib.analysis import sections

    part = sections.compute(broken, pd.DataFrame())
    assert part.items == ["before the failure"]
    assert part.error == ("This part of the analysis could not be computed from these "
                          "records (test_analysis.broken: ValueError: Index contains duplicate "
                          "entries, cannot reshape); the other sections do not depend on it.")
    assert sections.compute(overview.text, pd.DataFrame()).error is None


def test_notebook_90_goes_on_past_a_section_that_raises(tmp_path, monkeypatch):
    """Every computation of notebook 90 runs through sections.show: one study's analysis
    raising leaves a line saying why in its findings line, its figure and its section,
    and every other study is still computed."""
    import matplotlib
    import nbformat
    from conftest import ROOT

    from benchlib.analysis import sections
    from benchlib.core import envinfo
    from benchlib.records import results

    matplotlib.use("Agg")

    def boom(df):
        raise ValueError("Index contains duplicate entries, cannot reshape")

    for i, (notebook, row) in enumerate([("10_single_device_io.ipynb", io_rows()),
                                         ("20_dp_vs_ddp.ipynb", dist_rows())]):
        params = {k: v for k, v in row.items() if k not in ("notebook", "table", "samples_per_s",
                                                            "total_s", "total_s_p10",
                                                            "total_s_p90", "device_name")}
        results.write_record(tmp_path, results.make_record(
            run_id=f"r{i}", table=row["table"], notebook=notebook, params=params,
            env=envinfo.collect(), started_at=results.now(), status="ok",
            metrics={"samples_per_s": 100.0, "device_name": "cpu"}))
    shown = []
    monkeypatch.setattr(single_device_io, "runs", boom)
    monkeypatch.setattr(sections, "_display", shown.append)
    cells = [c.source for c in nbformat.read(ROOT / "notebooks" / "90_analysis.ipynb", 4).cells
             if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    namespace = {"results_dir": str(tmp_path)}
    for source in cells:
        exec(compile(source, "notebook 90", "exec"), namespace)
    text = [str(getattr(item, "data", item)) for item in shown]
    failed = [t for t in text if "could not be computed" in t]
    assert len(failed) == 3 and all("ValueError: Index contains duplicate" in t for t in failed)
    assert "- **single_device_io**" in failed[0] and "- **dp_vs_ddp**" in failed[0]  # the rest
    assert any("## dp_vs_ddp: " in t for t in text)  # a later section, computed
    assert any(t.startswith("No ok run of multinode_lightning yet") for t in text)

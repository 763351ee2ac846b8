"""The input pipeline (issue 52): the IO data sets as WebDataset, LitData and Mosaic shards,
read by each library with DataLoader workers, from their folder or from a real S3 server
on loopback (rclone's `serve s3`, started here and stopped at the end) through a link
that caps bandwidth, adds latency and counts what it carries."""

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import torch

for _lib in ("webdataset", "litdata", "streaming", "boto3"):
    pytest.importorskip(_lib, reason="the streaming extra is not installed (make setup installs it)")

from benchlib.cli import main  # noqa: E402
from benchlib.config import DataPrepConfig, SingleDeviceIoConfig  # noqa: E402
from benchlib.config.choices import SHARD_FORMATS  # noqa: E402
from benchlib.data import prepare  # noqa: E402
from benchlib.data.storage import decoded  # noqa: E402
from benchlib.errors import BenchlibError, StoreFailed  # noqa: E402
from benchlib.shards import prepare as shard_prep  # noqa: E402
from benchlib.shards import read, timing  # noqa: E402
from benchlib.store import link, s3, server  # noqa: E402
from benchlib.studies import io_shards, single_device_io  # noqa: E402

SAMPLES, SHARD_MB = 400, 0.2  # about 7 shards a format: enough for 4 workers


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """(data folder, outputs folder): mydataset written as shards of every format and
    uploaded to the workbook's store, which runs for the module's tests and stops after."""
    data, out = tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("outputs")
    before = os.environ.get("BENCHLIB_OUTPUTS")
    os.environ["BENCHLIB_OUTPUTS"] = str(out)
    try:
        cfg = DataPrepConfig(path=str(data), dataset="mydataset", size=SAMPLES, offline=True,
                             shards="all", shard_mb=SHARD_MB, store="s3")
        prepare.prepare(cfg)
        shard_prep.prepare(cfg)
        yield data, out
    finally:
        server.stop()
        if before is None:
            os.environ.pop("BENCHLIB_OUTPUTS", None)
        else:
            os.environ["BENCHLIB_OUTPUTS"] = before


@pytest.fixture
def store_outputs(shards, monkeypatch):
    """The module's outputs folder (its store's state) for this test."""
    monkeypatch.setenv("BENCHLIB_OUTPUTS", str(shards[1]))
    return shards


def _identity(x: torch.Tensor) -> str:
    return hashlib.sha1(x.numpy().tobytes()).hexdigest()


def _epoch_identities(fmt: str, source: str, index: dict, tmp_path: Path, workers: int,
                      env: dict | None = None, start: str = "fork") -> tuple[list[str], list[dict]]:
    cfg = SingleDeviceIoConfig(dataset="mydataset", variant=fmt, num_workers=workers,
                               batch_size=32, multiprocessing_context=start)
    ds = read.dataset(fmt, source, index, tmp_path / "cache", 0, env or {}, 32)
    seen = []
    for x, _ in io_shards.loader(cfg, ds, index, tmp_path / "workers", torch.device("cpu"), env):
        seen += [_identity(v) for v in x]
    read.release(fmt, ds)
    return seen, timing.workers(tmp_path / "workers")


@pytest.mark.parametrize("fmt", SHARD_FORMATS)
def test_each_library_reads_every_sample_once_an_epoch_with_2_workers(store_outputs, tmp_path, fmt,
                                                                      monkeypatch):
    data, _ = store_outputs
    # Mosaic's file locks go to the temp folder; released, none is left (a short folder:
    # torch's workers bind unix sockets in it)
    locks = Path(tempfile.mkdtemp(prefix="bl-"))
    monkeypatch.setattr(tempfile, "tempdir", str(locks))
    folder = shard_prep.local_folder(data, "mydataset", fmt, SHARD_MB)
    index = json.loads((folder / s3.INDEX).read_text())
    assert index["samples"] == SAMPLES and index["shards"] >= 4
    seen, workers = _epoch_identities(fmt, str(folder), index, tmp_path, workers=2)
    images, _ = decoded("mydataset", data)
    assert sorted(seen) == sorted(_identity(x) for x in images)  # none twice, none missing
    assert [w["worker"] for w in workers] == [0, 1]  # both worked, and together read them all
    assert sum(w["samples"] for w in workers) == SAMPLES and min(w["samples"] for w in workers) > 0
    left = list(locks.iterdir())
    shutil.rmtree(locks)
    assert not left


def test_mosaics_workers_started_fresh_read_every_sample_from_the_store_through_a_link(
        store_outputs, tmp_path):
    """The named case's remedy: Mosaic's 2 workers from the store through a link, started
    by a forkserver (each its own S3 connection, none inherited from the process that read
    index.json), read every sample once: none twice, none missing, none of another's bytes.
    Forked, the same read stalled 60 s or failed here (docs/studies.md, the named case).
    A second read through a second link, as a kernel's next row: the forkserver started for
    the first has the first link's endpoint, and its workers are given the second's."""
    from benchlib import paths

    data, _ = store_outputs
    url = shard_prep.default_url("mydataset", "mds", SHARD_MB)
    images, _ = decoded("mydataset", data)
    for n in (1, 2):
        with shard_prep.store_env("") as env, link.start(env["AWS_ENDPOINT_URL"], 0.0, 20.0) as shaped:
            env = {**env, "AWS_ENDPOINT_URL": shaped.endpoint, "S3_ENDPOINT_URL": shaped.endpoint}
            with paths.environment(env):
                index = s3.check_shards(url, env)
                seen, workers = _epoch_identities("mds", url, index, tmp_path / str(n), 2, env,
                                                  "forkserver")
            requests = shaped.counts()["requests"]
        assert sorted(seen) == sorted(_identity(x) for x in images)
        assert sorted(w["worker"] for w in workers) == [0, 1]
        assert min(w["samples"] for w in workers) > 0
        assert len({w["pid"] for w in workers} | {os.getpid()}) == 3  # processes of their own
        assert max(w["start_s"] for w in workers) < 30  # none waited out download_timeout (60 s)
        assert requests >= index["shards"]  # every shard came through this read's link


def test_a_row_from_the_store_names_first_batch_both_epochs_waits_and_the_links_traffic(
        store_outputs, capsys):
    data, out = store_outputs
    # litdata: Mosaic's 2 workers through a link are the named case (a stall or a failure)
    code = main(["io", "2", "cpu", "--dataset", "mydataset", "--variant", "litdata", "--mode",
                 "traverse", "--path", str(data), "--shard-mb", str(SHARD_MB), "--store", "s3",
                 "--num-workers", "2", "--repeats", "1", "--warmup-steps", "1",
                 "--batch-size", "16", "--link-latency-ms", "20", "--outputs", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    record = json.loads(Path(printed.split("record: ")[1].split()[0]).read_text())
    m = record["metrics"]
    index = json.loads((shard_prep.local_folder(data, "mydataset", "litdata", SHARD_MB)
                        / s3.INDEX).read_text())
    shard_bytes = sum(v for k, v in index["files"].items() if k.startswith("chunk-"))
    # epoch 1 fetched every shard through the link, each after 20 ms; epoch 2 read the cache
    assert m["bytes_read_epoch1"] >= shard_bytes and m["requests_epoch1"] >= index["shards"]
    assert m["cache_hits_epoch1"] == 0 and m["cache_hits_epoch2"] == index["shards"]
    assert m["bytes_read_epoch2"] < shard_bytes / 10
    assert m["first_batch_cold_s"] >= 0.02 and m["worker_start_s"] >= 0.02
    assert m["epoch1_samples_per_s"] > 0 and m["epoch2_samples_per_s"] > 0
    assert 0 <= m["wait_p50_s"] <= m["wait_p99_s"]
    assert m["workers_n"] == 2 and m["link"].startswith("s3 (")
    assert [w["worker"] for w in record["details"]["pipeline_epochs"][0][0]["workers"]] == [0, 1]
    assert "epoch 2" in printed and "requests" in printed


def test_the_link_caps_bandwidth_adds_latency_per_request_and_counts_them(store_outputs):
    store = server.ensure()
    url = shard_prep.default_url("mydataset", "wds", SHARD_MB)
    name, size = max(s3.listing(url, store.env()).items(), key=lambda kv: kv[1])
    with link.start(store.endpoint, mibps=1.0, latency_ms=100) as shaped:
        env = {**store.env(), "AWS_ENDPOINT_URL": shaped.endpoint}
        [signed] = s3.signed_urls(url, [name], env)
        start = time.perf_counter()
        with urllib.request.urlopen(signed, timeout=30) as r:
            body = r.read()
        took = time.perf_counter() - start
        counted = shaped.counts()
    assert len(body) == size
    assert took >= 0.1 + size / 2**20 * 0.9  # the latency, then the bytes at 1 MiB/s
    assert counted["requests"] == 1 and counted["bytes_out"] == size


def _records(out: Path) -> set[Path]:
    return set((out / "results").rglob("*.json")) if (out / "results").exists() else set()


def _io(out: Path, data: Path, *flags: str) -> int:
    return main(["io", "1", "cpu", "--dataset", "mydataset", "--mode", "traverse", "--path",
                 str(data), "--shard-mb", str(SHARD_MB), "--repeats", "1", "--outputs", str(out),
                 *flags])


@pytest.mark.parametrize("flags, line", [
    (["--variant", "wds", "--store", "s3", "--store-endpoint", "http://127.0.0.1:9"],
     "store_endpoint: http://127.0.0.1:9 does not answer (tried listing s3://benchlib/mydataset/"
     "wds-0.2mb"),
    (["--variant", "wds", "--store", "s3", "--store-url", "s3://nobucket/shards"],
     "store_url: s3://nobucket/shards: bucket 'nobucket' does not exist at http://127.0.0.1:"),
    (["--variant", "litdata", "--store", "s3", "--store-url", "s3://benchlib/nothing"],
     "store_url: s3://benchlib/nothing holds no objects at http://127.0.0.1:"),
    (["--variant", "mds", "--shard-mb", "0"], "shard_mb: must be > 0 MB (a shard holds at least "
     "one sample), got 0"),
    (["--variant", "mds", "--num-workers", "2", "--multiprocessing-context", "thread"],
     "multiprocessing_context: 'thread' is not one of fork, forkserver, spawn"),
    (["--variant", "raw", "--num-workers", "2", "--multiprocessing-context", "spawn"],
     "multiprocessing_context: starts the workers of a shard variant (wds, litdata, mds) with "
     "num_workers >= 1; got variant raw, num_workers 2"),
    (["--variant", "wds", "--multiprocessing-context", "spawn"],
     "multiprocessing_context: starts the workers of a shard variant (wds, litdata, mds) with "
     "num_workers >= 1; got variant wds, num_workers 0"),
])
def test_bad_store_input_is_one_line_naming_the_parameter_and_what_was_tried(
        store_outputs, capsys, flags, line):
    data, out = store_outputs
    before = _records(out)
    assert _io(out, data, *flags) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"benchlib io: {line}") and err.count("\n") == 1, err
    assert _records(out) == before  # no record


def test_wrong_keys_and_a_truncated_shard_are_named_with_what_was_tried(store_outputs, capsys,
                                                                       monkeypatch):
    data, out = store_outputs
    store = server.ensure()
    before = _records(out)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    assert _io(out, data, "--variant", "wds", "--store", "s3",
               "--store-endpoint", store.endpoint) == 2
    assert capsys.readouterr().err == (
        f"benchlib io: store_endpoint: {store.endpoint} refused the keys in AWS_ACCESS_KEY_ID/"
        f"AWS_SECRET_ACCESS_KEY (key {store.access_key!r}; tried listing s3://benchlib/"
        "mydataset/wds-0.2mb: SignatureDoesNotMatch)\n")
    # a copy of the litdata shards with one chunk cut short
    folder = shard_prep.local_folder(data, "mydataset", "litdata", SHARD_MB)
    client = s3.client(store.env())
    for p in folder.iterdir():
        body = p.read_bytes()
        client.put_object(Bucket="benchlib", Key=f"cut/{p.name}",
                          Body=body[:100] if p.name == "chunk-0-1.bin" else body)
    assert _io(out, data, "--variant", "litdata", "--store", "s3",
               "--store-url", "s3://benchlib/cut") == 2
    size = (folder / "chunk-0-1.bin").stat().st_size
    assert capsys.readouterr().err == (
        f"benchlib io: store_url: s3://benchlib/cut/chunk-0-1.bin is 100 bytes, {size:,} "
        "written: a truncated shard; write them again with `benchlib data --shards`\n")
    assert _records(out) == before  # no record


def test_a_store_that_dies_mid_epoch_fails_the_row_naming_it_and_the_next_row_starts_it(
        store_outputs):
    data, _ = store_outputs
    cfg = SingleDeviceIoConfig(dataset="mydataset", variant="wds", mode="traverse", device="cpu",
                               path=str(data), shard_mb=SHARD_MB, store="s3", link_mibps=0.5,
                               num_workers=1, repeats=1, epochs=1, warmup_steps=1)
    dying = server.ensure()
    killer = threading.Timer(0.8, server.stop)
    killer.start()
    try:
        with pytest.raises(StoreFailed, match=f"store: {dying.endpoint} stopped answering during "
                           "the row"):
            single_device_io.run(cfg)
    finally:
        killer.cancel()
    assert server.status() is None
    log = server.folder() / "server.log"
    starts = log.read_text().count("Starting s3 server")
    again = SingleDeviceIoConfig(**{**cfg.__dict__, "link_mibps": 0.0})
    result = single_device_io.run(again)  # the next row starts the store again...
    assert result.metrics["samples"] == SAMPLES and result.metrics["bytes_read_epoch1"] > 0
    assert log.read_text().count("Starting s3 server") > starts
    assert server.status() is None  # ...and, having started it, stops it: nothing left behind


def test_a_reader_whose_epoch_fails_is_released_all_the_same(store_outputs, monkeypatch):
    """Mosaic's shared memory and file locks outlive the process: a row that failed mid-epoch
    (the named case's IndexError) left its reader's segments in /dev/shm."""
    data, _ = store_outputs
    cfg = SingleDeviceIoConfig(dataset="mydataset", variant="mds", mode="traverse", device="cpu",
                               path=str(data), shard_mb=SHARD_MB, num_workers=0, repeats=1,
                               epochs=1, warmup_steps=1)
    made, released = [], []
    real_dataset, real_release = read.dataset, read.release
    monkeypatch.setattr(read, "dataset", lambda *a: made.append(real_dataset(*a)) or made[-1])
    monkeypatch.setattr(read, "release", lambda fmt, ds: released.append(ds) or real_release(fmt, ds))

    def fails(*_):
        raise IndexError("Relative sample index 36 is not present in the shard.00011.mds file")

    monkeypatch.setattr(io_shards.loops, "run_epoch", fails)
    with pytest.raises(IndexError, match="shard.00011.mds"):
        single_device_io.run(cfg)
    assert len(made) == 1 and released == made


class _Nothing(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(())


def test_an_epoch_that_reads_no_sample_fails_the_row_saying_so(store_outputs, monkeypatch):
    """A reader whose workers find nothing (a forkserver's worker given a stopped link's
    endpoint read none, and raised nothing): the row fails naming it, not an IndexError."""
    data, _ = store_outputs
    cfg = SingleDeviceIoConfig(dataset="mydataset", variant="wds", mode="traverse", device="cpu",
                               path=str(data), shard_mb=SHARD_MB, num_workers=1, repeats=1,
                               epochs=1, warmup_steps=1)
    monkeypatch.setattr(read, "dataset", lambda *a: _Nothing())
    with pytest.raises(BenchlibError, match=r"wds: epoch 1 of repeat 1 read no sample of .*"
                                           rf"wds-{SHARD_MB}mb's {SAMPLES}$"):
        single_device_io.run(cfg)


def test_a_slow_worker_of_4_is_named_by_its_item_time(store_outputs, tmp_path, monkeypatch):
    data, _ = store_outputs
    monkeypatch.setenv(timing.DELAY_VAR, "3:4")  # worker 3 sleeps 4 ms a sample
    folder = shard_prep.local_folder(data, "mydataset", "wds", SHARD_MB)
    index = json.loads((folder / s3.INDEX).read_text())
    seen, workers = _epoch_identities("wds", str(folder), index, tmp_path, workers=4)
    assert len(seen) == SAMPLES and [w["worker"] for w in workers] == [0, 1, 2, 3]
    [slow] = [w for w in timing.slow_workers(workers) if w["what"] == "item_s"]
    assert slow["worker"] == 3 and slow["seconds"] >= 0.004 > slow["others_s"]


def test_stalls_are_waits_above_five_times_the_median_with_their_place_in_the_epoch():
    waits = [0.5] + [0.01] * 48 + [0.2]  # the first batch is the start-up, not a stall
    w = timing.waits(waits)
    assert w["wait_p50_s"] == 0.01 and w["stalls"] == 1 and w["stall_s"] == 0.2
    assert w["stall_at"] == [{"step": 49, "at": 0.98, "wait_s": 0.2}]
    assert timing.waits([0.01] * 10)["stalls"] == 0


def test_benchlib_store_starts_answers_and_stops_its_whole_process_group(tmp_path, capsys):
    out = tmp_path / "outputs"
    assert main(["store", "status", "--outputs", str(out)]) == 1
    assert main(["store", "start", "--outputs", str(out)]) == 0
    printed = capsys.readouterr().out
    state = json.loads((out / "store" / "server.json").read_text())
    assert f"store: {state['endpoint']} (pid {state['pid']})" in printed
    assert state["endpoint"].startswith("http://127.0.0.1:") and server.answers(state["endpoint"])
    assert "AWS_ACCESS_KEY_ID=" in printed and "AWS_ENDPOINT_URL=" in printed
    assert main(["store", "status", "--outputs", str(out)]) == 0
    assert main(["store", "stop", "--outputs", str(out)]) == 0
    assert not server.answers(state["endpoint"]) and not (out / "store" / "server.json").exists()
    with pytest.raises(ProcessLookupError):
        os.killpg(state["pid"], 0)  # nothing of its group is left


def _pipeline_record(run_id="p1", **metrics):
    """An input-bound shard row's record: 6,000 samples, epoch 1 at 1,000 samples/s over a
    link of 20 MiB/s, with 2 workers."""
    from benchlib.config import studies

    params = {"dataset": "mydataset", "variant": "mds", "mode": "train", "num_workers": 2,
              "prefetch_factor": 2, "shard_mb": 1.0, "cache": "keep", "store": "s3",
              "link_mibps": 20.0, "link_latency_ms": 30.0, "batch_size": 64, "model": "toynet",
              "device": "cpu", "path": "outputs/data"}
    m = {"data_s": 0.08, "compute_s": 0.02, "data_share": 0.8, "data_share_low": 0.75,
         "data_share_high": 0.85, "device_type": "cpu", "samples": 6000, "shard_format": "mds",
         "link": "s3 (the workbook's store on loopback), 20 MiB/s, 30 ms per request",
         "epoch1_samples_per_s": 1000.0, "samples_per_s": 1000.0, "first_batch_cold_s": 0.3,
         "wait_p50_s": 0.01, "wait_p99_s": 0.05, "stalls": 0, "stall_s": 0.0,
         "stall_share": 0.0, "bytes_read_epoch1": 5 * 2**20, "workers_n": 2, "slow_worker": None,
         **metrics}
    return {"run_id": run_id, "status": "ok", "study": studies.of_config(SingleDeviceIoConfig).name,
            "params": params, "metrics": m, "details": {}, "host_load": {"busy": False}}


@pytest.mark.parametrize("metrics, cause", [
    # stalls first: a capped link that idles between bursts is still a stall (Mosaic's
    # readers with 2 workers under a cap)
    ({"stalls": 6, "stall_s": 2.0, "stall_share": 0.33, "bytes_read_epoch1": 6 * 19 * 2**20},
     "stalls, 6 waits above 5x the median (10.0 ms) take 2.00 s an epoch, 33% of it"),
    ({"bytes_read_epoch1": 6 * 19 * 2**20}, "the link, epoch 1 read 19.0 MiB/s over a link of 20 MiB/s"),
    ({"first_batch_cold_s": 2.5}, "the first shard, the first batch came after 2.50 s cold, 42% "
     "of epoch 1"),
    ({}, "the reader, batch wait p50 10.0 ms with 2 workers"),
])
def test_a_run_waiting_on_its_store_says_whether_the_link_the_first_shard_or_stalls(metrics, cause):
    from benchlib.diagnose import rules

    d = rules.diagnose(_pipeline_record(**metrics))
    assert d.bottleneck == "input-bound"
    assert d.advice.startswith("waits on its store (s3 (the workbook's store on loopback), 20 MiB/s, "
                               f"30 ms per request): {cause}; "), d.advice
    if cause.startswith("the link"):  # no loader knob moves a link that is full
        assert d.advice.endswith("fewer bytes (smaller or compressed samples) or a faster link; "
                                 "no loader knob moves it") and d.try_params == {}
    else:
        assert "not measured here: `python -m benchlib diagnose p1 --try --launches 5`" in d.advice


def test_store_advice_is_measured_from_rows_that_differ_in_one_knob_and_names_a_slow_worker():
    from benchlib.diagnose import rules
    from benchlib.records.results import frame

    rec = _pipeline_record(stalls=6, stall_s=2.0, stall_share=0.33, slow_worker=1,
                           slow_worker_what="item_s", slow_worker_s=0.004,
                           slow_worker_others_s=0.0005)
    others = []
    for i, (prefetch, rate) in enumerate([(2, 1000.0)] * 5 + [(8, 1500.0)] * 5):
        r = _pipeline_record(run_id=f"k{i}", epoch1_samples_per_s=rate + i, samples_per_s=rate + i)
        r["params"]["prefetch_factor"] = prefetch
        r.update(started_at="2026-11-29T00:00:00", finished_at="2026-11-29T00:01:00",
                 label="pipes", testbed={"id": "t", "name": "t"})
        others.append(r)
    d = rules.diagnose(rec, frame(others))
    assert "worker 1 is slow (4.0 ms per sample against 0.5 ms for the others)" in d.advice
    assert "more workers leave it in the round-robin" in d.advice
    assert "prefetch_factor=8: measured here" in d.advice and "n=5 launches each" in d.advice
    assert d.try_params == {"prefetch_factor": 8}


def test_the_pipeline_table_gives_each_rows_figures_over_its_launches_with_an_interval():
    from benchlib.analysis import io_pipeline
    from benchlib.records.results import frame

    recs = []
    for i in range(6):
        r = _pipeline_record(run_id=f"t{i}", first_batch_cold_s=0.3 + i / 100,
                             epoch2_samples_per_s=3000.0 + i, stall_s=0.1)
        r.update(started_at="2026-11-29T00:00:00", finished_at="2026-11-29T00:01:00",
                 label="pipes", testbed={"id": "t", "name": "t"})
        recs.append(r)
    tab = io_pipeline.table(frame(recs))
    [row] = tab.to_dict("records")
    assert row["n"] == 6 and row["variant"] == "mds" and row["num_workers"] == 2
    assert row["first batch, s"] == "0.32 [0.30, 0.35]"  # median of 6 with its 95% interval
    assert row["epoch 2, samples/s"].startswith("3,002 [3,000, 3,005]")
    five = io_pipeline.table(frame(recs[:5])).to_dict("records")[0]
    assert five["first batch, s"] == "0.32 [0.30, 0.34] (94%)"  # min-max, and its coverage
    assert "| mds | s3 (the workbook's store on loopback)" in io_pipeline.markdown(tab)
    assert row["multiprocessing_context"] == "fork"  # a record from before the knob: what it ran


def test_workers_started_fresh_are_a_knob_the_table_and_diagnose_measure_like_for_like():
    """The named case's records (forked, one worker waiting out 60 s) beside 5 launches of
    the same row started by a forkserver: the table keeps them apart, the one-knob line and
    diagnose's advice say which is faster by the verdict rule, and `--try` runs that."""
    from benchlib.analysis import io_pipeline
    from benchlib.diagnose import rules
    from benchlib.records.results import frame

    named = dict(worker_start_s=60.4, worker_start_min_s=0.2, first_batch_cold_s=60.6)
    recs = []
    for i, (start, rate) in enumerate([("fork", 90.0)] * 5 + [("forkserver", 630.0)] * 5):
        r = _pipeline_record(run_id=f"w{i}", epoch1_samples_per_s=rate + i,
                             samples_per_s=rate + i, **(named if start == "fork" else {}))
        r["params"]["multiprocessing_context"] = start
        r.update(started_at="2026-11-29T00:00:00", finished_at="2026-11-29T00:01:00",
                 label="pipes", testbed={"id": "t", "name": "t"})
        recs.append(r)
    tab = io_pipeline.table(frame(recs)).set_index("multiprocessing_context")
    assert list(tab["n"]) == [5, 5] and tab.loc["forkserver", "epoch 1, samples/s"] == "637 [635, 639] (94%)"
    [line] = io_pipeline.one_knob(frame(recs))
    assert "multiprocessing_context=forkserver x" in line and "beyond the 10% threshold" in line
    d = rules.diagnose(recs[0], frame(recs[1:]))
    assert "): stalls, a worker waited 60.4 s" in d.advice
    assert "multiprocessing_context=forkserver: measured here" in d.advice
    assert d.try_params == {"multiprocessing_context": "forkserver"}


def test_a_row_killed_mid_read_leaves_neither_its_store_nor_its_link_running(tmp_path):
    import signal
    import subprocess
    import sys

    script = ("import sys, time\nfrom benchlib.store import link, server\n"
              "s = server.start(tied=True)\nl = link.start(s.endpoint, 1.0, 10.0)\n"
              "print(s.pid, l.proc.pid, flush=True)\ntime.sleep(60)\n")
    row = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "BENCHLIB_OUTPUTS": str(tmp_path)})
    pids = [int(p) for p in row.stdout.readline().split()]
    row.send_signal(signal.SIGKILL)  # no `finally` runs: the kernel of a row killed
    row.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_training_worker_reads_shards_from_a_folder_and_from_the_store_through_its_workers(
        store_outputs, tmp_path, monkeypatch):
    """`dataset: FORMAT:LOCATION` in a training study: the rank's DataLoader workers read
    their share through the library; from the store, its endpoint and keys reach them
    through the AWS variables. Mosaic from the store: its workers start fresh (forked, they
    shared the rank's S3 connection and trained on labels of another sample's bytes:
    `IndexError: Target 4507908090515978896 is out of bounds`, the named case)."""
    from benchlib.launch.launcher import launch

    data, _ = store_outputs
    folder = shard_prep.local_folder(data, "mydataset", "wds", SHARD_MB)
    store = server.ensure()
    scratch = Path(tempfile.mkdtemp(prefix="bl-"))  # the ranks' TMPDIR (short: unix sockets)
    common = ["--model", "toynet", "--num-workers", "2", "--batch-size", "16",
              "--warmup-steps", "1", "--epochs", "1", "--device", "cpu"]
    local = launch("single", ["--dataset", f"wds:{folder}", *common, "--max-steps", "6"],
                   tmp_path / "local", "single")
    remote = launch("single", ["--dataset",
                               f"litdata:{shard_prep.default_url('mydataset', 'litdata', SHARD_MB)}",
                               *common, "--max-steps", "6"], tmp_path / "remote", "single",
                    env={k: v for k, v in store.env().items() if k != "AWS_ENDPOINT_URL"}
                    | {"BENCHLIB_OUTPUTS": str(store_outputs[1]), "TMPDIR": str(scratch)})
    # Mosaic's whole epoch through a link: forked, its workers failed most such epochs here
    with link.start(store.endpoint, 0.0, 20.0) as shaped:
        mosaic = launch("single", ["--dataset",
                                   f"mds:{shard_prep.default_url('mydataset', 'mds', SHARD_MB)}",
                                   *common], tmp_path / "mosaic", "single",
                        env=store.env() | {"AWS_ENDPOINT_URL": shaped.endpoint,
                                           "TMPDIR": str(scratch)})
    for out in (local, remote, mosaic):
        m = out.result["metrics"]
        assert m["samples_per_s"] > 0 and m["first_batch_s"] > 0
    assert remote.result["metrics"]["model_class"].endswith("ToyNet")
    assert mosaic.result["metrics"]["epoch_samples"] == SAMPLES  # the whole epoch
    assert mosaic.result["metrics"]["first_batch_s"] < 30  # no worker waited out Mosaic's 60 s
    left = list(scratch.glob("benchlib-shards-*"))
    shutil.rmtree(scratch)
    assert not left  # the rank's downloads went with it


def test_only_mosaics_readers_of_a_store_ask_for_workers_started_fresh(store_outputs, monkeypatch):
    from benchlib.shards import for_training

    data, _ = store_outputs
    store = server.ensure()
    for key, value in store.env().items():
        monkeypatch.setenv(key, value)
    asked = {}
    for fmt in SHARD_FORMATS:
        for where in (shard_prep.default_url("mydataset", fmt, SHARD_MB),
                      str(shard_prep.local_folder(data, "mydataset", fmt, SHARD_MB))):
            ds, _ = for_training.dataset(f"{fmt}:{where}", 0, 16)
            asked[fmt, where.startswith("s3://")] = ds.worker_start
            read.release(fmt, ds.reader)
    assert asked == {(fmt, remote): "forkserver" if (fmt, remote) == ("mds", True) else None
                     for fmt in SHARD_FORMATS for remote in (True, False)}


def test_shards_are_a_data_set_of_ones_own_checked_before_any_rank(store_outputs):
    from benchlib.config import DpVsDdpConfig
    from benchlib.studies import checks

    data, _ = store_outputs
    folder = shard_prep.local_folder(data, "mydataset", "litdata", SHARD_MB)
    cfg = DpVsDdpConfig(dataset=f"litdata:{folder}", model="toynet", device="cpu")
    assert checks.own_code_trains(cfg) == SAMPLES  # the job built, its model checked
    with pytest.raises(Exception, match="dataset: 'litdata:/nowhere/shards': no folder "
                       "/nowhere/shards"):
        checks.own_code_trains(DpVsDdpConfig(dataset="litdata:/nowhere/shards", model="toynet",
                                             device="cpu"))


def test_the_io_finding_names_the_format_the_store_and_the_link():
    """The landing page's IO finding (notebook 10's headline) of shard rows."""
    from benchlib.analysis import single_device_io as analysis
    from benchlib.records.results import frame

    recs = []
    for i, (variant, rate) in enumerate([("mds", 900.0), ("wds", 1500.0)]):
        r = _pipeline_record(run_id=f"h{i}", samples_per_s=rate, epoch_samples_per_s=rate,
                             samples_per_s_p10=rate * 0.9, samples_per_s_p90=rate * 1.1)
        r["params"].update(variant=variant, epochs=2, repeats=3)
        r["metrics"].update(device_name="AMD EPYC", shard_format=variant)
        r.update(started_at="2026-11-29T00:00:00", finished_at="2026-11-29T00:01:00",
                 label="pipes", testbed={"id": "t", "name": "t"}, torch="2.14.1")
        recs.append(r)
    claims, _ = analysis.headline(analysis.runs(frame(recs)))
    text = " ".join(c.text() for c in claims)
    assert "wds shards from s3 (the workbook's store on loopback), 20 MiB/s, 30 ms per request" \
        in text and "fastest wds" in text, text


def test_mosaics_worker_waiting_out_its_download_timeout_is_called_a_stall_not_the_link():
    """The named case, as measured here: under a capped link, with 2 workers, one of
    Mosaic's workers waited 60 s for its first shard while the other took 0.2 s."""
    from benchlib.diagnose import rules

    d = rules.diagnose(_pipeline_record(worker_start_s=60.4, worker_start_min_s=0.2,
                                        first_batch_cold_s=60.6, bytes_read_epoch1=6 * 19 * 2**20))
    assert "): stalls, a worker waited 60.4 s for its first samples while another took 0.20 s " \
           "through the same link: a reader stalled; " in d.advice
    assert "the named case: Mosaic's workers share the keep-alive S3 connection" in d.advice
    assert "start each worker fresh, with a connection of its own: multiprocessing_context=" \
           "forkserver" in d.advice and "--try --launches 5` measures it" in d.advice
    assert "the link," not in d.advice and d.try_params == {"multiprocessing_context": "forkserver"}
    # workers started fresh that stall all the same are a stall, not the named case
    fresh = _pipeline_record(worker_start_s=60.4, worker_start_min_s=0.2, first_batch_cold_s=60.6)
    fresh["params"]["multiprocessing_context"] = "spawn"
    d = rules.diagnose(fresh)
    assert "): stalls, a worker waited 60.4 s" in d.advice and "named case" not in d.advice


def test_the_pipeline_table_counts_a_rows_failed_launches_beside_its_figures():
    from benchlib.analysis import io_pipeline
    from benchlib.records.results import frame

    ok = _pipeline_record(run_id="ok1")
    bad = {**_pipeline_record(run_id="bad1"), "status": "failed", "metrics": {},
           "error": {"message": "IndexError: Relative sample index 38 is not present in the "
                     "shard.00005.mds file."}}
    for r in (ok, bad):
        r.update(started_at="2026-11-29T00:00:00", finished_at="2026-11-29T00:01:00",
                 label="pipes", testbed={"id": "t", "name": "t"})
    [row] = io_pipeline.table(frame([ok, bad])).to_dict("records")
    assert (row["n"], row["failed"]) == (1, 1) and row["epoch 1, samples/s"] == "1,000"


def test_a_folder_of_ones_own_images_becomes_shards_a_training_rank_reads_decoded(
        store_outputs, tmp_path):
    from PIL import Image

    from benchlib.shards import for_training

    data, _ = store_outputs
    images = tmp_path / "mine"
    for c, colour in enumerate(["red", "green", "blue"]):
        (images / f"class{c}").mkdir(parents=True)
        for i in range(4):
            Image.new("RGB", (40 + i, 30), colour).save(images / f"class{c}" / f"{i}.jpg")
    cfg = DataPrepConfig(path=str(data), dataset="mydataset", shards="wds,mds", shard_mb=SHARD_MB,
                         images=str(images), images_size=32)
    made = {e["format"]: e for e in shard_prep.prepare(cfg) if e["dataset"] == "images"}
    assert set(made) == {"wds", "mds"} and made["wds"]["samples"] == 12
    for fmt in ("wds", "mds"):
        ds, (x, _, largest) = for_training.dataset(f"{fmt}:{made[fmt]['folder']}", 0, 4)
        got = list(ds)
        assert len(got) == 12 and largest == 2 and tuple(x.shape) == (2, 3, 32, 32)
        assert all(tuple(img.shape) == (3, 32, 32) for img, _ in got)
        assert sorted(label for _, label in got) == [0] * 4 + [1] * 4 + [2] * 4
        read.release(fmt, ds.reader)

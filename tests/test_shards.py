"""The input pipeline (issue 52): the IO data sets as WebDataset, LitData and Mosaic shards,
read by each library with DataLoader workers, from their folder or from a real S3 server
on loopback (rclone's `serve s3`, started here and stopped at the end) through a link
that caps bandwidth, adds latency and counts what it carries."""

import hashlib
import json
import os
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
from benchlib.errors import StoreFailed  # noqa: E402
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
                      env: dict | None = None) -> tuple[list[str], list[dict]]:
    cfg = SingleDeviceIoConfig(dataset="mydataset", variant=fmt, num_workers=workers,
                               batch_size=32)
    ds = read.dataset(fmt, source, index, tmp_path / "cache", 0, env or {}, 32)
    seen = []
    for x, _ in io_shards.loader(cfg, ds, index, tmp_path / "workers", torch.device("cpu")):
        seen += [_identity(v) for v in x]
    read.release(fmt, ds)
    return seen, timing.workers(tmp_path / "workers")


@pytest.mark.parametrize("fmt", SHARD_FORMATS)
def test_each_library_reads_every_sample_once_an_epoch_with_2_workers(store_outputs, tmp_path, fmt):
    data, _ = store_outputs
    folder = shard_prep.local_folder(data, "mydataset", fmt, SHARD_MB)
    index = json.loads((folder / s3.INDEX).read_text())
    assert index["samples"] == SAMPLES and index["shards"] >= 4
    seen, workers = _epoch_identities(fmt, str(folder), index, tmp_path, workers=2)
    images, _ = decoded("mydataset", data)
    assert sorted(seen) == sorted(_identity(x) for x in images)  # none twice, none missing
    assert [w["worker"] for w in workers] == [0, 1]  # both worked, and together read them all
    assert sum(w["samples"] for w in workers) == SAMPLES and min(w["samples"] for w in workers) > 0


def test_a_row_from_the_store_names_first_batch_both_epochs_waits_and_the_links_traffic(
        store_outputs, capsys):
    data, out = store_outputs
    code = main(["io", "2", "cpu", "--dataset", "mydataset", "--variant", "mds", "--mode",
                 "traverse", "--path", str(data), "--shard-mb", str(SHARD_MB), "--store", "s3",
                 "--num-workers", "2", "--repeats", "1", "--warmup-steps", "1",
                 "--batch-size", "16", "--link-latency-ms", "20", "--outputs", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    record = json.loads(Path(printed.split("record: ")[1].split()[0]).read_text())
    m = record["metrics"]
    index = json.loads((shard_prep.local_folder(data, "mydataset", "mds", SHARD_MB)
                        / s3.INDEX).read_text())
    shard_bytes = sum(v for k, v in index["files"].items() if k.startswith("shard."))
    # epoch 1 fetched every shard through the link, each after 20 ms; epoch 2 read the cache
    assert m["bytes_read_epoch1"] >= shard_bytes and m["requests_epoch1"] >= index["shards"]
    assert m["cache_hits_epoch1"] == 0 and m["cache_hits_epoch2"] == index["shards"]
    assert m["bytes_read_epoch2"] < shard_bytes / 10
    assert m["first_batch_cold_s"] >= 0.02 and m["worker_start_s"] >= 0.02
    assert m["epoch1_samples_per_s"] > 0 and m["epoch2_samples_per_s"] > 0
    assert 0 <= m["wait_p50_s"] <= m["wait_p99_s"]
    assert [w["worker"] for w in m["workers"]] == [0, 1] and m["link"].startswith("s3 (")
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
    again = SingleDeviceIoConfig(**{**cfg.__dict__, "link_mibps": 0.0})
    result = single_device_io.run(again)  # its preflight started the store again
    assert server.status() is not None and server.status().pid != dying.pid
    assert result.metrics["samples"] == SAMPLES


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

import json
import struct

import numpy as np
import pytest
from torchvision.datasets import FashionMNIST

from benchlib.cli import main
from benchlib.config import DataPrepConfig
from benchlib.data import datasets, prepare
from benchlib.data import manifest as data_manifest
from benchlib.errors import ConfigError, UsageError


def prep(path, **kw):
    cfg = DataPrepConfig(path=str(path), **{"size": 500, "fashion_size": 1200, "cifar_size": 50,
                                            "imagefolder_size": 20, "tokenfile_size": 5000,
                                            "offline": True, **kw})
    return prepare.prepare(cfg)


def test_offline_fashion_mnist_loads_through_torchvision_with_real_shapes(tmp_path):
    prep(tmp_path, dataset="fashion-mnist")
    train = FashionMNIST(str(tmp_path), train=True, download=False)
    test = FashionMNIST(str(tmp_path), train=False, download=False)
    assert (len(train), len(test)) == (1200, 200)
    assert train.data.shape == (1200, 28, 28) and str(train.data.dtype) == "torch.uint8"
    assert str(train.targets.dtype) == "torch.int64"
    image, label = train[0]
    assert image.size == (28, 28) and image.mode == "L" and 0 <= label <= 9
    # balanced classes, like the real training split (6000 of each)
    assert np.bincount(train.targets.numpy()).tolist() == [120] * 10


def test_offline_images_are_learnable_class_shapes_not_noise(tmp_path):
    prep(tmp_path, dataset="fashion-mnist")
    ds = FashionMNIST(str(tmp_path), train=True, download=False)
    x, y = ds.data.numpy().reshape(len(ds), -1).astype(float), ds.targets.numpy()
    centroids = np.stack([x[y == c].mean(0) for c in range(10)])
    nearest = np.argmin(((x[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (nearest == y).mean() > 0.9  # a nearest-centroid classifier separates them


def test_idx_header_is_big_endian_magic_and_dims(tmp_path):
    prep(tmp_path, dataset="fashion-mnist")
    raw = tmp_path / "FashionMNIST" / "raw"
    head = (raw / "train-images-idx3-ubyte").read_bytes()[:16]
    assert struct.unpack(">IIII", head) == (0x803, 1200, 28, 28)
    head = (raw / "t10k-labels-idx1-ubyte").read_bytes()[:8]
    assert struct.unpack(">II", head) == (0x801, 200)


def test_mydataset_is_float32_28x28_with_labels_0_to_9(tmp_path):
    prep(tmp_path, dataset="mydataset", size=321)
    x, y = datasets.load_mydataset(tmp_path)
    assert x.shape == (321, 28, 28) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() < 1.0
    assert y.dtype == np.int64 and set(np.unique(y)) <= set(range(10))


def test_manifest_records_source_samples_bytes_and_checksum(tmp_path):
    entries = prep(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest == entries
    fm = manifest["fashion-mnist"]
    assert fm["source"] == "generated" and fm["samples"] == {"train": 1200, "test": 200}
    assert fm["bytes"] == sum((tmp_path / f).stat().st_size for f in fm["files"])
    assert fm["sha256"] == data_manifest._sha256(tmp_path, fm["files"])
    assert manifest["mydataset"]["samples"] == {"train": 500}


def test_same_seed_gives_identical_files_and_a_second_prepare_reuses_them(tmp_path):
    first = prep(tmp_path / "a")
    again = prep(tmp_path / "b")
    assert first["fashion-mnist"]["sha256"] == again["fashion-mnist"]["sha256"]
    stamp = (tmp_path / "a" / "mydataset.npz").stat().st_mtime_ns
    assert prep(tmp_path / "a") == first
    assert (tmp_path / "a" / "mydataset.npz").stat().st_mtime_ns == stamp


def test_changed_size_regenerates(tmp_path):
    prep(tmp_path, dataset="mydataset", size=100)
    prep(tmp_path, dataset="mydataset", size=200)
    assert datasets.load_mydataset(tmp_path)[0].shape[0] == 200


def test_no_network_falls_back_to_offline_generation_with_a_message(tmp_path, monkeypatch, capsys):
    # port 9 on loopback is closed: the same failure as a machine without network
    monkeypatch.setattr(FashionMNIST, "mirrors", ["http://127.0.0.1:9/"])
    entries = prep(tmp_path, dataset="fashion-mnist", offline=False)
    assert entries["fashion-mnist"]["source"] == "generated"
    err = capsys.readouterr().err
    assert "no network (127.0.0.1:9 unreachable" in err and "same IDX format" in err


def test_tokenfile_is_nanogpts_uint16_memmap_of_zipf_ids_with_its_meta(tmp_path):
    """train.bin and val.bin as nanoGPT reads them (np.memmap of uint16), the ids skewed as
    words are and below the vocabulary, meta.json saying what is in them; nothing else."""
    entries = prep(tmp_path, dataset="tokenfile", tokenfile_size=5000, tokenfile_vocab=1000)
    folder = tmp_path / "tokenfile"
    train = np.memmap(folder / "train.bin", dtype=np.uint16, mode="r")
    val = np.memmap(folder / "val.bin", dtype=np.uint16, mode="r")
    assert (len(train), len(val)) == (5000, 500)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta == {"vocab_size": 1000, "max_token_id": int(max(train.max(), val.max())),
                    "train_tokens": 5000, "val_tokens": 500, "dtype": "uint16"}
    assert 900 <= meta["max_token_id"] < 1000
    counts = np.bincount(train, minlength=1000)
    # Zipf, exponent 1: the ten commonest ids hold H(10) / H(1000) = 39% of the tokens
    assert counts.argmax() == 0 and 0.33 < counts[:10].sum() / 5000 < 0.45
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    assert entries["tokenfile"]["samples"] == {"train": 5000, "val": 500}
    again = prep(tmp_path / "again", dataset="tokenfile", tokenfile_size=5000, tokenfile_vocab=1000)
    assert again["tokenfile"]["sha256"] == entries["tokenfile"]["sha256"]
    rows = {r["dataset"]: r for r in prepare.verify(tmp_path)}
    assert rows["tokenfile"]["samples"] == 5000 and rows["tokenfile"]["dtype"] == "uint16"


def test_tokenfile_windows_are_nanogpts_x_and_y_shifted_by_one_and_split_across_ranks(tmp_path):
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from benchlib.data import tokenfile

    prep(tmp_path, dataset="tokenfile", tokenfile_size=1000, tokenfile_vocab=1000)
    data = np.memmap(tmp_path / "tokenfile" / "train.bin", dtype=np.uint16, mode="r")
    windows = tokenfile.TokenWindows(tmp_path, seq_len=16)
    assert len(windows) == (1000 - 1) // 16
    for i in (0, 7, len(windows) - 1):  # nanoGPT's get_batch at the window's start s
        s = 16 * i
        x, y = windows[i]
        assert x.dtype == np.int64 and (x == data[s : s + 16]).all() \
            and (y == data[s + 1 : s + 1 + 16]).all() and (y[:-1] == x[1:]).all()
    with pytest.raises(IndexError):
        windows[len(windows)]
    seen = []
    for rank in (0, 1):  # each rank its own windows, read by two DataLoader workers
        sampler = DistributedSampler(windows, num_replicas=2, rank=rank, seed=0)
        batches = list(DataLoader(windows, batch_size=4, sampler=sampler, num_workers=2))
        assert batches[0][0].dtype == torch.int64 and batches[0][0].shape == (4, 16)
        seen.append({tuple(x.tolist()) for xb, _ in batches for x in xb})
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == len(windows) == 62  # no padding


def test_describe_a_missing_data_set_suggests_benchlib_data(tmp_path):
    with pytest.raises(UsageError, match=r"has no mydataset data; run `python -m benchlib data --path"):
        data_manifest.describe(tmp_path, "mydataset")


@pytest.mark.parametrize("field, value, message", [
    ("dataset", "mnist", "dataset: 'mnist' is not one of all, fashion-mnist, mydataset, cifar10, "
     "imagefolder, tokenfile"),
    ("tokenfile_vocab", 70000, "tokenfile_vocab: ids are stored as uint16: at most 65536, got 70000"),
    ("size", 0, "size: must be >= 1, got 0"),
    ("size", "10", "size: expected int, got str '10'"),
    ("offline", 1, "offline: expected bool, got int 1"),
])
def test_config_rejects_bad_values_naming_the_field(field, value, message):
    with pytest.raises(ConfigError) as info:
        DataPrepConfig(**{field: value})
    assert str(info.value) == message and info.value.field == field


def test_cli_data_writes_data_and_bad_size_exits_2_writing_nothing(tmp_path, capsys):
    assert main(["data", "--path", str(tmp_path / "d"), "--offline", "--size", "50",
                 "--fashion-size", "60", "--cifar-size", "20", "--imagefolder-size", "20",
                 "--tokenfile-size", "1000"]) == 0
    out = capsys.readouterr().out
    assert "fashion-mnist: generated, 60 train, 10 test" in out
    assert "tokenfile: generated, 1000 train, 100 val" in out
    assert main(["data", "--path", str(tmp_path / "bad"), "--size", "-3"]) == 2
    assert "benchlib data: size: must be >= 1, got -3" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_cli_data_unwritable_path_is_one_clear_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["data", "--path", str(blocker / "sub"), "--offline"]) == 2
    assert "path: cannot create" in capsys.readouterr().err

import pytest
import torch

from benchlib.config.choices import IN_MEMORY_VARIANTS, IO_DATASETS
from benchlib.data import storage
from benchlib.errors import UsageError


@pytest.mark.parametrize("dataset", IO_DATASETS)
def test_every_variant_yields_the_same_sample_and_label_for_the_same_index(small_data, dataset):
    raw = storage.prepare(dataset, "raw", small_data)
    for variant in IN_MEMORY_VARIANTS:
        other = storage.prepare(dataset, variant, small_data)
        assert other.samples == raw.samples and other.source == "generated"
        for i in (0, 1, 17, raw.samples - 1):
            x_raw, y_raw = raw.sample(i)
            x, y = other.sample(i)
            assert x.shape == (1, 28, 28) and x.dtype == torch.float32, variant
            assert torch.equal(x, x_raw) and y == y_raw, (variant, i)


@pytest.mark.parametrize("variant", IN_MEMORY_VARIANTS)
def test_a_loader_batch_has_the_same_shape_for_every_variant(small_data, variant):
    from benchlib.core.loops import make_loader

    prepared = storage.prepare("fashion-mnist", variant, small_data)
    loader = make_loader(prepared.dataset, prepared.collate_fn, 32, 0, torch.device("cpu"), 0)
    x, y = next(iter(loader))
    assert x.shape == (32, 1, 28, 28) and x.dtype == torch.float32
    assert y.shape == (32,) and y.dtype == torch.int64
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0


def test_decoded_caches_follow_the_data_checksum(small_data):
    storage.prepare("mydataset", "np_memmap", small_data)
    storage.prepare("mydataset", "tensorclass_memmap", small_data)
    cache = storage.cache_dir("mydataset", small_data)
    assert (cache / "images.npy").exists() and (cache / "tensorclass" / "meta.json").exists()
    again = storage.prepare("mydataset", "tensorclass_memmap", small_data)  # loads the cache
    assert again.dataset.images.shape == (300, 1, 28, 28)


def test_unknown_variant_and_missing_data_are_clear(tmp_path, small_data):
    with pytest.raises(UsageError, match="variant: 'lmdb' is not one of raw, preload"):
        storage.prepare("fashion-mnist", "lmdb", small_data)
    with pytest.raises(UsageError, match=r"has no fashion-mnist data; run `python -m benchlib data"):
        storage.prepare("fashion-mnist", "raw", tmp_path)


def test_read_idx_gives_back_what_write_idx_wrote_and_refuses_other_files(tmp_path):
    import numpy as np

    from benchlib.data.generate import read_idx, write_idx

    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "images", images)
    assert np.array_equal(read_idx(tmp_path / "images"), images)
    (tmp_path / "other").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(16))
    with pytest.raises(UsageError, match="path: .*other is not an IDX file of unsigned bytes"):
        read_idx(tmp_path / "other")

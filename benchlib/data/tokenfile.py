"""Token ids on disk as nanoGPT keeps them: `tokenfile/train.bin` and `val.bin`, each a flat
array of np.uint16 read with np.memmap, and `meta.json` (vocab_size, the largest id, the
token counts, the dtype). `benchlib data` generates them: real text is not needed to
measure speed, since a step does the same arithmetic whatever the ids are; the ids follow
a Zipf law (frequency of the k-th commonest id ~ 1/k, as words do) below the vocabulary.

A training sample is a window of seq_len + 1 tokens, as nanoGPT's get_batch takes them:
x = tokens[s:s+T], y = tokens[s+1:s+1+T] (`TokenWindows`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import atomic, paths
from benchlib.data.manifest import describe
from benchlib.errors import ConfigError

TOKENFILE_DIR = "tokenfile"
SPLITS = ("train", "val")
DTYPE = np.uint16
ZIPF_EXPONENT = 1.0
_CHUNK = 1 << 22  # tokens drawn at a time: the uniform draws of one chunk take 32 MiB


def files() -> list[str]:
    return [f"{TOKENFILE_DIR}/{split}.bin" for split in SPLITS] + [f"{TOKENFILE_DIR}/meta.json"]


def generate(root: Path, train_tokens: int, vocab_size: int, seed: int) -> dict[str, int]:
    """train.bin with `train_tokens` ids, val.bin with a tenth, and meta.json; each file
    written beside its place and renamed over it. The same seed writes the same bytes."""
    rng = np.random.default_rng(seed + 4)
    weights = 1.0 / np.arange(1, vocab_size + 1) ** ZIPF_EXPONENT
    cdf = np.cumsum(weights / weights.sum())
    sizes = {"train": train_tokens, "val": max(train_tokens // 10, 2)}
    largest = 0
    for split, n in sizes.items():
        with atomic.replacing(root / TOKENFILE_DIR / f"{split}.bin", suffix=".bin") as tmp:
            ids = np.memmap(tmp, dtype=DTYPE, mode="w+", shape=(n,))
            for start in range(0, n, _CHUNK):
                drawn = np.searchsorted(cdf, rng.random(min(_CHUNK, n - start)), side="right")
                ids[start : start + len(drawn)] = np.minimum(drawn, vocab_size - 1)
                largest = max(largest, int(ids[start : start + len(drawn)].max()))
            ids.flush()
            del ids
    atomic.write_json(root / TOKENFILE_DIR / "meta.json", {
        "vocab_size": vocab_size, "max_token_id": largest, "train_tokens": sizes["train"],
        "val_tokens": sizes["val"], "dtype": np.dtype(DTYPE).name})
    return sizes


def meta(path: str | Path) -> dict[str, Any]:
    """The prepared tokenfile's meta.json; the usual message naming `benchlib data` if it
    was never prepared under `path`."""
    describe(path, TOKENFILE_DIR)
    return json.loads((paths.resolve(path) / TOKENFILE_DIR / "meta.json").read_text())


def check_fits(info: dict[str, Any], seq_len: int, model: str, model_vocab: int | None) -> None:
    """The model's vocabulary holds the data's largest id, and train.bin has a window of
    seq_len + 1 tokens: one line naming the field, before any rank starts."""
    largest = info["max_token_id"]
    if model_vocab is not None and model_vocab <= largest:
        raise ConfigError("vocab_size", f"{model}'s vocab_size is {model_vocab}, but the "
                          f"tokenfile's largest token id is {largest}: set model_args "
                          f"vocab_size to at least {largest + 1}, or prepare the data with "
                          f"--tokenfile-vocab {model_vocab}")
    if seq_len + 1 > info["train_tokens"]:
        raise ConfigError("seq_len", f"{seq_len} needs windows of {seq_len + 1} tokens, but "
                          f"the tokenfile's train.bin holds {info['train_tokens']}: lower "
                          "seq_len or prepare more with --tokenfile-size")


class TokenWindows:
    """train.bin (or val.bin) as a map-style data set of (x, y) int64 windows: item i is
    x = tokens[s:s+T], y = tokens[s+1:s+1+T] with s = i*T, the windows side by side. nanoGPT
    draws s at random; here the sampler shuffles the windows (DistributedSampler: each rank
    its own), so an epoch reads each once. The memmap is opened in the process that reads
    it (each DataLoader worker its own), never pickled."""

    def __init__(self, path: str | Path, seq_len: int, split: str = "train"):
        self.file = paths.resolve(path) / TOKENFILE_DIR / f"{split}.bin"
        self.seq_len = seq_len
        self.tokens = self.file.stat().st_size // np.dtype(DTYPE).itemsize
        self._ids: np.memmap | None = None

    def __len__(self) -> int:
        return (self.tokens - 1) // self.seq_len

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        s = range(0, len(self) * self.seq_len, self.seq_len)[i]  # IndexError past the last
        if self._ids is None:
            self._ids = np.memmap(self.file, dtype=DTYPE, mode="r")
        window = self._ids[s : s + self.seq_len + 1].astype(np.int64)
        return window[:-1], window[1:]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_ids": None}

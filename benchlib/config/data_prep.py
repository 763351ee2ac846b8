"""The data_prep study's parameters (notebook 00_data_prep and `python -m benchlib data`)."""

from __future__ import annotations

import dataclasses

from benchlib.config.base import StudyConfig, require_choice, require_min
from benchlib.config.choices import DATASETS_PREPARED, IO_DATASETS, SHARD_FORMATS, STORES
from benchlib.errors import ConfigError


@dataclasses.dataclass
class DataPrepConfig(StudyConfig):
    """Data preparation (notebook 00, `python -m benchlib data`)."""

    path: str = "outputs/data"
    """Folder the data sets are written to; relative paths start at the project root."""
    dataset: str = "all"
    """Which data set to prepare: all, fashion-mnist, mydataset, cifar10, imagefolder or
    tokenfile."""
    size: int = 60000
    """MyDataSet sample count (seed 000's --size)."""
    fashion_size: int = 60000
    """FashionMNIST training images when generated offline (the test split gets a sixth)."""
    cifar_size: int = 50000
    """CIFAR-10 training images when generated offline (the test split gets a fifth)."""
    imagefolder_size: int = 1000
    """ImageNet-layout JPEGs generated (10 classes; val gets a tenth)."""
    tokenfile_size: int = 1_000_000
    """Token ids in tokenfile's train.bin (val.bin gets a tenth); always generated."""
    tokenfile_vocab: int = 50257
    """tokenfile's ids are 0..tokenfile_vocab-1 (GPT-2's 50,257; at most 65,536: uint16)."""
    offline: bool = False
    """Generate FashionMNIST and CIFAR-10 instead of downloading them (automatic without network)."""
    seed: int = 0
    """Seed of the generators: the same seed gives byte-identical files."""
    shards: str = ""
    """Also write fashion-mnist and mydataset as shards: wds, litdata, mds, several with
    commas, or all; empty: none (the IO study's shard variants read them)."""
    shard_mb: float = 4.0
    """The shards' size in MB."""
    store: str = "local"
    """local (shards under path/shards/) or s3 (also uploaded to an object store)."""
    store_endpoint: str = ""
    """store s3: the endpoint URL; empty: the workbook's own, started if need be. Its keys
    come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."""
    images: str = ""
    """With shards: a folder of your own images, one subfolder per class (ImageFolder's
    layout), also written as shards (under path/shards/images/), the images as they are."""
    images_size: int = 224
    """images: the side the readers resize and centre-crop them to (3 x side x side)."""

    def validate(self) -> None:
        require_choice("dataset", self.dataset, ("all", *DATASETS_PREPARED))
        require_min("size", self.size, 1)
        require_min("fashion_size", self.fashion_size, 10)
        require_min("cifar_size", self.cifar_size, 10)
        require_min("imagefolder_size", self.imagefolder_size, 10)
        require_min("tokenfile_size", self.tokenfile_size, 10)
        require_min("tokenfile_vocab", self.tokenfile_vocab, 2)
        if self.tokenfile_vocab > 2**16:
            raise ConfigError("tokenfile_vocab", f"ids are stored as uint16: at most 65536, got "
                              f"{self.tokenfile_vocab}")
        if not self.path:
            raise ConfigError("path", "must name a folder, e.g. outputs/data")
        for fmt in self.shard_formats():
            if fmt not in SHARD_FORMATS:
                raise ConfigError("shards", f"{fmt!r} is not one of {', '.join(SHARD_FORMATS)} "
                                  "(several with commas, or all)")
        if not self.shard_mb > 0:
            raise ConfigError("shard_mb", f"must be > 0 MB (a shard holds at least one sample), "
                              f"got {self.shard_mb:g}")
        require_choice("store", self.store, STORES)
        if self.store == "s3" and not self.shards:
            raise ConfigError("store", "s3 uploads shards: name them with shards (wds, litdata, "
                              "mds or all)")
        if self.store_endpoint and self.store != "s3":
            raise ConfigError("store_endpoint", "is for store s3")
        if self.images and not self.shards:
            raise ConfigError("images", "are written as shards: name the formats with shards "
                              "(wds, litdata, mds or all)")
        require_min("images_size", self.images_size, 8)
        if self.shards and not self.images and not set(self.datasets()) & set(IO_DATASETS):
            raise ConfigError("shards", f"are written of {' and '.join(IO_DATASETS)}; dataset "
                              f"is {self.dataset}")

    def shard_formats(self) -> tuple[str, ...]:
        """The shard formats asked for, in the order of choices.SHARD_FORMATS for `all`."""
        if self.shards.strip() == "all":
            return SHARD_FORMATS
        return tuple(f.strip() for f in self.shards.split(",") if f.strip())

    def datasets(self) -> tuple[str, ...]:
        return DATASETS_PREPARED if self.dataset == "all" else (self.dataset,)

"""Offline data in the real on-disk formats: FashionMNIST's raw IDX files, CIFAR-10's
python pickle batches and ImageNet-layout JPEG folders, with images that are class
prototypes plus noise (a model can learn them; decoding them costs what the real ones
cost). The same seed writes byte-identical files."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import atomic
from benchlib.errors import UsageError

IMAGE_SIDE = 28
NUM_CLASSES = 10
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


IDX_UBYTE_IMAGES = 0x00000803  # IDX magic: unsigned byte, 3 dimensions
IDX_UBYTE_LABELS = 0x00000801  # IDX magic: unsigned byte, 1 dimension


def class_prototypes(rng: np.random.Generator, side: int = IMAGE_SIDE,
                     channels: int = 0) -> np.ndarray:
    """Ten blocky side x side shapes in [0, 1] inside an ellipse, one per class; with
    `channels`, colour images shaped (10, channels, side, side)."""
    extra = (channels,) if channels else ()
    coarse = rng.random((NUM_CLASSES, *extra, side // 4, side // 4))
    shapes = np.kron(coarse, np.ones((4, 4)))
    yy, xx = np.mgrid[:side, :side]
    half = (side - 1) / 2
    ellipse = ((yy - half) / (side * 0.47)) ** 2 + ((xx - half) / (side * 0.36)) ** 2 <= 1
    return (shapes * ellipse).astype(np.float32)


def generate_images(n: int, rng: np.random.Generator, prototypes: np.ndarray):
    """`n` uint8 images shaped like the prototypes, balanced labels 0-9:
    prototype x brightness + noise."""
    shape = prototypes.shape[1:]
    labels = rng.permutation(np.arange(n) % NUM_CLASSES).astype(np.uint8)
    images = np.empty((n, *shape), dtype=np.uint8)
    for start in range(0, n, 10_000):  # chunks keep the float copy small
        chunk = labels[start : start + 10_000]
        brightness = rng.uniform(0.6, 1.0, size=(len(chunk),) + (1,) * len(shape))
        noise = rng.normal(0.0, 0.08, size=(len(chunk), *shape))
        pixels = np.clip(prototypes[chunk] * brightness.astype(np.float32)
                         + noise.astype(np.float32), 0.0, 1.0)
        images[start : start + len(chunk)] = np.round(pixels * 255).astype(np.uint8)
    return images, labels


def write_idx(file: Path, array: np.ndarray) -> None:
    """An uint8 array as an IDX file (big-endian header: magic, then each dimension)."""
    assert array.dtype == np.uint8 and array.ndim in (1, 3)
    magic = IDX_UBYTE_IMAGES if array.ndim == 3 else IDX_UBYTE_LABELS
    header = struct.pack(f">I{array.ndim}I", magic, *array.shape)
    atomic.write_bytes(file, header + array.tobytes())


def read_idx(file: Path) -> np.ndarray:
    """An IDX file of unsigned bytes (as write_idx writes it, and as torchvision's
    FashionMNIST reads it), without importing torchvision: ~2 s a process on CPU."""
    raw = np.fromfile(file, dtype=np.uint8)
    magic, ndim = struct.unpack(">I", raw[:4].tobytes())[0], int(raw[3])
    if magic not in (IDX_UBYTE_IMAGES, IDX_UBYTE_LABELS):
        raise UsageError(f"path: {file} is not an IDX file of unsigned bytes (magic {magic:#010x})")
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim].tobytes())
    return raw[4 + 4 * ndim :].reshape(dims)


def fashion_files() -> list[str]:
    return [f"FashionMNIST/raw/{name}" for split in FASHION_FILES.values() for name in split]


def generate_fashion_mnist(root: Path, train_size: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    prototypes = class_prototypes(rng)
    sizes = {"train": train_size, "test": max(train_size // 6, NUM_CLASSES)}
    for split, (images_name, labels_name) in FASHION_FILES.items():
        images, labels = generate_images(sizes[split], rng, prototypes)
        write_idx(root / "FashionMNIST" / "raw" / images_name, images)
        write_idx(root / "FashionMNIST" / "raw" / labels_name, labels)
    return sizes


CIFAR_DIR = "cifar-10-batches-py"
CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck"]


CIFAR_TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]


def _pickle(file: Path, obj: Any) -> None:
    import pickle

    atomic.write_bytes(file, pickle.dumps(obj, protocol=2))


def generate_cifar10(root: Path, train_size: int, seed: int) -> dict[str, int]:
    """The python pickle batches torchvision reads: five training batches, one test batch
    and batches.meta; images are colour class shapes plus noise."""
    rng = np.random.default_rng(seed + 2)
    prototypes = class_prototypes(rng, side=32, channels=3)
    sizes = {"train": train_size, "test": max(train_size // 5, NUM_CLASSES)}
    folder = root / CIFAR_DIR
    images, labels = generate_images(sizes["train"], rng, prototypes)
    for name, part in zip(CIFAR_TRAIN_BATCHES, np.array_split(np.arange(train_size), 5)):
        _pickle(folder / name, {"batch_label": name, "labels": labels[part].tolist(),
                                "data": images[part].reshape(len(part), -1),
                                "filenames": [f"generated_{i}.png" for i in part]})
    images, labels = generate_images(sizes["test"], rng, prototypes)
    _pickle(folder / "test_batch", {"batch_label": "test_batch", "labels": labels.tolist(),
                                    "data": images.reshape(len(labels), -1),
                                    "filenames": [f"generated_{i}.png" for i in range(len(labels))]})
    _pickle(folder / "batches.meta", {"label_names": CIFAR_CLASSES,
                                      "num_cases_per_batch": len(labels), "num_vis": 3072})
    return sizes


IMAGEFOLDER_DIR = "imagefolder"
IMAGEFOLDER_SIDE = 160


def generate_imagefolder(root: Path, size: int, seed: int) -> tuple[dict[str, int], list[str]]:
    """`size` training and size/10 validation JPEGs in ImageNet's layout
    (train/<class>/*.JPEG, val/<class>/*.JPEG), 10 classes of colour shapes plus noise."""
    from PIL import Image

    rng = np.random.default_rng(seed + 3)
    prototypes = class_prototypes(rng, side=IMAGEFOLDER_SIDE, channels=3)
    sizes, files = {"train": size, "test": max(size // 10, NUM_CLASSES)}, []
    for split, n in (("train", sizes["train"]), ("val", sizes["test"])):
        images, labels = generate_images(n, rng, prototypes)
        for i, (image, label) in enumerate(zip(images, labels)):
            name = f"{IMAGEFOLDER_DIR}/{split}/n{label:08d}/{split}_{i:07d}.JPEG"
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            with atomic.replacing(root / name, suffix=".JPEG") as tmp:
                Image.fromarray(image.transpose(1, 2, 0)).save(tmp, format="JPEG", quality=90)
            files.append(name)
    return sizes, files

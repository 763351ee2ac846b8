"""The data_prep study (notebook 00, `python -m benchlib data`): prepare the data sets,
open each the way the studies do, and report what is there, real or generated."""

from __future__ import annotations

from typing import Any

from benchlib.config import DataPrepConfig
from benchlib.data import manifest, prepare
from benchlib.studies.repeats import Launch


def launches(cfg: DataPrepConfig, run_id: str = "interactive") -> list[Launch]:
    """None: the data sets are prepared in the kernel that asks for them."""
    return []


def run(cfg: DataPrepConfig) -> dict[str, dict[str, Any]]:
    """Prepare (or reuse) the data sets `cfg` names; their manifest entries by name. With
    `shards`, the IO data sets also as shards (and uploaded with `store: s3`)."""
    entries = prepare.prepare(cfg)
    if cfg.shards:
        from benchlib.shards import prepare as shards

        for e in shards.prepare(cfg):
            print(f"{e['dataset']} {e['format']}: {e['shards']} shards, {e['bytes'] / 1e6:.1f} "
                  f"MB{', at ' + e['url'] if e['url'] else ''}")
    return entries


def verify(cfg: DataPrepConfig) -> list[dict[str, Any]]:
    """Every prepared data set opened as the studies open it: shape, dtype, classes."""
    return prepare.verify(cfg.path)


def sample_images(cfg: DataPrepConfig, per_class: int = 4):
    """A few FashionMNIST training images of each class, for a look at the data."""
    return prepare.sample_images(cfg.path, per_class)


def metrics(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run's record: per data set its source, samples and bytes; the total time."""
    return manifest.prep_metrics(entries)

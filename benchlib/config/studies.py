"""The one list of the workbook's studies, in reading order.

The sweep (whether a row's study checks the machine first), the
report (its findings' order, a record's study), the analysis (its sections' order) and
`compare --study` all read it, so a study is added here once.
A record's `study` field names its study (`single_device_io`, `of_notebook(its notebook)`),
its `table` the parameter table its row came from (`io_workers`), and its `label` its
result set.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchlib.errors import ConfigError


@dataclass(frozen=True)
class Study:
    """One study: its name (notebooks/NN_<name>.ipynb, <Name>Config, benchlib/studies/
    <name>.py, benchlib/analysis/<name>.py, params/<name>_*.yaml), the question it
    answers, and whether its rows check the machine they run on first (its module in
    benchlib/studies has a `preflight`, run where the row runs)."""

    name: str
    notebook: str
    question: str
    preflight: bool = True
    cli: tuple[str, ...] = ()  # the `notebook` of records its CLI command writes
    # a sweep may start its rows' kernels warm (benchlib.runs.warm_kernels): what its rows
    # time runs in processes they launch, or nothing is timed. Not the IO study, which
    # times in its kernel: forked, its traverse rows measured a median 0.92x of a fresh
    # kernel's (0.75-0.98 by row, 4 sweeps of 7 repeats; docs/sweeps.md)
    warm_kernel: bool = False

    @property
    def config(self) -> str:
        """The name of its config class in benchlib.config.CONFIGS."""
        return "".join(w.capitalize() for w in self.name.split("_")) + "Config"


STUDIES: tuple[Study, ...] = (
    # its record's total time says how long the data took to get, not how fast anything ran
    Study("data_prep", "00_data_prep.ipynb", "Which data sets are here, real or generated?",
          preflight=False, warm_kernel=True),
    Study("single_device_io", "10_single_device_io.ipynb",
          "How fast does data reach the model, per DataLoader setting and storage variant?",
          cli=("benchlib io (CLI)",)),
    Study("memory_and_batch", "15_memory_and_batch.ipynb",
          "What is the largest batch that trains here, and what does a bigger one buy?",
          cli=("benchlib maxbatch (CLI)",), warm_kernel=True),
    Study("dp_vs_ddp", "20_dp_vs_ddp.ipynb",
          "Does DDP beat one process and DataParallel here, and by how much?",
          warm_kernel=True),
    Study("multinode_lightning", "30_multinode_lightning.ipynb",
          "How does throughput scale across nodes, with raw DDP and Lightning?",
          warm_kernel=True),
    Study("fault_tolerance", "35_fault_tolerance.ipynb", "What does losing a rank cost?",
          warm_kernel=True),
    Study("framework_comparison", "40_framework_comparison.ipynb",
          "How fast does ResNet train here, and how close to the hardware's peak (MFU)?",
          warm_kernel=True),
    Study("scaling_projection", "45_scaling_projection.ipynb",
          "How far would these figures scale, and what stops them?", preflight=False,
          warm_kernel=True),
    Study("transformer_training", "50_transformer_training.ipynb",
          "DDP or FSDP2, which activation checkpointing: tokens/s, MFU and peak memory?",
          warm_kernel=True),
    Study("analysis", "90_analysis.ipynb", "Everything side by side", preflight=False,
          warm_kernel=True),
    Study("compare", "95_compare.ipynb", "Did anything get slower between two result sets?",
          preflight=False, warm_kernel=True),
)
# records of the all-reduce CLI belong to no notebook study; they are named as their command
CLI_ONLY = {"benchlib allreduce (CLI)": "allreduce", "benchlib doctor (CLI)": "doctor"}
GPU_CHECK = "gpu_check"  # a GPU check step's record: its notebook is "gpu-check <step>"

BY_NAME = {s.name: s for s in STUDIES}
_BY_NOTEBOOK = {nb: s for s in STUDIES for nb in (s.notebook, *s.cli)}


def warm_kernel(notebook: str) -> bool:
    """Whether a sweep may fork the kernel of a row of `notebook` (Study.warm_kernel; a
    notebook of the user's: no, it may time in its kernel)."""
    study = _BY_NOTEBOOK.get(notebook)
    return study is not None and study.warm_kernel


def named(name: str) -> Study:
    """The study called `name`; ConfigError listing the names otherwise."""
    if name not in BY_NAME:
        raise ConfigError("study", f"{name!r} is not a study; studies: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def of_notebook(notebook: str) -> str:
    """The study a record of `notebook` belongs to (`10_single_device_io.ipynb` and
    `benchlib io (CLI)` are single_device_io); a notebook of the user's own is named by its
    file name without the NN_ prefix."""
    if notebook in _BY_NOTEBOOK:
        return _BY_NOTEBOOK[notebook].name
    if notebook in CLI_ONLY:
        return CLI_ONLY[notebook]
    if notebook.startswith("gpu-check "):
        return GPU_CHECK
    stem = notebook.rpartition("/")[2].removesuffix(".ipynb")
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def order(name: str) -> int:
    """A study's place in reading order (studies not in the list come last)."""
    names = list(BY_NAME)
    return names.index(name) if name in BY_NAME else len(names)

"""The study registry: the one source of what a study is, in reading order.

An entry names the study's notebook, its config class, its study module (`run`,
`preflight`), its analysis module (table, headline, main figure and notebook 90's section
from one frame), the question it answers and how a sweep starts its kernels. The sweep
(configs, preflight, kernel mode), the records (a record's `study`), notebook 90 (its
sections), the report (its findings, their order and thumbnails) and `compare --study`
all ask the registry, so a study is added by one entry plus its modules and notebook.
The entry is the one place a study's name is written: a config class finds its study here
(`of_config`), an analysis module its own (`of_analysis`), and the entry its config class
in the study's config module (`config_class`).

Studies of one's own, outside benchlib, join through `BENCHLIB_STUDIES` (module names,
comma-separated, each with a `STUDIES` tuple of entries): every process a sweep or a
report starts inherits it, so the kernels and the analysis see them too.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from benchlib import paths
from benchlib.errors import ConfigError

KERNELS = ("fresh", "warm")


@dataclass(frozen=True)
class Study:
    """One study. `config`: its config class, a class of its config module
    (benchlib.config.<name>) or `pkg.mod:Class` (default: <Name>Config). `module` and
    `analysis`: its study and analysis modules (default: benchlib.studies.<name>,
    benchlib.analysis.<name>; "" for none: a study that launches nothing, a notebook that
    reads every study's records). `kernel`: `warm`, a sweep may fork the row's kernel from
    one that imported torch once (what the row times runs in processes it launches, or
    nothing is timed), or `fresh`, a new kernel per row
    (the IO study times in its kernel: forked, its traverse rows measured a median 0.92x of
    a fresh kernel's, 0.75-0.98 by row over 4 sweeps of 7 repeats; docs/sweeps.md).
    `preflight`: its study module checks the machine a row runs on first. `cli`: the
    `notebook` of records its CLI command writes."""

    name: str
    notebook: str
    question: str
    config: str = ""
    module: str | None = None
    analysis: str | None = None
    kernel: str = "fresh"
    preflight: bool = True
    cli: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.config:
            object.__setattr__(self, "config", "".join(
                w.capitalize() for w in self.name.split("_")) + "Config")
        for field, package in (("module", "studies"), ("analysis", "analysis")):
            if getattr(self, field) is None:
                object.__setattr__(self, field, f"benchlib.{package}.{self.name}")
        if self.kernel not in KERNELS:
            raise ConfigError("kernel", f"study {self.name}: must be one of {', '.join(KERNELS)}, "
                              f"got {self.kernel!r}")


STUDIES: tuple[Study, ...] = (
    # its record's total time says how long the data took to get, not how fast anything ran
    Study("data_prep", "00_data_prep.ipynb", "Which data sets are here, real or generated?",
          kernel="warm", preflight=False),
    Study("single_device_io", "10_single_device_io.ipynb",
          "How fast does data reach the model, per DataLoader setting and storage variant?",
          cli=("benchlib io (CLI)",)),
    Study("memory_and_batch", "15_memory_and_batch.ipynb",
          "What is the largest batch that trains here, and what does a bigger one buy?",
          kernel="warm", cli=("benchlib maxbatch (CLI)",)),
    Study("dp_vs_ddp", "20_dp_vs_ddp.ipynb",
          "Does DDP beat one process and DataParallel here, and by how much?", kernel="warm"),
    Study("multinode_lightning", "30_multinode_lightning.ipynb",
          "How does throughput scale across nodes, with raw DDP and Lightning?", kernel="warm"),
    Study("fault_tolerance", "35_fault_tolerance.ipynb", "What does losing a rank cost?",
          kernel="warm"),
    Study("framework_comparison", "40_framework_comparison.ipynb",
          "How fast does ResNet train here, and how close to the hardware's peak (MFU)?",
          kernel="warm"),
    Study("scaling_projection", "45_scaling_projection.ipynb",
          "How far would these figures scale, and what stops them?", module="",
          kernel="warm", preflight=False),
    Study("transformer_training", "50_transformer_training.ipynb",
          "DDP or FSDP2, which activation checkpointing: tokens/s, MFU and peak memory?",
          kernel="warm"),
    Study("compile", "55_compile.ipynb",
          "After how many steps does torch.compile pay off here, cold and warm, and does it "
          "change the loss?", kernel="warm"),
    Study("analysis", "90_analysis.ipynb", "Everything side by side", module="", analysis="",
          kernel="warm", preflight=False),
    Study("compare", "95_compare.ipynb", "Did anything get slower between two result sets?",
          module="", analysis="", kernel="warm", preflight=False),
)
# records of the all-reduce CLI belong to no notebook study; they are named as their command
CLI_ONLY = {"benchlib allreduce (CLI)": "allreduce", "benchlib doctor (CLI)": "doctor"}
GPU_CHECK = "gpu_check"  # a GPU check step's record: its notebook is "gpu-check <step>"

_extra: dict[str, tuple[Study, ...]] = {}


def registry() -> tuple[Study, ...]:
    """benchlib's studies, then those of the modules BENCHLIB_STUDIES names, each once."""
    extra: list[Study] = []
    for module in paths.extra_study_modules():
        if module not in _extra:
            try:
                found = importlib.import_module(module).STUDIES
            except (ImportError, AttributeError) as e:
                raise ConfigError("BENCHLIB_STUDIES", f"{module}: cannot read its STUDIES "
                                  f"({type(e).__name__}: {e}); name modules that define "
                                  "STUDIES = (Study(...), ...)") from e
            _extra[module] = tuple(found)
        extra += _extra[module]
    known = {s.name for s in STUDIES}
    clash = next((s.name for s in extra if s.name in known), None)
    if clash:
        raise ConfigError("BENCHLIB_STUDIES", f"study {clash!r} is one of benchlib's own; "
                          "give yours another name")
    return (*STUDIES, *extra)


def analysed() -> list[Study]:
    """The studies notebook 90 and the report give a section and a finding, in order."""
    return [s for s in registry() if s.analysis]


def named(name: str) -> Study:
    """The study called `name`; ConfigError listing the names otherwise."""
    found = {s.name: s for s in registry()}
    if name not in found:
        raise ConfigError("study", f"{name!r} is not a study; studies: {', '.join(found)}")
    return found[name]


@functools.cache
def config_class(study: Study) -> type:
    """The config class `study`'s entry names: `Class` in its config module
    (benchlib.config.<name>), or `pkg.module:Class` for a study of one's own."""
    module, _, name = study.config.rpartition(":")
    module = module or f"benchlib.config.{study.name}"
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError("config", f"study {study.name}: cannot find {name} in {module} "
                          f"({type(e).__name__}: {e}); put the class in {module.replace('.', '/')}.py or name it "
                          "config='pkg.module:Class'") from e


def _find(match: Callable[[Study], bool]) -> Study | None:
    """The first entry `match` takes, benchlib's own looked at first (so that a module of
    benchlib finds its study without importing the modules BENCHLIB_STUDIES names)."""
    return next((s for s in STUDIES if match(s)), None) or \
        next((s for s in registry() if match(s)), None)


def of_config(cls: type) -> Study | None:
    """The entry whose config class is `cls` itself (None: a piece that studies compose,
    such as TrainingConfig, or a class no entry names)."""
    return _find(lambda s: s.config.rpartition(":")[2] == cls.__name__
                 and config_class(s) is cls)


def of_analysis(module: str) -> Study:
    """The entry whose analysis module is `module` (an analysis module's `__name__`)."""
    found = _find(lambda s: s.analysis == module)
    if found is None:
        raise ConfigError("analysis", f"no study of the registry names {module} as its "
                          "analysis module; add analysis='...' to its Study entry")
    return found


def of_notebook_entry(notebook: str) -> Study | None:
    """The registry's entry for records of `notebook` (its file or its CLI's name)."""
    return next((s for s in registry() if notebook in (s.notebook, *s.cli)), None)


def warm_kernel(notebook: str) -> bool:
    """Whether a sweep may fork the kernel of a row of `notebook` (its entry's kernel; a
    notebook of the user's own: no, it may time in its kernel)."""
    study = of_notebook_entry(notebook)
    return study is not None and study.kernel == "warm"


def of_notebook(notebook: str) -> str:
    """The study a record of `notebook` belongs to (`10_single_device_io.ipynb` and
    `benchlib io (CLI)` are single_device_io); a notebook of the user's own is named by its
    file name without the NN_ prefix."""
    study = of_notebook_entry(notebook)
    if study is not None:
        return study.name
    if notebook in CLI_ONLY:
        return CLI_ONLY[notebook]
    if notebook.startswith("gpu-check "):
        return GPU_CHECK
    stem = notebook.rpartition("/")[2].removesuffix(".ipynb")
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def order(name: str) -> int:
    """A study's place in reading order (studies not in the registry come last)."""
    names = [s.name for s in registry()]
    return names.index(name) if name in names else len(names)

"""The scaling projection's parameters (notebook 45_scaling_projection): where each input of
the model (docs/projection.md) comes from, the node layout and the what-ifs.

An input given as text is one of: a number; a run id (a record under results_dir);
`newest` (the newest record that measures it); `dlperf` (seed 003's tables, fitted on their
1-node rows for `framework` at `batch_size`); `none` (input_ceiling only: no data path, as
with synthetic data). Which of these each input takes is checked here, the values the
records hold when the projection is built (benchlib.analysis.scaling_projection).
"""

from __future__ import annotations

import dataclasses
import re

from benchlib.config.base import StudyConfig, require_choice, require_min
from benchlib.config.choices import PROJECTION_MAX_DEVICES_PER_NODE, PROJECTION_MAX_NODES
from benchlib.errors import ConfigError

DLPERF_FRAMEWORKS = ("OneFlow", "TensorFlow", "PyTorch", "Paddle")
DLPERF_BATCHES = (32, 64, 128, 160)
WHAT_IF_NAMES = ("inter_bw", "intra_bw", "input_ceiling", "batch_size", "compute", "overlap",
                 "bucket_mb", "host_cores")
RUN_ID = re.compile(r"[0-9a-f]{12}")
# which forms each input takes, besides a positive number
FORMS = {"compute": ("run id", "newest", "dlperf"), "intra_busbw": ("run id", "newest", "dlperf"),
         "inter_busbw": ("run id", "newest"), "input_ceiling": ("run id", "newest", "dlperf", "none")}


def _between(field: str, value: int, most: int) -> None:
    if not 1 <= value <= most:
        raise ConfigError(field, f"must be between 1 and {most}, got {value}")


def input_form(value: str) -> str:
    """`number`, `run id`, or the keyword itself; ConfigError-free: the caller checks."""
    try:
        return "number" if float(value) > 0 else "not positive"
    except ValueError:
        return "run id" if RUN_ID.fullmatch(value) else value


@dataclasses.dataclass
class ScalingProjectionConfig(StudyConfig):
    """The projection notebook (45): throughput, speedup and efficiency to 1024 devices."""

    results_dir: str = "outputs/results"
    """Folder of result records that run ids and `newest` are looked up in."""
    compute: str = "dlperf"
    """One device's samples/s: a number, a run id or `newest` (a one-device record of notebook
    40 or 20), or `dlperf` (seed 003's 1-GPU row)."""
    framework: str = "PyTorch"
    """Seed 003's framework, for every input given as `dlperf`."""
    batch_size: int = 128
    """Per device, with a number or `dlperf` (a record's own batch size otherwise)."""
    model: str = "resnet50"
    """The model projected: `compute: newest` takes the newest record of this model where
    there is one (else the newest of any, saying so); its gradient size from its parameter
    count (a record's model_params wins)."""
    intra_busbw: str = "dlperf"
    """GB/s among a node's devices: a number, a run id or `newest` (an all-reduce record,
    notebook 20), or `dlperf` (the effective busbw fitted to seed 003's 1-node rows)."""
    inter_busbw: str = "10"
    """GB/s between nodes: a number or a run id / `newest` (10: a 100 Gb/s port at 80%)."""
    input_ceiling: str = "dlperf"
    """Samples/s of one node's data path: a number, `none` (synthetic data), a run id or
    `newest` (notebook 10, traverse mode), or `dlperf` (seed 003's node cap)."""
    devices_per_node: int = 8
    """Devices (ranks) per node."""
    host_cores: int = 0
    """CPU ranks: the cores one node's ranks share (0: devices, nothing shared)."""
    nodes: str = ""
    """Comma-separated node counts; empty: powers of two up to 1024 devices."""
    what_ifs: str = "inter_bw:2x,input_ceiling:2x,batch_size:256"
    """Comma-separated what-ifs, NAME:Nx or NAME:VALUE (the CLI's NAME=..., which a
    notebook's parameters cell cannot hold: papermill reads one `=` per line)."""

    def validate(self) -> None:
        for name, forms in FORMS.items():
            form = input_form(getattr(self, name))
            if form != "number" and form not in forms:
                raise ConfigError(name, f"{getattr(self, name)!r} is not a positive number or "
                                  f"one of: {', '.join(forms)}")
        require_choice("framework", self.framework, DLPERF_FRAMEWORKS)
        require_min("batch_size", self.batch_size, 1)
        _between("devices_per_node", self.devices_per_node, PROJECTION_MAX_DEVICES_PER_NODE)
        require_min("host_cores", self.host_cores, 0)
        if self.nodes and not re.fullmatch(r"\d+(,\d+)*", self.nodes):
            raise ConfigError("nodes", f"{self.nodes!r} is not comma-separated node counts")
        for count in self.nodes.split(",") if self.nodes else []:
            _between("nodes", int(count), PROJECTION_MAX_NODES)
        for spec in self.what_if_specs():
            name, _, value = spec.partition("=")
            if name not in WHAT_IF_NAMES or not re.fullmatch(r"[\d.]+x?", value):
                raise ConfigError("what_ifs", f"{spec.replace('=', ':')!r} is not NAME:VALUE or "
                                  f"NAME:Nx, NAME one of {', '.join(WHAT_IF_NAMES)}")
        if "dlperf" in self.sources().values() and self.batch_size not in DLPERF_BATCHES:
            raise ConfigError("batch_size", f"seed 003 has batch {', '.join(map(str, DLPERF_BATCHES))}"
                              f", not {self.batch_size}")

    def what_if_specs(self) -> list[str]:
        """The what-ifs as the model takes them: NAME=VALUE or NAME=Nx."""
        return [spec.strip().replace(":", "=", 1) for spec in self.what_ifs.split(",") if spec.strip()]

    def sources(self) -> dict[str, str]:
        """Each text input's form: number, run id, newest, dlperf or none."""
        return {name: input_form(getattr(self, name)) for name in FORMS}

"""`export --to tensorboard`: a TensorBoard log folder, one run per record
(`<out>/<table>/<run_id>/events.out.tfevents.benchlib`) holding:

- a scalar per figure (its median, at step 0, at the time the record finished), with its
  bounds beside it under names that say what they are: `X/ci95_low` and `X/ci95_high`
  (a 95% interval), or `X/p10` and `X/p90` (the spread, where there were too few launches
  for an interval; a share of a step: `X/low`, `X/high` over one run's steps), and `X/n`;
- a margin chart of median and bounds for each figure that has them (the Custom Scalars
  dashboard), in a category that names the bounds;
- the record's parameters and testbed (hardware, torch, CUDA, commit, ...) as hparams.

Each file is built whole in memory and written atomically, with the record's own times in
it, so exporting again writes the same bytes. TensorBoard's protocol buffers are enough:
neither TensorFlow nor torch is imported."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchlib import atomic
from benchlib.compare.bmf import BOUNDS
from benchlib.errors import UsageError
from benchlib.export import figures, files

EVENTS = "events.out.tfevents.benchlib"  # TensorBoard reads any file named *tfevents*
CATEGORY = {figures.CI95: "benchlib: median and 95% interval",
            figures.SPREAD: "benchlib: median and p10-p90 spread (too few launches for an "
                            "interval)",
            figures.STEPS: "benchlib: median and low-high over one run's steps (not an "
                           "interval over launches)"}
# the bounds' tags beside X: X/ci95_low, X/p10, X/low, ... (the names a record gives them)
BOUND_TAGS = {kind: (low[1:], high[1:]) for kind, (low, high) in BOUNDS.items()}


def _protos():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
        from tensorboard.plugins.custom_scalar import layout_pb2
        from tensorboard.plugins.custom_scalar import metadata as layout_metadata
        from tensorboard.plugins.hparams import summary_v2
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError as e:
        raise UsageError(f"to: tensorboard needs the export extra (pip install -e '.[export]'): "
                         f"{e}") from e
    return SimpleNamespace(event_pb2=event_pb2, summary_pb2=summary_pb2, tensor_pb2=tensor_pb2,
                           types_pb2=types_pb2, layout_pb2=layout_pb2,
                           layout_metadata=layout_metadata, summary_v2=summary_v2,
                           RecordWriter=RecordWriter)


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def hparams(record: dict[str, Any]) -> dict[str, Any]:
    """The record's parameters (a mapping or list as JSON text) and, under `benchlib.`,
    its result set, study, table, run id and testbed fields."""
    out: dict[str, Any] = {}
    for k, v in record["params"].items():
        out[k] = v if isinstance(v, (bool, int, float, str)) else json.dumps(v, sort_keys=True)
    out.update({f"benchlib.{k}": record[k] for k in ("label", "study", "table", "run_id")})
    out.update({f"benchlib.testbed.{k}": v for k, v in figures.testbed(record).items()})
    return out


def scalars(figs: list[figures.Figure]) -> dict[str, float]:
    """tag -> value: each figure's median, its bounds under the names of what they are,
    and its n."""
    out: dict[str, float] = {}
    for f in figs:
        out[f.name] = f.value
        if f.bounds:
            low, high = BOUND_TAGS[f.bounds]
            out[f"{f.name}/{low}"], out[f"{f.name}/{high}"] = f.low, f.high
        if f.n is not None:
            out[f"{f.name}/n"] = float(f.n)
    return out


def _layout(layout_pb2, figs: list[figures.Figure]):
    """The margin charts of the figures with bounds, one category per kind of bounds."""
    layout = layout_pb2.Layout()
    for kind, title in CATEGORY.items():
        charts = []
        for f in (f for f in figs if f.bounds == kind):
            low, high = BOUND_TAGS[kind]
            series = layout_pb2.MarginChartContent.Series(value=f.name, lower=f"{f.name}/{low}",
                                                    upper=f"{f.name}/{high}")
            charts.append(layout_pb2.Chart(title=f"{f.name} (median, {figures.WORDS[kind]})",
                                     margin=layout_pb2.MarginChartContent(series=[series])))
        if charts:
            layout.category.add(title=title, chart=charts)
    return layout


def events(record: dict[str, Any]) -> bytes:
    """The record's event file, whole."""
    tb = _protos()
    summary_pb2 = tb.summary_pb2
    when = _seconds(record["finished_at"])
    figs = figures.figures(record["metrics"])
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v)
                                         for t, v in scalars(figs).items()])
    charts = _layout(tb.layout_pb2, figs)
    layout = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=tb.layout_metadata.CONFIG_SUMMARY_TAG,
        tensor=tb.tensor_pb2.TensorProto(dtype=tb.types_pb2.DT_STRING,
                                         string_val=[charts.SerializeToString()]),
        metadata=tb.layout_metadata.create_summary_metadata())])
    hp = tb.summary_v2.hparams_pb(hparams(record), trial_id=record["run_id"],
                               start_time_secs=_seconds(record["started_at"]))
    buffer = io.BytesIO()
    out = tb.RecordWriter(buffer)
    event = tb.event_pb2.Event
    for e in (event(wall_time=when, file_version="brain.Event:2"),
              event(wall_time=when, step=0, summary=hp),
              event(wall_time=when, step=0, summary=summary),
              *([event(wall_time=when, step=0, summary=layout)] if charts.category else [])):
        out.write(e.SerializeToString(deterministic=True))
    return buffer.getvalue()


def run_folder(out: Path, record: dict[str, Any]) -> Path:
    return out / record["table"] / record["run_id"]


def export(label: str, records: list[dict[str, Any]], out: Path) -> list[str]:
    """Write one run folder per record into `out`; the lines to print."""
    built = {run_folder(out, r) / EVENTS: events(r) for r in records}
    files.writable_folder(out)
    for path, data in built.items():
        atomic.write_bytes(path, data)
    return [f"tensorboard: {len(built)} runs in {out} (tensorboard --logdir {out}: scalars, "
            "the Custom Scalars dashboard's margin charts, HParams)"]

"""A study's one setting from the shell: `benchlib io` (notebook 10) and `benchlib
maxbatch` (notebook 15), each with flags generated from its study's config and one record
written as the records layer writes a command's (records/command_run.py)."""

from __future__ import annotations

import benchlib.cli.common as common
from benchlib import paths
from benchlib.cli.flags import add_config_flags, config_from
from benchlib.config import MemoryAndBatchConfig, SingleDeviceIoConfig
from benchlib.config.choices import DEVICES
from benchlib.errors import ConfigError, UsageError


def cmd_io(args) -> int:
    """Seed 000's singlegpu.py / test_funcs.py: one setting measured, one record written."""
    from benchlib.studies import single_device_io

    cfg = config_from(args, SingleDeviceIoConfig, path=str(paths.from_command_line(args.path)))
    single_device_io.preflight(cfg)  # bad input ends here: exit 2, nothing written
    run = common.start_record(args, "io", cfg.as_dict())
    result = single_device_io.run(cfg, run.run_id)
    path = run.write(result.metrics, result.details())
    print(single_device_io.describe(cfg, result))
    for row in result.profile:
        print(f"  {row['op'][:48]:48} calls {row['calls']:6d}  self cpu {row['self_cpu_ms']:9.3f} ms"
              + (f"  self cuda {row['self_cuda_ms']:9.3f} ms" if "self_cuda_ms" in row else ""))
    if result.metrics["trace_path"]:
        print(f"trace: {result.metrics['trace_path']}")
    print(f"record: {path}")
    return 0


def cmd_maxbatch(args) -> int:
    """The largest batch that trains: a table of the batches tried, the sentence, a record."""
    from benchlib.studies import memory_and_batch

    try:  # named as typed: --memory-limit, not memory_limit
        cfg = config_from(args, MemoryAndBatchConfig)
        memory_and_batch.preflight(cfg)  # bad input ends here: exit 2, nothing written
    except ConfigError as e:
        raise UsageError(f"--{e.field.replace('_', '-')}: {str(e).split(': ', 1)[1]}") from None
    run = common.start_record(args, "maxbatch", cfg.as_dict())
    result = memory_and_batch.run(cfg, run.run_id)
    print(f"{'batch':>7}  {'fits':>4}  {'samples/s':>10}  {'peak':>10}  why not")
    for t in result.details["trials"]:
        rate = f"{t['samples_per_s']:10.1f}" if t["samples_per_s"] else f"{'-':>10}"
        print(f"{t['batch_size']:>7}  {'yes' if t['fits'] else 'no':>4}  {rate}  "
              f"{memory_and_batch.size_text(t['peak_bytes']):>10}  {t['why']}")
    print(memory_and_batch.describe(cfg, result))
    print(f"record: {run.write(result.metrics, result.details)}")
    return 0


def add_parsers(sub) -> None:
    """`io` and `maxbatch`, on `sub` (argparse's subparsers)."""
    p = sub.add_parser("io", help="single-device IO: seed 000's singlegpu.py and test_funcs.py")
    add_config_flags(p, SingleDeviceIoConfig, positional=("epochs", "device"),
                     required=("path", "dataset"), choices={"device": DEVICES})
    p.add_argument("--table", "--study", dest="table", default="io",
                   help="the table the record is filed under: outputs/results/<table>/ "
                        "(default io; --study is its older spelling)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(func=cmd_io)

    p = sub.add_parser("maxbatch", help="the largest per-device batch that trains (doubling, "
                       "then bisection, on real training steps), throughput against batch")
    add_config_flags(p, MemoryAndBatchConfig, choices={"device": DEVICES})
    p.add_argument("--table", default="maxbatch",
                   help="the table the record is filed under: outputs/results/<table>/ "
                        "(default maxbatch)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(func=cmd_maxbatch)

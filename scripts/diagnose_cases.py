#!/usr/bin/env python3
"""The cases issue 38 built on purpose, each launched and diagnosed by whichever benchlib
is on the path (so that the same cases can be run by an older checkout, for its text
before a fix: `PYTHONPATH=OLD_CHECKOUT python scripts/diagnose_cases.py OUT`):

    .venv/bin/python scripts/diagnose_cases.py OUT

a data set whose first reads take 0.5 s each, read by 2 workers; rank 1 of 2 slowed 150 ms
a step, recorded as on a quiet host and launched beside a busy loop on every core; IO runs
of two data sets; an item that raises in a DataLoader worker. A case recorded as on a
quiet host leaves out what its rank 0 counted of this host's other tasks during the run. tests/test_diagnose.py
builds the same cases and checks what diagnose says of them."""
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchlib.cli import main
from benchlib.core import envinfo, hostload
from benchlib.errors import LaunchError
from benchlib.launch.launcher import launch
from benchlib.records import results

ROOT = Path(sys.argv[1]).resolve()
OWN, DATA = ROOT / "own", ROOT / "data"
OWN.mkdir(parents=True, exist_ok=True)
(OWN / "tinyhead.py").write_text(
    "from torch import nn\n\ndef build():\n    return nn.Sequential(nn.AdaptiveAvgPool2d(1), "
    "nn.Flatten(), nn.Linear(3, 10))\n")
(OWN / "slowstart.py").write_text(
    "import os\nimport time\n\nimport torch\n\nREADS = {}\n\n\n"
    "class SlowStart(torch.utils.data.Dataset):\n    def __len__(self):\n        return 128\n\n"
    "    def __getitem__(self, i):  # each process's first 4 reads: 0.5 s (a cold cache)\n"
    "        READS[os.getpid()] = READS.get(os.getpid(), 0) + 1\n"
    "        if READS[os.getpid()] <= 4:\n            time.sleep(0.5)\n"
    "        return torch.zeros(3, 8, 8), i % 10\n\n\ndef build():\n    return SlowStart()\n")
(OWN / "badrow.py").write_text(
    "import torch\n\nclass Rows(torch.utils.data.Dataset):\n    def __len__(self):\n"
    "        return 320\n\n    def __getitem__(self, i):\n        if i == 280:\n"
    "            raise ValueError('row 280 has 3 columns, not 4')\n"
    "        return torch.zeros(3, 8, 8), i % 10\n\ndef build():\n    return Rows()\n")
sys.path.insert(0, str(OWN))
os.environ["PYTHONPATH"] = f"{OWN}:{os.environ.get('PYTHONPATH', '')}"


def launched(folder, module, params, nproc, load=False):
    start, started_at = hostload.sample(), results.now()
    worker = {k: v for k, v in params.items() if k != "strategy"}
    try:
        out = launch(module, {"device": "cpu", "log_interval": 0, **worker}, folder / "logs",
                     "torchrun" if nproc > 1 else "single", nproc, timeout_s=300)
        done = {"status": "ok", "metrics": out.result["metrics"], "details": out.result["details"]}
    except LaunchError as e:
        done = {"status": "failed", "error": {"type": "LaunchError", "message": str(e)}}
    host_load = hostload.span(start, hostload.sample()) if load else {"busy": False, "start": {}}
    if not load and done.get("metrics"):  # the case as built: not this host's neighbours
        done["metrics"] = {k: v for k, v in done["metrics"].items()
                           if not k.startswith(("host_others", "host_contention", "host_cores"))}
    rec = results.make_record(run_id="constructed", table="t", notebook="20_dp_vs_ddp.ipynb",
                              params=params, env=envinfo.collect(), started_at=started_at,
                              host_load=host_load, **done)
    results.write_record(folder / "out" / "results", rec)
    return folder / "out", rec


def show(title, out, run_id="constructed"):
    print(f"===== {title}", flush=True)
    main(["diagnose", run_id, "--outputs", str(out)])
    sys.stdout.flush()


@contextlib.contextmanager
def busy_loops(n):
    loops = [subprocess.Popen([sys.executable, "-c", "import os; os.nice(19)\nwhile True: pass"])
             for _ in range(n)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


out, rec = launched(ROOT / "slowstart", "single", {"model": "tinyhead:build", "dataset": "slowstart:build",
                    "batch_size": 4, "num_workers": 2, "epochs": 1, "warmup_steps": 1}, 1)
m = rec["metrics"]
print("slow start record:", {k: m.get(k) for k in ("samples_per_s", "epoch_samples_per_s",
                                                    "first_batch_s", "warmup_s", "startup_gap")})
show("slow start, 2 workers, first 4 reads of each 0.5 s", out)

SLOWED = {"model": "simplecnn", "dataset": "synthetic", "image_size": 32, "batch_size": 8,
          "epochs": 1, "max_steps": 12, "warmup_steps": 2, "inject_step_delay_ms": 150.0, "delay_rank": 1}
out, _ = launched(ROOT / "quiet", "ddp", SLOWED, 2)
show("rank 1 slowed 150 ms a step, recorded as a quiet host", out)
with busy_loops(hostload.job_cores()):
    out, _ = launched(ROOT / "busy", "ddp", SLOWED, 2, load=True)
show("rank 1 slowed 150 ms a step, a busy loop on every core", out)

main(["data", "--path", str(DATA), "--offline", "--dataset", "fashion-mnist", "--fashion-size", "600"])
main(["data", "--path", str(DATA), "--offline", "--dataset", "mydataset", "--size", "300"])
flags = ["io", "1", "cpu", "--path", str(DATA), "--variant", "raw", "--mode", "traverse",
         "--repeats", "1", "--batch-size", "32"]
io = ROOT / "io"
for table, dataset, workers in (("fashion0", "fashion-mnist", 0), ("mine2", "mydataset", 2)):
    main([*flags, "--dataset", dataset, "--num-workers", str(workers), "--table", table, "--outputs", str(io)])
for f in io.glob("results/*/*.json"):  # the case as built, not this host's neighbours
    r = json.loads(f.read_text())
    f.write_text(json.dumps({**r, "host_load": {"busy": False, "start": {}}}))
ids = {json.loads(f.read_text())["table"]: json.loads(f.read_text())["run_id"] for f in io.glob("results/*/*.json")}
print("io runs:", ids)
show("fashion-mnist raw traverse, 0 workers, beside mydataset with 2", io, ids["fashion0"])

out, rec = launched(ROOT / "badrow", "single", {"model": "tinyhead:build", "dataset": "badrow:build",
                    "batch_size": 8, "num_workers": 2, "epochs": 1}, 1)
show("item 280 raises in a DataLoader worker", out)

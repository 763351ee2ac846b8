"""What each activation checkpointing mode keeps, on the CPU: the peak resident memory of
one training step of a GPT (benchlib.core.gpt) above the memory before its forward, in a
fresh process per mode, so the interpreter and the weights are not in the figure.

    python scripts/ac_memory.py [--repeats 3] [--n-layer 4] [--n-embd 256] [--seq 512] [--batch 16]

Prints each mode's median and range over the repeats (MiB) and its ratio to `none`."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

STEP = """
import json, resource, sys, torch
from benchlib.core import gpt
from benchlib.distributed import fsdp
mode, n_layer, n_embd, seq, batch = sys.argv[1], *map(int, sys.argv[2:6])
torch.manual_seed(0)
torch.set_num_threads(1)
model = gpt.build("gpt-tiny", {"n_layer": n_layer, "n_embd": n_embd, "n_head": 4,
                               "block_size": seq, "vocab_size": 2048}, seq_len=seq)
fsdp.checkpoint_blocks(model, mode)
x = torch.randint(0, 2048, (batch, seq))
def kib():
    return int(open("/proc/self/statm").read().split()[1]) * 4
loss = torch.nn.functional.cross_entropy(model(x[:1, :8]).flatten(0, 1), x[:1, :8].flatten())
loss.backward()  # warm: the allocator's pools and autograd's first-use costs
model.zero_grad(set_to_none=False)
before = kib()
loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
loss.backward()
print(json.dumps({"peak_above_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before}))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    found: dict[str, list[float]] = {"none": [], "selective": [], "full": []}
    for _ in range(a.repeats):
        for mode in found:  # interleaved: a slow moment of the host touches every mode
            out = subprocess.run([sys.executable, "-c", STEP, mode, str(a.n_layer),
                                  str(a.n_embd), str(a.seq), str(a.batch)],
                                 capture_output=True, text=True, check=True)
            found[mode].append(json.loads(out.stdout.splitlines()[-1])["peak_above_kib"] / 1024)
    base = statistics.median(found["none"])
    for mode, values in found.items():
        med = statistics.median(values)
        print(f"{mode:9} {med:8.1f} MiB (range {min(values):.1f}-{max(values):.1f}, "
              f"n={len(values)}), {med / base:.2f}x none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

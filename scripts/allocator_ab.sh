#!/usr/bin/env bash
# The allocator comparison of docs/compare.md, with its rule fixed before measuring:
# threshold 10% (compare's default) and LAUNCHES launches a side (default 5), interleaved
# default, tuned, default, tuned, ... so that drift in the machine hits both labels alike.
# Each launch is a sweep of params/compare_smoke_cpu.yaml (five ResNet-18 rows, 10 repeats
# each); then `benchlib compare default tuned` prints the verdicts. Takes about 4.5 minutes
# a round (both labels) on a quiet 2-core VM. Run it on a machine with nothing else on it:
# every record keeps the host's load (`host_load`), and compare names a busy host.
#
#   scripts/allocator_ab.sh [LAUNCHES] [OUTPUTS]     # default 5, outputs/allocator-ab
set -euo pipefail
cd "$(dirname "$0")/.."
launches=${1:-5}
out=${2:-outputs/allocator-ab}
py=${PYTHON:-.venv/bin/python}
export BENCHLIB_OUTPUTS="$PWD/$out" OMP_NUM_THREADS=1
"$py" -m benchlib data --path outputs/data --dataset imagefolder --imagefolder-size 200 --offline
for i in $(seq 1 "$launches"); do
    force=$([ "$i" -gt 1 ] && echo --force || true)
    echo "allocator-ab: round $i of $launches ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
    "$py" -m benchlib sweep params/compare_smoke_cpu.yaml --label default --no-progress $force
    "$py" -m benchlib --allocator tuned sweep params/compare_smoke_cpu.yaml --label tuned \
        --no-progress $force
done
"$py" -m benchlib compare default tuned --threshold 10%

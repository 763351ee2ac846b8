#!/usr/bin/env bash
# Every GPU path of the workbook on a single-GPU machine, in six parts of one call of under
# 10 minutes each (part 1 by default; --part 2: language model, timm/hf models; --part 3: IO,
# traces, the comm hook's cost; --part 4: torch.compile cold and warm for ResNet-50 and
# gpt2-124m; --part 5: the largest batch, confirmed; --part 6: float8 training's per-layer
# tables and its A/B against bf16); the steps are a table, benchlib/gpucheck/plan.yaml:
#   scripts/gpu-check.sh OUT [--part 1|2|3|4|5|6|2,1] [--dry-run] [--only STEP,...] [--budget-s S]
# Uses the python that is there (PYTHON=... to choose), installs nothing, needs no network
# and no notebooks: benchlib's CLIs and workers only. Writes OUT/summary.md and
# OUT/summary.json, a record per step under OUT/results/ and a log per step under OUT/logs/.
# Without CUDA it says so in one line and exits 2; --dry-run prints the plan anywhere.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$PYTHON" -m benchlib.gpucheck.check "$@"

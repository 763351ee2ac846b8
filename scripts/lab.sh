#!/usr/bin/env bash
# JupyterLab on the notebooks with the project's own kernel (what `make lab` runs):
#   scripts/lab.sh [FOLDER] [jupyter lab options...]
# Registers the kernel `benchlib` ("benchlib (.venv)") into the venv itself
# (.venv/share/jupyter/kernels/benchlib, not ~/.local), running the venv's python, and
# offers only that kernel: the notebooks ask for `python3`, and JupyterLab gives a
# notebook whose kernel is not offered the only one of the same language, so every
# notebook opens on `benchlib` without a kernel dialog and without editing the
# notebooks. Sweeps are not affected: they name their kernel (benchlib.sweep.KERNEL).
# FOLDER defaults to notebooks/; VENV=... picks another venv (default .venv).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${VENV:-.venv}"
case "$venv" in /*) ;; *) venv="$repo/$venv" ;; esac
if [ ! -x "$venv/bin/jupyter" ]; then
  echo "lab.sh: no JupyterLab in $venv (run \`make setup\` first)" >&2
  exit 1
fi

folder="$repo/notebooks"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then  # a first argument that is not an option
  folder="$1"
  shift
fi

# this project's machines and CI run as root, where Jupyter refuses to start without it
if [ "$(id -u)" = 0 ]; then set -- --allow-root "$@"; fi

"$venv/bin/python" -m ipykernel install --sys-prefix --name benchlib \
  --display-name "benchlib (.venv)" >/dev/null

exec "$venv/bin/jupyter" lab "$folder" \
  --KernelSpecManager.allowed_kernelspecs=benchlib \
  --MappingKernelManager.default_kernel_name=benchlib \
  "$@"

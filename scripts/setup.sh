#!/usr/bin/env bash
# Set up mars-eval in ./.venv (idempotent). Installs torch first so pip never swaps in another build:
# with an NVIDIA GPU, the default (CUDA) torch wheel; without one, torch==2.13.0 (a CPU build on our
# machines, taken from local disk). An already-installed torch is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    pip install -q "torch>=2.4"
  else
    pip install -q "torch==2.13.0"
  fi
fi
pip install -q -e ".[dev]"

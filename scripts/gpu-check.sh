#!/usr/bin/env bash
# The one command to run on a GPU machine (one GPU; `pip install -e .[vllm]` done). Under 8 minutes.
#
#   scripts/gpu-check.sh [WORKDIR]
#
# 1. builds a small Qwen3-shaped model locally (8 layers, hidden 1024; no download);
# 2. `mars-train --estimate-memory` for that model and the settings below (world size 1);
# 3. the GPU test of the vLLM engine (tests/training/test_vllm_engine.py: generate, sleep, push);
# 4. scripts/gpu_check.py under torchrun (1 rank): FSDP2 bf16 update on fp32 master weights at
#    the estimator's longest micro-batch, vLLM under external_launcher generating (step-0
#    evaluation, a rollout) and receiving weight pushes (checked against the model pushed),
#    measured peak memory against the estimate.
# Prints WORKDIR/gpu_check.json; exit 0 only when every check passed.
# Not yet run on a GPU (written on CPU-only machines): see training/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
W=${1:-$(mktemp -d -t gpu-check-XXXX)}
mkdir -p "$W"
start=$(date +%s)
step() { echo "== $(( $(date +%s) - start ))s: $*"; }

step "GPU and packages"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c 'import torch, vllm; print("torch", torch.__version__, "vllm", vllm.__version__, "cuda", torch.cuda.is_available())'
GIB=$("$PY" -c 'import torch; print(round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))')

step "small Qwen3-shaped model in $W/model"
"$PY" - "$W/model" <<'PY'
import sys
from mars_eval.models.tiny import build_tiny_model
build_tiny_model(sys.argv[1], hidden_size=1024, num_layers=8, num_heads=16, num_kv_heads=8, max_position=8192)
PY

# The reference preset with this model, one game, small batches; everything else as the preset.
SETTINGS=(model="$W/model" games=tic_tac_toe prompt_style=compact enable_thinking=false
  rollout_batch=8 minibatches=1 micro_batch_size=4 max_new_tokens=256 eval_max_tokens=256
  eval_every=1 eval_episodes=1 eval_opponents=random save_every=0 steps=1 live=false tracker=none)

step "estimate (world size 1, $GIB GiB)"
if "$PY" -m training.cli --preset qwen3-4b --estimate-memory --world-size 1 --torchrun --gpu-memory-gib "$GIB" \
  --json "${SETTINGS[@]}" >"$W/estimate.json"; then
  "$PY" -c 'import json,sys; e=json.load(open(sys.argv[1])); print({k: e[k] for k in ("update_peak_gib","rollout_peak_gib","fits")})' "$W/estimate.json"
else
  echo "no estimate (mars-train --estimate-memory failed): measured figures only"; rm -f "$W/estimate.json"
fi

step "vLLM engine test (one process)"
timeout 240 "$PY" -m pytest -q -x tests/training/test_vllm_engine.py

step "FSDP2 update + vLLM under external_launcher (torchrun, 1 rank)"
timeout 300 "$PY" -m torch.distributed.run --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29531 \
  scripts/gpu_check.py "$W" "$W/estimate.json" "${SETTINGS[@]}"
step "done: $W/gpu_check.json"

#!/usr/bin/env bash
# The GPU check, in two parts; each is one command, under 8 minutes, one JSON report.
#
#   scripts/gpu-check.sh update WORKDIR    part a, no vLLM: torch + transformers only (the lent
#                                          H200 image as it is); WORKDIR/gpu_check_update.json
#   scripts/gpu-check.sh vllm WORKDIR      part b, needs `pip install -e .[vllm]`;
#                                          WORKDIR/gpu_check_vllm.json
#
# Both run one rank under torchrun (NCCL) on a random Qwen3-4B-shaped model written here (no
# download). Part a's resume check writes a 48 GB checkpoint (fp32 weights + AdamW moments);
# where WORKDIR has less free space it runs on the model cut to the layers that fit (the report
# says how many). What each part checks and
# the report's fields: scripts/gpu_check_update.py, scripts/gpu_check_vllm.py, training/README.md
# ("GPU check"). Exit 0 only when every check passed. Extra key=value settings pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}  # the lent image documents python3
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}  # deterministic cuBLAS (resume check)
part=${1:?usage: scripts/gpu-check.sh update|vllm WORKDIR [key=value ...]}
W=${2:?usage: scripts/gpu-check.sh update|vllm WORKDIR [key=value ...]}
shift 2
case "$part" in
  update) script=scripts/gpu_check_update.py ;;
  vllm) script=scripts/gpu_check_vllm.py ;;
  *) echo "gpu-check: unknown part '$part' (update or vllm)" >&2; exit 2 ;;
esac
mkdir -p "$W"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec timeout 470 "$PY" -m torch.distributed.run --nproc-per-node 1 --master-addr 127.0.0.1 \
  --master-port "${GPU_CHECK_PORT:-29531}" "$script" "$W" "$@"

#!/usr/bin/env bash
# The issue-40 run: SmolLM2-135M-Instruct trained by tic-tac-toe self-play on the CPU with its
# transfer curve, then the saved checkpoints played by `mars-eval games`, and results/smol-curve/.
#
#   scripts/smol_run.sh WORK [key=value ...]
#
#   1. mars-eval models pull smollm2-135m-instruct                       (once; a second is instant)
#   2. mars-train --preset smol --output WORK/train --config scripts/smol_curve.toml [key=value ...]
#      (40 steps, the curve at steps 0, 20, 40: held-out games, single:arith --arith-steps 1);
#      run again, the same command resumes it (mars-train --resume)
#   3. mars-eval games --games tic_tac_toe --opponents random --episodes N on checkpoints/initial and
#      checkpoints/final, and --agent random (the random player's own rate, the same episode seeds)
#   4. mars-eval report WORK/train (the transfer curve) and mars-eval report WORK/games; the tables,
#      the paired comparisons and the targets (invalid-move rate <= 10%, the first mover's win rate
#      above the random agent's with a 95% interval that excludes it) into RESULTS
#      (scripts/smol_summary.py)
#
# Environment: PYTHON (default .venv/bin/python), GAMES_EPISODES (per seat, default 200),
# RESULTS (default results/smol-curve; a check at a tiny size points it elsewhere), THREADS
# (torch threads, default: the CPU count). Wall and CPU time of each stage go to WORK/times.txt.
set -euo pipefail

WORK=$(realpath -m "${1:?usage: scripts/smol_run.sh WORK [key=value ...]}")
shift
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
EPISODES=${GAMES_EPISODES:-200}
RESULTS=${RESULTS:-results/smol-curve}
export OMP_NUM_THREADS=${THREADS:-$(nproc)} MKL_NUM_THREADS=${THREADS:-$(nproc)}
mkdir -p "$WORK"
TIMES="$WORK/times.txt"

stage() {  # stage NAME CMD...: run it, append its wall and CPU time (children) and the load
  local name=$1
  shift
  local t0 c0 c1
  t0=$(date +%s)
  c0=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  echo "== $name: $*" >&2
  "$@"
  c1=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  printf '%s\twall %ss\tcpu %ss\tload %s\n' "$name" "$(($(date +%s) - t0))" \
    "$(((c1 - c0) / $(getconf CLK_TCK)))" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$TIMES" >&2
}

stage pull "$PY" -m mars_eval.cli models pull smollm2-135m-instruct

TRAIN="$WORK/train"
RESUME=()
if [ -f "$TRAIN/run_config.json" ]; then
  RESUME=(--resume --allow-change steps,eval_every,save_every,curve_episodes,mas_eval,live,tracker)
fi
stage train "$PY" -m training.cli --preset smol --output "$TRAIN" --config scripts/smol_curve.toml \
  "${RESUME[@]}" "$@"

GAMES="$WORK/games"
mkdir -p "$GAMES"
play() {  # play LABEL ARGS...: one mars-eval games run, its folder under WORK/games/LABEL
  local label=$1
  shift
  stage "games-$label" "$PY" -m mars_eval.cli games --games tic_tac_toe --opponents random \
    --episodes "$EPISODES" --seed 0 --output "$GAMES/$label" "$@"
}
# fp32 as training computed (--dtype auto may pick bf16 on a CPU with bf16 flags)
play initial --model "$TRAIN/checkpoints/initial" --dtype float32
play final --model "$TRAIN/checkpoints/final" --dtype float32
play random --agent random

stage report-curve "$PY" -m mars_eval.cli report "$TRAIN" --out "$WORK/curve.html"
stage report-games "$PY" -m mars_eval.cli report "$GAMES" --out "$WORK/games.md"
stage summary "$PY" scripts/smol_summary.py --work "$WORK" --results "$RESULTS"
echo "done: $RESULTS" >&2

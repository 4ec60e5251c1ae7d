#!/usr/bin/env bash
# The 2-process FSDP tests N times in a row (default 20) while another process keeps one core
# busy: the check that a torchrun rank never dies at exit (training/distributed.py exit_process).
#   scripts/repeat-fsdp.sh [N] [pytest -k expression]
# Prints one line per pass and "PASSES n/N"; stops at the first failure and shows the ranks'
# stderr (kept under $TMPDIR/repeat-fsdp/run-i). Exit 0 only when all N passed.
set -u
N=${1:-20}
K=${2:-}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BASE=${TMPDIR:-/tmp}/repeat-fsdp
rm -rf "$BASE" && mkdir -p "$BASE"
"$PY" -c 'while True: pass' &
BUSY=$!
trap 'kill $BUSY 2>/dev/null' EXIT
ok=0
for i in $(seq 1 "$N"); do
  t0=$(date +%s)
  args=(-q -x -p no:cacheprovider --basetemp "$BASE/run-$i" tests/training/test_fsdp.py)
  [ -n "$K" ] && args+=(-k "$K")
  if "$PY" -m pytest "${args[@]}" >"$BASE/run-$i.log" 2>&1; then
    ok=$((ok + 1))
    echo "pass $i/$N ($(( $(date +%s) - t0 ))s): $(tail -1 "$BASE/run-$i.log")"
  else
    echo "FAIL $i/$N: $(tail -1 "$BASE/run-$i.log")"
    grep -rh -B2 -A8 "terminate called\|SIGABRT\|Traceback" "$BASE/run-$i" --include=torchrun.err | head -80
    break
  fi
done
echo "PASSES $ok/$N"
[ "$ok" = "$N" ]

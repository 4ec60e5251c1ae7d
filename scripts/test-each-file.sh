#!/usr/bin/env bash
# Run every test file on its own (`pytest FILE`), one after another, and list the files that
# fail. A test that passes only after another file set something up fails here.
#
#   scripts/test-each-file.sh                  every tests/**/test_*.py
#   scripts/test-each-file.sh tests/games      the files under the given folders or files
#   PYTEST_ARGS="-m 'not slow'" scripts/test-each-file.sh     (extra pytest arguments)
#   PYTHON=/path/to/python scripts/test-each-file.sh           (default: .venv/bin/python, else python)
#
# Exit status: 0 when every file passed, 1 otherwise. Each file's output is kept under
# ${LOG_DIR:-/tmp/test-each-file}/ (one log per file).
set -u
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python; fi
fi
LOG_DIR=${LOG_DIR:-/tmp/test-each-file}
mkdir -p "$LOG_DIR"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tests)
mapfile -t files < <(find "${targets[@]}" -name 'test_*.py' -type f | sort)
failed=()
for f in "${files[@]}"; do
  log="$LOG_DIR/$(echo "$f" | tr '/' '_').log"
  start=$(date +%s)
  eval "\"\$PYTHON\" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} \"\$f\"" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  # 5: no tests collected (every test skipped by a marker): not a failure
  if [ $rc -eq 0 ] || [ $rc -eq 5 ]; then
    echo "ok      ${took}s  $f  ($(tail -n 1 "$log"))"
  else
    echo "FAILED  ${took}s  $f  (log: $log)"
    failed+=("$f")
  fi
done
echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "all ${#files[@]} test files pass alone"
  exit 0
fi
echo "${#failed[@]} of ${#files[@]} test files fail alone:"
printf '  %s\n' "${failed[@]}"
exit 1

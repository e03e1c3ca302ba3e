#!/usr/bin/env bash
# Runs every hostile record (write_hostile_records) through magpy-run on
# each backend (auto is compiled plus a timing) and optimization level,
# and through magpy-inspect's views, diff and exports, and
# fails on anything but a clean outcome: exit status 0, 1 or 2, one line of
# error with status 2, no sanitizer report, no hang. An FX export that
# magpy-inspect writes is run too, when a Python with torch is at hand.
# The precise message of each case is checked by the CLI tests; this is
# the net over every way in. Used by CTest and by the sanitizer job (with
# magpy-run and magpy-inspect built under ASan and UBSan).
#
#   tests/hostile/run_all.sh BIN_DIR [WORK_DIR]
set -uo pipefail
bin="$(cd "$1" && pwd)"
work="${2:-$(mktemp -d)}"
mkdir -p "$work" && cd "$work" || exit 2
"$bin/write_hostile_records" . > /dev/null || { echo "run_all: write_hostile_records failed"; exit 2; }
python=/usr/bin/python3
"$python" -c 'import torch' 2> /dev/null || python=""
failures=0 runs=0

# check NAME STATUS_ALLOWED COMMAND...: runs COMMAND, judges its outcome.
check() {
  local name=$1 allowed=$2
  shift 2
  runs=$((runs + 1))
  timeout 60 "$@" > out.txt 2> err.txt
  local status=$? why=""
  if grep -qE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' err.txt; then why="sanitizer report"
  elif [ "$status" -eq 124 ]; then why="no result in 60 s"
  elif ! [[ " $allowed " == *" $status "* ]]; then why="exit status $status"
  elif [ "$status" -eq 2 ] && [ "$(wc -l < err.txt)" -ne 1 ]; then why="$(wc -l < err.txt) lines of error"
  fi
  if [ -n "$why" ]; then
    failures=$((failures + 1))
    echo "FAIL $name: $* -> $why"
    head -n 20 err.txt | sed 's/^/    /'
  fi
}

while IFS=$'\t' read -r name status loads expect; do
  rec="$name.mgp"
  check "$name" "0 1 2" "$bin/magpy-run" --keep-going "$rec"
  check "$name" "0 2" "$bin/magpy-inspect" "$rec"
  [ "$loads" = 1 ] || continue  # the reader refuses it, the same way for every command
  check "$name" "0 1 2" "$bin/magpy-run" --backend compiled --keep-going "$rec"
  check "$name" "0 1 2" "$bin/magpy-run" --optimize all --time-budget 5 --keep-going "$rec"
  check "$name" "0 2" "$bin/magpy-inspect" "$rec" --format json
  check "$name" "0 2" "$bin/magpy-inspect" "$rec" --dot refgraph -o "$name.dot"
  check "$name" "0 1 2" "$bin/magpy-inspect" diff "$rec" "$rec"
  rm -f "$name.fx.py"
  check "$name" "0 2" "$bin/magpy-inspect" "$rec" --fx -o "$name.fx.py"
  if [ -n "$python" ] && [ -f "$name.fx.py" ]; then
    check "$name" "0 1" "$python" "$name.fx.py"
  fi
done < index.tsv

echo "run_all: $runs runs over $(wc -l < index.tsv) hostile records, $failures failed"
[ "$failures" -eq 0 ]

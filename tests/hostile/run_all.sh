#!/usr/bin/env bash
# Runs every hostile record (write_hostile_records) through magpy-run on
# each backend (auto is compiled plus a timing) and optimization level,
# and through magpy-inspect's views, diff and exports, and
# fails on anything but a clean outcome: exit status 0, 1 or 2, one line of
# error with status 2, no sanitizer report, within 10 s and 1 GiB of
# memory (MAGPY_HOSTILE_LIMITS="SECONDS MIB" sets others: the sanitizer
# job's instrumented binaries are slower and larger). An FX export that
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
read -r max_seconds max_mib <<< "${MAGPY_HOSTILE_LIMITS:-10 1024}"
failures=0 runs=0 worst_seconds=0 worst_mib=0

# check NAME STATUS_ALLOWED COMMAND...: runs COMMAND, judges its outcome.
check() {
  local name=$1 allowed=$2
  shift 2
  runs=$((runs + 1))
  /usr/bin/time -f '%e %M' -o cost.txt timeout 60 "$@" > out.txt 2> err.txt
  local status=$? why="" seconds mib
  read -r seconds mib < <(awk 'END { printf "%d %d", $1 + 0.999, ($2 + 1023) / 1024 }' cost.txt)
  [ "$seconds" -gt "$worst_seconds" ] && worst_seconds=$seconds
  [ "$mib" -gt "$worst_mib" ] && worst_mib=$mib
  if grep -qE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' err.txt; then why="sanitizer report"
  elif [ "$status" -eq 124 ]; then why="no result in 60 s"
  elif [ "$seconds" -gt "$max_seconds" ]; then why="$seconds s (limit $max_seconds s)"
  elif [ "$mib" -gt "$max_mib" ]; then why="$mib MiB (limit $max_mib MiB)"
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

echo "run_all: $runs runs over $(wc -l < index.tsv) hostile records, $failures failed;" \
  "the slowest took $worst_seconds s, the largest $worst_mib MiB"
[ "$failures" -eq 0 ]

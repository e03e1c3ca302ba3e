#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: fuzzes record loading and replay (the
# record_fuzzer of build-san/, made by scripts/sanitizers.sh) for SECONDS
# (default 600), starting from the bodies of records captured from the
# examples and of the hostile records that load. The corpus grows in
# build-san/fuzz-corpus; a crashing input lands in build-san/fuzz-findings
# and the script fails: make it a case in tests/hostile, then fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
fuzzer=build-san/bin/record_fuzzer
[ -x "$fuzzer" ] || { echo "fuzz: $fuzzer is missing; run scripts/sanitizers.sh first" >&2; exit 2; }
seeds=build-san/fuzz-seeds
corpus=build-san/fuzz-corpus
findings=build-san/fuzz-findings
mkdir -p "$seeds" "$corpus" "$findings"
if [ -z "$(ls -A "$seeds")" ]; then
  records=$(mktemp -d)
  for example in mlp containers breaks; do
    build/bin/magpy-capture -q -o "$records/$example.mgp" "examples/$example.py" > /dev/null
  done
  build/bin/write_hostile_records "$records"
  build/bin/record_bodies "$seeds" "$records"/*.mgp
  rm -rf "$records"
fi
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "fuzz: $seconds s from $(ls "$seeds" | wc -l) seeds"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$findings/" -print_final_stats=1 "$corpus" "$seeds" 2>&1 | tail -n 25

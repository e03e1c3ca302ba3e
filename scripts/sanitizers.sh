#!/usr/bin/env bash
# Builds magpy's record and replay libraries (and the capture library's
# interpreter-free part) with clang under AddressSanitizer
# and UndefinedBehaviorSanitizer (build-san/), runs their unit tests there
# and magpy-run and magpy-inspect over every hostile record,
# then fuzzes the record reader, replay, plan building and the tensor-file reader for
# MAGPY_FUZZ_SECONDS seconds
# (default 60; scripts/fuzz.sh runs longer campaigns). Needs build/ first
# (scripts/build.sh): its tools capture the fuzzer's seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${MAGPY_JOBS:-2}"
mkdir -p build-san
log=build-san/build.log
echo "sanitizers: building build-san (log in $log)"
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DMAGPY_CAPTURE=OFF -DMAGPY_SANITIZE=ON -DMAGPY_FUZZ=ON > "$log" ||
  { tail -n 30 "$log"; exit 1; }
cmake --build build-san -j"$jobs" --target record_tests replay_tests capture_tests record_fuzzer tensor_file_fuzzer \
  plan_fuzzer magpy-run magpy-inspect write_hostile_records >> "$log" 2>&1 ||
  { grep -B2 -A8 "error" "$log" | head -n 60; exit 1; }
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "sanitizers: record, replay and capture-policy unit tests under ASan+UBSan"
(cd build-san && ctest -j"$jobs" --output-on-failure -R '^(Format|Path|Text|Diff|Dot|Annotations|Plan|Passes|Session|Mock|ValueFiles|Environment|Fx|HostileRecords|StateDict|StateAccess|GraphUtils|Specialize)\.')
echo "sanitizers: magpy-run and magpy-inspect over every hostile record"
# Instrumented binaries run slower and hold ASan's shadow memory: looser limits.
MAGPY_HOSTILE_LIMITS="60 4096" tests/hostile/run_all.sh build-san/bin build-san/hostile_all
scripts/fuzz.sh "${MAGPY_FUZZ_SECONDS:-60}"

#!/usr/bin/env bash
# Installs, builds, and runs every test (what CI runs): the CTest suite,
# then the record and replay tests under ASan+UBSan and a short fuzzing run
# (scripts/sanitizers.sh; MAGPY_FUZZ_SECONDS sets its length).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j"${MAGPY_JOBS:-2}")
scripts/sanitizers.sh

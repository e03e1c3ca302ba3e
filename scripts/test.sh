#!/usr/bin/env bash
# Installs, builds, and runs every test (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"${MAGPY_JOBS:-2}"

#!/usr/bin/env bash
# Configures and builds magpy into build/ (binaries in build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"${MAGPY_JOBS:-2}"

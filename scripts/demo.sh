#!/usr/bin/env bash
# The main job on the bundled example: install, build, capture
# examples/mlp.py under magpy-capture, then replay the record natively.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p build/demo
cd build/demo
echo
echo "== magpy-capture ../../examples/mlp.py"
../bin/magpy-capture ../../examples/mlp.py
echo
echo "== magpy-inspect --summary mlp.mgp"
../bin/magpy-inspect --summary mlp.mgp
echo
echo "== the captured operator graph (magpy-inspect mlp.mgp, excerpt)"
../bin/magpy-inspect mlp.mgp | sed -n '/ graph (/,/ mock:/p'
echo
echo "== magpy-run mlp.mgp (native replay, no Python)"
../bin/magpy-run mlp.mgp --repeat 1000

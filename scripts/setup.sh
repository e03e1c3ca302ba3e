#!/usr/bin/env bash
# Installs magpy's build and test dependencies on Debian 12 (as root, or
# through sudo). Installing OpenBLAS makes it the system BLAS, which eager
# PyTorch and libtorch then both use: timings need it. Graphviz renders
# magpy-inspect --png pictures; matplotlib draws the evaluation's plots;
# clang and its runtime build the fuzzer and the sanitizer job.
# tests/check_setup.py checks that every package the repository's Python
# imports is listed here.
set -euo pipefail

packages=(
  build-essential cmake
  python3 python3.11-dev libpython3.11-dev
  python3-torch libtorch-dev libgloo-dev pybind11-dev python3-torchvision python3-torchaudio python3-numpy
  libcli11-dev libyaml-cpp-dev libzstd-dev
  googletest libgtest-dev
  libopenblas0-pthread
  graphviz python3-matplotlib
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies are installed"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${as_root[@]}" apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"

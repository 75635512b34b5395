#!/usr/bin/env bash
# Installs, with apt-get, whatever ppc needs to build and test that is missing.
# Idempotent and quiet when everything is there. Needs root (or sudo).
set -euo pipefail

packages=(
  cmake ninja-build g++ python3 git
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  # ppc-tblgen links LLVM's static TableGen and Support libraries, which
  # need zstd's development files.
  libzstd-dev
  libonnx-dev libonnx-testdata python3-onnx
  libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libabsl-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev
  # oneDNN's CMake package looks for OpenCL (its GPU runtime); a Recommends
  # that --no-install-recommends would skip.
  ocl-icd-opencl-dev
  # The ppc Python module (python/) and its PyTorch tests.
  python3-dev pybind11-dev python3-numpy python3-torch
  # The reports' graph.html drawn as a browser draws it (test/Report).
  chromium-headless-shell
)
# The importer's fuzzer needs clang's libFuzzer; only for PPC_SETUP_FUZZ=1.
if [[ "${PPC_SETUP_FUZZ:-0}" == 1 ]]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

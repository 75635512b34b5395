#!/usr/bin/env bash
# Installs the build tree to a scratch prefix and builds examples/consumer
# against it with find_package(PPC): the library contract for other projects.
# Usage: install-consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -G Ninja -S "$src/examples/consumer" -B "$scratch/build" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build" >/dev/null
"$scratch/build/ppc-consumer"

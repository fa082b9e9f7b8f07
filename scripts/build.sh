#!/usr/bin/env bash
# Configures and builds zero into build/ (Release with debug info, Ninja, ccache when present).
# Extra arguments go to the CMake configure step, e.g. -DZERO_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ZERO_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"

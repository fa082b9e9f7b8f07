#!/usr/bin/env bash
# Configures and builds zero into build/ (Release with debug info, Ninja, ccache when present).
# Extra arguments go to the CMake configure step, e.g. -DZERO_WITH_CUDA=OFF.
# With --main-job first (scripts/demo.sh): only what the main job runs, `zero` and comm_bench; a
# new build folder is then configured with -DZERO_MAIN_JOB_ONLY=ON, which needs none of the
# test-only packages, and a folder configured already is left as it is. Without it: everything,
# with -DZERO_MAIN_JOB_ONLY=OFF, so that a folder the main job configured is widened to the full
# build and builds the rest beside what it compiled.
# ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py): stops before CMake runs (the checker checks
# the -D names against a build's cache).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ZERO_BUILD_DIR:-build}
profile=(-DZERO_MAIN_JOB_ONLY=OFF)
targets=()
if [ "${1:-}" = --main-job ]; then
  shift
  profile=()
  [ -f "$build_dir/CMakeCache.txt" ] || profile=(-DZERO_MAIN_JOB_ONLY=ON)
  targets=(--target zero comm_bench)
fi
[ "${ZERO_PARSE_ONLY:-0}" != 1 ] || { echo "scripts/build.sh: the command line parses"; exit 0; }
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${profile[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"

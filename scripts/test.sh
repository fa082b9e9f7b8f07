#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, mpi at 2 and 4 ranks, cuda tests
# skip without a GPU, golden tests skip without python3-torch). ctest prints the summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
cd "${ZERO_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 900

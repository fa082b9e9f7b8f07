#!/usr/bin/env bash
# Runs the README's "install and consume" commands (install_and_consume.sh; the README holds a copy
# that the readme_examples test compares) in a scratch folder WORK where build/ is this build and
# tests/ the checkout's: installs zero into WORK/build-install, then configures, builds and runs
# the consumer project (tests/package/consumer: find_package(zero) -> zero::core) against it.
set -euo pipefail
build_dir=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
ln -s "$(cd "$build_dir" && pwd)" "$work/build"
ln -s "$(cd "$source_dir" && pwd)/tests" "$work/tests"
export CMAKE_GENERATOR=Ninja
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache
cd "$work" && bash -euo pipefail "$source_dir/tests/package/install_and_consume.sh" | grep -v '^-- '

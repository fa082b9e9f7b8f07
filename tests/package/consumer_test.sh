#!/usr/bin/env bash
# Installs this build of zero into a scratch prefix, then configures, builds and runs the consumer
# project against the install tree (find_package(zero) -> zero::core).
set -euo pipefail
build_dir=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
test -x "$work/prefix/bin/zero" && "$work/prefix/bin/zero" --version

#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the most complete thing zero does today
# on 2 MPI ranks: the launch/communicator check and the collective bandwidth benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build=${ZERO_BUILD_DIR:-build}
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
"${mpirun[@]}" "$build/tools/zero" env --check_comm
"${mpirun[@]}" "$build/benchmarks/comm_bench" --max_bytes $((16 << 20))

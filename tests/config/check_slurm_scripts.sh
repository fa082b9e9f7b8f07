#!/usr/bin/env bash
# The sbatch scripts in configs/slurm: each parses (bash -n), has the #SBATCH lines a person edits,
# and, run as Slurm would run it (the job's variables set, srun/mpirun/torchrun/scontrol replaced
# by stubs that print their arguments), starts `zero train` with a DeepSpeed config that exists,
# the launcher its name says, and MASTER_ADDR/MASTER_PORT exported for the Gloo path.
set -euo pipefail
source_dir=${1:?usage: check_slurm_scripts.sh SOURCE_DIR}
cd "$source_dir"
stubs=$(mktemp -d)
trap 'rm -rf "$stubs"' EXIT
for tool in srun mpirun torchrun; do
  printf '#!/usr/bin/env bash\necho "%s $* MASTER=$MASTER_ADDR:$MASTER_PORT"\n' "$tool" >"$stubs/$tool"
done
printf '#!/usr/bin/env bash\necho node-a; echo node-b\n' >"$stubs/scontrol"
chmod +x "$stubs"/*
failed=0
fail() { echo "FAIL $1: $2"; failed=1; }
scripts=(configs/slurm/*.sbatch)
[ ${#scripts[@]} -ge 4 ] || fail configs/slurm "expected the single- and multi-node scripts"
for script in "${scripts[@]}"; do
  bash -n "$script" || fail "$script" "does not parse"
  for line in '#SBATCH --partition=' '#SBATCH --account=' '#SBATCH --nodes=' '#SBATCH --time='; do
    grep -q -- "^$line" "$script" || fail "$script" "no '$line' line"
  done
  output=$(env -u MASTER_ADDR -u MASTER_PORT PATH="$stubs:$PATH" SLURM_JOB_ID=4242 SLURM_JOB_NAME=t \
           SLURM_JOB_NODELIST='node-[a-b]' SLURM_NTASKS=16 SLURM_NNODES=2 SLURM_CPUS_PER_TASK=4 \
           SLURM_TASKS_PER_NODE='8(x2)' SLURM_SUBMIT_DIR="$source_dir" bash "$script") ||
    fail "$script" "exited $?"
  echo "$script: $output"
  config=$(sed -n 's/.*--deepspeed \([^ ]*\).*/\1/p' <<<"$output")
  [ -n "$config" ] && [ -f "$config" ] || fail "$script" "--deepspeed '$config' is not a file"
  grep -q ' train --model_name_or_path ' <<<"$output" || fail "$script" "does not run zero train"
  grep -q 'MASTER=node-a:14242' <<<"$output" || fail "$script" "MASTER_ADDR:MASTER_PORT not node-a:14242"
  case "$script" in
    *mpirun*) grep -q '^mpirun -np 16 ' <<<"$output" || fail "$script" "not mpirun -np 16" ;;
    *srun_mpi*) grep -q '^srun --mpi=pmix ' <<<"$output" || fail "$script" "not srun --mpi=pmix" ;;
    *srun_torchrun*) grep -q '^srun .*torchrun --nnodes 2 ' <<<"$output" || fail "$script" "not srun torchrun" ;;
    *torchrun*) grep -q '^torchrun .*--no_python ' <<<"$output" || fail "$script" "not torchrun" ;;
    *srun_gloo*) grep -q '^srun --mpi=none ' <<<"$output" || fail "$script" "not plain srun" ;;
  esac
done
[ "$failed" = 0 ] && echo "slurm scripts: all ${#scripts[@]} check out"
exit "$failed"

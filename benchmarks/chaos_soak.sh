#!/usr/bin/env bash
# Chaos soak (issue 27): a small GPT-2 trains for a few hundred steps at 2 ranks under a
# supervisor that restarts it (torchrun --max_restarts over Gloo, and an mpirun retry loop as an
# sbatch script writes it) while this script SIGKILLs a random rank at random moments, N times.
# Every restart must resume from `latest`, and the final model must be byte-identical to an
# uninterrupted run's. Prints each kill (rank, where it was, step, checkpoint resumed, steps
# redone, seconds from the kill to training again and to the killed step again) and a summary.
#
#   benchmarks/chaos_soak.sh [--zero PATH] [--launchers torchrun,mpirun] [--kills N] [--steps S]
#                            [--save_steps K] [--time_limit SECONDS] [--seed X] [--work DIR]
#                            [--mpirun PATH]
# Defaults: build/tools/zero, both launchers, 10 kills, 300 steps, a checkpoint every 20 steps,
# 900 s, the seed from the clock, a new folder under TMPDIR, mpirun from PATH. torchrun is
# torch.distributed.run of ZERO_PYTHON, else of /usr/bin/python3 (Debian's torch 1.13).
#
# Where a rank is: zero's phase report (ZERO_PHASE_DIR, zero/core/phase_report.h), one line per
# process: its trainer phase and the collective in flight; the step is metrics.jsonl's last.
# The first three kills of each launcher wait for a rank to be mid-step (computing, no
# collective in flight), mid-collective and mid-save, in a random order; the others strike at a
# random moment whatever the rank is doing. A kill waits for the first checkpoint: a rerun in an
# output_dir that holds files but no checkpoint is refused (as run_clm refuses it; the sbatch
# examples in configs/slurm pass --overwrite_output_dir then).
#
# Bounds: N kills per launcher, --time_limit seconds for the whole soak (every process it started
# is killed past it, and it fails), addresses on 127.0.0.1 only. Exit 0 only when every check
# held; the last line says "chaos soak ok" then.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
zero=$here/build/tools/zero
launchers=torchrun,mpirun
kills=10
steps=300
save_steps=20
time_limit=900
seed=$(date +%s)
work=${TMPDIR:-/tmp}/zero-chaos-soak.$$
mpirun_path=mpirun
while [ $# -gt 0 ]; do
  case $1 in
  --zero) zero=$2 ;;
  --launchers) launchers=$2 ;;
  --kills) kills=$2 ;;
  --steps) steps=$2 ;;
  --save_steps) save_steps=$2 ;;
  --time_limit) time_limit=$2 ;;
  --seed) seed=$2 ;;
  --work) work=$2 ;;
  --mpirun) mpirun_path=$2 ;;
  *) echo "chaos_soak.sh: unknown option '$1' (see the comment at the top)" >&2; exit 2 ;;
  esac
  shift 2
done
for value in kills steps save_steps time_limit seed; do
  [[ ${!value} =~ ^[0-9]+$ ]] || { echo "chaos_soak.sh: --$value '${!value}' is not a whole number" >&2; exit 2; }
done
[ -x "$zero" ] || { echo "chaos_soak.sh: no zero binary at $zero (--zero PATH)" >&2; exit 2; }
source "$here/benchmarks/chaos_soak_lib.sh"

RANDOM=$seed
start_time=$EPOCHREALTIME
deadline=$(now_plus "$time_limit")
rm -rf "$work" && mkdir -p "$work"
echo "chaos soak: $kills kills per launcher ($launchers), $steps steps, a checkpoint every" \
  "$save_steps, seed $seed, bound $time_limit s, in $work"
write_inputs "$work"

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
reference=""
IFS=, read -ra launcher_list <<<"$launchers"
for launcher in "${launcher_list[@]}"; do
  case $launcher in
  torchrun) find_torchrun || { echo "chaos_soak.sh: no python here imports torch.distributed.run (ZERO_PYTHON)" >&2; exit 2; } ;;
  mpirun) command -v "$mpirun_path" >/dev/null || { echo "chaos_soak.sh: no mpirun at '$mpirun_path' (--mpirun)" >&2; exit 2; } ;;
  *) echo "chaos_soak.sh: unknown launcher '$launcher' (torchrun, mpirun)" >&2; exit 2 ;;
  esac
  # The uninterrupted run of this launcher: the same backend's reductions, so the same bits.
  phases=""
  run_supervised "$launcher" "$work/$launcher-straight" 0 &
  job=$!
  finish_job || { fail "$launcher: the run without kills failed (exit $?)"; continue; }
  reference=$work/$launcher-straight/model.safetensors
  soak "$launcher" || fail "$launcher: the soak failed"
  out=$work/$launcher-soak
  if [ -e "$out/model.safetensors" ] && cmp -s "$reference" "$out/model.safetensors"; then
    echo "$launcher: final model.safetensors is byte-identical to the run without kills"
  else
    fail "$launcher: the final model differs from the run without kills (or is missing)"
  fi
done
echo "chaos soak: $(elapsed_since "$start_time") s in all"
[ $failures -eq 0 ] || { echo "chaos soak FAILED: $failures check(s)"; exit 1; }
echo "chaos soak ok"

#!/usr/bin/env bash
# One rank's start in the requeue_*.sbatch scripts: runs its arguments (the zero binary and
# `train ...`), adding --overwrite_output_dir while ZERO_OUTPUT_DIR holds no checkpoint (`latest`).
# zero resumes from the output_dir's latest checkpoint by itself, as run_clm does, and (as
# run_clm) refuses an output_dir that holds files but no checkpoint: what a rank killed before the
# first save leaves. Decided by each rank as it starts, so torchrun's own restarts decide again.
# Every rank of an attempt sees the same answer: `latest` appears only after every rank saved.
set -euo pipefail
if [ -e "${ZERO_OUTPUT_DIR:?ZERO_OUTPUT_DIR names the output_dir}/latest" ]; then
  exec "$@"
fi
exec "$@" --overwrite_output_dir

# shellcheck shell=bash
# Sourced by the requeue_*.sbatch scripts beside it: restarts that lose nothing.
#
# run_with_restarts SIGNAL COMMAND...: runs COMMAND (a launcher starting `zero train`) and runs it
# again after a failure (a rank killed, a node's process gone), at most ZERO_MAX_RESTARTS times
# (default 3). Each attempt resumes from the latest checkpoint in the output_dir: zero does so by
# itself when the output_dir holds one, as run_clm does; the ranks start through zero_attempt.sh,
# which starts over with --overwrite_output_dir while there is no checkpoint yet.
#
# The signal Slurm sends this shell before the time limit (#SBATCH --signal=B:USR1@180) goes to
# the launcher as SIGNAL; the ranks save a checkpoint and exit, and the job puts itself back in
# the queue (scontrol requeue, which #SBATCH --requeue allows) to continue from that checkpoint.
# A node failure requeues the job too (--requeue); the new run resumes the same way.
# benchmarks/chaos_soak.sh runs the same loop (its own copy, without the signal and the requeue)
# around mpirun, and torchrun --max_restarts, under SIGKILLs.

export ZERO_OUTPUT_DIR  # read by zero_attempt.sh in every rank
run_with_restarts() {
  local signal=$1
  shift
  local attempt=0 status=0 preempted=0 launcher
  while :; do
    "$@" &
    launcher=$!
    trap 'preempted=1; kill -'"$signal"' "$launcher"' USR1
    while :; do  # a trapped signal interrupts wait: wait again until the launcher exits
      status=0
      wait "$launcher" || status=$?
      kill -0 "$launcher" 2>/dev/null || break
    done
    trap - USR1
    if [ "$preempted" = 1 ]; then
      echo "restart.sh: the time limit is near; the job goes back in the queue (exit $status)"
      scontrol requeue "${SLURM_JOB_ID:?}"
      return 0
    fi
    [ "$status" = 0 ] && return 0
    attempt=$((attempt + 1))
    if [ "$attempt" -gt "${ZERO_MAX_RESTARTS:-3}" ]; then
      echo "restart.sh: attempt $attempt failed (exit $status); no restarts left"
      return "$status"
    fi
    echo "restart.sh: the launcher exited $status; restart $attempt of ${ZERO_MAX_RESTARTS:-3}" \
      "from $(cat "$ZERO_OUTPUT_DIR/latest" 2>/dev/null || echo "the start (no checkpoint yet)")"
  done
}

#!/usr/bin/env bash
# Runs one training twice, under two launches, and checks that the logged losses agree
# (within 2e-5: ranks may sum in another order over another backend).
#   same_losses.sh "LAUNCH A..." "LAUNCH B..." -- PROGRAM ARGS...
set -uo pipefail
launch_a=$1 launch_b=$2
shift 3
a=$($launch_a "$@" 2>&1) || { echo "FAIL: '$launch_a $*' exited $?"; echo "$a"; exit 1; }
b=$($launch_b "$@" 2>&1) || { echo "FAIL: '$launch_b $*' exited $?"; echo "$b"; exit 1; }
# "step  50  loss 0.04330" (examples), "step 2/12 | ... | loss 5.9766 | ..." (zero train),
# "final loss 0.00027": the number after "loss".
losses() { grep -E '^(step |final loss )' | sed -E 's/.*[ |]loss ([-0-9.e+]+).*/\1/'; }
la=$(losses <<<"$a") lb=$(losses <<<"$b")
[ -n "$la" ] || { echo "FAIL: no loss lines from '$launch_a'"; echo "$a"; exit 1; }
echo "$launch_a: $(echo $la)"
echo "$launch_b: $(echo $lb)"
paste <(echo "$la") <(echo "$lb") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5 || $2 == "") { bad++; print "FAIL: loss " n ": " $1 " vs " $2 } }
  END { if (bad || n == 0) exit 1; print "same losses: " n " values agree" }'

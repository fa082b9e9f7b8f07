# scripts/gpu_check.sh's decisions, sourced by it (and by its `selftest`, which feeds each of them
# made-up logs): where compute-sanitizer is, which test cases ran and how, whether a GPU run's
# losses stay within the CPU run's tolerance, and the time plan. No side effects beyond stdout.
# shellcheck shell=bash

# compute-sanitizer: on the PATH, else where a CUDA toolkit puts it (beside nvcc, the toolkit
# folders under ZERO_CUDA_ROOTS, default /usr/local/cuda*, /opt/cuda and /opt/nvidia's), else in
# the PyTorch wheels' nvidia packages (the site-packages of ZERO_GPU_CHECK_PYTHONS, default python3
# and /opt/torch's venv). Prints "PATH (where it was found)"; returns 1, printing every place
# looked in, when there is none.
find_compute_sanitizer() {
  local candidates=() places=() candidate root nvcc python site
  if command -v compute-sanitizer >/dev/null 2>&1; then
    echo "$(command -v compute-sanitizer) (on the PATH)"
    return 0
  fi
  places+=("the PATH")
  if nvcc=$(command -v nvcc 2>/dev/null); then
    nvcc=$(dirname "$(readlink -f "$nvcc")")
    candidates+=("$nvcc/compute-sanitizer|beside nvcc" "$nvcc/../compute-sanitizer/compute-sanitizer|beside nvcc")
    places+=("beside nvcc ($nvcc)")
  fi
  # shellcheck disable=SC2206  # the roots are globs on purpose
  local roots=(${ZERO_CUDA_ROOTS:-/usr/local/cuda /usr/local/cuda-* /opt/cuda /opt/nvidia/*})
  for root in "${roots[@]}"; do
    candidates+=("$root/bin/compute-sanitizer|CUDA toolkit $root"
                 "$root/compute-sanitizer/compute-sanitizer|CUDA toolkit $root")
  done
  places+=("${roots[*]}")
  for candidate in "${candidates[@]}"; do
    if [[ -f ${candidate%%|*} && -x ${candidate%%|*} ]]; then
      echo "$(readlink -f "${candidate%%|*}") (${candidate#*|})"
      return 0
    fi
  done
  for python in ${ZERO_GPU_CHECK_PYTHONS:-python3 /opt/torch/.venv/bin/python3}; do
    command -v "$python" >/dev/null 2>&1 || continue
    for site in $("$python" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
      [[ -d $site/nvidia ]] || continue
      places+=("$site/nvidia")
      candidate=$(find "$site/nvidia" -maxdepth 4 -name compute-sanitizer -type f -perm -u+x 2>/dev/null |
                  sort | head -n 1)
      [[ -n $candidate ]] && { echo "$candidate (the PyTorch wheels' nvidia packages)"; return 0; }
    done
  done
  echo "compute-sanitizer not found; looked on: $(IFS=';'; echo "${places[*]}")"
  return 1
}

# "STEP LOSS" per logged training step of a `zero train` output folder's metrics.jsonl (full
# precision; the console prints 4 decimals), in step order.
losses_of() {
  local metrics=$1
  [[ -f $metrics ]] || return 1
  grep -a '"loss":' "$metrics" |
    sed -n 's/.*"loss":\([^,}]*\).*"step":\([0-9]*\).*/\2 \1/p' | sort -n
}

# compare_losses CPU_LOSSES GPU_LOSSES TOLERANCE LABEL: files of "STEP LOSS" lines (losses_of).
# Prints both columns, each step's |gpu - cpu| and the largest, and a NOTE; returns 1 when a step
# is missing on either side, a loss is not a finite number, or |gpu - cpu| > TOLERANCE (nats) at
# any step.
compare_losses() {
  local cpu=$1 gpu=$2 tolerance=$3 label=$4
  echo "---- $label: per-step loss, GPU against the CPU run (tolerance $tolerance)"
  join -a 1 -a 2 -e missing -o 0,1.2,2.2 <(sort -k1,1 "$cpu") <(sort -k1,1 "$gpu") | sort -n |
    awk -v tolerance="$tolerance" -v label="$label" '
      function finite(x) { return x ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
      BEGIN { printf "%6s %14s %14s %12s\n", "step", "cpu", "gpu", "|gpu - cpu|" }
      {
        steps++
        if (!finite($2) || !finite($3)) { bad++; printf "%6s %14s %14s %12s  <- not a loss on both sides\n", $1, $2, $3, "-"; next }
        d = $3 - $2; if (d < 0) d = -d
        flag = d > tolerance ? "  <- over the tolerance" : ""
        if (d > tolerance) over++
        if (d >= largest) { largest = d; at = $1 }
        printf "%6d %14.6f %14.6f %12.3e%s\n", $1, $2, $3, d, flag
      }
      END {
        if (steps == 0) { print "NOTE: " label ": no losses to compare"; exit 1 }
        printf "NOTE: %s: %d steps, largest |gpu - cpu| %.3e at step %s (tolerance %s)%s\n", label, steps,
               largest, at, tolerance, (bad || over) ? sprintf(": FAILED, %d over the tolerance, %d missing or not finite", over, bad) : ""
        exit (bad || over) ? 1 : 0
      }'
}

# The full names a gtest program lists (--gtest_list_tests output on stdin), one per line; the
# DISABLED_ ones, which gtest lists but does not run, left out.
gtest_listed_cases() {
  awk '/^[^ ]/ { suite = $1 } /^  [^ ]/ && suite $1 !~ /DISABLED_/ { print suite $1 }'
}

# check_cases LISTED LOG REQUIRED...: LISTED holds a program's case names (gtest_listed_cases),
# LOG its run's output. Prints one line per case, "case NAME: passed|skipped|failed|no result",
# and returns 1 when a case failed or has no result (the program stopped before it), or when a
# REQUIRED name (Suite.Case, matching every prefix/Suite.Case/parameter instance) matches no
# listed case or did not pass in every instance; with CASES_SKIPPED_OK=1 (no device: every case
# skips itself) a skipped required case passes. Other cases may skip (the multi-rank cases at
# world 1).
check_cases() {
  local listed=$1 log=$2 name line status failed=0 required matched
  shift 2
  declare -A result=()
  while IFS= read -r line; do
    name=${line#*\] }
    name=${name%%, where *}
    name=${name%% (*}
    case "$line" in
      '[       OK ] '*) result[$name]=passed ;;
      '[  SKIPPED ] '*) result[$name]=skipped ;;
      '[  FAILED  ] '*) result[$name]=failed ;;
    esac
  done < <(grep -a '^\[  *\(OK\|SKIPPED\|FAILED\) *\] [A-Za-z]' "$log")
  while IFS= read -r name; do
    status=${result[$name]:-no result}
    echo "case $name: $status"
    [[ $status == passed || $status == skipped ]] || failed=1
  done <"$listed"
  for required in "$@"; do
    matched=0
    while IFS= read -r name; do
      [[ $name =~ ^([^/]+/)?${required//./\\.}(/[^/]+)?$ ]] || continue
      matched=$((matched + 1))
      [[ ${result[$name]:-no result} == passed || ${CASES_SKIPPED_OK:-0} == 1 ]] ||
        { echo "FAILED: required case $name: ${result[$name]:-no result}"; failed=1; }
    done <"$listed"
    [[ $matched -gt 0 ]] || { echo "FAILED: required case $required is not in the programs' lists"; failed=1; }
  done
  return $failed
}

# The "measured: ..." lines tests print beside their bounds (tests/common/measured.h), as a table
# sorted by the share of the bound used, largest first; a NOTE with their count and the largest.
measured_bounds() {
  local log=$1 lines
  lines=$(grep -a '^measured: ' "$log" | sed 's/^measured: //' |
          awk '{ share = $0; sub(/.*, /, "", share); sub(/%.*/, "", share); print share "\t" $0 }' |
          sort -t$'\t' -k1,1gr | cut -f2-)
  [[ -n $lines ]] || return 0
  echo "---- bounds measured (the share of each bound used, largest first)"
  echo "$lines"
  echo "NOTE: $(wc -l <<<"$lines") bounds measured; largest share: $(head -n 1 <<<"$lines")"
}

# plan_steps BUDGET STEP...: the time plan printed at the start, from step_estimate (seconds on
# an H100 or H200: benchmarks/RESULTS.md's runs, 2026-11-26/27, with what was added since: the
# tests step's eighth program and new cases, the train step's runs against the CPU) and
# step_limit.
step_estimate() {
  case "$1" in
    env) echo 5 ;; tests) echo 60 ;; memcheck) echo 40 ;; train) echo 90 ;;
    racecheck) echo 100 ;; kernels) echo 10 ;; torch) echo 60 ;; *) echo 60 ;;
  esac
}
step_limit() {
  case "$1" in
    env) echo 30 ;; tests) echo 150 ;; memcheck) echo 100 ;; train) echo 200 ;;
    racecheck) echo 180 ;; kernels) echo 30 ;; torch) echo 120 ;; *) echo 60 ;;
  esac
}
plan_steps() {
  local budget=$1 name total=0 rows=()
  shift
  for name in "$@"; do
    total=$((total + $(step_estimate "$name")))
    rows+=("$name ~$(step_estimate "$name") s (limit $(step_limit "$name") s)")
  done
  local joined
  joined=$(printf '%s, ' "${rows[@]}")
  echo "gpu_check.sh: plan: ${joined%, }; estimated $total s (~$(( (total + 59) / 60 )) min) of a" \
       "$budget s budget"
  echo "gpu_check.sh: each step's limit is cut to what is left of the budget; a step whose estimate" \
       "no longer fits is not run and counts as failed"
  [[ $total -le $budget ]] || echo "gpu_check.sh: WARNING: the estimates add up to more than the budget"
}

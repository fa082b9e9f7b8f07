# `scripts/gpu_check.sh selftest`: the dry mode. Sourced by gpu_check.sh, after its functions and
# gpu_check_lib.sh's: each decision a GPU run takes is fed made-up logs, metrics files, gtest
# programs and toolkit folders, and must pass what it must and fail what it must. No GPU, no
# build. Prints one line per check; exits 1 naming each check that behaved otherwise.
# shellcheck shell=bash

selftest_failures=0
# expect STATUS DESCRIPTION COMMAND...: COMMAND (output in $selftest_dir/out) exits 0 when STATUS
# is pass, non-zero when it is fail.
expect() {
  local want=$1 what=$2 status=0
  shift 2
  "$@" >"$selftest_dir/out" 2>&1 || status=$?
  if [[ ($want == pass && $status -eq 0) || ($want == fail && $status -ne 0) ]]; then
    echo "ok: $what ($want)"
  else
    echo "WRONG: $what: expected $want, exit $status; its output:"
    sed 's/^/    /' "$selftest_dir/out"
    selftest_failures=$((selftest_failures + 1))
  fi
}
# expect_output TEXT DESCRIPTION: the last expect's output holds TEXT.
expect_output() {
  if grep -qF -- "$1" "$selftest_dir/out"; then
    echo "ok: $2"
  else
    echo "WRONG: $2: no '$1' in:"
    sed 's/^/    /' "$selftest_dir/out"
    selftest_failures=$((selftest_failures + 1))
  fi
}

# A metrics.jsonl as zero train writes it: LOSS per step from the arguments, an eval line between.
fake_metrics() {
  local file=$1 step=0 loss
  shift
  mkdir -p "$(dirname "$file")"
  : >"$file"
  for loss in "$@"; do
    step=$((step + 1))
    echo "{\"epoch\":0.1,\"grad_norm\":1.5,\"learning_rate\":0.0006,\"loss\":$loss,\"loss_scale\":1.0,\"step\":$step,\"tokens_per_second\":99.5}" >>"$file"
    [[ $step -eq 2 ]] && echo "{\"epoch\":0.2,\"eval_loss\":99.0,\"step\":$step}" >>"$file"
  done
  return 0
}

# A gtest program: --gtest_list_tests lists Suite.{A,B} and Prefix/Param.C/{fp32,bf16}; a run
# prints each case's result line as CASE_RESULTS says ("NAME=OK|SKIPPED|FAILED|none", default OK).
fake_gtest() {
  cat >"$1" <<'EOF'
#!/usr/bin/env bash
if [[ ${1:-} == --gtest_list_tests ]]; then
  printf 'Suite.\n  A\n  B\nPrefix/Param.\n  C/fp32  # GetParam() = 1-byte object <00>\n  C/bf16  # GetParam() = 1-byte object <01>\n'
  exit 0
fi
status=0
for name in Suite.A Suite.B Prefix/Param.C/fp32 Prefix/Param.C/bf16; do
  result=OK
  for entry in ${CASE_RESULTS:-}; do [[ ${entry%%=*} == "$name" ]] && result=${entry#*=}; done
  echo "[ RUN      ] $name"
  case $result in
    OK) echo "[       OK ] $name (1 ms)" ;;
    SKIPPED) echo "[  SKIPPED ] $name (0 ms)"; [[ $status -eq 0 ]] && status=77 ;;
    FAILED) echo "[  FAILED  ] $name (1 ms)"; status=1 ;;
    none) exit 134 ;;
  esac
done
echo "measured: Suite.A logits: 1.000e-03 (bound 5.0e-02, 2.0% of it)"
echo "measured: Suite.B loss: 4.000e-02 (bound 5.0e-02, 80.0% of it)"
exit $status
EOF
  chmod +x "$1"
}

selftest() {
  selftest_dir=$(mktemp -d)
  trap 'rm -rf "$selftest_dir"' EXIT
  local d=$selftest_dir

  # Losses: metrics.jsonl read at full precision, eval lines left out; the comparison.
  fake_metrics "$d/cpu/metrics.jsonl" 10.875 9.5 8.25 7.125
  expect pass "losses_of reads each step's loss" losses_of "$d/cpu/metrics.jsonl"
  expect_output "3 8.25" "losses_of: step 3's loss at full precision"
  losses_of "$d/cpu/metrics.jsonl" >"$d/cpu.losses"
  fake_metrics "$d/near/metrics.jsonl" 10.876 9.502 8.249 7.1265
  losses_of "$d/near/metrics.jsonl" >"$d/near.losses"
  expect pass "losses within 5e-3 of the CPU's" compare_losses "$d/cpu.losses" "$d/near.losses" 5e-3 near
  expect_output "largest |gpu - cpu| 2.000e-03 at step 2" "the largest difference named with its step"
  fake_metrics "$d/far/metrics.jsonl" 10.876 9.502 8.31 7.1265
  losses_of "$d/far/metrics.jsonl" >"$d/far.losses"
  expect fail "a step 6e-2 from the CPU's, tolerance 5e-3" compare_losses "$d/cpu.losses" "$d/far.losses" 5e-3 far
  expect_output "<- over the tolerance" "the step over the tolerance marked"
  fake_metrics "$d/short/metrics.jsonl" 10.876 9.502 8.249
  losses_of "$d/short/metrics.jsonl" >"$d/short.losses"
  expect fail "a step missing on the device" compare_losses "$d/cpu.losses" "$d/short.losses" 5e-3 short
  fake_metrics "$d/nan/metrics.jsonl" 10.876 nan 8.249 7.1265
  losses_of "$d/nan/metrics.jsonl" >"$d/nan.losses"
  expect fail "a NaN loss on the device" compare_losses "$d/cpu.losses" "$d/nan.losses" 5e-3 nan
  : >"$d/empty.losses"
  expect fail "no losses on either side" compare_losses "$d/empty.losses" "$d/empty.losses" 5e-3 empty

  # The train step's comparison over made-up device and CPU runs (COMPARE_RUNS gpt2:0 gpt2:3).
  mkdir -p "$d/work" "$d/refs"
  for stage in 0 3; do
    fake_metrics "$d/work/gpu_gpt2_s$stage/metrics.jsonl" 10.876 9.502 8.249 7.1265
    echo 0 >"$d/work/gpu_gpt2_s$stage.status"
    echo "zero: GPT-2 attention on cuDNN's fused SDPA, bf16 (cuDNN 9)" >"$d/work/gpu_gpt2_s$stage.log"
    fake_metrics "$d/refs/cpu_gpt2_s$stage/metrics.jsonl" 10.875 9.5 8.25 7.125
    echo 0 >"$d/refs/cpu_gpt2_s$stage.status"
  done
  local compare=(WORK="$d/work" CPU_REFS="$d/refs" COMPARE_RUNS="gpt2:0 gpt2:3" ZERO_GPU_CHECK_TOLERANCE_GPT2=5e-3)
  expect pass "the train step's comparison, both stages within the tolerance" \
    in_bash compare_with_cpu "${compare[@]}" STEP_DEADLINE=$(( $(date +%s) + 5 ))
  expect_output "device attention cuDNN's fused SDPA, bf16" "the device's attention named"
  fake_metrics "$d/work/gpu_gpt2_s3/metrics.jsonl" 10.876 9.9 8.249 7.1265
  expect fail "the train step's comparison, stage 3 0.4 off at step 2" \
    in_bash compare_with_cpu "${compare[@]}" STEP_DEADLINE=$(( $(date +%s) + 5 ))
  expect_output "NOTE: gpt2 stage 3, device attention cuDNN's fused SDPA, bf16: 4 steps, largest |gpu - cpu| 4.000e-01 at step 2" \
    "the failing run's NOTE"
  echo 1 >"$d/work/gpu_gpt2_s3.status"
  expect fail "the train step's comparison, the device run failed" \
    in_bash compare_with_cpu "${compare[@]}" STEP_DEADLINE=$(( $(date +%s) + 5 ))
  expect_output "NOTE: gpt2 stage 3: zero train on the device failed" "the failed device run named"
  rm "$d/refs/cpu_gpt2_s0.status"
  expect fail "the train step's comparison, a CPU run unfinished at the deadline" \
    in_bash compare_with_cpu "${compare[@]}" STEP_DEADLINE=$(( $(date +%s) - 1 ))
  expect_output "the CPU run had not finished" "the unfinished CPU run named"

  # Cases by name: a fake gtest program through the tests step's checks.
  fake_gtest "$d/fake_test"
  "$d/fake_test" --gtest_list_tests | gtest_listed_cases >"$d/listed"
  expect pass "the listed names" grep -qx 'Prefix/Param.C/bf16' "$d/listed"
  "$d/fake_test" >"$d/all.log" 2>&1 || true
  expect pass "every case passed, Param.C required" check_cases "$d/listed" "$d/all.log" Param.C Suite.A
  expect_output "case Prefix/Param.C/fp32: passed" "each case named with its result"
  CASE_RESULTS="Prefix/Param.C/bf16=SKIPPED" "$d/fake_test" >"$d/all.log" 2>&1 || true
  expect fail "a required case skipped on a device" check_cases "$d/listed" "$d/all.log" Param.C
  expect_output "FAILED: required case Prefix/Param.C/bf16: skipped" "the skipped required instance named"
  expect pass "a case skipped that is not required" check_cases "$d/listed" "$d/all.log" Suite.A
  expect pass "a required case skipped without a device (CASES_SKIPPED_OK=1)" \
    in_bash "check_cases '$d/listed' '$d/all.log' Param.C" CASES_SKIPPED_OK=1
  CASE_RESULTS="Suite.B=FAILED" "$d/fake_test" >"$d/all.log" 2>&1 || true
  expect fail "a failed case" check_cases "$d/listed" "$d/all.log" Suite.A
  CASE_RESULTS="Prefix/Param.C/fp32=none" "$d/fake_test" >"$d/all.log" 2>&1 || true
  expect fail "a program that stopped before its last cases" check_cases "$d/listed" "$d/all.log"
  expect_output "case Prefix/Param.C/bf16: no result" "the case with no result named"
  "$d/fake_test" >"$d/all.log" 2>&1 || true
  expect fail "a required case no program lists" check_cases "$d/listed" "$d/all.log" Suite.Renamed
  expect pass "measured bounds as a table" measured_bounds "$d/all.log"
  expect_output "NOTE: 2 bounds measured; largest share: Suite.B loss" "the largest share first"

  # The tests step itself over the fake program, as on a device (GPU_COUNT=1).
  mkdir -p "$d/bin"
  cp "$d/fake_test" "$d/bin/fake_test"
  local device=(BIN="$d/bin" GPU_COUNT=1 CUDA_TESTS=fake_test)
  expect pass "the tests step, every case passing" in_bash step_tests "${device[@]}" REQUIRED_CASES=Param.C
  expect_output "NOTE: 1 test programs: 4 cases passed, 0 skipped; the 1 required cases passed" "the tests step's NOTE"
  expect fail "the tests step, a required case skipped on a device" \
    in_bash step_tests "${device[@]}" REQUIRED_CASES=Param.C CASE_RESULTS="Prefix/Param.C/fp32=SKIPPED"
  expect fail "the tests step, a required case renamed away" in_bash step_tests "${device[@]}" REQUIRED_CASES=Param.D

  # compute-sanitizer: found in a toolkit folder, or its absence fails memcheck on a device.
  mkdir -p "$d/cuda-fake/compute-sanitizer" "$d/nowhere"
  # shellcheck disable=SC2016  # the fake's own script, expanded when it runs
  printf '#!/bin/sh\n[ "$1" = --version ] && { echo "fake sanitizer 1.0"; exit 0; }\nwhile [ "${1#-}" != "$1" ]; do case "$1" in --tool|--target-processes|--error-exitcode) shift 2 ;; *) shift ;; esac; done\nexec "$@"\n' \
    >"$d/cuda-fake/compute-sanitizer/compute-sanitizer"
  chmod +x "$d/cuda-fake/compute-sanitizer/compute-sanitizer"
  local no_toolkit=(PATH=/usr/bin:/bin ZERO_GPU_CHECK_PYTHONS=none)
  expect pass "compute-sanitizer in a toolkit's compute-sanitizer/ folder" \
    in_bash find_compute_sanitizer "${no_toolkit[@]}" ZERO_CUDA_ROOTS="$d/nowhere $d/cuda-fake"
  expect_output "$d/cuda-fake/compute-sanitizer/compute-sanitizer (CUDA toolkit $d/cuda-fake)" "where it was found"
  expect fail "no compute-sanitizer anywhere" \
    in_bash find_compute_sanitizer "${no_toolkit[@]}" ZERO_CUDA_ROOTS="$d/nowhere"
  expect fail "memcheck on a device without compute-sanitizer" \
    in_bash step_memcheck "${no_toolkit[@]}" ZERO_CUDA_ROOTS="$d/nowhere" "${device[@]}" KERNEL_TESTS=fake_test
  expect_output "NOTE: memcheck not run: compute-sanitizer not found" "memcheck's failure says why"
  expect pass "memcheck on a device with the toolkit's compute-sanitizer" \
    in_bash step_memcheck "${no_toolkit[@]}" ZERO_CUDA_ROOTS="$d/cuda-fake" "${device[@]}" KERNEL_TESTS=fake_test
  expect_output "NOTE: memcheck clean over fake_test ($d/cuda-fake/compute-sanitizer/compute-sanitizer" \
    "the log names the compute-sanitizer that ran"

  # The budget: a step whose estimate no longer fits is not run, and the run fails.
  expect fail "a run whose steps do not fit its budget" \
    bash "$(dirname "${BASH_SOURCE[0]}")/gpu_check.sh" run --from-build "$d/nowhere" --results "$d/budget" --budget 4 env
  expect_output "plan: env ~5 s (limit 30 s); estimated 5 s" "the plan printed first"
  expect_output "| env | failed: not run, " "the step over the budget recorded as failed"

  rm -rf "$selftest_dir"
  trap - EXIT
  if [[ $selftest_failures -ne 0 ]]; then
    echo "gpu_check.sh selftest: $selftest_failures check(s) behaved otherwise"
    return 1
  fi
  echo "gpu_check.sh selftest: every check passed what it must and failed what it must"
}

# in_bash FUNCTION VARIABLE=VALUE...: FUNCTION in a fresh bash with those variables in its
# environment, as `step` runs a step, with every function of gpu_check.sh and its library.
in_bash() {
  local function=$1
  shift
  env "$@" bash -c "$(declare -f); $function"
}

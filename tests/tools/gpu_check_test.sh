#!/usr/bin/env bash
# scripts/gpu_check.sh run over a build tree (--from-build), as it runs on a machine without a
# GPU: exit 0, one summary row per step, every GPU step "skipped: no CUDA device" (where a GPU is
# visible: passed), at most 8 files in the results folder (what a device run returns), a rerun of named steps only, and bad
# input refused.
#   gpu_check_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1 build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
script=$source_dir/scripts/gpu_check.sh

bash "$script" run --from-build "$build_dir" --results "$work/all" >"$work/all.log" 2>&1 ||
  { cat "$work/all.log"; fail "gpu_check.sh run exited non-zero"; }
summary=$work/all/summary.md
[[ -f "$summary" ]] || fail "no summary.md"
for name in env tests memcheck racecheck kernels train torch; do
  row=$(grep "^| $name |" "$summary") || { cat "$summary"; fail "no row for step $name"; }
  if nvidia-smi -L >/dev/null 2>&1; then
    [[ "$row" == *"| passed |"* ]] || fail "step $name did not pass on a GPU: $row"
  elif [[ "$name" != env ]]; then
    [[ "$row" == *"skipped: no"* ]] || fail "step $name without a GPU: $row"
  fi
done
grep -q '^| env | passed |' "$summary" || fail "the env step failed: $(cat "$work/all/env.log")"
grep -q 'comm: local rank 0/1: all_reduce(sum of rank+1) = 1 (expected 1), host buffers' "$work/all/env.log" ||
  fail "env step: no host-communicator check in env.log"
# Every case named in the tests step's log, issue 42's eight among them (without a device: skipped).
for case_name in CudnnAttentionTest.ReadsAndWritesBf16ActivationsInPlace \
    ParameterDtypes/GPT2ComputeCudaTest.NextTokenLogitsAndGreedyGenerationMatchTheCpu/bf16 \
    Dtypes/TrainCuda.EvaluationAfterAnOverlappedOffloadStepMatchesTheCpu/bf16 LlamaCuda.DecoderStepsMatchTheCpuDecoder; do
  grep -q "^case $case_name: \(skipped\|passed\)$" "$work/all/tests.log" || fail "tests.log does not name $case_name"
done
files=$(find "$work/all" -type f | wc -l)
[[ $files -le 8 ]] || fail "$files files in the results folder (at most 8)"
echo "run: 7 steps, $files files"

# A rerun repeats only the named steps.
bash "$script" run --from-build "$build_dir" --results "$work/rerun" env kernels >"$work/rerun.log" 2>&1 ||
  { cat "$work/rerun.log"; fail "rerun exited non-zero"; }
[[ $(grep -c '^| [a-z]* |' "$work/rerun/summary.md") -eq 3 ]] || fail "the rerun's summary has other steps: $(cat "$work/rerun/summary.md")"
[[ ! -e "$work/rerun/tests.log" ]] || fail "the rerun ran the tests step"
echo "rerun: env and kernels only"

# Bad input: an unknown step, a missing bundle.
if bash "$script" run --results "$work/bad" nosuchstep >"$work/bad.log" 2>&1; then fail "an unknown step was accepted"; fi
grep -q "unknown step 'nosuchstep'" "$work/bad.log" || fail "unknown step: $(cat "$work/bad.log")"
if bash "$script" run --bundle "$work/missing.tar.xz" --results "$work/bad" env >"$work/bad.log" 2>&1; then fail "a missing bundle was accepted"; fi
grep -q "no bundle at" "$work/bad.log" || fail "missing bundle: $(cat "$work/bad.log")"
echo "gpu_check test passed"

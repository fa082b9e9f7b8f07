#!/usr/bin/env bash
# `zero train` checkpoints end to end on a tiny GPT-2 (2 layers, width 32, dropout on) trained on
# a generated corpus, logging every step; losses are read from metrics.jsonl.
#   checkpoint_cli_test.sh CASE ZERO SOURCE_DIR WORK_DIR MPIRUN [MPIRUN FLAGS...]
# CASE:
#   resume     40 steps straight (world 1, stage 0) = 20 at world 4 / stage 3 (stopped by the
#              preemption hook) + 20 resumed at world 2 / stage 1: the 40 losses within 1e-5;
#              `zero checkpoint info` and `consolidate` (LM and classifier) on the checkpoints.
#   precision  bf16 -> bf16 at another stage (exact: same arithmetic), fp32 -> bf16 and
#              bf16 -> fp32 (the continuation within 1e-2: bf16's rounding, see below); fp16
#              with overflowed steps: the loss scaler continues exactly.
#   crash      a rank killed with SIGKILL in the middle of a save (ZERO_TEST_SLOW_SAVE_MS):
#              `latest` still names the previous checkpoint, which loads and continues exactly;
#              truncated and missing shards refused naming the file; another model config
#              refused naming the key.
#   masters    bf16 runs at world 2, stages 1, 2, 3 and stage 3 with offload_optimizer nvme: the
#              final model.safetensors and checkpoint-N's equal, byte for byte, the fp32 masters
#              `zero checkpoint consolidate` writes from checkpoint-N (not the bf16 copy widened).
#   gloo       resume with the Gloo backend (torchrun's variables; MPIRUN is launch_ranks).
#   sigterm    SIGTERM to a running job (world 1, and one rank of 2): a checkpoint, exit 0, and
#              the resumed run continues the trajectory; a second signal exits at once with 143.
set -euo pipefail
case_name=$1 zero=$2 work=$4  # $3, the source folder, is not read: the corpus is generated
shift 4
mpirun=("$@")
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMP_NUM_THREADS=1

for stage in 0 1 2 3; do
  cat >"z$stage.json" <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": $stage}}
EOF
done
model=n_layer=2,n_embd=32,n_head=2,n_positions=32
# A fixed corpus (so measured deviations stay put): 3000 lines of 4-11 words from a small word
# list, drawn by an LCG.
python3 - <<'EOF'
words = ("the king queen speaks of a night sword crown and dark sea fair lord my heart doth love "
         "thee to battle wind star gold is not where home").split()
state = 12345
def draw():
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    return state >> 33
with open("corpus.txt", "w") as out:
    for _ in range(3000):
        out.write(" ".join(words[draw() % len(words)] for _ in range(4 + draw() % 8)) + ".\n")
EOF
# The flags every run shares, with --max_steps $1.
set_common() {
  common=(--train_file "$work/corpus.txt" --tokenizer_vocab_size 300 --block_size 32
    --do_train True --learning_rate 3e-3 --logging_steps 1 --no_plot --max_steps "$1")
}
set_common 40

fail() { echo "FAIL: $*"; exit 1; }
# launch WORLD: the launcher words for WORLD ranks; run_env: variables for every rank.
launch() { [ "$1" -gt 1 ] && echo "${mpirun[*]} -np $1" || true; }
# train LOG WORLD STAGE|CONFIG.json [FLAGS...]: zero train at WORLD ranks (global batch 8) at ZeRO
# stage STAGE (or with CONFIG.json), with the variables in $run_env on every rank.
run_env=""
train() {
  local log=$1 world=$2 config=$3
  shift 3
  [[ $config == *.json ]] || config=z$config.json
  # shellcheck disable=SC2046
  $(launch "$world") env $run_env "$zero" train --config_overrides "$model" "${common[@]}" \
    --per_device_train_batch_size $((8 / world)) --deepspeed "$config" "$@" >"$log" 2>&1 ||
    { local code=$?; cat "$log"; fail "$log: exit $code"; }
}
# compare A B TOLERANCE [FIRST LAST]: the losses of steps FIRST..LAST of two metrics.jsonl.
compare() {
  python3 - "$@" <<'EOF'
import json, sys
a, b, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])
first, last = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (1, 40)
def losses(path):
    return {e["step"]: e["loss"] for e in map(json.loads, open(path)) if "loss" in e}
la, lb = losses(a), losses(b)
worst = 0.0
for step in range(first, last + 1):
    if step not in la or step not in lb:
        sys.exit(f"FAIL: step {step} missing from {a if step not in la else b}")
    worst = max(worst, abs(la[step] - lb[step]))
print(f"{b} vs {a}, steps {first}-{last}: max |loss difference| {worst:.2e} (bound {tolerance:g})")
if worst > tolerance:
    sys.exit(f"FAIL: {b} differs from {a} by {worst:.3e} > {tolerance:g}")
EOF
}
latest_of() { cat "$1/latest"; }
# The child processes of PID (the ranks mpirun started), from /proc.
children_of() { cat /proc/"$1"/task/*/children 2>/dev/null || true; }

case $case_name in
resume)
  train straight.log 1 0 --output_dir straight
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train first.log 4 3 --output_dir run
  grep -q "preempted" first.log || fail "first.log: the preemption hook did not stop the run"
  [ "$(latest_of run)" = checkpoint-20 ] || fail "run/latest is '$(latest_of run)'"
  [ ! -e run/model.safetensors ] || fail "a preempted run wrote its final model"
  train second.log 2 1 --output_dir run --resume_from_checkpoint latest
  grep -q "resumed from run/checkpoint-20 at step 20 (written by 4 rank(s), stage 3" second.log ||
    fail "second.log does not say it resumed from checkpoint-20"
  compare straight/metrics.jsonl run/metrics.jsonl 1e-5
  "$zero" checkpoint info run >info.txt || { cat info.txt; fail "checkpoint info"; }
  grep -q "written by world 4, ZeRO stage 3, fp32 parameters" info.txt || fail "info: $(cat info.txt)"
  grep -q "^valid:" info.txt || fail "info did not validate: $(cat info.txt)"
  "$zero" checkpoint consolidate run/checkpoint-20 consolidated >/dev/null
  # The fp32 masters of a fp32 run are the model the trainer saved beside them, byte for byte.
  cmp consolidated/model.safetensors run/checkpoint-20/model.safetensors ||
    fail "consolidated model differs from checkpoint-20/model.safetensors"
  cmp consolidated/config.json run/checkpoint-20/config.json
  # GPT2ForSequenceClassification: the score unit comes along.
  printf 'text,label\n' >labels.csv
  for i in $(seq 30); do printf '"the sea and a ship %s",sea\n"a sword and the king %s",war\n' "$i" "$i"; done >>labels.csv
  ZERO_TEST_PREEMPT_AT_STEP=3 "$zero" train --task text-classification --train_file labels.csv \
    --text_column_names text --label_column_name label --max_seq_length 12 \
    --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=16 --tokenizer_vocab_size 300 \
    --do_train --max_steps 10 --per_device_train_batch_size 4 --no_plot --output_dir classify \
    >classify.log 2>&1 || { cat classify.log; fail "classification run"; }
  "$zero" checkpoint consolidate classify consolidated_classify >/dev/null
  grep -q GPT2ForSequenceClassification consolidated_classify/config.json || fail "classifier config"
  cmp consolidated_classify/model.safetensors classify/checkpoint-3/model.safetensors ||
    fail "consolidated classifier differs from checkpoint-3/model.safetensors"
  echo "resume ok"
  ;;
precision)
  # bf16 -> bf16, stage 3 -> stage 2 at world 2: the same arithmetic, so the same losses.
  train bf16.log 2 2 --bf16 True --output_dir bf16
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train a1.log 2 3 --bf16 True --output_dir a
  train a2.log 2 2 --bf16 True --output_dir a --resume_from_checkpoint latest
  grep -q "stage 3 -> 2" a2.log || fail "a2.log: $(grep resumed a2.log)"
  compare bf16/metrics.jsonl a/metrics.jsonl 1e-6
  # fp32 -> bf16 and bf16 -> fp32: the first 20 steps exact, the continuation within 1e-2 of the
  # uninterrupted run in the first precision. Not exact: the same fp32 masters and moments are
  # loaded, but bf16 rounds every parameter and gradient by up to 2^-8 relative, so the two
  # precisions drift apart (measured here: bf16 vs fp32 over all 40 steps 1.9e-3, the resumed
  # continuations 1.4e-3 and 1.5e-3; gpt2_mixed_precision_test bounds 200 steps by 5e-2). A run
  # that did not load the checkpoint would restart near the initial loss, > 0.5 higher.
  train fp32.log 1 0 --output_dir fp32
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train b1.log 2 1 --output_dir b
  train b2.log 2 2 --bf16 True --output_dir b --resume_from_checkpoint latest
  grep -q "fp32 -> bf16 parameters" b2.log || fail "b2.log: $(grep resumed b2.log)"
  compare fp32/metrics.jsonl b/metrics.jsonl 1e-5 1 20
  compare fp32/metrics.jsonl b/metrics.jsonl 1e-2 21 40
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train c1.log 2 2 --bf16 True --output_dir c
  train c2.log 1 0 --output_dir c --resume_from_checkpoint c/checkpoint-20
  grep -q "bf16 -> fp32 parameters" c2.log || fail "c2.log: $(grep resumed c2.log)"
  compare bf16/metrics.jsonl c/metrics.jsonl 1e-6 1 20
  compare bf16/metrics.jsonl c/metrics.jsonl 1e-2 21 40
  # fp16 with dynamic loss scaling from 2^16, window 5: the scale grows until steps overflow and
  # are skipped (before step 20); the checkpoint carries the scaler's state (scale, iteration,
  # last overflow, hysteresis), so the resumed run skips and grows exactly as the straight one.
  for stage in 2 3; do
    cat >"f$stage.json" <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "fp16": {"enabled": "auto", "initial_scale_power": 16, "loss_scale_window": 5},
 "zero_optimization": {"stage": $stage}}
EOF
  done
  train fp16.log 2 f2.json --fp16 True --output_dir fp16
  grep -q '"grad_norm":null' fp16/metrics.jsonl || fail "no fp16 step overflowed"
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train d1.log 2 f3.json --fp16 True --output_dir d
  train d2.log 2 f2.json --fp16 True --output_dir d --resume_from_checkpoint latest
  compare fp16/metrics.jsonl d/metrics.jsonl 1e-6
  python3 - fp16/metrics.jsonl d/metrics.jsonl <<'EOF'
import json, sys
a, b = ([e.get("loss_scale") for e in map(json.loads, open(p))] for p in sys.argv[1:])
sys.exit(0 if a == b else f"FAIL: loss scales differ: {a} vs {b}")
EOF
  echo "precision ok"
  ;;
offload)
  # Into and out of offload (docs/engine.md "Offload"): the checkpoint holds the fp32 masters and
  # moments wherever a run kept them (device, pinned host memory, NVMe swap files), so a run
  # resumes across placements with the uninterrupted losses.
  mkdir -p nvme
  cat >zo3.json <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                       "offload_param": {"device": "cpu"}}}
EOF
  cat >zn2.json <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "$work/nvme"}}}
EOF
  train straight.log 1 0 --output_dir straight
  # stage 1 without offload -> stage 3 with optimizer and parameters in host memory
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train into1.log 2 1 --output_dir into
  train into2.log 2 zo3.json --output_dir into --resume_from_checkpoint latest
  grep -q "placed: host_pinned" into2.log || fail "into2.log: $(grep placed into2.log)"
  grep -q "resumed from into/checkpoint-20 at step 20" into2.log ||
    fail "into2.log: $(grep resumed into2.log)"
  compare straight/metrics.jsonl into/metrics.jsonl 1e-5
  # stage 2 with the optimizer state in NVMe swap files -> stage 0 at world 1
  run_env=ZERO_TEST_PREEMPT_AT_STEP=20 train out1.log 2 zn2.json --output_dir out
  grep -q "placed: .*nvme" out1.log || fail "out1.log: $(grep placed out1.log)"
  [ -z "$(ls -A nvme)" ] || fail "swap files left in nvme/: $(ls -A nvme)"
  train out2.log 1 0 --output_dir out --resume_from_checkpoint latest
  compare straight/metrics.jsonl out/metrics.jsonl 1e-5
  echo "offload ok"
  ;;
masters)
  # What a 16-bit run saves is its fp32 masters, as Hugging Face's Trainer saves the fp32
  # parameters under mixed precision: the same bytes as the masters consolidated from the
  # checkpoint's shards, in the final model and in checkpoint-N.
  mkdir -p nvme
  cat >zn3.json <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "bf16": {"enabled": "auto"},
 "zero_optimization": {"stage": 3, "sub_group_size": 20000,
                       "offload_optimizer": {"device": "nvme", "nvme_path": "$work/nvme"}}}
EOF
  set_common 4
  for config in 1 2 3 zn3.json; do
    out=m${config%.json}
    train "$out.log" 2 "$config" --bf16 True --save_steps 4 --output_dir "$out"
    "$zero" checkpoint consolidate "$out/checkpoint-4" "$out/consolidated" >/dev/null
    for saved in "$out/model.safetensors" "$out/checkpoint-4/model.safetensors"; do
      cmp "$out/consolidated/model.safetensors" "$saved" ||
        fail "$saved differs from the consolidated fp32 masters"
    done
    # The masters, not the bf16 copy widened: most values have bits below bf16's 16.
    python3 - "$out/model.safetensors" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
start = 8 + struct.unpack("<Q", data[:8])[0]
words = struct.unpack(f"<{(len(data) - start) // 4}I", data[start:])
beyond = sum(1 for w in words if w & 0xFFFF)
if beyond <= len(words) // 2:
    sys.exit(f"FAIL: {sys.argv[1]}: only {beyond} of {len(words)} values beyond bf16")
EOF
  done
  echo "masters ok"
  ;;
nvme_faults)
  # NVMe offload faults under a real 2-rank job: every rank exits non-zero naming the path, no
  # hang, and the last checkpoint stays valid. (Read-only and full filesystems need mounts: the
  # store's own tests make them in a private mount namespace, tests/offload.)
  mkdir -p nvme
  write_nvme_config() {
    cat >"$1" <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "$2"},
                       "offload_param": {"device": "nvme", "nvme_path": "$2"}}}
EOF
  }
  # 1. nvme_path missing: both ranks stop before training, naming it.
  write_nvme_config missing.json "$work/no_such_folder"
  if $(launch 2) "$zero" train --config_overrides "$model" "${common[@]}" \
    --per_device_train_batch_size 4 --deepspeed missing.json --output_dir missing \
    >missing.log 2>&1; then fail "trained with a missing nvme_path"; fi
  grep -q "$work/no_such_folder" missing.log || fail "missing.log: $(cat missing.log)"
  # 2. the swap files deleted while training: the run stops with an error naming the swap file,
  # non-zero, and the last checkpoint saved before is intact.
  write_nvme_config run.json "$work/nvme"
  set_common 100000
  $(launch 2) "$zero" train --config_overrides "$model" "${common[@]}" \
    --per_device_train_batch_size 4 --deepspeed run.json --output_dir run --save_strategy steps \
    --save_steps 10 --save_total_limit 1 >deleted.log 2>&1 &
  job=$!
  # A checkpoint is complete once `latest` exists (written last); with save_total_limit 1 each one
  # lives only until the next save, so wait for `latest`, not for a particular checkpoint.
  for _ in $(seq 1200); do [ -e run/latest ] && break; sleep 0.05; done
  [ -e run/latest ] || { kill "$job"; cat deleted.log; fail "no checkpoint within 60 s"; }
  swap_files=$(find nvme -name '*.swap')
  [ -n "$swap_files" ] || { kill "$job"; fail "no swap files under nvme/"; }
  rm -f $swap_files
  status=0
  timeout 45 tail --pid="$job" -f /dev/null || { kill -9 "$job"; fail "the job hung after its swap files were deleted"; }
  wait "$job" || status=$?
  [ "$status" -ne 0 ] || fail "the job exited 0 after its swap files were deleted"
  grep -q "\.swap" deleted.log || fail "deleted.log does not name a swap file: $(tail -5 deleted.log)"
  latest=$(latest_of run)
  "$zero" checkpoint info "run/$latest" >info.txt 2>&1 || { cat info.txt; fail "run/$latest does not validate"; }
  grep -q "^valid:" info.txt || fail "info: $(cat info.txt)"
  # (Swap folders: the rank that fails removes its own before ending the job; a peer ended by
  # MPI_Abort's kill cannot. Removal at exit and at _Exit is tested in tests/offload.)
  echo "nvme_faults ok (exit $status, latest $latest)"
  ;;
crash)
  train straight.log 2 1 --output_dir straight
  # Checkpoints every 10 steps, each save held 2 s with every shard file half written; rank 1 is
  # killed (SIGKILL) while it writes checkpoint-20.
  $(launch 2) env ZERO_TEST_SLOW_SAVE_MS=2000 "$zero" train --config_overrides "$model" "${common[@]}" \
    --per_device_train_batch_size 4 --deepspeed z1.json --output_dir run --save_strategy steps \
    --save_steps 10 >crashed.log 2>&1 &
  job=$!
  # The shard file streams into its .tmp name and is renamed when complete.
  shard=run/.tmp-checkpoint-20/zero_shard-00001-of-00002.safetensors.tmp
  for _ in $(seq 300); do [ -e "$shard" ] && break; sleep 0.1; done
  [ -e "$shard" ] || { kill "$job"; cat crashed.log; fail "no save of checkpoint-20 began"; }
  victim=""
  for pid in $(children_of "$job"); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q " train "; then victim=$pid; fi
  done
  [ -n "$victim" ] || { kill "$job"; fail "no rank process under the launcher $job"; }
  kill -9 "$victim"
  if wait "$job"; then fail "the job survived a rank killed with SIGKILL"; fi
  [ "$(latest_of run)" = checkpoint-10 ] || fail "run/latest is '$(latest_of run)'"
  [ ! -e run/checkpoint-20 ] || fail "run/checkpoint-20 exists after a crash in its save"
  "$zero" checkpoint info run >info.txt || { cat info.txt; fail "checkpoint-10 does not validate"; }
  grep -q "^checkpoint run/checkpoint-10" info.txt || fail "info: $(head -1 info.txt)"
  # Damaged copies of checkpoint-10 are refused naming the file, by info and by train.
  # (corrupt: one byte flipped, same size: found by the checksum while loading, after the cheap
  # checks; the output_dir's metrics.jsonl is still untouched.)
  for damage in truncated missing corrupt; do
    cp -r run "$damage"
    file="$damage/checkpoint-10/zero_shard-00001-of-00002.safetensors"
    case $damage in
    truncated) truncate -s -64 "$file" ;;
    missing) rm "$file" ;;
    corrupt) printf '\x5a' | dd of="$file" bs=1 seek=$(($(stat -c %s "$file") - 100)) conv=notrunc 2>/dev/null ;;
    esac
    if "$zero" checkpoint info "$damage" >"$damage.info" 2>&1; then fail "info accepted $damage"; fi
    grep -q "$file" "$damage.info" || fail "info does not name $file: $(cat "$damage.info")"
    if $(launch 2) "$zero" train --config_overrides "$model" "${common[@]}" --per_device_train_batch_size 4 \
      --deepspeed z1.json --output_dir "$damage" --resume_from_checkpoint latest \
      >"$damage.train" 2>&1; then fail "train resumed from a $damage shard"; fi
    grep -q "$file" "$damage.train" || fail "train does not name $file: $(cat "$damage.train")"
  done
  grep -q "truncated" truncated.info || fail "truncated.info: $(cat truncated.info)"
  grep -q "checksum" corrupt.train || fail "corrupt.train: $(cat corrupt.train)"
  cmp -s run/metrics.jsonl corrupt/metrics.jsonl || fail "a refused resume rewrote metrics.jsonl"
  # Another model config: refused naming the key.
  if "$zero" train "${common[@]}" --config_overrides n_layer=2,n_embd=64,n_head=2,n_positions=32 \
    --per_device_train_batch_size 8 --output_dir run --resume_from_checkpoint latest \
    >other_model.log 2>&1; then fail "resumed with another model config"; fi
  grep -q "the checkpoint's model has n_embd 32 .*this run's has 64" other_model.log ||
    fail "other_model.log: $(cat other_model.log)"
  # The survivor continues exactly, at another world and stage; its first save cleans the
  # interrupted staging folder.
  train resumed.log 1 3 --output_dir run --resume_from_checkpoint latest --save_strategy steps \
    --save_steps 15 --save_total_limit 2
  grep -q "resumed from run/checkpoint-10 at step 10" resumed.log || fail "resumed.log"
  compare straight/metrics.jsonl run/metrics.jsonl 1e-5
  [ ! -e run/.tmp-checkpoint-20 ] || fail "the interrupted staging folder was not cleaned"
  # save_total_limit 2: checkpoint-15 and checkpoint-30 stay, checkpoint-10 goes.
  kept=$(cd run && echo checkpoint-*)
  [ "$kept" = "checkpoint-15 checkpoint-30" ] || fail "rotation left $kept"
  [ "$(latest_of run)" = checkpoint-30 ] || fail "run/latest is '$(latest_of run)'"
  echo "crash ok"
  ;;
sigterm)
  set_common 400
  train straight.log 1 0 --output_dir straight
  # wait_for_steps DIR N: until DIR/metrics.jsonl has N lines.
  wait_for_steps() {
    for _ in $(seq 600); do
      [ -e "$1/metrics.jsonl" ] && [ "$(wc -l <"$1/metrics.jsonl")" -ge "$2" ] && return 0
      sleep 0.02
    done
    fail "$1 did not reach $2 steps"
  }
  for world in 1 2; do
    $(launch $world) "$zero" train --config_overrides "$model" "${common[@]}" --per_device_train_batch_size $((8 / world)) \
      --deepspeed z0.json --output_dir "w$world" >"w$world.log" 2>&1 &
    job=$!
    wait_for_steps "w$world" 5
    target=$job
    if [ $world -gt 1 ]; then  # one rank only: the ranks must agree through the all-reduce
      for pid in $(children_of "$job"); do
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q " train " && target=$pid
      done
      [ "$target" != "$job" ] || { kill "$job"; fail "no rank process under the launcher $job"; }
    fi
    kill -TERM "$target"
    code=0
    wait "$job" || code=$?
    [ $code -eq 0 ] || { cat "w$world.log"; fail "world $world: exit $code after SIGTERM"; }
    grep -q "preempted" "w$world.log" || fail "w$world.log does not say preempted"
    tag=$(latest_of "w$world")
    step=${tag#checkpoint-}
    [ "$step" -lt 400 ] || fail "world $world: the signal came after the last step"
    train "w$world.resumed.log" 1 0 --output_dir "w$world" --resume_from_checkpoint latest
    grep -q "resumed from w$world/$tag at step $step" "w$world.resumed.log" || fail "w$world"
    compare straight/metrics.jsonl "w$world/metrics.jsonl" 1e-5 1 400
  done
  # A second signal while the checkpoint is written: exit at once with 128 + 15.
  env ZERO_TEST_SLOW_SAVE_MS=3000 "$zero" train --config_overrides "$model" "${common[@]}" --per_device_train_batch_size 8 \
    --deepspeed z0.json --output_dir twice >twice.log 2>&1 &
  job=$!
  wait_for_steps twice 5
  kill -TERM $job
  for _ in $(seq 300); do ls twice/.tmp-checkpoint-*/zero_shard-* >/dev/null 2>&1 && break; sleep 0.02; done
  kill -TERM $job
  code=0
  wait $job || code=$?
  [ $code -eq 143 ] || { cat twice.log; fail "second SIGTERM: exit $code, not 143"; }
  [ ! -e twice/latest ] || fail "a checkpoint was committed after the second signal"
  echo "sigterm ok"
  ;;
gloo)
  # The Gloo backend under torchrun's variables (MPIRUN is tests/comm/launch_ranks here): 2 ranks
  # stopped by the hook at step 20, resumed at 4 ranks; the same losses as mpirun's straight run.
  train straight.log 1 3 --output_dir straight
  gloo() { "${mpirun[@]}" --env torchrun --timeout 100 "$1" -- "${@:2}"; }
  ZERO_TEST_PREEMPT_AT_STEP=20 gloo 2 "$zero" train --config_overrides "$model" "${common[@]}" \
    --per_device_train_batch_size 4 --deepspeed z3.json --output_dir run >first.log 2>&1 ||
    { cat first.log; fail "first.log"; }
  grep -q "backend gloo, world size 2" first.log || fail "first.log: not on Gloo"
  gloo 4 "$zero" train --config_overrides "$model" "${common[@]}" --per_device_train_batch_size 2 \
    --deepspeed z1.json --output_dir run --resume_from_checkpoint latest >second.log 2>&1 ||
    { cat second.log; fail "second.log"; }
  grep -q "resumed from run/checkpoint-20 at step 20 (written by 2 rank(s)" second.log ||
    fail "second.log: $(grep resumed second.log)"
  compare straight/metrics.jsonl run/metrics.jsonl 1e-5
  echo "gloo ok"
  ;;
*)
  fail "unknown case '$case_name'"
  ;;
esac

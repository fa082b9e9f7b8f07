#!/usr/bin/env bash
# 7B to 16B on one GPU machine (issue 39): Llama shapes with random weights trained by `zero
# train` for a few steps, each beside its plan and, where the issue asks, beside DeepSpeed 0.19.
#
#   benchmarks/big_models.sh prepare [--zero BIN] [--output DIR]
#       Here (no GPU): DIR (default .device/big_models, git-ignored; a device run carries
#       `.device`) gets what the GPU machine lacks: wikitext-2.txt (WikiText-2's validation and
#       test splits, 522,593 tokens: shared/ holds no train split), tokenizer/ (a byte-level BPE
#       learned from it by `zero tokenizer train --vocab_size 32000`: 20,222 tokens, every id
#       below Llama-2's 32000 rows; about 4.6 characters a token, as a real 32k BPE gives), and
#       wheels/ (DeepSpeed 0.19.8 built from its sdist, and what it needs that the machine's
#       Python 3.12 lacks: pydantic, pydantic_core, annotated_types, typing_inspection, hjson).
#       PREPARE_PYTHON (default python3) builds the wheel: a Python with pip, setuptools and
#       wheel (here ~/.cache/zero/venv-ds/bin/python). Reaches the package registry.
#
#   benchmarks/big_models.sh run [--bundle FILE | --bin DIR] [--assets DIR] [--results DIR] [RUN...]
#       On the GPU machine: the runs named (all by default), each under 10 minutes:
#         7b          Llama-2-7B, ZeRO stage 0, no offload
#         7b-offload  Llama-2-7B, ZeRO-2 with offload_optimizer cpu (pinned), beside DeepSpeed
#         13b         Llama-2-13B, ZeRO-3 with offload_optimizer cpu ratio 0.5 (half the
#                     optimizer's states on the device, half in pinned host memory), beside
#                     DeepSpeed with the same ratio
#         16b         benchmarks/configs/llama-16b (16,187,909,120 parameters: Llama-2-13B's
#                     layer with 50 layers), ZeRO-3 with the bf16 parameters on NVMe and the
#                     optimizer's states split between device and pinned host memory (ratio
#                     RATIO_16B, 0.5, over sub-groups of one layer each, sub_group_size
#                     320,000,000: 25 layers' states on the device, the plan's choice for
#                     139 GiB + 128 GiB; at SCALE=tiny 4,200,000, the embedding alone)
#       Every run: bf16, AdamW with fp32 masters (lr 3e-4, 2 warmup steps, weight decay 0.1,
#       clipping 1), T 4096, micro-batch 1, 8 micro-batches a step (32,768 tokens). First the plan
#       (`zero estimate` with --gpu_memory 139GiB --cpu_memory 128GiB, the run's ds_config):
#       without recompute, then where the plan says the device needs it with the fewest first
#       blocks recomputed that fit (--recompute_blocks auto: the estimate's "recompute: the first
#       K of L blocks"; the run gets --recompute_blocks K); a run neither fits is refused with the
#       plan's words. DeepSpeed's side (Hugging Face's gradient checkpointing) recomputes every
#       block whenever zero's recomputes any. Then `zero train` with nvidia-smi sampling the device, then the DeepSpeed
#       side (benchmarks/big_models_deepspeed.py) on the same ids, shape and ds_config. 7b also
#       saves the model and loads it with transformers. Writes DIR/summary.md (one row a side:
#       tokens/s, TFLOP/s, losses, peaks against the plan, the step's time by part) and one log
#       per side into DIR, default benchmarks/results/big_models_<date>_<device>.
#       TFLOP/s = tokens/s x (6 N + 12 L C T) (PaLM's model FLOPs, N every parameter, no causal
#       halving, recompute not counted), MFU against 790 TFLOP/s (a large bf16 GEMM on an H200).
#
#   Options of run: --bundle FILE, the tar of scripts/gpu_check.sh build (default
#   .device/gpu_bundle.tar.xz; its bundle/bin/zero), or --bin DIR, a folder with zero (a build's
#   tools/). Environment: SCALE=tiny shrinks every shape (2 layers, width 128, T 256, 4
#   micro-batches, 3 steps) and runs both sides on the CPU (--use_cpu; DeepSpeed under
#   DS_ACCELERATOR=cpu): the dry run of this script. SIDES=zero|deepspeed|both (both),
#   STEPS (7b 8, others 4), DEEPSPEED_PYTHON (default: python3 with the wheels of --assets
#   installed into a temporary folder), GPU_MEMORY (139GiB), CPU_MEMORY (128GiB), RATIO_16B,
#   WORK (default .device/work: the final models and NVMe swap go there, on the checkout's disk
#   rather than a /tmp that may be memory; a run whose final model and swap exceed its free
#   space is refused).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
all_runs=(7b 7b-offload 13b 16b)
die() { echo "big_models: $*" >&2; exit 2; }
say() { echo "big_models: $*"; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

prepare() {
  local zero=$root/build/tools/zero output=$root/.device/big_models
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --zero) zero=${2:?--zero needs a program}; shift 2 ;;
      --output) output=${2:?--output needs a folder}; shift 2 ;;
      -h|--help) usage 0 ;;
      *) die "prepare: unknown argument '$1' (see --help)" ;;
    esac
  done
  local shared=${ZERO_SHARED_DATA:-$root/../shared/data}
  [[ -x $zero ]] || die "prepare: no zero at $zero (--zero)"
  [[ -f $shared/wikitext-2/wiki.valid.tokens ]] || die "prepare: no $shared/wikitext-2 (ZERO_SHARED_DATA)"
  mkdir -p "$output/wheels"
  cat "$shared/wikitext-2/wiki.valid.tokens" "$shared/wikitext-2/wiki.test.tokens" >"$output/wikitext-2.txt"
  "$zero" tokenizer train --vocab_size 32000 --output "$output/tokenizer" --files "$output/wikitext-2.txt"
  # DeepSpeed is published as an sdist: its wheel is built here (no ops compiled: they build
  # on first use there, with the machine's nvcc and torch); the rest as Python 3.12 wheels.
  local python=${PREPARE_PYTHON:-python3} work
  work=$(mktemp -d)
  "$python" -m pip download -q --no-deps --no-binary :all: -d "$work" deepspeed==0.19.8
  DS_BUILD_OPS=0 "$python" -m pip wheel -q --no-deps --no-build-isolation -w "$output/wheels" \
    "$work"/deepspeed-0.19.8.tar.gz
  rm -rf "$work"
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$output/wheels" pydantic==2.14.4 pydantic_core==2.50.5 \
    annotated-types==0.8.0 typing-inspection==0.4.5 hjson==3.1.0
  say "prepared $output ($(du -sh "$output" | cut -f1)): $(ls "$output" "$output/wheels" | tr '\n' ' ')"
}

# ---- run ----
# The run's shape: sets config (model folder), ds (the zero_optimization section), steps, sides.
shape_of() {
  local name=$1 nvme=$2
  steps=${STEPS:-4} sides=both
  case "$name" in
    7b) config=$root/configs/models/Llama-2-7b-hf zero_section='{"stage": 0}'
        steps=${STEPS:-8} sides=zero ;;
    7b-offload) config=$root/configs/models/Llama-2-7b-hf
        zero_section='{"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}}' ;;
    13b) config=$root/configs/models/Llama-2-13b-hf
        zero_section='{"stage": 3, "stage3_gather_16bit_weights_on_model_save": true, "offload_optimizer": {"device": "cpu", "pin_memory": true, "ratio": 0.5}}' ;;
    16b) config=$root/benchmarks/configs/llama-16b sides=zero
        # One layer (317,191,680 parameters) per sub-group, so the ratio moves the split a layer
        # (4.7 GiB of states) at a time: with the default 1e9 (three layers, 14.2 GiB) the split
        # misses the window where device and host both fit. max_in_cpu: DeepSpeed's default 1e9
        # elements (the embedding and two layers' shards cached in pinned memory, the rest on
        # NVMe). At SCALE=tiny the embedding (4.1M) is a sub-group of its own, the one the ratio
        # keeps on the device, and the only shard cached (the layers' are swapped).
        local sub_group=320000000 in_cpu=1000000000
        [[ ${SCALE:-} == tiny ]] && sub_group=4200000 in_cpu=4200000
        zero_section='{"stage": 3, "stage3_gather_16bit_weights_on_model_save": true, "sub_group_size": '"$sub_group"', "offload_optimizer": {"device": "cpu", "pin_memory": true, "ratio": '"${RATIO_16B:-0.5}"'}, "offload_param": {"device": "nvme", "nvme_path": "'"$nvme"'", "pin_memory": true, "max_in_cpu": '"$in_cpu"'}}' ;;
    *) die "run: unknown run '$name' (runs: ${all_runs[*]})" ;;
  esac
  [[ -z ${SIDES:-} || $SIDES == both ]] || sides=$([[ $sides == zero && $SIDES == deepspeed ]] && echo none || echo "$SIDES")
}

# tiny_config SOURCE OUT: SOURCE's config.json at 2 layers, width 128 (the vocabulary kept).
tiny_config() {
  mkdir -p "$2"
  python3 - "$1/config.json" "$2/config.json" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
config.update(hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=4)
json.dump(config, open(sys.argv[2], "w"), indent=2)
EOF
}

# The CUDA libraries of the machine's PyTorch wheels (nvidia-*) and toolkit, for the bundle's
# programs (scripts/bundle.sh --target-cuda leaves them to the target).
wheel_library_path() {
  python3 - <<'EOF' 2>/dev/null || true
import glob, os, site
folders = sorted({os.path.dirname(f) for s in site.getsitepackages()
                  for f in glob.glob(os.path.join(s, "nvidia", "**", "lib*.so*"), recursive=True)})
folders += [d for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
            if os.path.isdir(d)]
print(":".join(folders))
EOF
}

# median_tokens LOG: the median of zero's logged tokens/s after the first step.
median_tokens() {
  grep -a '^step ' "$1" | tail -n +2 | grep -ao '[0-9.]* tokens/s' | sed 's/ tokens.s//' | sort -g |
    awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print 0}'
}

# flops_per_token CONFIG_DIR T: 6 N + 12 L C T, N from zero estimate's count.
flops_per_token() {
  python3 - "$1/config.json" "$2" "$3" <<'EOF'
import json, sys
c, T, N = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
print(6 * N + 12 * c["num_hidden_layers"] * c["hidden_size"] * T)
EOF
}

# row CELL...: one row of the summary table.
row() {
  local line="|" cell
  for cell in "$@"; do line+=" $cell |"; done
  echo "$line" >>"$summary"
}

run_one() {
  local name=$1 work=$2
  local nvme=$work/nvme
  shape_of "$name" "$nvme"
  local block=4096 batch=1 accumulation=8 cpu_flags=() memory=(--gpu_memory "${GPU_MEMORY:-139GiB}" --cpu_memory "${CPU_MEMORY:-128GiB}")
  if [[ ${SCALE:-} == tiny ]]; then
    tiny_config "$config" "$work/model"
    config=$work/model block=256 accumulation=4 steps=${STEPS:-3} cpu_flags=(--use_cpu)
  fi
  mkdir -p "$nvme"
  printf '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "bf16": {"enabled": true}, "wall_clock_breakdown": true, "zero_optimization": %s}\n' \
    "$zero_section" >"$work/ds.json"
  local shape=(--block_size "$block" --per_device_train_batch_size "$batch" --gradient_accumulation_steps "$accumulation")
  local estimate=("$zero" estimate --model_name_or_path "$config" --deepspeed "$work/ds.json" "${shape[@]}" "${memory[@]}" "${cpu_flags[@]}")
  echo "==== $name: the plan"
  echo "+ ${estimate[*]}"
  local checkpointing=() status=0
  "${estimate[@]}" >"$work/plan.log" 2>&1 || status=$?
  if [[ $status -eq 0 ]] && ! grep -aq '^fits: yes' "$work/plan.log"; then
    "${estimate[@]}" --recompute_blocks auto >"$work/plan.log" 2>&1 || status=$?
    checkpointing=(--recompute_blocks "$(grep -aoEm1 'the first [0-9]+ of [0-9]+ blocks recomputed' "$work/plan.log" |
                                        awk '{print $3}' || true)")
  fi
  sed -n '1,/^configurations/p' "$work/plan.log" | sed '$d'
  if [[ $status -ne 0 ]] || ! grep -aq '^fits: yes' "$work/plan.log"; then
    local why
    why=$(grep -a -m1 -E '^fits: |error' "$work/plan.log" || echo "zero estimate exit $status")
    say "$name refused by the plan: $why"
    row "$name" zero "refused by the plan: ${why//|/\\|}" "" "" "" "" ""
    return 0
  fi
  local parameters device_plan host_plan fpt
  parameters=$(grep -aoEm1 '^zero estimate: [0-9]+ parameters' "$work/plan.log" | grep -oE '[0-9]+')
  device_plan=$(grep -aom1 'GPU rank: device peak reserved .* = [0-9.]* GiB' "$work/plan.log" | grep -o '[0-9.]* GiB$' || true)
  host_plan=$(grep -aom1 '^    train .*' "$work/plan.log" | awk '{print $2, $3}' || true)
  fpt=$(flops_per_token "$config" "$block" "$parameters")
  say "$name: $parameters parameters, ${checkpointing[*]:-no recompute}; plan: GPU $device_plan, host (train phase) $host_plan"
  local tokens=$((block * batch * accumulation))
  # The disk: zero train always writes the final model (as run_clm saves at the end): under this
  # DeepSpeed config with --bf16 the module's bf16 weights, 2 bytes a parameter, as Trainer saves
  # them (stage 3 with stage3_gather_16bit_weights_on_model_save), plus the plan's NVMe bytes;
  # the folder is emptied after each run.
  local nvme_bytes free needed
  nvme_bytes=$(grep -aom1 'host per rank: .*nvme [0-9.]* GiB' "$work/plan.log" | grep -o '[0-9.]* GiB$' |
               awk '{printf "%.0f", $1 * 1073741824}' || true)
  needed=$((2 * parameters + ${nvme_bytes:-0}))
  free=$(df -B1 --output=avail "$work" | tail -n 1 | tr -d ' ')
  say "$name: disk: the final model and the swap need $((needed / 1000000000)) GB in $work, $((free / 1000000000)) GB free"
  if [[ $free -lt $needed ]]; then
    row "$name" zero "refused: the disk ($((free / 1000000000)) GB free in $work, $((needed / 1000000000)) GB needed)" "" "" "" "" ""
    return 0
  fi
  if [[ $sides == zero || $sides == both ]]; then
    echo "==== $name: zero train"
    local sampler="" log=$results/$name.zero.log
    if command -v nvidia-smi >/dev/null && [[ ${SCALE:-} != tiny ]]; then
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$work/smi" 2>/dev/null &
      sampler=$!
    fi
    status=0
    "$zero" train --config_name "$config" --tokenizer_name "$assets/tokenizer" \
      --train_file "$assets/wikitext-2.txt" --do_train --bf16 --deepspeed "$work/ds.json" "${shape[@]}" \
      "${checkpointing[@]}" "${cpu_flags[@]}" --max_steps "$steps" --logging_steps 1 \
      --learning_rate 3e-4 --warmup_steps 2 --weight_decay 0.1 --seed 42 --save_strategy no \
      --include_tokens_per_second --no_plot --output_dir "$work/out" --overwrite_output_dir \
      >"$log" 2>&1 || status=$?
    [[ -n $sampler ]] && { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
    grep -a -E '^(step|time|memory|engine|model|train:|saved)' "$log" || tail -n 20 "$log"
    if [[ $status -ne 0 ]]; then
      row "$name" zero "failed (exit $status; $name.zero.log): $(tail -n 1 "$log" | cut -c1-200 | sed 's/|/\\|/g')" "" "" "" "" ""
    else
      local rate first last ledger smi host breakdown
      rate=$(median_tokens "$log" || true)
      first=$(grep -a '^step ' "$log" | head -n 1 | grep -ao 'loss [0-9.]*' | sed 's/loss //' || true)
      last=$(grep -a '^step ' "$log" | tail -n 1 | grep -ao 'loss [0-9.]*' | sed 's/loss //' || true)
      ledger=$(grep -a '^step ' "$log" | tail -n 1 | grep -ao 'memory peak MiB per rank [0-9.]*' | sed 's/.* //' || true)
      smi=$(sort -n "$work/smi" 2>/dev/null | tail -n 1 || true)
      host=$(grep -aom1 'memory phase train: .*of plan' "$log" | sed 's/memory phase train: process peak //; s/ (VmHWM, largest rank)//; s/ (baseline [0-9.]* MiB included)//' || true)
      breakdown=$(grep -a '^time (ms) per step' "$log" | tail -n 1 | sed 's/^time (ms) per step | //; s/ | /, /g' || true)
      row "$name" zero "passed" "$rate" "$(awk -v r="$rate" -v f="$fpt" 'BEGIN {printf "%.1f (MFU %.3f)", r * f / 1e12, r * f / 790e12}')" \
        "$first → $last" "ledger ${ledger:-?} MiB, nvidia-smi ${smi:-?} MiB; plan $device_plan (with allowance); host ${host:-?} (train phase plan $host_plan)" \
        "${breakdown:-?} ms; ${checkpointing[*]:-no recompute}"
      [[ $name == 7b ]] && check_saved "$work/out"
    fi
    rm -rf "$work/out" "$nvme"
  fi
  if [[ $sides == deepspeed || $sides == both ]]; then
    echo "==== $name: DeepSpeed"
    # The ids zero trained on: each line of the text encoded as run_clm tokenizes it, joined.
    "$zero" tokenizer encode --tokenizer_name "$assets/tokenizer" --lines --files "$assets/wikitext-2.txt" >"$work/ids.txt"
    local ds_log=$results/$name.deepspeed.log flags=()
    [[ ${#checkpointing[@]} -gt 0 ]] && flags=(--gradient_checkpointing)
    status=0
    (cd "$root/benchmarks" && RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=${MASTER_PORT:-29541} PYTHONUNBUFFERED=1 "$deepspeed_python" big_models_deepspeed.py \
      --deepspeed "$work/ds.json" --config "$config" --ids "$work/ids.txt" --block_size "$block" \
      --batch "$batch" --accumulation "$accumulation" --steps "$steps" "${flags[@]}") >"$ds_log" 2>&1 || status=$?
    grep -a -E '^(step|DEEPSPEED)' "$ds_log" || tail -n 30 "$ds_log"
    local line
    line=$(grep -a '^DEEPSPEED ' "$ds_log" || true)
    if [[ $status -ne 0 || -z $line ]]; then
      row "$name" DeepSpeed "failed (exit $status; $name.deepspeed.log): $(grep -a -m1 -E 'Error|error' "$ds_log" | cut -c1-200 | sed 's/|/\\|/g')" "" "" "" "" ""
    else
      local rate
      rate=$(grep -o 'tokens_per_s=[0-9]*' <<<"$line" | cut -d= -f2)
      row "$name" DeepSpeed "passed ($(cut -d' ' -f2 <<<"$line"), torch $(grep -o 'torch=[^ ]*' <<<"$line" | cut -d= -f2))" "$rate" \
        "$(awk -v r="$rate" -v f="$fpt" 'BEGIN {printf "%.1f (MFU %.3f)", r * f / 1e12, r * f / 790e12}')" \
        "$(grep -o 'losses=[^ ]*' <<<"$line" | cut -d= -f2 | sed 's/,/ → /')" \
        "device $(grep -o 'device_reserved_mib=[0-9]*' <<<"$line" | cut -d= -f2) MiB reserved, host $(grep -o 'host_peak_gb=[0-9.]*' <<<"$line" | cut -d= -f2) GB (VmHWM)" \
        "$(grep -o 's/step=[^ ]*' <<<"$line" | cut -d= -f2) s per step"
    fi
  fi
  echo "tokens per optimizer step: $tokens"
}

# check_saved DIR: the saved model (HF safetensors) loads in transformers, every tensor finite.
check_saved() {
  local python=${deepspeed_python:-python3}
  "$python" - "$1" <<'EOF' || row 7b transformers "failed: the saved model does not load" "" "" "" "" ""
import sys, time
import torch, transformers
start = time.perf_counter()
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32)
bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
assert not bad, f"nonfinite tensors: {bad[:3]}"
print(f"big_models: transformers {transformers.__version__} loads the saved model "
      f"({type(model).__name__}, {sum(p.numel() for p in model.parameters())} parameters, all "
      f"finite) in {time.perf_counter() - start:.1f} s")
EOF
}

run() {
  local bundle="" bin="" runs=()
  unpacked="" site=""
  trap 'rm -rf "${unpacked:-}" "${site:-}"' EXIT
  assets=$root/.device/big_models results=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --bundle) bundle=${2:?--bundle needs a file}; shift 2 ;;
      --bin) bin=${2:?--bin needs a folder}; shift 2 ;;
      --assets) assets=${2:?--assets needs a folder}; shift 2 ;;
      --results) results=${2:?--results needs a folder}; shift 2 ;;
      -h|--help) usage 0 ;;
      -*) die "run: unknown option '$1' (see --help)" ;;
      *) [[ " ${all_runs[*]} " == *" $1 "* ]] || die "run: unknown run '$1' (runs: ${all_runs[*]})"
         runs+=("$1"); shift ;;
    esac
  done
  [[ ${#runs[@]} -gt 0 ]] || runs=("${all_runs[@]}")
  [[ -z $bundle || -z $bin ]] || die "run: --bundle and --bin exclude each other"
  [[ -f $assets/wikitext-2.txt && -f $assets/tokenizer/vocab.json ]] ||
    die "run: no wikitext-2.txt and tokenizer/ in $assets (make them here: benchmarks/big_models.sh prepare)"
  if [[ -z $bin ]]; then
    bundle=${bundle:-$root/.device/gpu_bundle.tar.xz}
    [[ -f $bundle ]] || die "run: no bundle at $bundle (make it here: scripts/gpu_check.sh build)"
    unpacked=$(mktemp -d)
    tar -C "$unpacked" -xJf "$bundle"
    bin=$unpacked/bundle/bin
  fi
  zero=$bin/zero
  [[ -x $zero ]] || die "run: no zero in $bin"
  local library_path
  library_path=$(wheel_library_path)
  export LD_LIBRARY_PATH="${library_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [[ ${SCALE:-} == tiny ]]; then
    export DS_ACCELERATOR=cpu
  fi
  local device=cpu
  command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 &&
    device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr -c 'A-Za-z0-9\n' '_' | sed 's/_*$//')
  [[ $device != cpu || ${SCALE:-} == tiny ]] ||
    die "run: no CUDA device visible: these shapes need the GPU machine (SCALE=tiny for the dry run here)"
  deepspeed_python=${DEEPSPEED_PYTHON:-}
  if [[ -z $deepspeed_python ]] && compgen -G "$assets/wheels/*.whl" >/dev/null; then
    site=$(mktemp -d)
    if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
         "$assets"/wheels/*.whl; then
      export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    else
      say "the wheels of $assets/wheels do not install into $(python3 --version) (they are for the GPU machine's 3.12): DEEPSPEED_PYTHON=... names a Python with DeepSpeed"
    fi
  fi
  deepspeed_python=${deepspeed_python:-python3}
  results=${results:-$root/benchmarks/results/big_models_$(date -u +%Y%m%d_%H%M)_$device${SCALE:+_$SCALE}}
  mkdir -p "$results"
  summary=$results/summary.md
  {
    echo "# big_models $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n), ${SCALE:-full} scale"
    echo
    echo "- device: $([[ $device != cpu ]] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1 || echo 'the CPU (--use_cpu)')"
    echo "- zero: $zero ($(cat "$bin/../commit.txt" 2>/dev/null || git -C "$root" rev-parse --short HEAD))"
    echo "- DeepSpeed side: $("$deepspeed_python" -c 'import deepspeed, torch, transformers; print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")' 2>/dev/null || echo 'not importable')"
    echo
    echo "| run | side | status | tokens/s | TFLOP/s | loss first → last step | peaks against the plan | step's time by part |"
    echo "|---|---|---|---|---|---|---|---|"
  } >"$summary"
  local name start work
  for name in "${runs[@]}"; do
    start=$SECONDS
    mkdir -p "${WORK:-$root/.device/work}"
    work=$(mktemp -d "${WORK:-$root/.device/work}/big_models_$name.XXXX")
    run_one "$name" "$work" 2>&1 | tee "$results/$name.log"
    rm -rf "$work"
    say "$name: $((SECONDS - start)) s"
  done
  echo
  cat "$summary"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  -h|--help|"") usage 0 ;;
  *) die "unknown command '$1': prepare or run (see --help)" ;;
esac

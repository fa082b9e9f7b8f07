#!/usr/bin/env bash
# Beyond memory (issue 24): a GPT-2 whose model states exceed the machine's memory, trained by
# `zero train` with ZeRO-3, bf16, optimizer and parameters on NVMe (sub_group_size 1e8,
# stage3_max_live_parameters 1e8, bucket sizes 5e7, block 128, batch 1, one rank), then saved,
# consolidated, checked and resumed. Not a test: results go to docs/engine.md.
#   SHAPE=xl    n_embd=1600,n_layer=48,n_head=25 (1.56B parameters): STEPS (5) steps with
#               checkpoint-STEPS, `zero checkpoint consolidate`, a resume for one more step.
#   SHAPE=2.7b  n_embd=2560,n_layer=32,n_head=32 (2.65B): STEPS (2) steps and the final model, with
#               checkpoint-STEPS where the disk has room for it.
#   OVERRIDES=n_layer=2,...  any other shape (run as xl), to check the script in minutes.
# Each zero run is under /usr/bin/time -v. Reported: s/step per step (block x batch / the logged
# tokens_per_second), the swap GB/s of each log line beside fio's sequential O_DIRECT read and
# write on the same folder (when fio is installed), every phase's measured process peak (VmHWM)
# against its plan, the maximum resident size, save, consolidate and resume times. The saved model
# is checked: every tensor of model.safetensors equals the consolidated fp32 masters of the
# checkpoint (cast to its dtype), and transformers loads it (with the venv's python).
#
# Before anything runs, `zero train --dry_run` gives the plan's NVMe bytes; with the checkpoint
# (16 bytes a parameter: the shard's fp32 master and Adam's two moments, and its model.safetensors)
# and the models (4 bytes a parameter each) that is what the folder needs at its fullest, checked
# against `df`: the script says what it needs and exits 2 when the folder lacks it. Files are
# deleted once checked, so the fullest moment is the larger of training (swap, checkpoint, final
# model), consolidating (checkpoint, final and consolidated models) and resuming (swap,
# checkpoint, resumed model); the DeepSpeed side runs after zero's models and checkpoint are gone
# (its save_checkpoint is skipped where its swap, checkpoint and model would not fit). One run at
# a time.
#
# OFFLOAD=cpu runs the pinned-memory variant instead (offload_optimizer and offload_param
# `device: cpu`, pin_memory): no swap folder, no fio.
#
# DeepSpeed side by side (the issue's bar), when DEEPSPEED_VENV holds a python with torch 2,
# deepspeed 0.19, transformers and accelerate: after zero's runs, the same shape and the same
# ds.json (one run at a time, the same OMP_NUM_THREADS) through
# benchmarks/beyond_memory_deepspeed.py on DeepSpeed's CPU accelerator with gloo, the model made
# under zero.Init (HfDeepSpeedConfig): STEPS steps, then save_checkpoint and save_16bit_model
# timed, under /usr/bin/time -v. DeepSpeed's NVMe offload builds its async_io op, which needs
# libaio-dev: without it the DeepSpeed side is skipped with OFFLOAD=nvme (the script says so) and
# runs with OFFLOAD=cpu. A last table puts both sides together.
#
# Usage: benchmarks/beyond_memory.sh [build dir]   (env: SHAPE=xl|2.7b, OVERRIDES, STEPS,
#   WORK=<build>/beyond_memory (the NVMe folder and outputs), ZERO_SHARED_DATA=../shared/data,
#   ZERO_VENV=~/.cache/zero/venv, PRECISION=bf16|fp32, SUB_GROUP=1e8, LIVE=1e8, BUCKET=5e7,
#   OFFLOAD=nvme|cpu, DEEPSPEED_VENV (unset: zero only), OMP_NUM_THREADS (unset: the cores))
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
zero=$build/tools/zero
shared=$(realpath "${ZERO_SHARED_DATA:-../shared/data}")
venv_python=${ZERO_VENV:-$HOME/.cache/zero/venv}/bin/python
work=${WORK:-$build/beyond_memory}
shape=${SHAPE:-xl} precision=${PRECISION:-bf16}
sub_group=${SUB_GROUP:-1e8} live=${LIVE:-1e8} bucket=${BUCKET:-5e7} block=128 batch=1
offload=${OFFLOAD:-nvme} ds_python=${DEEPSPEED_VENV:+$DEEPSPEED_VENV/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
say() { echo "beyond_memory: $*"; }
die() { echo "beyond_memory: $*" >&2; exit 2; }
[ -x "$zero" ] || die "$zero not built (ninja -C $build zero)"
[ -f "$shared/gpt2/tokenizer.json" ] || die "no GPT-2 tokenizer at $shared/gpt2 (ZERO_SHARED_DATA)"
corpus=$shared/tinyshakespeare/input.txt
[ -f "$corpus" ] || die "no corpus at $corpus (ZERO_SHARED_DATA)"
case "$shape" in
  xl) overrides=n_embd=1600,n_layer=48,n_head=25,n_positions=1024 steps=${STEPS:-5} flow=resume ;;
  2.7b) overrides=n_embd=2560,n_layer=32,n_head=32,n_positions=1024 steps=${STEPS:-2} flow=final ;;
  *) die "SHAPE is xl or 2.7b, got '$shape' (OVERRIDES=... for another shape)" ;;
esac
[ -n "${OVERRIDES:-}" ] && overrides=$OVERRIDES shape=custom
# With nvme, DeepSpeed 0.19 needs two settings zero reads too: its parameter swap buffers hold the
# largest tensor (buffer_size, default 1e8 elements: the 2.7B shape's 128.7M-element embedding
# does not fit), and stage3_max_reuse_distance 0 (with its default it fails at step 2, "Not enough
# buffers 0 for swapping 1", DeepSpeed#3062). zero keeps a gathered parameter no longer either way.
largest=$(python3 -c "
o = dict(kv.split('=') for kv in '$overrides'.split(','))
print(max(100_000_000, 50257 * int(o['n_embd'])))")
case "$offload" in
  nvme) place='"device": "nvme", "nvme_path": "'$work/nvme'", "pin_memory": false'
    param_place="$place, \"buffer_size\": $largest" reuse='"stage3_max_reuse_distance": 0,' ;;
  cpu) place='"device": "cpu", "pin_memory": true' param_place=$place reuse= ;;
  *) die "OFFLOAD is nvme or cpu, got '$offload'" ;;
esac
if [ -n "$ds_python" ]; then
  [ -x "$ds_python" ] && "$ds_python" -c "import deepspeed, transformers, accelerate" &>/dev/null ||
    die "DEEPSPEED_VENV=$DEEPSPEED_VENV: no python there with deepspeed, transformers and accelerate"
  if [ "$offload" = nvme ] && ! dpkg -s libaio-dev >/dev/null 2>&1; then
    say "DeepSpeed side skipped: its NVMe offload builds the async_io op, which needs libaio-dev" \
      "(not installed); OFFLOAD=cpu compares the pinned-memory variant"
    ds_python=
  fi
fi
mkdir -p "$work"
rm -rf "${work:?}/nvme" "$work/run" "$work/consolidated" "$work/resumed"
mkdir -p "$work/nvme"
half=$([ "$precision" = bf16 ] && echo '"bf16": {"enabled": true},' || true)
cat >"$work/ds.json" <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", $half
 "zero_optimization": {"stage": 3, "sub_group_size": $sub_group,
   "stage3_max_live_parameters": $live, "stage3_prefetch_bucket_size": $bucket,
   "reduce_bucket_size": $bucket, "stage3_param_persistence_threshold": 0, $reuse
   "offload_optimizer": {$place},
   "offload_param": {$param_place}}}
EOF
common=(--train_file "$corpus" --tokenizer_name "$shared/gpt2" --config_overrides "$overrides"
  --block_size $block --per_device_train_batch_size $batch --do_train True --learning_rate 5e-5
  --logging_steps 1 --seed 42 --no_plot True --deepspeed "$work/ds.json")

# The plan and the disk.
"$zero" train "${common[@]}" --max_steps "$steps" --output_dir "$work/run" --dry_run \
  >"$work/plan.log" 2>&1 || { cat "$work/plan.log"; die "the dry run failed"; }
parameters=$(python3 -c "
o = dict(kv.split('=') for kv in '$overrides'.split(','))
C, L, T, V = int(o['n_embd']), int(o['n_layer']), int(o.get('n_positions', 1024)), 50257
print(V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C)")
nvme=$(awk '/^    train / { for (i = 1; i <= NF; i++) if ($i == "nvme") { v = $(i + 1); u = $(i + 2) } }
  END { sub(/\)/, "", u); f = (u ~ /GiB/) ? 1073741824 : (u ~ /MiB/) ? 1048576 : 1; printf "%.0f\n", v * f }' \
  "$work/plan.log")
[ "${nvme:-0}" -gt 0 ] || [ "$offload" = cpu ] ||
  { cat "$work/plan.log"; die "no planned nvme bytes in the dry run"; }
nvme=${nvme:-0}
checkpoint=$((16 * parameters)) model=$((4 * parameters))
free=$(df -B1 --output=avail "$work" | tail -1 | tr -d ' ')
# The fullest moments: training (swap, checkpoint, final model; resuming is the same with the
# resumed model) and consolidating (checkpoint, final and consolidated models).
with_checkpoint=$(( nvme + checkpoint + model > checkpoint + 2 * model ?
                    nvme + checkpoint + model : checkpoint + 2 * model ))
without=$((nvme + model))
# DeepSpeed's: its swap (taken as zero's plan), its checkpoint (12 bytes a parameter) and the
# 16-bit model.
ds_checkpoint_flags=()
if [ $((nvme + 12 * parameters + 2 * parameters)) -gt "$free" ]; then
  ds_checkpoint_flags=(--no_checkpoint)
fi
gb() { python3 -c "print(f'{$1 / 1e9:.1f} GB')"; }
say "shape $shape ($overrides, $parameters parameters), $precision, $steps steps, offload" \
  "$offload, $OMP_NUM_THREADS threads, folder $work"
say "needs: swap $(gb "$nvme") (the plan's nvme), checkpoint $(gb $checkpoint), models $(gb $model)" \
  "each: $(gb $with_checkpoint) at the fullest with the checkpoint, $(gb $without) without;" \
  "$(gb "$free") free ($(df -h --output=source,target "$work" | tail -1 | tr -s ' '))"
save_flags=(--save_steps "$steps")
if [ "$free" -lt "$with_checkpoint" ]; then
  [ "$flow" = final ] && [ "$free" -ge "$without" ] ||
    die "not enough disk: $(gb $with_checkpoint) needed in $work, $(gb "$free") free (WORK=...)"
  say "no room for the checkpoint: the final model only, loaded with transformers, not checked" \
    "against the masters"
  save_flags=(--save_strategy no) flow=final-only
fi
grep -E "^memory plan|^    (load|train|checkpoint|final save) " "$work/plan.log" || true

if [ "$offload" = cpu ]; then
  say "offload cpu: no swap, no fio"
elif command -v fio >/dev/null; then
  for rw in write read; do
    fio --name=seq --directory="$work/nvme" --rw=$rw --bs=1M --size=1G --direct=1 \
      --ioengine=libaio --iodepth=8 --output-format=terse --terse-version=3 >"$work/fio.$rw" 2>&1 ||
      { say "fio $rw failed: $(tail -1 "$work/fio.$rw")"; continue; }
    awk -F';' -v rw=$rw '{ kb = (rw == "read") ? $7 : $48; printf "beyond_memory: fio %s %.2f GB/s\n", rw, kb * 1024 / 1e9 }' \
      "$work/fio.$rw"
  done
  rm -f "$work/nvme"/seq.*
else
  say "fio is not installed: no reference for the swap GB/s"
fi

# timed NAME COMMAND...: COMMAND under /usr/bin/time -v, its output in NAME.log; prints its time,
# maximum resident size, phase peaks against their plans, and swap GB/s.
timed() {
  local name=$1
  shift
  local start=$SECONDS
  /usr/bin/time -v "$@" >"$work/$name.log" 2>&1 || { tail -30 "$work/$name.log"; die "$name failed"; }
  say "$name: $((SECONDS - start)) s, maximum resident" \
    "$(awk '/Maximum resident/ { printf "%.2f GB", $NF / 1e6 }' "$work/$name.log")"
  grep -E "^memory phase" "$work/$name.log" || true
  grep -oE "swap read [0-9.]+ GB/s, write [0-9.]+ GB/s" "$work/$name.log" | sed 's/^/  /' | sort | uniq -c || true
}
step_times() {  # OUT FIRST: s/step of each step after FIRST logged in OUT/metrics.jsonl
  python3 - "$1" "$2" $block $batch <<'EOF'
import json, sys
out, first, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * int(sys.argv[4])
rows = [json.loads(l) for l in open(out + "/metrics.jsonl") if "tokens_per_second" in l]
print("beyond_memory: s/step", " ".join(f"{r['step']}: {tokens / r['tokens_per_second']:.1f}"
                                        for r in rows if r.get("tokens_per_second") and r["step"] > first))
EOF
}

timed train "$zero" train "${common[@]}" --max_steps "$steps" "${save_flags[@]}" --output_dir "$work/run"
step_times "$work/run" 0
[ -f "$work/run/model.safetensors" ] || [ -f "$work/run/model.safetensors.index.json" ] ||
  die "no model in $work/run"
if [ "$flow" != final-only ]; then
  timed consolidate "$zero" checkpoint consolidate "$work/run/checkpoint-$steps" "$work/consolidated"
  if [ -x "$venv_python" ]; then
    "$venv_python" - "$work/run" "$work/consolidated" <<'EOF' || mismatch=1
import json, os, sys
import torch
from safetensors import safe_open
def tensors(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    return {name: (os.path.join(folder, f)) for f in files
            for name in safe_open(os.path.join(folder, f), "pt").keys()}
saved, masters = tensors(sys.argv[1]), tensors(sys.argv[2])
assert set(saved) == set(masters), sorted(set(saved) ^ set(masters))
differ, rounded = [], 0
for name in sorted(saved):
    a = safe_open(saved[name], "pt").get_tensor(name)
    b = safe_open(masters[name], "pt").get_tensor(name)
    if not torch.equal(a, b.to(a.dtype)):
        differ.append(name)
        rounded += torch.equal(a, b.to(torch.bfloat16).to(a.dtype))
from transformers import GPT2LMHeadModel
model = GPT2LMHeadModel.from_pretrained(sys.argv[1])
print(f"beyond_memory: transformers loads it ({sum(p.numel() for p in model.parameters())} parameters)")
if differ:
    print(f"beyond_memory: MISMATCH: {len(differ)} of {len(saved)} tensors of the saved model differ "
          f"from the checkpoint's fp32 masters ({differ[0]}, ...); {rounded} of them equal the "
          "masters rounded to bf16 (the compute weights)")
    sys.exit(1)
print(f"beyond_memory: the saved model's {len(saved)} tensors equal the checkpoint's fp32 masters")
EOF
  else
    say "no venv python at $venv_python: the saved model is not checked against the masters"
  fi
  rm -rf "$work/consolidated"
elif [ -x "$venv_python" ]; then
  # No checkpoint to compare with: transformers loads the final model, every tensor finite.
  "$venv_python" - "$work/run" <<'EOF' || mismatch=1
import sys
import torch
from transformers import GPT2LMHeadModel
model = GPT2LMHeadModel.from_pretrained(sys.argv[1])
bad = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
assert not bad, f"nonfinite tensors in the saved model: {bad[:3]}"
print(f"beyond_memory: transformers loads it ({sum(p.numel() for p in model.parameters())} "
      "parameters, all finite); not compared with masters (no checkpoint)")
EOF
else
  say "no venv python at $venv_python: the final model is not loaded with transformers"
fi
# The final model is checked: its tensors go (the resume writes its own), the rest stays.
rm -f "$work/run"/model*.safetensors*
if [ "$flow" = resume ]; then
  rm -rf "$work/nvme" && mkdir -p "$work/nvme"
  timed resume "$zero" train "${common[@]}" --max_steps $((steps + 1)) --save_strategy no \
    --resume_from_checkpoint "$work/run/checkpoint-$steps" --output_dir "$work/resumed"
  grep -q "resumed from" "$work/resume.log" || die "the resume did not resume"
  step_times "$work/resumed" "$steps"
fi

# DeepSpeed: the same shape and ds.json, then both sides in one table.
if [ -n "$ds_python" ]; then
  # zero's checkpoint and models make room (its logs and metrics.jsonl stay for the table).
  rm -rf "$work"/run/checkpoint-* "$work"/resumed/*.safetensors*
  rm -rf "$work/deepspeed" && mkdir -p "$work/deepspeed"
  [ ${#ds_checkpoint_flags[@]} -eq 0 ] ||
    say "DeepSpeed: save_checkpoint skipped (its swap, checkpoint and model would not fit)"
  [ "$offload" = nvme ] && rm -rf "$work/nvme" && mkdir -p "$work/nvme"
  export DS_ACCELERATOR=cpu RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
  export MASTER_PORT=${MASTER_PORT:-29533}
  timed deepspeed "$ds_python" benchmarks/beyond_memory_deepspeed.py --deepspeed "$work/ds.json" \
    --train_file "$corpus" --tokenizer "$shared/gpt2" --overrides "$overrides" \
    --block_size $block --batch $batch --steps "$steps" --output_dir "$work/deepspeed" \
    "${ds_checkpoint_flags[@]}"
  grep -E "^step |^DEEPSPEED" "$work/deepspeed.log" | sed 's/^/  /'
  python3 - "$work" $block $batch "$(git rev-parse --short HEAD 2>/dev/null)" <<'PY'
import json, re, statistics, sys
work, tokens, commit = sys.argv[1], int(sys.argv[2]) * int(sys.argv[3]), sys.argv[4]
def text(name):
    return open(f"{work}/{name}.log").read()
def max_rss(log):
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", log).group(1)) * 1024 / 1e9
train, ds = text("train"), text("deepspeed")
zero_steps = [tokens / r["tokens_per_second"] for r in map(json.loads, open(f"{work}/run/metrics.jsonl"))
              if r.get("tokens_per_second")]
checkpoint = re.search(r"saved \S*checkpoint-\d+ in ([\d.]+) s", train)
final = re.search(r"\(Hugging Face \w+\) in ([\d.]+) s", train)
line = re.search(r"^DEEPSPEED (\S+) s/step=(\S+) .*checkpoint_s=(\S+) model16_s=(\S+)", ds, re.M)
ds_steps = [float(t) for t in line.group(2).split(",")]
def later(times):  # the median after the first step (warm-up)
    return statistics.median(times[1:] if len(times) > 1 else times)
z, d = later(zero_steps), later(ds_steps)
def row(name, steps, rss, checkpoint_s, model_s):
    listed = ", ".join(f"{t:.2f}" for t in steps)
    print(f"  | {name} | {later(steps):.2f} ({listed}) | {rss:.2f} GB | {checkpoint_s} | {model_s} |")
print(f"beyond_memory: side by side (zero {commit}, {line.group(1)}; s/step: median after step 1)")
print("  | | s/step (each step) | max resident | checkpoint save | model save |")
print("  |---|---|---|---|---|")
row("zero", zero_steps, max_rss(train), f"{checkpoint.group(1)} s" if checkpoint else "-",
    f"{final.group(1)} s (fp32 masters)" if final else "-")
row("DeepSpeed", ds_steps, max_rss(ds),
    f"{float(line.group(3)):.2f} s" if line.group(3) != "nan" else "- (skipped)",
    f"{float(line.group(4)):.2f} s (save_16bit_model)")
print(f"beyond_memory: zero's s/step / DeepSpeed's {z / d:.2f} (target <= 0.8), max resident "
      f"{max_rss(train) / max_rss(ds):.2f} (target <= 1)")
PY
fi
[ "${mismatch:-0}" = 0 ] || die "done, but the saved model is not the checkpoint's fp32 masters (above)"
say "done"

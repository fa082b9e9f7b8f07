#!/usr/bin/env bash
# Offload step time, side by side in one run: a GPT-2 of 67.0M parameters (n_layer 4, n_embd 768,
# n_head 12, GPT-2 vocabulary 50257, block 128, fp32, 2 blocks per rank per step) trained at 2
# ranks with ZeRO-3 by `zero train` (a) without offload, (b) with offload_optimizer cpu, (c) with
# offload_optimizer + offload_param cpu, (d) with offload_optimizer nvme (a folder under the build
# directory, on its disk), and by DeepSpeed ZeRO-3 with (e1) offload_optimizer cpu and (e2)
# offload_optimizer + offload_param cpu (benchmarks/offload_bench_deepspeed.py: a Hugging Face
# GPT2LMHeadModel of the same shape, deepspeed.initialize, gloo; DeepSpeed runs DeepSpeedCPUAdam).
# Same corpus (tiny shakespeare with the GPT-2 tokenizer from shared/data; the Debian fortunes
# when tiny shakespeare is absent), same shapes, batch, dtype (fp32: what DeepSpeed runs on CPU
# here), AdamW lr 5e-5, weight decay 0, clipping 1; not the same initial weights.
#
# Each configuration trains WARMUP + STEPS steps; the table gives the median (and min/max) of the
# last STEPS step times. zero: a step's time is its logging window (--logging_steps 1: global
# tokens / tokens_per_second in metrics.jsonl, rank 0's clock, the step and the log's all-gather).
# DeepSpeed: forward + backward + engine.step() after a barrier, the slower rank's time.
# "ledger peak" is what `zero train` prints as "memory peak MiB per rank": the ledger's device +
# host space peaks (on the CPU backend the device space is host memory labelled as device; the
# offloaded states are under host_pinned, and nvme, which that figure leaves out). "max RSS" is
# each rank's peak resident set (/usr/bin/time for zero, getrusage for DeepSpeed), the one memory
# figure both sides have. The whole sequence runs ROUNDS times, interleaved (a slow phase of the
# shared machine falls on every configuration), and the timed steps of all rounds are pooled.
#
# Usage: benchmarks/offload_bench.sh [build dir]   (env: WARMUP=2 STEPS=5 ROUNDS=2,
#   ZERO_SHARED_DATA=../shared/data, ZERO_VENV=~/.cache/zero/venv). Needs tools/zero built and
#   the venv with deepspeed + transformers (scripts/setup_venv.sh); OMP_NUM_THREADS=1 per rank.
#
# DeepSpeed 0.19.8 on Debian's torch 1.13 needs a few torch-2 pieces (module hooks with kwargs,
# torch.compiler, Gloo's all-gather into a tensor and reduce-scatter, setup_context Functions, a
# gradient hook that outlives its node, ...): the driver supplies them (see its functions), and
# checks the result: rank 0 retrains the first 3 steps with plain torch AdamW on the same initial
# weights and batches, and the run fails unless the losses agree within 1e-3 (the CHECK lines;
# measured 9.5e-7). Without the gradient-hook fix DeepSpeed trained without its gradients. Debian's `python -m torch.distributed.run` fails under Python 3.11
# (Std.from_str returns None: "'NoneType' object has no attribute 'get'"), so this script starts
# the two ranks itself with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, as that launcher would.
#
# Measured (2026-11-23, this 2-core VM, load average 0.5 at the start and 2.2 at the end: the
# benchmark's own ranks; 306 s), `bash benchmarks/offload_bench.sh`, median s/step (min-max),
# ledger peak MiB/rank, max RSS MiB rank 0/1:
#   (a) zero ZeRO-3, no offload                 1.29 (1.25-1.89)  1589.3  2495/1688
#   (b) zero ZeRO-3, optimizer cpu              1.32 (1.29-1.85)  1205.4  2751/1944
#   (c) zero ZeRO-3, optimizer + param cpu      1.32 (1.27-2.02)  1077.5  2751/1944
#   (d) zero ZeRO-3, optimizer nvme             2.21 (2.16-2.42)  1205.4  2751/1945
#   (e1) DeepSpeed ZeRO-3, optimizer cpu        2.61 (2.40-2.78)       -  2571/2553
#   (e2) DeepSpeed ZeRO-3, optimizer+param cpu  2.53 (2.34-2.82)       -  2579/2547
# DeepSpeed ran DeepSpeedCPUAdam; its forward/backward/step 0.83/1.72/0.11 s; CHECK 9.5e-7.
# Under load 3.8-4.9 the same gave 2.09, 1.97, 1.35, 2.32, 2.48, 2.91 s/step; under load 5-6
# 1.75, 1.82, 2.23, 2.79, 4.19, 5.08. More in docs/engine.md, "Offload".
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
zero=$build/tools/zero
venv_python=${ZERO_VENV:-$HOME/.cache/zero/venv}/bin/python
shared=${ZERO_SHARED_DATA:-../shared/data}
warmup=${WARMUP:-2} steps=${STEPS:-5} rounds=${ROUNDS:-2}
[ -x "$zero" ] || { echo "offload_bench: $zero not built (ninja -C $build zero)" >&2; exit 2; }
[ -x "$venv_python" ] || { echo "offload_bench: no venv python at $venv_python" >&2; exit 2; }
tokenizer=$shared/gpt2
[ -f "$tokenizer/tokenizer.json" ] || {
  echo "offload_bench: the GPT-2 tokenizer $tokenizer/tokenizer.json is missing (ZERO_SHARED_DATA)" >&2
  exit 2
}
tokenizer=$(realpath "$tokenizer")
if [ -f "$shared/tinyshakespeare/input.txt" ]; then
  corpus=$(realpath "$shared/tinyshakespeare/input.txt")
else  # the demo's corpus, one file (the DeepSpeed side reads a single text file)
  corpus=$build/offload_bench_fortunes.txt
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort | xargs cat >"$corpus"
fi

n_layer=4 n_embd=768 n_head=12 block=128 batch=2
work=$build/offload_bench
unset OPENBLAS_CORETYPE
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive DS_BUILD_OPS=0
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)

# REPORT_ONLY=1: print the table of the last run's outputs again.
if [ "${REPORT_ONLY:-0}" != 1 ]; then
rm -rf "$work"
mkdir -p "$work/nvme"

# The DeepSpeed configs `zero train` reads ("auto" filled from its flags).
config() {  # name, offload JSON fragment
  cat >"$work/$1.json" <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                           "weight_decay": "auto"}},
 "fp16": {"enabled": false}, "bf16": {"enabled": false},
 "zero_optimization": {"stage": 3, "overlap_comm": true, "contiguous_gradients": true$2},
 "steps_per_print": 1000000}
EOF
}
config a ''
config b ', "offload_optimizer": {"device": "cpu", "pin_memory": true}'
config c ', "offload_optimizer": {"device": "cpu", "pin_memory": true},
  "offload_param": {"device": "cpu", "pin_memory": true}'
config d ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work/nvme\",
  \"pin_memory\": true, \"buffer_count\": 4}"

run_zero() {  # config name, round
  local out=$work/$1.$2
  # shellcheck disable=SC2016 # $0, $@ and the rank expand in each rank's shell
  "${mpirun[@]}" bash -c 'exec /usr/bin/time -f "MAXRSS_KB %M" -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$out" "$zero" train --train_file "$corpus" --tokenizer_name "$tokenizer" \
    --config_overrides "n_layer=$n_layer,n_embd=$n_embd,n_head=$n_head,n_positions=$block,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0" \
    --block_size $block --do_train True --per_device_train_batch_size $batch \
    --max_steps $((warmup + steps)) --logging_steps 1 --learning_rate 5e-5 --weight_decay 0 \
    --lr_scheduler_type constant --save_strategy no --no_plot True --seed 42 \
    --deepspeed "$work/$1.json" --output_dir "$out" --overwrite_output_dir True >"$out.log" 2>&1 || {
    echo "offload_bench: zero train ($1) failed; the end of $out.log:" >&2
    tail -20 "$out.log" >&2
    exit 1
  }
}

run_deepspeed() {  # name, round, extra driver flags...
  local name=$1 round=$2 out=$work/$1.$2
  shift 2
  local port=$((29500 + RANDOM % 2000)) pids=() rank
  for rank in 1 0; do
    RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port "$venv_python" benchmarks/offload_bench_deepspeed.py \
      --train_file "$corpus" --tokenizer "$tokenizer" --n_layer $n_layer --n_embd $n_embd \
      --n_head $n_head --block_size $block --batch $batch --warmup "$warmup" --steps "$steps" \
      --label "$name" "$@" >"$out.log.$rank" 2>&1 &
    pids+=($!)
  done
  local failed=0 pid
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [ $failed = 1 ] || ! grep -q '^RESULT' "$out.log.0"; then
    echo "offload_bench: DeepSpeed ($name) failed; the end of $out.log.0:" >&2
    grep -v INFO "$out.log.0" | tail -20 >&2
    exit 1
  fi
}

echo "offload_bench: $(getconf _NPROCESSORS_ONLN) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start;" \
  "corpus $corpus; nvme folder $work/nvme ($(df -T "$work/nvme" | awk 'NR==2 {print $2}'))"
start=$(date +%s)
for round in $(seq 1 "$rounds"); do
  for c in a b c d; do run_zero $c "$round"; done
  check=$([ "$round" = 1 ] && echo 3 || echo 0)  # the torch check once per configuration
  run_deepspeed e1 "$round" --check_steps "$check"
  run_deepspeed e2 "$round" --offload_param --check_steps "$check"
done
echo "offload_bench: $(( $(date +%s) - start )) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
fi

python3 - "$work" "$rounds" "$warmup" "$batch" "$block" <<'EOF'
import json, re, statistics, sys
from pathlib import Path
work, rounds, warmup, batch, block = Path(sys.argv[1]), *map(int, sys.argv[2:])
names = {"a": "zero ZeRO-3, no offload", "b": "zero ZeRO-3, optimizer cpu",
         "c": "zero ZeRO-3, optimizer + param cpu", "d": "zero ZeRO-3, optimizer nvme",
         "e1": "DeepSpeed ZeRO-3, optimizer cpu", "e2": "DeepSpeed ZeRO-3, optimizer + param cpu"}
checks = []
print(f"{'configuration':42} {'median s/step':>13} {'min':>6} {'max':>6}  {'ledger peak MiB/rank':>20}  max RSS MiB/rank  last loss")
for key, title in names.items():
    times, peak, rss, loss, extra = [], "-", "-", "-", ""
    for r in range(1, rounds + 1):
        if key.startswith("e"):
            line = next(l for l in (work / f"{key}.{r}.log.0").read_text().splitlines() if l.startswith("RESULT"))
            fields = line.split()
            times += [float(t) for f in fields if f.startswith("times=") for t in f[6:].split(",")]
            rss = fields[6]
            extra = " ".join(f for f in fields[7:] if f.startswith(("optimizer=", "fwd/bwd/step=")))
            losses = [l for l in (work / f"{key}.{r}.log.0").read_text().splitlines() if l.startswith("step ")]
            loss = losses[-1].split()[3]
        else:
            rows = [json.loads(l) for l in (work / f"{key}.{r}" / "metrics.jsonl").read_text().splitlines()]
            rows = [row for row in rows if "tokens_per_second" in row]
            times += [batch * 2 * block / row["tokens_per_second"] for row in rows if row["step"] > warmup]
            loss = f"{rows[-1]['loss']:.4f}"
            peaks = re.findall(r"memory peak MiB per rank (\S+)", (work / f"{key}.{r}.log").read_text())
            peak = peaks[-1]
            kib = [int(re.search(r"MAXRSS_KB (\d+)", p.read_text()).group(1))
                   for p in sorted(work.glob(f"{key}.{r}.rss.*"))]
            rss = "/".join(f"{k / 1024:.0f}" for k in kib)
    checks += [l for r in range(1, rounds + 1) if key.startswith("e")
               for l in (work / f"{key}.{r}.log.0").read_text().splitlines() if l.startswith("CHECK")]
    print(f"{title:42} {statistics.median(times):13.3f} {min(times):6.3f} {max(times):6.3f}  {peak:>20}  {rss:>16}  {loss} {extra}")
print(f"steps: {warmup} warm-up, then the timed ones; last loss: zero's is the mean over ranks, "
      "DeepSpeed's rank 0's (different initial weights and batch order)")
print("\n".join(checks))
EOF

#!/usr/bin/env bash
# The main job: installs what it needs and is missing, builds what it runs (`zero` and comm_bench:
# scripts/setup.sh and scripts/build.sh with --main-job; scripts/test.sh adds the rest), and runs
# `zero train` on 2 MPI ranks: a small GPT-2 trained from scratch with ZeRO-3 on the Debian
# `fortunes` corpus, as Hugging Face's run_clm.py would be run (same flags, DeepSpeed config with
# "auto" values): a byte-level BPE learned on the corpus, the loss every 25 steps, evaluation
# (loss, perplexity) every 100, samples, and a Hugging Face checkpoint, results files and loss.svg
# in build/demo_output. Then the collective bandwidth benchmark.
# Extra arguments go to `zero train` (e.g. --max_steps 50); ZERO_DEMO_BENCH=0 skips the benchmark.
# ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py): installs, builds and runs nothing; one `zero
# train` parses the whole command line (this script's flags and the extra ones) and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
parse_only=${ZERO_PARSE_ONLY:-0}
build=${ZERO_BUILD_DIR:-build}
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
if [ "$parse_only" = 1 ]; then
  mpirun=()
else
  bash scripts/setup.sh --main-job
  bash scripts/build.sh --main-job
fi
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
# Two ranks share the machine's cores: one OpenMP thread each, no spinning against each other.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# The corpus: every fortune file (the *.dat indexes and the *.u8 links left out), one example per
# line as run_clm reads text files; the first 5% of the lines validate.
corpus=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort | paste -sd, -)

"${mpirun[@]}" "$build/tools/zero" train \
  --train_file "$corpus" \
  --config_overrides n_layer=4,n_embd=192,n_head=4,n_positions=128,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0 \
  --tokenizer_vocab_size 2048 --block_size 128 \
  --do_train True --do_eval True --eval_strategy steps --eval_steps 100 --max_eval_samples 256 \
  --per_device_train_batch_size 8 --per_device_eval_batch_size 8 \
  --max_steps 300 --learning_rate 3e-3 --warmup_steps 30 --weight_decay 0.01 --adam_beta2 0.95 \
  --logging_steps 25 --save_steps 100 --save_total_limit 1 --seed 42 \
  --num_samples 2 --sample_tokens 64 \
  --deepspeed configs/ds_zero3_demo.json \
  --output_dir "$build/demo_output" --overwrite_output_dir True \
  "$@"

if [ "${ZERO_DEMO_BENCH:-1}" = 1 ] && [ "$parse_only" != 1 ]; then
  "${mpirun[@]}" "$build/benchmarks/comm_bench" --max_bytes $((16 << 20))
fi

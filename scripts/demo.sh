#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains a small GPT-2 with ZeRO-3 on 2 MPI
# ranks on the Debian `fortunes` corpus (examples/gpt2_zero3.cc): tokenizer, training with the
# loss every 10 steps, validation loss before and after, the memory ledger, samples, and a Hugging
# Face checkpoint in build/demo_output. Then the collective bandwidth benchmark.
# Extra arguments go to gpt2_zero3 (e.g. --max_steps 50); ZERO_DEMO_BENCH=0 skips the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build=${ZERO_BUILD_DIR:-build}
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
# Two ranks share the machine's cores: one OpenMP thread each, no spinning against each other.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

"${mpirun[@]}" "$build/examples/gpt2_zero3" \
  --deepspeed configs/ds_zero3_demo.json \
  --corpus /usr/share/games/fortunes \
  --output_dir "$build/demo_output" \
  --max_steps 300 --block_size 128 --per_device_train_batch_size 8 --learning_rate 3e-3 \
  --n_layer 4 --n_embd 192 --n_head 4 --vocab_size 2048 --seed 42 \
  "$@"

if [ "${ZERO_DEMO_BENCH:-1}" = 1 ]; then
  "${mpirun[@]}" "$build/benchmarks/comm_bench" --max_bytes $((16 << 20))
fi

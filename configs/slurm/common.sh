# Sourced by the sbatch scripts beside it: the `zero train` command line (Hugging Face run_clm's
# flags, the DeepSpeed config in ZERO_DS_CONFIG) and the rendezvous address torchrun and the Gloo
# path read. Edit the paths and hyperparameters here; the scripts edit only #SBATCH lines.
ZERO=${ZERO:-zero}                                   # the zero binary (build/tools/zero)
ZERO_DS_CONFIG=${ZERO_DS_CONFIG:-configs/ds_zero3.json}
ZERO_OUTPUT_DIR=${ZERO_OUTPUT_DIR:-output/${SLURM_JOB_NAME:-zero}-${SLURM_JOB_ID:-local}}
zero_train_args=(
  train
  --model_name_or_path "${ZERO_MODEL:-/path/to/gpt2}"
  --train_file "${ZERO_TRAIN_FILE:-/path/to/train.txt}"
  --validation_file "${ZERO_VALIDATION_FILE:-/path/to/valid.txt}"
  --deepspeed "$ZERO_DS_CONFIG"
  --output_dir "$ZERO_OUTPUT_DIR"
  --do_train --do_eval
  --per_device_train_batch_size 8
  --gradient_accumulation_steps 4
  --learning_rate 6e-4 --weight_decay 0.1 --warmup_steps 100
  --max_steps 5000 --logging_steps 10 --save_steps 500 --save_total_limit 3
)

# MASTER_ADDR: the first node of the allocation; MASTER_PORT: a port derived from the job id
# (10000-59999), so two jobs on one node do not collide. Override either by exporting it.
if [ -z "${MASTER_ADDR:-}" ]; then
  # (sed reads every line: head would close the pipe early and pipefail would end the job.)
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)
fi
MASTER_PORT=${MASTER_PORT:-$((10000 + ${SLURM_JOB_ID:-0} % 50000))}
export MASTER_ADDR MASTER_PORT

#!/bin/sh
# The launch lines of the guides with torch >= 2, unchanged but for the program name:
#   python -m torch.distributed.launch --nproc_per_node=2 --use-env --no-python zero train ...
#     (torch refuses --no-python without --use-env: the rank comes as LOCAL_RANK), and a Python
#     script under the same launcher without --use-env, which gets --local-rank=N and hands its
#     command line to zero unchanged (the form that passes the flag);
#   accelerate launch --no_python --multi_gpu --num_processes 2 ... zero train ...
#     (without a GPU, accelerate runs one process unless --multi_gpu is given).
# PYTHON (ZERO_PYTHON_TF5: a private venv) must import torch >= 2 (and accelerate for the last).
# Exits 77 (skipped) without them.
# Usage: torch2_launch_test.sh PYTHON ZERO CORPUS OUT_DIR
python=$1 zero=$2 corpus=$3 out=$4
if [ -z "$python" ] || [ ! -x "$python" ]; then echo "skipped: ZERO_PYTHON_TF5 unset"; exit 77; fi
if ! "$python" -c "import sys, torch; sys.exit(int(torch.__version__.split('.')[0]) < 2)" \
    2>/dev/null; then
  echo "skipped: $python has no torch >= 2"; exit 77
fi
free_port() {
  "$python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}
rm -rf "$out" && mkdir -p "$out" || exit 1
train="train --do_train --train_file $corpus --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=32 --tokenizer_vocab_size 300 --block_size 32 --max_steps 2 --logging_steps 1 --per_device_train_batch_size 2 --overwrite_output_dir --no_plot"
check() {  # name log
  if ! grep -q "world size 2" "$2" || ! grep -q "step 2/2" "$2"; then
    cat "$2"; echo "$1: zero did not train at world size 2"; exit 1
  fi
  echo "$1: ok"
}
version=$("$python" -c 'import torch; print(torch.__version__)')
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 "$python" -m torch.distributed.launch --nproc_per_node=2 \
  --master_addr=127.0.0.1 --master_port="$(free_port)" --use-env --no-python "$zero" $train \
  --output_dir "$out/launch" > "$out/launch.log" 2>&1 || { cat "$out/launch.log"; exit 1; }
check "torch.distributed.launch --use-env --no-python (torch $version)" "$out/launch.log"
# The script: zero with the launcher's arguments ("--local-rank=N train ..."), shown first.
printf 'import os, sys\nprint("zero", *sys.argv[1:3], flush=True)\nos.execv(os.environ["ZERO_BIN"], ["zero"] + sys.argv[1:])\n' \
  > "$out/exec_zero.py"
# shellcheck disable=SC2086
ZERO_BIN="$zero" OMP_NUM_THREADS=1 "$python" -m torch.distributed.launch --nproc_per_node=2 \
  --master_addr=127.0.0.1 --master_port="$(free_port)" "$out/exec_zero.py" $train \
  --output_dir "$out/local_rank" > "$out/local_rank.log" 2>&1 || { cat "$out/local_rank.log"; exit 1; }
grep -q -- "^zero --local-rank=1 train" "$out/local_rank.log" ||
  { cat "$out/local_rank.log"; echo "the launcher passed no --local-rank=1"; exit 1; }
check "torch.distributed.launch passing --local-rank=N (torch $version)" "$out/local_rank.log"
if "$python" -c "import accelerate" 2>/dev/null; then
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 "$python" -m accelerate.commands.launch --no_python --multi_gpu \
    --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no \
    --main_process_port "$(free_port)" "$zero" $train --output_dir "$out/accelerate" \
    > "$out/accelerate.log" 2>&1 || { cat "$out/accelerate.log"; exit 1; }
  check "accelerate launch $("$python" -c 'import accelerate; print(accelerate.__version__)')" \
    "$out/accelerate.log"
else
  echo "accelerate is not importable: its launch line not tried"
fi
echo "torch2 launch test passed"

#!/bin/sh
# The launch lines of the guides, unchanged but for the program name, with the torch PYTHON has:
#   torchrun --standalone --nnodes=1 --nproc_per_node=2 --no-python zero train ...
#     (python -m torch.distributed.run; torch 1.13 spells it --no_python);
#   python -m torch.distributed.launch --nproc_per_node=2 --use-env --no-python zero train ...
#     (torch refuses --no-python without --use-env, 1.13 as 2.x: the rank comes as LOCAL_RANK;
#     1.13 spells them --use_env --no_python), and a Python script under the same launcher
#     without --use-env, which gets --local-rank=N (1.13: --local_rank=N) and hands its command
#     line to zero unchanged (the form that passes the flag);
#   accelerate launch --no_python --multi_gpu --num_processes 2 ... zero train ...
#     (without a GPU, accelerate runs one process unless --multi_gpu is given; needs torch >= 2);
#   deepspeed --num_gpus 2 --no_python zero train ... (where PYTHON has deepspeed).
# PYTHON must import torch (CI: Debian's 1.13 through ZERO_PYTHON; ZERO_PYTHON_TF5: a private
# venv with torch >= 2 and accelerate). Exits 77 (skipped) without it.
# Usage: torch_launch_test.sh PYTHON ZERO CORPUS OUT_DIR
python=$1 zero=$2 corpus=$3 out=$4
if [ -z "$python" ] || [ ! -x "$python" ]; then echo "skipped: no Python given"; exit 77; fi
if ! "$python" -c "import torch.distributed.run" 2>/dev/null; then
  echo "skipped: $python has no torch.distributed.run"; exit 77
fi
if "$python" -c "import sys, torch; sys.exit(int(torch.__version__.split('.')[0]) < 2)" \
    2>/dev/null; then
  no_python=--no-python use_env=--use-env local_rank=--local-rank redirects=
else
  no_python=--no_python use_env=--use_env local_rank=--local_rank
  # torch 1.13's elastic agent under Python >= 3.12 fails on its default redirects (Std.NONE is
  # not iterated from an IntFlag any more): stderr redirected and teed parses (a torch bug).
  redirects="--redirects 2 --tee 2"
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
OMP_NUM_THREADS=1 "$python" -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=2 \
  $redirects $no_python "$zero" $train --output_dir "$out/torchrun" > "$out/torchrun.log" 2>&1 ||
  { cat "$out/torchrun.log"; exit 1; }
check "torchrun --standalone --nnodes=1 --nproc_per_node=2 $no_python (torch $version)" \
  "$out/torchrun.log"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 "$python" -m torch.distributed.launch --nproc_per_node=2 \
  --master_addr=127.0.0.1 --master_port="$(free_port)" $redirects $use_env $no_python "$zero" \
  $train \
  --output_dir "$out/launch" > "$out/launch.log" 2>&1 || { cat "$out/launch.log"; exit 1; }
check "torch.distributed.launch $use_env $no_python (torch $version)" "$out/launch.log"
# The script: zero with the launcher's arguments ("--local-rank=N train ..."), shown first as one
# write(2) per rank (print's separate writes of each word interleaved the two ranks' lines).
printf 'import os, sys\nos.write(1, ("zero " + " ".join(sys.argv[1:3]) + "\\n").encode())\nos.execv(os.environ["ZERO_BIN"], ["zero"] + sys.argv[1:])\n' \
  > "$out/exec_zero.py"
# shellcheck disable=SC2086
ZERO_BIN="$zero" OMP_NUM_THREADS=1 "$python" -m torch.distributed.launch --nproc_per_node=2 \
  --master_addr=127.0.0.1 --master_port="$(free_port)" $redirects "$out/exec_zero.py" $train \
  --output_dir "$out/local_rank" > "$out/local_rank.log" 2>&1 || { cat "$out/local_rank.log"; exit 1; }
grep -q -- "^zero $local_rank=1 train" "$out/local_rank.log" ||
  { cat "$out/local_rank.log"; echo "the launcher passed no $local_rank=1"; exit 1; }
check "torch.distributed.launch passing $local_rank=N (torch $version)" "$out/local_rank.log"
if [ $local_rank = --local_rank ]; then
  echo "accelerate needs torch >= 2: its launch line not tried"
elif "$python" -c "import accelerate" 2>/dev/null; then
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
# DeepSpeed's launcher (README's launch table): deepspeed --num_gpus 2 --no_python zero train ...,
# which appends --local_rank=N; the banner names it.
if "$python" -c "import deepspeed.launcher.runner" 2>/dev/null; then
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 "$python" -m deepspeed.launcher.runner --num_gpus 2 \
    --master_port "$(free_port)" --no_python "$zero" $train --output_dir "$out/deepspeed" \
    > "$out/deepspeed.log" 2>&1 || { cat "$out/deepspeed.log"; exit 1; }
  grep -q "launch: deepspeed, backend gloo, world size 2, 2 rank(s) per node" "$out/deepspeed.log" ||
    { cat "$out/deepspeed.log"; echo "the launch banner does not name the deepspeed launcher"; exit 1; }
  check "deepspeed --num_gpus 2 --no_python (DeepSpeed $("$python" -c \
    'import deepspeed; print(deepspeed.__version__)' 2>/dev/null))" "$out/deepspeed.log"
else
  echo "deepspeed is not importable: its launch line not tried"
fi
echo "torch launch test passed"

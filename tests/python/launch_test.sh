#!/usr/bin/env bash
# zero.train under a launcher equals `zero train` under the same launcher: two ranks, ZeRO-3,
# evaluation and checkpoints, once as the CLI and once as `python -c "import zero;
# zero.train(sys.argv[1:])"` on each rank. The losses, gradient norms and evaluation losses of
# metrics.jsonl, the final model, the checkpoint's model and shards must be byte-identical, and
# each rank's returned dict must carry the CLI's train_loss, eval_loss and global_step.
# LAUNCH...: the command line that starts a program on two ranks, the program appended: `mpirun
# -np 2`, or tests/comm's `launch_ranks --torchrun PYTHON 2 --` (torchrun --no_python, where
# PYTHON imports torch.distributed.run: Debian's torch 1.13 in CI). LAUNCHER: the launch zero
# must report (openmpi, torchrun). PYTHON: the interpreter the module is built for; PACKAGE_DIR holds `zero`.
# Usage: launch_test.sh PYTHON PACKAGE_DIR ZERO SOURCE_DIR LAUNCHER WORK_DIR LAUNCH...
set -euo pipefail
python=$1 package_dir=$2 zero=$3 source=$4 launcher=$5 work=$6
shift 6
rm -rf "$work" && mkdir -p "$work"
export PYTHONPATH="$package_dir${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1
launch() {  # launch NAME PROGRAM... (on every rank)
  local name=$1
  shift
  "${LAUNCH[@]}" "$@" --train_file "$source/docs/ARCHITECTURE.md" \
    --validation_file "$source/README.md" \
    --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=32 --tokenizer_vocab_size 300 \
    --do_train True --do_eval True --max_steps 4 --per_device_train_batch_size 2 --block_size 32 \
    --logging_steps 1 --save_steps 2 --eval_strategy steps --eval_steps 2 --no_plot \
    --output_dir "$work/$name" --deepspeed "$source/configs/ds_zero3.json" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; echo "$name failed"; exit 1; }
}
LAUNCH=("$@")
launch cli "$zero" train
# Each rank writes its returned dict to a file of its own: both ranks share python.log, where a
# line of one can run into the other's progress output.
export ZERO_TEST_RESULTS=$work/results
mkdir -p "$ZERO_TEST_RESULTS"
launch python "$python" -c 'import json, logging, os, sys, zero
logging.basicConfig(level=logging.INFO, format="%(message)s")  # the library log records (stderr)
result = zero.train(sys.argv[1:])
with open(os.path.join(os.environ["ZERO_TEST_RESULTS"], f"{os.getpid()}.json"), "w") as out:
    json.dump({key: result.get(key) for key in
               ("global_step", "train_loss", "eval_loss", "preempted")}, out)'
for name in cli python; do
  grep -q "launch: $launcher, backend [a-z]*, world size 2," "$work/$name.log" ||
    { cat "$work/$name.log"; echo "$name: not 2 ranks launched by $launcher"; exit 1; }
done
values() { grep -o '"\(loss\|grad_norm\|eval_loss\|step\)":[0-9.e+-]*' "$1/metrics.jsonl"; }
[ "$(values "$work/cli" | grep -c eval_loss)" -ge 2 ] || { echo "fewer than 2 evaluations"; exit 1; }
diff <(values "$work/cli") <(values "$work/python") || { echo "metrics differ"; exit 1; }
shards=("$work"/cli/checkpoint-4/zero_shard-*-of-00002.safetensors)
if [ "${#shards[@]}" -ne 2 ] || [ ! -f "${shards[1]}" ]; then
  ls -R "$work/cli"; echo "expected 2 shard files"; exit 1
fi
for file in model.safetensors checkpoint-4/model.safetensors "${shards[@]#"$work/cli/"}"; do
  cmp "$work/cli/$file" "$work/python/$file" || { echo "$file differs"; exit 1; }
done
"$python" - "$work" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
results = [json.loads(path.read_text()) for path in sorted((work / "results").glob("*.json"))]
cli = json.loads((work / "cli" / "all_results.json").read_text())
expected = {"global_step": 4, "train_loss": cli["train_loss"], "eval_loss": cli["eval_loss"],
            "preempted": False}
if len(results) != 2 or any(result != expected for result in results):
    sys.exit(f"zero.train returned {results}, the CLI's run {expected}")
print(f"both ranks returned {expected}")
PY
echo "$launcher: zero.train equals zero train at 2 ranks: $(values "$work/cli" | wc -l) values," \
  "model and checkpoint identical"

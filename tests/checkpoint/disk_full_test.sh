#!/usr/bin/env bash
# A checkpoint save that fills the disk: `zero train`'s output_dir is a small tmpfs mounted in a
# private mount namespace (unshare -m, as root; the test skips with exit 77 where that is not
# permitted), sized to hold about one and a half checkpoints, with --save_steps 2 and
# --save_total_limit 1. The second save hits ENOSPC; the test checks that
#   - the job stops (exit != 0) with an error naming the file, the bytes it was writing, the
#     device's free space and "No space left on device";
#   - `latest` still names checkpoint-2, which validates (`zero checkpoint info`) and was not
#     rotated away by the limit, and no partial checkpoint-4 folder or staging folder is left;
#   - once the disk has room (the tmpfs remounted larger) the same command resumes from
#     checkpoint-2 and ends with the losses of an uninterrupted run.
#   disk_full_test.sh ZERO WORK_DIR [MPIRUN FLAGS...]   (with a launcher: the job at 2 ranks)
set -euo pipefail
zero=$1 work=$2
shift 2
mpirun=("$@")
skip() { echo "zero: skipped disk_full: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if [ -z "${ZERO_DISK_FULL_IN_NAMESPACE:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root (unshare -m), this is uid $(id -u)"
  unshare -m --propagation private true 2>/dev/null || skip "unshare -m is not permitted here"
  ZERO_DISK_FULL_IN_NAMESPACE=1 exec unshare -m --propagation private "$0" "$zero" "$work" "$@"
fi

rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMP_NUM_THREADS=1
world=1 launch=()
if [ ${#mpirun[@]} -gt 0 ]; then world=2 launch=("${mpirun[@]}" -np 2); fi
python3 - <<'EOF'
words = "the king queen speaks of a night sword crown and dark sea fair lord my heart".split()
state = 12345
def draw():
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    return state >> 33
with open("corpus.txt", "w") as out:
    for _ in range(2000):
        out.write(" ".join(words[draw() % len(words)] for _ in range(4 + draw() % 8)) + ".\n")
EOF
cat >z1.json <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 1}}
EOF
# train OUTPUT_DIR: 6 steps, a checkpoint every 2, at most 1 kept.
train() {
  "${launch[@]}" "$zero" train --config_overrides n_layer=2,n_embd=64,n_head=2,n_positions=32 \
    --train_file "$work/corpus.txt" --tokenizer_vocab_size 300 --block_size 32 --do_train True \
    --learning_rate 3e-3 --logging_steps 1 --no_plot --max_steps 6 --save_strategy steps \
    --save_steps 2 --save_total_limit 1 --per_device_train_batch_size $((4 / world)) \
    --deepspeed z1.json --output_dir "$1"
}

train straight >straight.log 2>&1 || { cat straight.log; fail "the uninterrupted run failed"; }
checkpoint_bytes=$(du -sb straight/checkpoint-6 | cut -f1)
others_bytes=$(($(du -sb straight | cut -f1) - checkpoint_bytes))
# Room for the files beside the checkpoints and 1.5 checkpoints (whole pages, plus one per file).
size_kib=$(((others_bytes + checkpoint_bytes * 3 / 2) / 1024 + 64))
echo "one checkpoint: $checkpoint_bytes bytes; tmpfs of $size_kib KiB"
mkdir full
mount -t tmpfs -o size="${size_kib}k" tmpfs full || skip "mount -t tmpfs failed in the namespace"

if train full/run >full.log 2>&1; then
  cat full.log
  fail "the job went on with a full disk (tmpfs of $size_kib KiB)"
fi
cat full.log
grep -q "No space left on device" full.log || fail "full.log does not say the disk is full"
grep -q "error: .*full/run/.tmp-checkpoint-4/" full.log ||
  fail "the error does not name the file in full/run/.tmp-checkpoint-4"
grep -Eq "error: .*(bytes \[[0-9]+, [0-9]+\)|[0-9]+ bytes)" full.log ||
  fail "the error does not name the bytes"
grep -Eq "error: .* has [0-9]+ bytes free" full.log || fail "the error does not name the free space"
grep -q "saved .*checkpoint-2" full.log || fail "checkpoint-2 was not saved before the disk filled"
[ "$(cat full/run/latest)" = checkpoint-2 ] || fail "full/run/latest is '$(cat full/run/latest)'"
[ -d full/run/checkpoint-2 ] || fail "checkpoint-2 was rotated away"
[ ! -e full/run/checkpoint-4 ] || fail "a partial checkpoint-4 is left"
# The rank that hit ENOSPC removes its partial file while the error unwinds, and rank 0 the
# staging folder. (At 2 ranks, when rank 1 fails first, rank 0 is ended by the abort without
# unwinding: the staging folder stays until the next save of that step or rotation removes it.)
leftover=$(find full/run \( -name '.tmp*' -o -name '*.tmp' \) -printf '%P ')
[ "$world" = 2 ] || [ -z "$leftover" ] || fail "the failed save left $leftover"
[ ! -e full/run/latest.tmp ] || fail "the failed save left full/run/latest.tmp"
"$zero" checkpoint info full/run >info.txt 2>&1 || { cat info.txt; fail "checkpoint-2 does not validate"; }
grep -q "^checkpoint full/run/checkpoint-2" info.txt || fail "info: $(head -1 info.txt)"
grep -q "^valid:" info.txt || fail "info did not validate: $(cat info.txt)"

# Room again: the same command resumes from checkpoint-2 (run_clm: the output_dir's last
# checkpoint) and continues the uninterrupted run's losses.
mount -o remount,size=64m full
train full/run >resumed.log 2>&1 || { cat resumed.log; fail "the resume failed"; }
grep -q "resumed from full/run/checkpoint-2 at step 2" resumed.log ||
  fail "resumed.log: $(grep -i resum resumed.log || true)"
python3 - straight/metrics.jsonl full/run/metrics.jsonl <<'EOF'
import json, sys
def losses(path):
    return {e["step"]: e["loss"] for e in map(json.loads, open(path)) if "loss" in e}
a, b = (losses(p) for p in sys.argv[1:])
worst = max(abs(a[s] - b[s]) for s in range(1, 7))
print(f"resumed vs uninterrupted, steps 1-6: max |loss difference| {worst:.2e}")
sys.exit(0 if worst <= 1e-6 else f"FAIL: the resumed run differs by {worst:.3e}")
EOF
[ "$(cat full/run/latest)" = checkpoint-6 ] || fail "after the resume latest is '$(cat full/run/latest)'"
[ "$(find full/run -maxdepth 1 -name 'checkpoint-*' | wc -l)" = 1 ] ||
  fail "save_total_limit 1 kept $(ls full/run)"
echo "disk_full ok"

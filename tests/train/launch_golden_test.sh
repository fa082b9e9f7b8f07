#!/bin/sh
# zero under the launches torch 2.15's launchers and accelerate 1.15 really make, as recorded in
# tests/golden/data/launch_environments.txt by tests/golden/record_torch2_goldens.py (torchrun
# --standalone --no-python, torch.distributed.launch --use-env --no-python, the same running a
# script, which gets --local-rank=N, and accelerate launch --multi_gpu; 2 processes each). For
# each recorded process, under exactly its recorded variables:
#   - `zero env` detects torchrun's rank r of a world of 2, local rank r of 2, and the master
#     address and port given;
#   - the recorded words after the program (the launcher's --local-rank=N before the subcommand,
#     then "train") are a command line zero accepts (`--help` after them: exit 0, no usage error).
# Exits 1 naming the process and what differed. No Python needed.
# Usage: launch_golden_test.sh ZERO GOLDEN_FILE
zero=$1 golden=$2
[ -x "$zero" ] || { echo "no zero binary at '$zero'"; exit 1; }
[ -r "$golden" ] || { echo "cannot read $golden"; exit 1; }
tab=$(printf '\t')
seen="" processes=0
while IFS="$tab" read -r name argv vars; do
  case $name in '#'* | '') continue ;; esac
  processes=$((processes + 1))
  rank="" local_rank="" addr="" port=""
  for variable in $vars; do
    case $variable in
      RANK=*) rank=${variable#RANK=} ;;
      LOCAL_RANK=*) local_rank=${variable#LOCAL_RANK=} ;;
      MASTER_ADDR=*) addr=${variable#MASTER_ADDR=} ;;
      MASTER_PORT=*) port=${variable#MASTER_PORT=} ;;
    esac
  done
  if [ -z "$rank" ] || [ "$rank" != "$local_rank" ]; then
    echo "$name: recorded RANK '$rank' and LOCAL_RANK '$local_rank' (one node: equal)"; exit 1
  fi
  expected="launch: torchrun rank $rank/2 (local $rank/2) master $addr:$port"
  # shellcheck disable=SC2086
  detected=$(env -i PATH="$PATH" $vars "$zero" env 2>&1 | grep '^launch:')
  [ "$detected" = "$expected" ] ||
    { echo "$name rank $rank: zero env says '$detected', expected '$expected'"; exit 1; }
  # shellcheck disable=SC2086
  usage=$(env -i PATH="$PATH" $vars "$zero" $argv --help 2>&1 >/dev/null) ||
    { echo "$name rank $rank: zero $argv --help failed: $usage"; exit 1; }
  seen="$seen $name:$rank"
  echo "$name rank $rank (zero $argv): ok"
done <"$golden"
for name in torchrun launch_use_env launch_script accelerate; do
  for rank in 0 1; do
    case "$seen " in *" $name:$rank "*) ;; *) echo "$golden has no $name rank $rank"; exit 1 ;; esac
  done
done
[ "$processes" -eq 8 ] || { echo "$golden: $processes processes, expected 8"; exit 1; }
grep -q -- "--local-rank=1 train" "$golden" ||
  { echo "$golden: no process got --local-rank=N from its launcher"; exit 1; }
echo "launch golden test passed"

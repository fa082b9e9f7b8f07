# shellcheck shell=bash
# The chaos soak's parts (sourced by benchmarks/chaos_soak.sh, which sets zero, work, kills,
# steps, save_steps, deadline and fail): the inputs, the two supervisors, the phase reader and
# the chaos loop. Times are microseconds since the epoch (EPOCHREALTIME without its point).

now_plus() { echo $((${EPOCHREALTIME/./} + $1 * 1000000)); }
elapsed_since() {  # elapsed_since START (EPOCHREALTIME): seconds, 1 decimal
  local us=$((${EPOCHREALTIME/./} - ${1/./}))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}
seconds_of() { printf '%d.%02d' $(($1 / 1000000)) $(($1 % 1000000 / 10000)); }  # µs -> s
past_deadline() { [ "${EPOCHREALTIME/./}" -ge "$deadline" ]; }
# A sleep without a process: read with a timeout on a pipe that never gets data.
exec {nap_fd}<> <(:)
nap() { read -r -t "$1" -u "$nap_fd" _ || true; }

# The corpus (a fixed LCG over a small word list, as tests/checkpoint makes it), the DeepSpeed
# config and the run's flags.
write_inputs() {
  python3 "$here/scripts/lcg_corpus.py" 3000 "$1/corpus.txt"
  cat >"$1/ds.json" <<'EOF'
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
EOF
  # shellcheck disable=SC2054  # the commas are one flag value
  train_flags=(train --config_overrides n_layer=4,n_embd=128,n_head=4,n_positions=64
    --train_file "$1/corpus.txt" --tokenizer_vocab_size 300 --block_size 64 --do_train True
    --learning_rate 3e-3 --seed 7 --logging_steps 1 --no_plot --max_steps "$steps"
    --per_device_train_batch_size 4 --deepspeed "$1/ds.json" --save_strategy steps
    --save_steps "$save_steps" --save_total_limit 2)
}

# torchrun: torch.distributed.run from a python that has it (Debian's torch 1.13 is in
# /usr/bin/python3; ZERO_PYTHON first).
find_torchrun() {
  local python
  for python in "${ZERO_PYTHON:-}" /usr/bin/python3 python3; do
    [ -n "$python" ] && "$python" -c "import torch.distributed.run" 2>/dev/null &&
      { torchrun=("$python" -m torch.distributed.run); return 0; }
  done
  return 1
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# mpirun's flags for a single machine, root included (the tests' ZERO_MPIEXEC_EXTRA_FLAGS).
mpirun=("${mpirun_path:-mpirun}" --oversubscribe --allow-run-as-root --bind-to none)
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
# Local addresses only: OpenMPI's runtime and TCP transport on the loopback interface.
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo}
export OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# run_supervised LAUNCHER OUT RESTARTS: `zero train` into OUT at 2 ranks under LAUNCHER, which
# restarts it up to RESTARTS times, in the foreground; the log is OUT.log (torchrun) or
# OUT.attempt<i>.log (mpirun, one per attempt). Its exit code is the supervisor's.
run_supervised() {
  local launcher=$1 out=$2 restarts=$3
  if [ "$launcher" = torchrun ]; then
    # Static rendezvous on 127.0.0.1 (torchrun's default): the ranks meet through the agent's
    # store, which outlives every attempt; zero's keys there carry the attempt's restart count.
    # (torch 1.13's torchrun fails on its default redirects under Python >= 3.11: stderr
    # redirected and teed parses, as tests/comm/launch_ranks passes it.)
    "${torchrun[@]}" --nproc_per_node 2 --max_restarts "$restarts" --monitor_interval 0.1 \
      --master_addr 127.0.0.1 --master_port "$(free_port)" --redirects 2 --tee 2 \
      --log_dir "$out.torchrun" --no_python \
      "$zero" "${train_flags[@]}" --output_dir "$out" >"$out.log" 2>&1
    return
  fi
  # As an sbatch script writes it: run again until it succeeds or the attempts run out; each
  # attempt resumes from output_dir's latest checkpoint (run_clm's rule).
  local attempt=0
  until "${mpirun[@]}" -np 2 "$zero" "${train_flags[@]}" --output_dir "$out" \
    >"$out.attempt$attempt.log" 2>&1; do
    attempt=$((attempt + 1))
    [ $attempt -le "$restarts" ] || return 1
  done
}

# The processes under PID (the supervisor's launcher, agent and ranks), from /proc.
descendants() {
  local child
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}
# stop_job: ends the supervised run `job` started and everything under it (SIGKILL, by pid),
# and the ranks its phase files name (mpirun's ranks may outlive it).
stop_job() {
  local pids entry
  pids=$(descendants "$job")
  kill -KILL "$job" $pids 2>/dev/null || true
  if [ -n "${phases:-}" ]; then
    live_ranks "$phases"
    for entry in "${live[@]}"; do entry=${entry#*:} && kill -KILL "${entry%%:*}" 2>/dev/null || true; done
  fi
  wait "$job" 2>/dev/null || true
}
# finish_job: the supervised run's exit code once it ends; past the soak's deadline it is stopped
# and the code is 124.
finish_job() {
  while alive "$job"; do
    past_deadline && { echo "time limit reached: stopping the run" >&2; stop_job; return 124; }
    nap 0.05
  done
  local code=0
  wait "$job" || code=$?
  return $code
}

# read_phase FILE: phase_rank, phase_phase, phase_collective from a rank's phase line
# (zero/core/phase_report.h); false when the line is not whole (a read racing a write).
read_phase() {
  local w1 w3 w5 rest
  read -r w1 phase_rank w3 phase_phase w5 phase_collective rest 2>/dev/null <"$1" || return 1
  [[ $w1 == rank && $w3 == phase && $w5 == collective && -z $rest ]]
}
# classify: phase_class, what a rank is doing by its phase line: save, collective, step, or the
# phase (a variable, not output: the aim polls it every 2 ms, a subshell each time would cost).
classify() {
  if [ "$phase_phase" = checkpoint ]; then phase_class=save
  elif [ "$phase_collective" != - ]; then phase_class=collective
  elif [ "$phase_phase" = train ]; then phase_class=step
  else phase_class=$phase_phase; fi
}
# alive PID: the process runs (a zombie, dead but not yet reaped, does not: mpirun may exit
# before it reaps a rank it killed, which init reaps later).
alive() {
  local state=""
  read -r _ _ state _ 2>/dev/null <"/proc/$1/stat" || return 1
  [ "$state" != Z ] && [ "$state" != X ]
}
# live_ranks DIR: "rank<r>:pid:file" of each process whose phase file is in DIR and that is alive.
live_ranks() {
  local file name
  live=()
  for file in "$1"/rank*-*; do
    [ -e "$file" ] || continue
    name=${file##*/}
    alive "${name##*-}" && live+=("${name%%-*}:${name##*-}:$file")
  done
  return 0
}
last_step() {  # the last optimizer step metrics.jsonl logged (0: none)
  local line
  line=$(tail -n 1 "$1/metrics.jsonl" 2>/dev/null || true)
  [[ $line =~ \"step\":\ *([0-9]+) ]] && echo "${BASH_REMATCH[1]}" || echo 0
}

# wait_for CONDITION SECONDS [INTERVAL]: polls CONDITION (a function) every INTERVAL seconds
# (default 0.01) until it holds; false at SECONDS or the soak's deadline.
wait_for() {
  local until
  until=$(now_plus "$2")
  while ! "$1"; do
    [ "${EPOCHREALTIME/./}" -lt "$until" ] && ! past_deadline || return 1
    nap "${3:-0.01}"
  done
}
# stopped PID: every thread of PID is stopped (a group stop reaches the threads one by one).
stopped() {
  local task state
  for task in /proc/"$1"/task/*; do
    read -r _ _ state _ 2>/dev/null <"$task/stat" || continue
    [[ $state == [TtZX] ]] || return 1
  done
}
job_alive() { alive "$job"; }
# A rank of the attempt after the kill (a pid not in old_pids) is training.
training_again() {
  local entry
  live_ranks "$phases"
  for entry in "${live[@]}"; do
    local pid=${entry#*:}
    [[ " $old_pids " == *" ${pid%%:*} "* ]] && continue
    read_phase "${entry##*:}" && [ "$phase_phase" = train ] && return 0
  done
  ! job_alive  # the run ended: nothing to wait for
}
old_attempt_gone() {
  local pid
  for pid in $old_pids; do alive "$pid" && return 1; done
  return 0
}
# strike: the victim (victim_rank, alive) frozen with SIGSTOP when its phase line shows `target`
# (any: whatever it does); read again while it cannot change: the match is killed (SIGKILL),
# else it runs on. True once killed, with phase_* its last line; true too when the run ended
# (victim_pid empty then).
strike() {
  local entry i
  live_ranks "$phases"
  for entry in "${live[@]}"; do
    [ "${entry%%:*}" = "rank$victim_rank" ] || continue
    read_phase "${entry##*:}" || return 1
    classify
    [ "$target" = any ] || [ "$phase_class" = "$target" ] || return 1
    victim_pid=${entry#*:} victim_pid=${victim_pid%%:*}
    kill -STOP "$victim_pid" 2>/dev/null || return 1
    for ((i = 0; i < 1000; i++)); do stopped "$victim_pid" && break; done
    if read_phase "${entry##*:}" && classify && { [ "$target" = any ] || [ "$phase_class" = "$target" ]; }; then
      kill -KILL "$victim_pid"
      return 0
    fi
    kill -CONT "$victim_pid"
    return 1
  done
  victim_pid=""
  ! job_alive
}
first_checkpoint() { [ -e "$out/latest" ] || ! job_alive; }
past_killed_step() { [ "$(last_step "$out")" -gt "$step_at_kill" ] || ! job_alive; }

# soak LAUNCHER: the supervised run in LAUNCHER-soak with `kills` SIGKILLs; prints a row per kill
# and a summary; false when a kill could not be made or a restart did not resume from latest.
soak() {
  local launcher=$1
  out=$work/$launcher-soak
  phases=$work/$launcher-phases
  mkdir -p "$phases"
  ZERO_PHASE_DIR=$phases run_supervised "$launcher" "$out" "$kills" &
  job=$!
  # The first three kills aim at a step, a collective and a save (in a random order); the rest
  # strike whatever the rank is doing.
  local -a targets=(step collective save)
  local i j swap
  for ((i = 2; i > 0; i--)); do
    j=$((RANDOM % (i + 1)))
    swap=${targets[i]} targets[i]=${targets[j]} targets[j]=$swap
  done
  local -a expected=()
  local k hit_step=0 hit_collective=0 hit_save=0 ok=0 redone_sum=0 train_sum=0 back_sum=0
  local redone_max=0 train_max=0 back_max=0 t_kill t_gone t_train t_back phase resumed redone
  printf '%-8s %4s %4s %-10s %-26s %5s %7s %6s %7s %8s %7s\n' "$launcher" kill rank aimed \
    "killed in" step resumed redone "to end" "to train" "to step" | tee "$work/$launcher-kills.txt"
  for ((k = 1; k <= kills; k++)); do
    target=${targets[k - 1]:-any}
    old_pids=""
    if [ $k -eq 1 ]; then
      wait_for first_checkpoint 300 || { echo "$launcher: no first checkpoint"; break; }
    fi
    job_alive || { echo "$launcher: the run ended after $((k - 1)) kill(s); raise --steps"; break; }
    nap "0.$((200 + RANDOM % 800))"  # 0.2 to 1 s into training
    victim_rank=$((RANDOM % 2)) victim_pid=""
    live_ranks "$phases"
    for i in "${live[@]}"; do i=${i#*:} && old_pids+=" ${i%%:*}"; done
    wait_for strike 60 0.002 || { echo "$launcher: kill $k: rank $victim_rank never in $target"; break; }
    [ -n "$victim_pid" ] || { echo "$launcher: the run ended before kill $k; raise --steps"; break; }
    t_kill=${EPOCHREALTIME/./}
    step_at_kill=$(last_step "$out")
    classify
    phase=$phase_class
    [ "$phase" = collective ] && phase="collective $phase_collective"
    case $phase in step) hit_step=1 ;; collective*) hit_collective=1 ;; save) hit_save=1 ;; esac
    wait_for old_attempt_gone 120 || { echo "$launcher: the killed attempt did not end in 120 s"; break; }
    t_gone=${EPOCHREALTIME/./}
    resumed=$(cat "$out/latest" 2>/dev/null || echo none)
    expected+=("$resumed")
    wait_for training_again 300 || { echo "$launcher: no training within 300 s of kill $k"; break; }
    t_train=${EPOCHREALTIME/./}
    wait_for past_killed_step 300 0.02 || true
    t_back=${EPOCHREALTIME/./}
    job_alive || [ $k -eq "$kills" ] || { echo "$launcher: the run ended after kill $k"; break; }
    redone=$((step_at_kill - ${resumed#checkpoint-}))
    redone_sum=$((redone_sum + redone)) train_sum=$((train_sum + t_train - t_kill))
    back_sum=$((back_sum + t_back - t_kill))
    ((redone > redone_max)) && redone_max=$redone
    ((t_train - t_kill > train_max)) && train_max=$((t_train - t_kill))
    ((t_back - t_kill > back_max)) && back_max=$((t_back - t_kill))
    printf '%-8s %4d %4d %-10s %-26s %5d %7s %6d %7s %8s %7s\n' "$launcher" "$k" "$victim_rank" \
      "$target" "$phase" "$step_at_kill" "${resumed#checkpoint-}" "$redone" \
      "$(seconds_of $((t_gone - t_kill)))" "$(seconds_of $((t_train - t_kill)))" "$(seconds_of $((t_back - t_kill)))" |
      tee -a "$work/$launcher-kills.txt"
    ok=$k
  done
  local code=0
  [ $ok -eq "$kills" ] || stop_job
  finish_job || code=$?
  echo "$launcher: supervisor exit $code after $ok kill(s)"
  [ $code -eq 0 ] && [ $ok -eq "$kills" ] || return 1
  # Every restart resumed from the checkpoint `latest` named when the killed attempt ended.
  local -a seen
  local logs=("$out".log) attempt
  for ((attempt = 0; attempt <= kills; attempt++)); do logs+=("$out.attempt$attempt.log"); done
  mapfile -t seen < <(cat "${logs[@]}" 2>/dev/null |
    sed -n 's|.*resumed from [^ ]*/\(checkpoint-[0-9]*\) at step.*|\1|p')
  if [ "${seen[*]}" != "${expected[*]}" ]; then
    echo "$launcher: the restarts resumed from '${seen[*]}', latest named '${expected[*]}'"
    return 1
  fi
  echo "$launcher: every restart resumed from latest (${seen[*]})"
  [ $hit_step -eq 1 ] && [ $hit_collective -eq 1 ] && [ $hit_save -eq 1 ] ||
    { echo "$launcher: not every phase was hit (step $hit_step, collective $hit_collective, save $hit_save)"; return 1; }
  echo "$launcher: $kills faults survived; steps redone per fault mean $((redone_sum / kills))" \
    "max $redone_max; kill to training again mean $(seconds_of $((train_sum / kills))) s" \
    "max $(seconds_of $train_max) s; kill to the killed step again mean" \
    "$(seconds_of $((back_sum / kills))) s max $(seconds_of $back_max) s"
}

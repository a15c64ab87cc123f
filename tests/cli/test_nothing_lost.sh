#!/usr/bin/env bash
# Nothing a user trained is lost or mixed up (docs/usage.md "Checkpoints", "Stopping and
# preemption"), one case per ctest entry, each at three layouts: cp 1, cp 2, and
# dp 2 x cp 2 with --shard full and --ep 2 (the tiny hybrid MoE model):
#
#   lock         a second run on a live run's checkpoint directory is refused at start-up,
#                once, naming the holder (host, pid); a lock left by a killed run of this
#                host is taken over with a warning; one of another host is refused while
#                its heartbeat is fresh and taken over once it is older than
#                --lock-stale-s; another host's lock from an earlier start of the same
#                Slurm job (a lower SLURM_RESTART_COUNT) is taken over at once, one from
#                the same start is not; a finished run leaves no lock
#   identity     --resume of another run's checkpoint (seed, seq_len, data) is refused,
#                naming each difference; --accept-changes lets it go on, saying so; a longer
#                --steps is no difference
#   export       --export-hf over an earlier export (one file, then shards, then one file)
#                leaves only the new one: gdn_eval of it gives the new model's loss, not the
#                old; a foreign file is kept, named once; a foreign folder is refused
#   zero_target  --documents eos on data whose windows are all EOS: every step is skipped
#                (loss null, a counter), and no update happens (the weights equal the
#                initial ones, bit for bit); data that is all EOS is refused at start-up
#   signal_rank  kill -TERM one rank's process (the last rank; twice, the second during the
#                save): every rank stops at the same step, writes its checkpoint, exits 75,
#                and --resume continues to the losses of an uninterrupted run, bit for bit
#   signal_mpirun  the same with the signal sent to mpirun: SIGUSR1 (forwarded to every
#                rank, mpirun exits 75) and SIGTERM (mpirun forwards it and SIGKILLs the
#                ranks one second later: a small model's save fits)
#
#   test_nothing_lost.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
CONFIG=$SRC/configs/tiny-qwen3-next.json  # MoE (8 experts), eos_token_id 10
make_work_dir

# The layouts: name, ranks, flags.
LAYOUTS=("cp1|1|--cp 1" "cp2|2|--cp 2" "dp2xcp2-full-ep2|4|--dp 2 --cp 2 --shard full --ep 2")
# Small steps, so that runs are quick and a signal finds them mid-run.
SMALL=(--config "$CONFIG" --seq-len 64 --batch 2)

source "$(dirname "$0")/train_runs.sh"

case_lock() {
  local name np flags
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name np flags <<<"$layout"
    local D=$WORK/$name/ck L=$WORK/$name/a.jsonl
    mkdir -p "$WORK/$name"
    # shellcheck disable=SC2086
    start "$np" "$WORK/$name/a.out" "${SMALL[@]}" $flags --steps 100000 --checkpoint-dir "$D" \
      --log "$L"
    local a=$bg
    if ! wait_for 120 logged "$L" 2; then
      cat "$WORK/$name/a.out"
      fail "$name: run A did not start"
      kill "$a" 2>/dev/null
      continue
    fi
    local holder
    holder=$(rank_pid gdn_train "$D" 0)
    # shellcheck disable=SC2086
    run "$np" 60 "$WORK/$name/b.out" "${SMALL[@]}" $flags --seed 2 --steps 5 \
      --checkpoint-dir "$D" --resume
    expect_once "$name: run B on live run A's directory is refused, naming A" \
      "is in use by another run (host $(hostname), pid $holder" "$WORK/$name/b.out" "$rc"
    check "$name: B wrote nothing (no checkpoint yet in $D)" \
      bash -c "! compgen -G '$D/ckpt-*'"
    # Run A dies without releasing its lock (SIGKILL: nothing runs on the way out).
    pkill -KILL -f -- "--checkpoint-dir $D" 2>/dev/null
    wait "$a" 2>/dev/null
    wait_for 30 none_left "--checkpoint-dir $D"
    check "$name: the killed run A left its lock" [ -f "$D/gdn-run.lock" ]
    take_run "$np" "$flags" "$D"
    ok_run "$name: a run after the killed one" "$WORK/take.out" &&
      said_once "$name: takes over the dead run's lock" "no longer runs on this host" \
        "$WORK/take.out" &&
      check "$name: and releases it at the end" [ ! -e "$D/gdn-run.lock" ]
    # Another host's lock: refused while it beats, taken over once it is stale.
    local E=$WORK/$name/other
    fake_lock "$E" other-node 4242 "" 1
    take_run "$np" "$flags" "$E"
    expect_once "$name: a fresh lock of another host is refused" \
      "is in use by another run (host other-node, pid 4242" "$WORK/take.out" "$rc"
    fake_lock "$E" other-node 4242 "" 60
    take_run "$np" "$flags" "$E"
    ok_run "$name: a stale lock of another host" "$WORK/take.out" &&
      said_once "$name: is taken over, saying why" "its heartbeat stopped" "$WORK/take.out"
    # A requeued Slurm job: the lock of its earlier start (another node) is taken at once.
    fake_lock "$E" other-node 4242 777 1
    MPI_EXTRA=(-x SLURM_JOB_ID=778)
    take_run "$np" "$flags" "$E" --overwrite-checkpoints
    expect_once "$name: another Slurm job's fresh lock is refused" \
      "(host other-node, pid 4242, Slurm job 777" "$WORK/take.out" "$rc"
    # The same start of the same job (a second srun in one allocation) is a live run.
    MPI_EXTRA=(-x SLURM_JOB_ID=777)
    take_run "$np" "$flags" "$E" --overwrite-checkpoints
    expect_once "$name: the same job's fresh lock from the same start is refused" \
      "(host other-node, pid 4242, Slurm job 777" "$WORK/take.out" "$rc"
    MPI_EXTRA=(-x SLURM_JOB_ID=777 -x SLURM_RESTART_COUNT=1)
    take_run "$np" "$flags" "$E" --overwrite-checkpoints
    MPI_EXTRA=()
    ok_run "$name: the lock of the job's earlier start (a requeue)" "$WORK/take.out" &&
      said_once "$name: is taken over at once" "of this Slurm job, which was requeued" \
        "$WORK/take.out"
  done
}

case_identity() {
  local name np flags
  printf 'some text to train on, line after line\n%.0s' $(seq 200) >"$WORK/text.txt"
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name np flags <<<"$layout"
    local D=$WORK/$name/ck
    mkdir -p "$WORK/$name"
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/a.out" "${SMALL[@]}" $flags --seed 1 --steps 4 --checkpoint-dir "$D"
    ok_run "$name: run A (seed 1, seq_len 64)" "$WORK/$name/a.out" || continue
    # shellcheck disable=SC2086
    run "$np" 60 "$WORK/$name/b.out" "${SMALL[@]}" $flags --seed 2 --seq-len 128 --steps 4 \
      --checkpoint-dir "$D" --resume
    expect_once "$name: --resume with another seed and seq_len is refused" \
      "was written by another run (checkpoint vs this run): seed 1 vs 2; seq_len 64 vs 128." \
      "$WORK/$name/b.out" "$rc"
    check "$name: the message names the flag that accepts them" \
      grep -q -- "--accept-changes seed,seq_len to continue" "$WORK/$name/b.out"
    # shellcheck disable=SC2086
    run "$np" 60 "$WORK/$name/c.out" "${SMALL[@]}" $flags --seed 1 --steps 8 --data "$WORK/text.txt" \
      --checkpoint-dir "$D" --resume
    expect_once "$name: --resume on other data is refused, naming it" \
      "data synthetic vs $WORK/text.txt; data_bytes 0 vs" "$WORK/$name/c.out" "$rc"
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/d.out" "${SMALL[@]}" $flags --seed 1 --steps 8 --lr 0.01 \
      --checkpoint-dir "$D" --resume
    expect_once "$name: another learning rate is a config difference, named by key" \
      "config (train.lr 0.003 vs 0.01)" "$WORK/$name/d.out" "$rc"
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/e.out" "${SMALL[@]}" $flags --seed 2 --seq-len 128 --steps 6 \
      --checkpoint-dir "$D" --resume --accept-changes seq_len,seed,schedule
    ok_run "$name: --accept-changes seq_len,seed,schedule" "$WORK/$name/e.out" &&
      said_once "$name: says what it accepted" "accepted by --accept-changes (checkpoint vs this run): seed 1 vs 2" \
        "$WORK/$name/e.out" &&
      check "$name: and goes on from step 4" grep -q "resumed from $D/ckpt-00000004.bin at step 4" \
        "$WORK/$name/e.out"
    # The checkpoint of step 6 is now of the seed-2 run, on a cosine over 6 steps: a longer
    # --steps would give its steps after warmup other learning rates.
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/f.out" "${SMALL[@]}" $flags --seed 2 --seq-len 128 --steps 9 \
      --checkpoint-dir "$D" --resume
    expect_once "$name: a longer --steps of a cosine run is refused as 'schedule'" \
      "schedule (the lr of step 3, one of the 6 taken, would change" "$WORK/$name/f.out" "$rc"
    check "$name: naming the steps and the flag" bash -c \
      "grep -q 'train.steps 6 vs 9' '$WORK/$name/f.out' && grep -q -- '--accept-changes schedule' '$WORK/$name/f.out'"
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/g.out" "${SMALL[@]}" $flags --seed 2 --seq-len 128 --steps 9 \
      --checkpoint-dir "$D" --resume --accept-changes schedule
    ok_run "$name: --accept-changes schedule continues it" "$WORK/$name/g.out" &&
      check "$name: from step 6" grep -q "resumed from $D/ckpt-00000006.bin at step 6" "$WORK/$name/g.out"
    # A wsd run before its decay is extended without a flag or a warning.
    local W=$WORK/$name/wsd
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/h.out" "${SMALL[@]}" $flags --lr-schedule wsd --steps 3 --checkpoint-dir "$W"
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/i.out" "${SMALL[@]}" $flags --lr-schedule wsd --steps 12 \
      --checkpoint-dir "$W" --resume
    ok_run "$name: a longer --steps of a wsd run resumes" "$WORK/$name/i.out" &&
      check "$name: from step 3, without a warning" \
        bash -c "grep -q 'resumed from $W/ckpt-00000003.bin at step 3' '$WORK/$name/i.out' &&
                 ! grep -q 'warning\] --resume' '$WORK/$name/i.out'"
  done
}

# eval_loss DIR: gdn_eval's loss of the export in DIR on a fixed batch (f64), or "failed".
eval_loss() {
  python3 "$(dirname "$0")/npy_tool.py" write-i64 "$WORK/tokens.npy" 2,65 \
    $(seq 0 129 | awk '{ print ($1 * 37 + 11) % 256 }') || return 1
  timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 1 "$BIN/gdn_eval" --init-from "$1" \
    --tokens "$WORK/tokens.npy" --dtype f64 >"$WORK/eval.json" 2>"$WORK/eval.err" &&
    jq -r .loss "$WORK/eval.json" || echo failed
}

case_export() {
  local name np flags
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name np flags <<<"$layout"
    local E=$WORK/$name/export R=$WORK/$name/reference
    mkdir -p "$WORK/$name"
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/a.out" "${SMALL[@]}" $flags --steps 1 --export-hf "$E"
    ok_run "$name: a 1-step export, one file" "$WORK/$name/a.out" || continue
    echo '{"a tokenizer": "not ours"}' >"$E/tokenizer.json"
    local old new ref
    old=$(eval_loss "$E")
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/b.out" "${SMALL[@]}" $flags --steps 5 --export-hf "$E" \
      --export-hf-max-mb 0.2
    ok_run "$name: a 5-step export over it, in shards" "$WORK/$name/b.out" || continue
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/c.out" "${SMALL[@]}" $flags --steps 5 --export-hf "$R"
    new=$(eval_loss "$E")
    ref=$(eval_loss "$R")
    check "$name: no model.safetensors is left beside the shards" [ ! -e "$E/model.safetensors" ]
    check "$name: the shards and their index are there" \
      bash -c "[ -f '$E/model.safetensors.index.json' ] && compgen -G '$E/model-00001-of-0000*.safetensors' >/dev/null"
    check "$name: gdn_eval reads the 5-step model ($new = $ref), not the 1-step one ($old)" \
      bash -c "[ '$new' = '$ref' ] && [ '$new' != '$old' ] && [ '$new' != failed ]"
    said_once "$name: the foreign file is named once" "kept beside the new export: tokenizer.json" \
      "$WORK/$name/b.out"
    check "$name: and kept" grep -q "not ours" "$E/tokenizer.json"
    check "$name: nothing of the export is left beside it" \
      bash -c "! compgen -G '$WORK/$name/.export.gdn-export-*'"
    # Back to one file: the shards and the index go.
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/d.out" "${SMALL[@]}" $flags --steps 5 --export-hf "$E"
    ok_run "$name: a one-file export over the shards" "$WORK/$name/d.out" &&
      check "$name: leaves no shard or index" \
        bash -c "! compgen -G '$E/model-*' && [ ! -e '$E/model.safetensors.index.json' ] && cmp -s '$E/model.safetensors' '$R/model.safetensors'"
    mkdir "$E/notes"
    # shellcheck disable=SC2086
    run "$np" 60 "$WORK/$name/e.out" "${SMALL[@]}" $flags --steps 5 --export-hf "$E"
    expect_once "$name: a folder of the user's in the export directory is refused at start-up" \
      "holds entries an export does not write (notes)" "$WORK/$name/e.out" "$rc"
  done
}

case_zero_target() {
  # 20 ordinary tokens, then 50000 EOS (id 10): at seed 1234 every window of the first steps
  # lies in the EOS (checked by the log: every step skipped).
  python3 -c 'import struct, sys; ids = [(i * 7 + 30) % 200 + 20 for i in range(20)] + [10] * 50000
open(sys.argv[1], "wb").write(struct.pack("<%dH" % len(ids), *ids))' "$WORK/eos.u16"
  python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<3000H", *([10] * 3000)))' \
    "$WORK/all_eos.u16"
  local name np flags
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name np flags <<<"$layout"
    mkdir -p "$WORK/$name"
    local L=$WORK/$name/skip.jsonl
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/a.out" "${SMALL[@]}" $flags --data "$WORK/eos.u16" --documents eos \
      --steps 3 --log "$L" --export-hf "$WORK/$name/skipped"
    ok_run "$name: a run on all-EOS windows" "$WORK/$name/a.out" || continue
    check "$name: every step is logged skipped, loss null, counted: $(jq -c '[.loss, .skipped, .skipped_steps]' "$L" | tr '\n' ' ')" \
      [ "$(jq -c '[.loss, .skipped, .skipped_steps]' "$L" | tr '\n' ' ')" = "[null,true,1] [null,true,2] [null,true,3] " ]
    said_once "$name: the end says how many were skipped" "3 of 3 steps were skipped" "$WORK/$name/a.out"
    check "$name: no 'loss 0' line" bash -c "! grep -q 'loss 0.000000' '$WORK/$name/a.out'"
    # The initial weights, exported without a step: the skipped steps changed nothing
    # (weight decay and the moments would have).
    # shellcheck disable=SC2086
    run "$np" 120 "$WORK/$name/b.out" "${SMALL[@]}" $flags --steps 0 --export-hf "$WORK/$name/init"
    ok_run "$name: the initial weights" "$WORK/$name/b.out" &&
      check "$name: the weights after the skipped steps are the initial ones, bit for bit" \
        cmp -s "$WORK/$name/skipped/model.safetensors" "$WORK/$name/init/model.safetensors"
    # shellcheck disable=SC2086
    run "$np" 60 "$WORK/$name/c.out" "${SMALL[@]}" $flags --data "$WORK/all_eos.u16" \
      --documents eos --steps 3
    expect_once "$name: data that is all EOS is refused at start-up" \
      "gives no counted target at all: every token is the EOS id 10" "$WORK/$name/c.out" "$rc"
  done
}

# preempt NAME NP FLAGS HOW: an uninterrupted 400-step run, then the same run stopped by a
# signal (HOW: rank-term, mpirun-usr1 or mpirun-term) and resumed; their losses must agree
# bit for bit, and the stopped run must have saved the step it reached.
preempt() {
  local name=$1 np=$2 flags=$3 how=$4
  local dir=$WORK/$name-$how U=$WORK/$name-$how/u.jsonl I=$WORK/$name-$how/i.jsonl
  local D=$WORK/$name-$how/ck
  mkdir -p "$dir"
  local common=("${SMALL[@]}" --steps 400 --checkpoint-every 100)
  # shellcheck disable=SC2086
  run "$np" 300 "$dir/u.out" "${common[@]}" $flags --log "$U"
  ok_run "$name $how: the uninterrupted run" "$dir/u.out" || return
  # shellcheck disable=SC2086
  start "$np" "$dir/i.out" "${common[@]}" $flags --log "$I" --checkpoint-dir "$D"
  local mp=$bg
  if ! wait_for 120 logged "$I" 5; then
    cat "$dir/i.out"
    fail "$name $how: the run to stop did not start"
    return
  fi
  case "$how" in
    rank-term)  # the last rank only, twice: the second one may land in the save
      local pid
      pid=$(last_rank_pid "$D" "$np")
      kill -TERM "$pid"
      sleep 0.05
      kill -TERM "$pid" 2>/dev/null
      ;;
    mpirun-usr1) kill -USR1 "$(pgrep -P "$mp")" ;;
    mpirun-term) kill -TERM "$(pgrep -P "$mp")" ;;
  esac
  wait "$mp"
  local code=$?
  local reached
  reached=$(wc -l <"$I")
  if [ "$how" = mpirun-term ]; then
    check "$name $how: mpirun ends with an error ($code: it was signalled itself)" [ "$code" -ne 0 ]
  else
    check "$name $how: the job exits 75, preempted and resumable ($code)" [ "$code" -eq 75 ]
  fi
  said_once "$name $how: one line says where it stopped" "preempted at step $reached of 400: checkpoint $D/ckpt-$(printf %08d "$reached").bin written" \
    "$dir/i.out"
  check "$name $how: the checkpoint of step $reached is there" \
    [ -f "$D/ckpt-$(printf %08d "$reached").bin" ]
  check "$name $how: it stopped mid-run ($reached of 400)" [ "$reached" -lt 400 ]
  # shellcheck disable=SC2086
  run "$np" 300 "$dir/r.out" "${common[@]}" $flags --log "$I" --checkpoint-dir "$D" --resume
  ok_run "$name $how: --resume" "$dir/r.out" &&
    check "$name $how: the resumed curve equals the uninterrupted one, bit for bit" \
      [ "$(file_losses "$I")" = "$(file_losses "$U")" ]
}

case_signal_rank() {
  local name np flags
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name np flags <<<"$layout"
    preempt "$name" "$np" "$flags" rank-term
  done
}

case_signal_mpirun() {
  local name np flags
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name np flags <<<"$layout"
    preempt "$name" "$np" "$flags" mpirun-usr1
    preempt "$name" "$np" "$flags" mpirun-term
  done
}

run_case

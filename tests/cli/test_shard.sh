#!/usr/bin/env bash
# The training state sharded over the mesh (train.shard, docs/design.md §6d) through
# gdn_train under mpirun, one ctest entry per case:
#   bash tests/cli/test_shard.sh <bin dir> <mpirun> <source dir> <case>
# Cases:
#   curves   20-step f32 loss curves of the tiny hybrid MoE model with --shard optimizer and
#            full and with --ep 2 and 4 (cp 2, dp 2 x cp 2, cp 4) agree with the replicated
#            ep 1 run within the CP tolerance
#   resume   f64: save at dp 2 x cp 2 --shard full --ep 2, resume at cp 4 --shard none --ep 1,
#            and the reverse: the continuation agrees with the uninterrupted run within
#            1e-12; resumed at the layout that saved, it is bit-identical; a set missing
#            one of its parts is skipped
#   bf16_ep  bf16: dp 2 --ep 2 keeps what the experts' backward reads as ep 1 does (the
#            received rows and the outputs back in bf16), so its losses are ep 1's to 1e-9
#            (they differed by 1e-5 when ep 2 kept them in f32)
#   refused  bad layouts (shard, ep) refused at start-up on every rank, with one message
# Losses are read from the --log JSON lines with jq (17 significant digits: equal strings
# are equal bits).
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
CONFIG="$SRC/configs/tiny-qwen3-next.json"
make_work_dir
SEQ=90  # not a multiple of cp * chunk_size for any cp here

# run_log NAME NP ARGS...: a run logging to $WORK/NAME.jsonl (log_run, common.sh).
run_log() { log_run 300 "$1" "$2" --config "$CONFIG" --seq-len "$SEQ" "${@:3}"; }
# agree NAME A B TOL: the same steps, and every |loss difference| <= TOL relative.
agree() {
  local d
  d=$(maxdiff "$2" "$3" relative)
  if [ "$d" != "steps differ" ] && awk -v d="$d" -v t="$4" 'BEGIN { exit !(d <= t) }'; then
    pass "$1: max relative |loss diff| = $d (<= $4)"
  else
    paste -d ' ' <(echo "$2") <(echo "$3")
    fail "$1: max relative |loss diff| = $d (tolerance $4)"
  fi
}

case_curves() {
  local layout name np dp cp variant
  for layout in "cp2 2 1 2" "dp2cp2 4 2 2" "cp4 4 1 4"; do
    read -r name np dp cp <<<"$layout"
    run_log "${name}_ref" "$np" --dp "$dp" --cp "$cp" --steps 20 ||
      fail "$name: the replicated 20-step run failed"
    for variant in "--shard optimizer" "--shard full" "--ep 2" "--ep 2 --shard full" \
      "--ep 4 --shard optimizer"; do
      [ "$np" -lt 4 ] && [[ "$variant" == *"--ep 4"* ]] && continue
      # shellcheck disable=SC2086
      run_log "${name}_variant" "$np" --dp "$dp" --cp "$cp" $variant --steps 20 ||
        fail "$name $variant: the 20-step run failed"
      agree "$name $variant vs replicated ep 1 (20 steps, f32)" "$(losses "${name}_ref")" \
        "$(losses "${name}_variant")" 1e-4
    done
  done
}

case_resume() {
  # resume_pair NAME SAVE_NP SAVE_ARGS -- RESUME_NP RESUME_ARGS: 3 steps at the first
  # layout, checkpoint, 3 more at the second; against 6 uninterrupted steps at the first.
  local full=(--dtype f64 --steps 6 --checkpoint-every 3)
  resume_pair() {
    local name=$1 np1=$2 a1=$3 np2=$4 a2=$5
    # shellcheck disable=SC2086
    run_log "${name}_whole" "$np1" $a1 "${full[@]}" --checkpoint-dir "$WORK/${name}_whole" &&
      run_log "${name}_part" "$np1" $a1 --dtype f64 --steps 3 --checkpoint-every 3 \
        --checkpoint-dir "$WORK/${name}_ckpt" &&
      run_log "${name}_resumed" "$np2" $a2 "${full[@]}" --resume \
        --checkpoint-dir "$WORK/${name}_ckpt" || {
      fail "$name: a run failed"
      return
    }
    if ! grep -q "at step 3" "$WORK/${name}_resumed.out"; then
      cat "$WORK/${name}_resumed.out"
      fail "$name: the resumed run did not resume at step 3"
    elif [ "$np1 $a1" = "$np2 $a2" ]; then
      if [ "$(pick "${name}_resumed" 3 5)" = "$(pick "${name}_whole" 3 5)" ]; then
        pass "$name: steps 3..5 bit-identical to the uninterrupted run"
      else
        paste -d ' ' <(pick "${name}_whole" 3 5) <(pick "${name}_resumed" 3 5)
        fail "$name: steps 3..5 differ from the uninterrupted run"
      fi
    else
      agree "$name: steps 3..5 vs the uninterrupted run" "$(pick "${name}_whole" 3 5)" \
        "$(pick "${name}_resumed" 3 5)" 1e-12
    fi
  }
  local a="--dp 2 --cp 2 --batch 4 --shard full --ep 2" b="--cp 4 --batch 4 --shard none --ep 1"
  resume_pair full_ep2_to_none 4 "$a" 4 "$b"
  # The set that run saved: one part per rank (each owns a part of every unit), and the
  # manifest; without one part it is torn and skipped.
  local set="$WORK/full_ep2_to_none_ckpt/ckpt-00000003.bin" parts
  parts=$(compgen -G "$set.part-*" | wc -l)
  if [ -f "$set" ] && [ "$parts" -eq 4 ]; then
    pass "shard full on 4 ranks saved a manifest and 4 parts"
  else
    ls -l "$WORK/full_ep2_to_none_ckpt"
    fail "shard full on 4 ranks saved $parts parts (expected 4 and a manifest)"
  fi
  mkdir -p "$WORK/torn_ckpt"
  cp "$set" "$set.part-00000" "$set.part-00001" "$set.part-00003" "$WORK/torn_ckpt/"
  set="$WORK/torn_ckpt/ckpt-00000003.bin"
  # shellcheck disable=SC2086
  run_log torn 4 $b --dtype f64 --steps 3 --resume --checkpoint-dir "$WORK/torn_ckpt"
  # It is the only one: --resume refuses the directory rather than start afresh.
  if [ "$(grep -c "skipping checkpoint $set: .*part-00002' is missing" "$WORK/torn.out")" -eq 1 ] &&
    grep -q "none of the 1 checkpoints in '$WORK/torn_ckpt' could be loaded" "$WORK/torn.out"; then
    pass "a set without one of its parts is skipped, with one warning, and no fresh start"
  else
    cat "$WORK/torn.out"
    fail "a set without one of its parts was not skipped with one warning and refused"
  fi
  resume_pair none_to_full_ep2 4 "$b" 4 "$a"
  resume_pair full_ep2_same 4 "$a" 4 "$a"
  resume_pair optimizer_ep4_same 4 "--cp 4 --batch 4 --shard optimizer --ep 4" 4 \
    "--cp 4 --batch 4 --shard optimizer --ep 4"
  resume_pair none_ep2_same 2 "--cp 2 --batch 4 --ep 2" 2 "--cp 2 --batch 4 --ep 2"
}

case_bf16_ep() {
  run_log bf16_ep1 2 --dp 2 --cp 1 --ep 1 --dtype bf16 --steps 4 &&
    run_log bf16_ep2 2 --dp 2 --cp 1 --ep 2 --dtype bf16 --steps 4 ||
    fail "bf16 dp 2: a run failed"
  agree "bf16 dp 2 --ep 2 vs --ep 1 (4 steps)" "$(losses bf16_ep1)" "$(losses bf16_ep2)" 1e-9
}

case_refused() {
  local out="$WORK/bad.out"
  bad() {  # bad NAME PHRASE NP ARGS...
    local name=$1 phrase=$2 np=$3
    shift 3
    timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$TRAIN" --config "$CONFIG" "$@" >"$out" 2>&1
    expect_once "$name" "$phrase" "$out" $?
  }
  bad "--shard partial" '--shard partial: expected "none" or "optimizer" or "full"' 2 --cp 2 \
    --shard partial
  jq '.train.shard = "zero3"' "$CONFIG" >"$WORK/zero3.json"
  bad "train.shard zero3" 'train.shard = "zero3"' 2 --config "$WORK/zero3.json" --cp 2
  bad "--ep 3 of 8 experts" "ep 3 (--ep) does not divide the 8 experts" 3 --cp 3 --ep 3
  bad "--ep 2 on 3 ranks" "ep 2 (--ep) does not divide the world of dp x cp = 3" 3 --cp 3 --ep 2
  bad "--ep 2 without MoE layers" "expert parallelism needs MoE layers" 2 \
    --config "$SRC/configs/tiny.json" --cp 2 --ep 2
  bad "--ep 0" "--ep 0: expected an integer >= 1" 2 --cp 2 --ep 0
}

run_case

#!/usr/bin/env bash
# Command-line tests of gdn_train under mpirun, run by ctest as
#   bash tests/cli/test_gdn_train.sh <gdn_train> <mpirun> <source dir>
# (1) loss curves of a 6-step f32 tiny run agree across cp = 1, 2, 4 and dp x cp = 2 x 2;
# (2) the same run twice gives bit-identical losses;
# (3) save at step 3 and resume: bit-identical at the same cp, within 1e-4 at another cp;
# (4) bad input: non-zero exit on all ranks, no hang, the message exactly once per job;
# (5) killing one rank ends the whole job within 30 s, and the last checkpoint loads;
# (6) on the shipped text the loss falls well below the text's unigram entropy;
# (7) a .u16 token file of the text's bytes trains bit-identically to the text itself;
# (8) data files are not held in memory: a rank's peak RSS does not grow with the file;
# (9) --profile changes no bit, and each step's components add up to its wall time;
# (10) --dtype bf16 on the hybrid MoE tiny model: reruns are bit-identical, cp = 2 and 4
#      agree with cp = 1 within 1e-2 (bf16's tolerance, docs/usage.md), and the loss after
#      20 steps is within 1% of the f32 run's, yet not equal to it.
# Losses are read from the --log JSON lines with jq; jq prints a double with 17
# significant digits, so equal strings mean equal bits.
set -uo pipefail

TRAIN=$1
MPIRUN=$2
SRC=$3
CONFIG="$SRC/configs/tiny.json"
TEXT="$SRC/data/public_domain.txt"
source "$(dirname "$0")/common.sh"
SEQ=250  # not a multiple of cp * chunk_size (64) for any cp tested

WORK=$(mktemp -d)
export TMPDIR="$WORK"  # the watchdog's heartbeat directories, removed with $WORK
KILL_PID=""
cleanup() {
  # The background job of check (5), if it is still there, and every process whose
  # command line names this run's private directory (all started by this script).
  if [ -n "$KILL_PID" ] && kill -0 "$KILL_PID" 2>/dev/null; then
    kill -TERM "$KILL_PID" 2>/dev/null
    sleep 1
    kill -KILL "$KILL_PID" 2>/dev/null
  fi
  kill_work_processes
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

train() {  # train NP ARGS...: gdn_train under mpirun, killed if it hangs
  local np=$1
  shift
  timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$TRAIN" "$@"
}

# run_log NAME NP ARGS...: a tiny run logging to $WORK/NAME.jsonl (log_run, common.sh).
run_log() { log_run 120 "$1" "$2" --config "$CONFIG" "${@:3}"; }

# steps_are NAME FIRST LAST: the log holds exactly steps FIRST..LAST, in order.
steps_are() { [ "$(jq -r .step "$WORK/$1.jsonl" 2>/dev/null | tr '\n' ' ')" = "$(seq -s ' ' "$2" "$3") " ]; }
# agree NAME REF A B TOL: pass when A and B hold the same steps and differ by <= TOL.
agree() {
  local name=$1 d
  d=$(maxdiff "$3" "$4")
  if [ "$d" != "steps differ" ] && awk -v d="$d" -v t="$5" 'BEGIN { exit !(d <= t) }'; then
    pass "$name: max |loss diff| = $d vs $2 (<= $5)"
  else
    paste -d ' ' <(echo "$3") <(echo "$4")
    fail "$name: max |loss diff| = $d vs $2 (tolerance $5)"
  fi
}

# ---------------------------------------------------------------- (1) loss curves across cp
for layout in "cp1 1 1 1" "cp2 2 1 2" "cp4 4 1 4" "dp2cp2 4 2 2"; do
  read -r name np dp cp <<<"$layout"
  if run_log "$name" "$np" --dp "$dp" --cp "$cp" --seq-len "$SEQ" && steps_are "$name" 0 5; then
    pass "$name: 6-step f32 run (-np $np, dp $dp, cp $cp, seq_len $SEQ)"
  else
    fail "$name: the 6-step run failed or did not log steps 0..5"
  fi
done
REF=$(losses cp1)
for name in cp2 cp4 dp2cp2; do
  agree "loss curve $name" "cp1" "$REF" "$(losses "$name")" 1e-4
done

# ---------------------------------------------------------------- (2) determinism
if run_log cp2_again 2 --cp 2 --seq-len "$SEQ" && steps_are cp2_again 0 5 &&
  [ "$(losses cp2_again)" = "$(losses cp2)" ]; then
  pass "determinism: two cp=2 runs give bit-identical losses"
else
  paste -d ' ' <(losses cp2) <(losses cp2_again)
  fail "determinism: two cp=2 runs differ"
fi

# ---------------------------------------------------------------- (3) resume
# The uninterrupted run, checkpointing at steps 3 and 6.
if run_log full 2 --cp 2 --seq-len "$SEQ" --steps 6 --checkpoint-dir "$WORK/ckpt_full" \
  --checkpoint-every 3 && steps_are full 0 5 && [ -f "$WORK/ckpt_full/ckpt-00000003.bin" ] &&
  [ -f "$WORK/ckpt_full/ckpt-00000006.bin" ]; then
  pass "uninterrupted run wrote ckpt-00000003.bin and ckpt-00000006.bin"
else
  ls -la "$WORK/ckpt_full" 2>&1
  fail "uninterrupted run with --checkpoint-every 3"
fi
# The interrupted one: 3 steps at cp=2, then a copy of the checkpoint directory per resume.
if run_log part 2 --cp 2 --seq-len "$SEQ" --steps 3 --checkpoint-dir "$WORK/ckpt_part" \
  --checkpoint-every 3 && steps_are part 0 2 && [ -f "$WORK/ckpt_part/ckpt-00000003.bin" ]; then
  for cp in 1 4; do
    cp -r "$WORK/ckpt_part" "$WORK/ckpt_part_cp$cp"
    cp "$WORK/part.jsonl" "$WORK/part_cp$cp.jsonl"
  done
  # resume NAME NP CP: --resume --steps 6 at cp CP, appending to NAME.jsonl.
  resume() {
    local dir="$WORK/ckpt_part${4:-}"
    if train "$2" --config "$CONFIG" --cp "$3" --seq-len "$SEQ" --steps 6 --resume \
      --checkpoint-dir "$dir" --checkpoint-every 3 --log "$WORK/$1.jsonl" >"$WORK/$1.out" 2>&1 &&
      grep -q "resumed from $dir/ckpt-00000003.bin at step 3" "$WORK/$1.out" && steps_are "$1" 0 5; then
      return 0
    fi
    cat "$WORK/$1.out"
    echo "logged steps: $(jq -r .step "$WORK/$1.jsonl" 2>/dev/null | tr '\n' ' ')"
    return 1
  }
  if resume part 2 2; then
    if [ "$(pick part 3 5)" = "$(pick full 3 5)" ] && [ "$(pick part 0 2)" = "$(pick full 0 2)" ]; then
      pass "resume at cp=2 from step 3: steps 3..5 bit-identical to the uninterrupted run"
    else
      paste -d ' ' <(losses full) <(losses part)
      fail "resume at cp=2: losses differ from the uninterrupted run"
    fi
  else
    fail "resume at cp=2 failed (no 'resumed from ... at step 3', or the log is not steps 0..5)"
  fi
  for cp in 4 1; do
    if resume "part_cp$cp" "$cp" "$cp" "_cp$cp"; then
      agree "resume at cp=$cp from a cp=2 checkpoint (steps 3..5)" "the uninterrupted cp=2 run" \
        "$(pick full 3 5)" "$(pick "part_cp$cp" 3 5)" 1e-4
    else
      fail "resume at cp=$cp from a cp=2 checkpoint failed"
    fi
  done
else
  fail "3-step run did not write ckpt-00000003.bin; resume checks skipped"
  failed=$((failed + 3))
fi

# ---------------------------------------------------------------- (4) bad input
# bad NAME PHRASE NP ARGS...: must exit non-zero (124 = hang) and the combined output
# must hold PHRASE exactly once (every rank refuses, one rank reports).
bad() {
  local name=$1 phrase=$2 np=$3
  shift 3
  timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$TRAIN" "$@" >"$WORK/bad.out" 2>&1
  expect_once "$name" "$phrase" "$WORK/bad.out" $?
}
ZIGZAG="requires contiguous, in-order shards"
jq '.train.context_parallel_load_balance = true' "$CONFIG" >"$WORK/lb.json"
jq '.train.stpes = 3' "$CONFIG" >"$WORK/typo.json"
jq '.model.linear_num_value_heads = 3 | .model.linear_num_key_heads = 2' "$CONFIG" >"$WORK/heads.json"
bad "--load-balance zigzag" "$ZIGZAG" 2 --config "$CONFIG" --cp 2 --load-balance zigzag
bad "context_parallel_load_balance: true" "$ZIGZAG" 2 --config "$WORK/lb.json" --cp 2
bad "unknown train key 'stpes'" "unknown train key 'stpes'" 2 --config "$WORK/typo.json" --cp 2
bad "missing --config file" "$WORK/no_such_config.json" 2 --config "$WORK/no_such_config.json" --cp 2
bad "Hv=3 not a multiple of Hk=2" "not a multiple of linear_num_key_heads" 2 \
  --config "$WORK/heads.json" --cp 2
bad "seq_len 1 below cp 2" "seq_len 1 (--seq-len) is below cp 2 (--cp)" 2 --config "$CONFIG" --cp 2 --seq-len 1
bad "dp*cp = 4 on 2 ranks" "but the job has world size 2" 2 --config "$CONFIG" --dp 2 --cp 2
bad "dp*cp = 4 on 3 ranks" "but the job has world size 3" 3 --config "$CONFIG" --dp 2 --cp 2
bad "missing --data file" "$WORK/no_such_text.txt" 2 --config "$CONFIG" --cp 2 \
  --data "$WORK/no_such_text.txt"
jq '.train.pair_scan = "ring"' "$CONFIG" >"$WORK/scan.json"
bad "--pair-scan ring" '--pair-scan ring: expected "allgather" or "log_depth" or "auto"' 2 \
  --config "$CONFIG" --cp 2 --pair-scan ring
bad "train.pair_scan ring" "train.pair_scan = \"ring\" in $WORK/scan.json: expected" 2 \
  --config "$WORK/scan.json" --cp 2

# ---------------------------------------------------------------- (5) kill one rank
KDIR="$WORK/ckpt_kill"  # its path marks this job's processes for pgrep
timeout 300 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" --config "$CONFIG" --cp 2 --steps 2000 \
  --checkpoint-every 2 --checkpoint-dir "$KDIR" >"$WORK/kill.out" 2>&1 &
KILL_PID=$!
wait_job "$KILL_PID" 60 compgen -G "$KDIR/ckpt-*.bin"  # the first checkpoint
# Rank 1, so the survivor is the rank that logs and writes checkpoints.
victim=$(rank_pid gdn_train "$KDIR" 1)
if ! compgen -G "$KDIR/ckpt-*.bin" >/dev/null || [ -z "$victim" ]; then
  cat "$WORK/kill.out"
  fail "kill: no checkpoint within 60 s or no running gdn_train rank found"
else
  signal_wait KILL 40 "$KILL_PID" "$victim"
  left=$(pgrep -f -- "$KDIR" | tr '\n' ' ')
  if kill -0 "$KILL_PID" 2>/dev/null; then
    fail "kill -9 of rank pid $victim: the job still runs after $secs s"
  elif [ -n "$left" ]; then
    fail "kill -9 of rank pid $victim: mpirun exited after $secs s but left processes $left"
  elif awk -v s="$secs" 'BEGIN { exit !(s <= 30) }'; then
    pass "kill -9 of rank pid $victim: the whole job ended in $secs s (<= 30)"
  else
    fail "kill -9 of rank pid $victim: the job took $secs s to end (> 30)"
  fi
  # The newest complete checkpoint must load: resume for one more step (of another cosine
  # than the killed run's 2000 steps: accepted).
  last=$(find "$KDIR" -maxdepth 1 -name 'ckpt-*.bin' | sort | tail -n 1)
  step=$((10#$(basename "$last" .bin | sed 's/^ckpt-//')))
  if train 2 --config "$CONFIG" --cp 2 --steps $((step + 1)) --resume --accept-changes schedule \
    --checkpoint-dir "$KDIR" \
    --log "$WORK/kill_resume.jsonl" >"$WORK/kill_resume.out" 2>&1 &&
    grep -q "resumed from $last at step $step" "$WORK/kill_resume.out" &&
    steps_are kill_resume "$step" "$step"; then
    pass "after the kill, $(basename "$last") (step $step) resumes and runs step $((step + 1))"
  else
    cat "$WORK/kill_resume.out"
    fail "after the kill, resuming from $(basename "$last") failed"
  fi
fi
wait "$KILL_PID" 2>/dev/null
KILL_PID=""

# ---------------------------------------------------------------- (6) learns on real text
# A model that only learned byte frequencies would sit at the unigram entropy; a loss
# clearly below it shows it uses the context. 100 steps at cp=2 take ~6 s here.
TEXT_STEPS=100
MARGIN=0.5
if run_log text 2 --cp 2 --data "$TEXT" --steps "$TEXT_STEPS" --seq-len 256 &&
  steps_are text 0 $((TEXT_STEPS - 1)); then
  H=$(grep -o 'unigram entropy [0-9.]*' "$WORK/text.out" | head -n 1 | awk '{ print $3 }')
  final=$(jq -r .loss "$WORK/text.jsonl" | tail -n 1)
  first=$(jq -r .loss "$WORK/text.jsonl" | head -n 1)
  if [ -z "$H" ]; then
    cat "$WORK/text.out"
    fail "text: no 'unigram entropy X nats' in the startup line"
  elif awk -v l="$final" -v h="$H" -v m="$MARGIN" 'BEGIN { exit !(l <= h - m) }'; then
    pass "text: loss $first -> $final after $TEXT_STEPS steps, unigram entropy $H nats (>= $MARGIN below)"
  else
    fail "text: final loss $final is not $MARGIN nats below the unigram entropy $H"
  fi
else
  fail "text: the run on $TEXT failed or did not log $TEXT_STEPS steps"
fi

# ---------------------------------------------------------------- (7) token file = text
# An independent oracle for the token-file path: the text's bytes written as little-endian
# uint16 ids (by python3, not by gdn-cp) are the same tokens, and the stream has the same
# length, so the seeded windows are the same too. Any difference in what the two paths read
# would change the losses, which must agree bit for bit (jq prints 17 digits).
TOKENS="$WORK/public_domain.u16"
if ! python3 -c 'import sys; d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b"".join(bytes((c, 0)) for c in d))' "$TEXT" "$TOKENS"; then
  fail "token file: could not write $TOKENS with python3"
elif [ "$(stat -c %s "$TOKENS")" -ne $((2 * $(stat -c %s "$TEXT"))) ]; then
  fail "token file: $TOKENS is not 2 bytes per byte of $TEXT"
elif run_log text20 2 --cp 2 --data "$TEXT" --steps 20 --seq-len 256 &&
  run_log tokens20 2 --cp 2 --data "$TOKENS" --steps 20 --seq-len 256 &&
  steps_are text20 0 19 && steps_are tokens20 0 19; then
  if ! grep -qF "token file $TOKENS ($(stat -c %s "$TEXT") tokens, uint16)" "$WORK/tokens20.out"; then
    cat "$WORK/tokens20.out"
    fail "token file: no 'token file $TOKENS (N tokens, uint16)' in the startup line"
  elif [ "$(losses tokens20)" = "$(losses text20)" ]; then
    pass "token file: 20 steps on $(basename "$TOKENS") are bit-identical to the text run"
  else
    paste -d ' ' <(losses text20) <(losses tokens20)
    fail "token file: the losses on $(basename "$TOKENS") differ from the text run"
  fi
else
  fail "token file: the 20-step runs on $TEXT and $TOKENS failed or did not log 20 steps"
fi
# The text's bytes go up to 'z' = 122 and beyond: a vocabulary of 100 is too small.
jq '.model.vocab_size = 100' "$CONFIG" >"$WORK/vocab100.json"
bad "token id beyond vocab_size" "$TOKENS': the token at index" 2 --config "$WORK/vocab100.json" \
  --cp 2 --data "$TOKENS"

# ---------------------------------------------------------------- (8) memory
# Each rank reads only its part of each window, from the file: a 256 MiB text (the shipped
# text repeated) and its .u16 (512 MiB) must leave every rank's peak RSS within a quarter
# of the text's size of a synthetic run's (ru_maxrss via python3; skipped without it).
# Holding the text, or a mapping that the id scan leaves resident, would add all of it.
# The text is that large because a CUDA build's start-up RSS (its libraries, ~230 MB) moves
# by 10-25 MB from run to run: a 64 MiB text's quarter was within that noise.
if command -v python3 >/dev/null 2>&1; then
  RSS="$(cd "$(dirname "$0")" && pwd)/peak_rss.py"
  python3 - "$TEXT" "$WORK/big.txt" "$WORK/big.u16" <<'PY'
import array, sys
b = open(sys.argv[1], "rb").read()
reps = (256 << 20) // len(b) + 1
u16 = array.array("H", list(b)).tobytes()  # one uint16 token per byte
with open(sys.argv[2], "wb") as t, open(sys.argv[3], "wb") as u:
    for _ in range(reps):
        t.write(b)
        u.write(u16)
PY
  peak_kb() {  # peak_kb ARGS...: the largest peak RSS over 2 ranks of a 1-step run
    timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 python3 "$RSS" "$TRAIN" --config "$CONFIG" \
      --cp 2 --steps 1 "$@" >"$WORK/mem.out" 2>&1 || { cat "$WORK/mem.out"; echo 0; return; }
    grep -o 'peak_rss_kb [0-9]* [0-9]*' "$WORK/mem.out" |
      awk 'BEGIN { m = 0 } $3 > m { m = $3 } END { print m }'
  }
  size_kb=$(($(stat -c %s "$WORK/big.txt") / 1024))
  base=$(peak_kb)
  for f in big.txt big.u16; do
    p=$(peak_kb --data "$WORK/$f")
    if [ "$base" -gt 0 ] && [ "$p" -gt 0 ] && [ $((p - base)) -le $((size_kb / 4)) ]; then
      pass "memory: peak RSS with $f ($size_kb KiB of text) is $((p - base)) KiB above synthetic"
    else
      fail "memory: peak RSS with $f is $((p - base)) KiB above synthetic ($base KiB; text $size_kb KiB)"
    fi
  done
else
  echo "SKIP: memory (no python3 to read each rank's peak RSS)"
fi
# ---------------------------------------------------------------- (9) profile
# The cp=2 run of (1) again with --profile: the same losses bit for bit, every step's
# "profile" holds the GDN layer's GEMMs, core and CP exchange and sums to its step_ms, and
# the table is printed after step 3 and after the last step.
if run_log cp2_profile 2 --cp 2 --seq-len "$SEQ" --profile && steps_are cp2_profile 0 5 &&
  [ "$(losses cp2_profile)" = "$(losses cp2)" ]; then
  pass "profile: --profile gives the same losses bit for bit"
else
  fail "profile: the --profile run failed or its losses differ"
fi
bad_steps=$(jq -r 'select(((.profile | has("gemm.gdn") and has("gdn_core") and
    has("comm.cp.fwd.allgather_pairs") and has("other")) | not)
    or (([.profile[]] | min) < 0)
    or ((((.profile | add) - .step_ms) | fabs) > 1e-6 * .step_ms)) | .step' \
  "$WORK/cp2_profile.jsonl" 2>&1)
if [ -z "$bad_steps" ] && [ "$(grep -c 'profile of rank 0, mean of steps 2-3' "$WORK/cp2_profile.out")" = 1 ] &&
  [ "$(grep -c 'profile of rank 0, mean of steps 2-6' "$WORK/cp2_profile.out")" = 1 ]; then
  pass "profile: every step's components add up to its step_ms; tables after steps 3 and 6"
else
  echo "steps with a bad profile: $bad_steps"
  grep 'profile' "$WORK/cp2_profile.out"
  fail "profile: a step's components are missing or do not add up, or a table is missing"
fi
# ---------------------------------------------------------------- (10) bf16
# bf16 rounds each layout's float noise to bf16 differently, so layouts agree to bf16's
# precision, not float's: each run's loss is within a few 2^-9 relative of the exact one,
# and 1e-2 is about 2^-9 of twice these losses (~4.2). Measured: 5e-4 over 20 steps.
CONFIG="$SRC/configs/tiny-qwen3-next.json"  # run_log's config from here on: hybrid, MoE
bf16_ok=1
for layout in "f32_cp1 1 f32" "bf16_cp1 1 bf16" "bf16_cp2 2 bf16" "bf16_cp4 4 bf16" "bf16_cp2_again 2 bf16"; do
  read -r name np dtype <<<"$layout"
  if ! run_log "$name" "$np" --cp "$np" --dp 1 --steps 20 --dtype "$dtype" ||
    ! steps_are "$name" 0 19; then
    fail "bf16: the 20-step $dtype run at cp=$np failed or did not log steps 0..19"
    bf16_ok=0
  fi
done
if [ "$bf16_ok" -eq 1 ]; then
  if [ "$(losses bf16_cp2_again)" = "$(losses bf16_cp2)" ]; then
    pass "bf16: two cp=2 runs give bit-identical losses"
  else
    fail "bf16: two cp=2 runs differ"
  fi
  agree "bf16 loss curve cp2" "bf16 cp1" "$(losses bf16_cp1)" "$(losses bf16_cp2)" 1e-2
  agree "bf16 loss curve cp4" "bf16 cp1" "$(losses bf16_cp1)" "$(losses bf16_cp4)" 1e-2
  f32_last=$(pick f32_cp1 19 19 | awk '{print $2}') bf16_last=$(pick bf16_cp1 19 19 | awk '{print $2}')
  if awk -v a="$bf16_last" -v b="$f32_last" 'BEGIN { d = a - b; if (d < 0) d = -d;
      exit !(d <= 0.01 * b && d > 0) }'; then
    pass "bf16: loss after 20 steps $bf16_last, f32 $f32_last (within 1%, not equal)"
  else
    fail "bf16: loss after 20 steps $bf16_last against f32 $f32_last (expected within 1%, not equal)"
  fi
fi
finish

#!/usr/bin/env bash
# gdn_plan against independent oracles, one case per ctest entry:
#
#   projections  qwen3-next-80b-a3b: the GDN projection FLOPs per token equal the hand count
#                from the config's values, 2 [d (2 Hk K + 2 Hv V) + d 2 Hv + Hv V d] (~67 M)
#   crossover    qwen3.5-35b-a3b: the per-layer crossover is within 10% of 1024 tokens per
#                shard (the MaxText pull request's figure)
#   cp_flops     qwen3-next-80b-a3b, 8192 tokens, cp = 4: the relative FLOP increase is
#                reported, and the added FLOPs equal a hand count of CP phase 1 (the
#                transition forward, the WY factors again and the adjoint backward)
#   exchange     tiny hybrid MoE model: the bytes and calls of every call site on every rank,
#                replicated and with the training state sharded (--shard optimizer, full),
#                and with the experts over ep ranks (the routed rows' bytes within 25% of a
#                balanced router's, every other number exact; with a router balanced by
#                construction, top-k = all experts, every number exact)
#                equal gdn_train's Communicator counters of a real step (cp = 2; cp = 4 with
#                layer_local and recomputation; dp 2 x cp 2 in f64)
#   memory       the per-rank estimate plus the process's start-up memory is within 25% of
#                gdn_train's measured peak RSS at three seq_len values (the table is printed)
#   flags        --help lists every flag; bad flags give one message naming the value, and
#                so does gdn_train --exchange-out to a path it cannot write
#   mfu          gdn_train's model TFLOP/s and MFU (cp 2, recomputation on, --peak-tflops):
#                its FLOPs a step (model_tflops x ranks x step time) equal gdn_plan's count
#                at cp 1 without recomputation; MFU is model_tflops over the peak; the start-up
#                line gives the peak's source, and without --peak-tflops the CPU's measured one
#   fewest       qwen3.5-397b-a17b at 1M tokens fits on at most 256 GPUs of 141 GiB with the
#                log-depth pair scan, and on none up to 16384 with the all-gather
#
#   test_gdn_plan.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
make_work_dir
NEXT="$SRC/configs/qwen3-next-80b-a3b.json"
Q35="$SRC/configs/qwen3.5-35b-a3b.json"
Q397="$SRC/configs/qwen3.5-397b-a17b.json"
TINY="$SRC/configs/tiny-qwen3-next.json"

# close A B REL: |A - B| <= REL |B|
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= r * m) }'; }

case_projections() {
  local hand got
  # The hand count, from the config's values only.
  hand=$(jq '.model | .hidden_size as $d | (.linear_num_key_heads * .linear_key_head_dim) as $qk |
             (.linear_num_value_heads * .linear_value_head_dim) as $vd |
             2 * ($d * (2 * $qk + 2 * $vd) + $d * 2 * .linear_num_value_heads + $vd * $d)' "$NEXT")
  got=$("$PLAN" --config "$NEXT" --seq-len 8192 --cp 4 --json |
    jq '.flops.components[] | select(.name == "gdn.projections") | .per_token_per_layer.fwd')
  if [ -n "$got" ] && close "$got" "$hand" 1e-12 && close "$hand" 67e6 0.01; then
    pass "projections: gdn_plan $got FLOP/token per GDN layer = hand count $hand (~67 M)"
  else
    fail "projections: gdn_plan '$got' vs hand count $hand (expected ~67e6)"
  fi
}

case_crossover() {
  local x
  x=$("$PLAN" --config "$Q35" --seq-len 65536 --cp 4 --json |
    jq '.exchange.crossover_tokens_per_shard.per_layer_forward')
  if [ -n "$x" ] && [ "$x" != null ] && close "$x" 1024 0.10; then
    pass "crossover: qwen3.5-35b-a3b per layer at cp = 4: $x tokens per shard (1024 +- 10%)"
  else
    fail "crossover: '$x' tokens per shard, expected 1024 +- 10%"
  fi
}

case_cp_flops() {
  local j rel added hand
  j=$("$PLAN" --config "$NEXT" --seq-len 8192 --cp 4 --json)
  rel=$(jq '.flops.relative_increase' <<<"$j")
  added=$(jq '.flops.step.total - .flops.step_cp1.total' <<<"$j")
  # CP phase 1 per chunk of C rows and value head (multiply-add = 2; triangles halved):
  # forward the transition, 4 C K^2 + 4 C K V; backward the WY factors again,
  # 3 C^2 K + C^2 V + C^3 / 3, and the adjoint pass, 6 C K V + C^2 V. The shards of
  # 8192 / 4 tokens are whole chunks, so the chunks are those of cp = 1.
  hand=$(jq --argjson T 8192 '(.model | (.num_hidden_layers - .num_hidden_layers / .full_attention_interval) as $gdn |
           .linear_key_head_dim as $K | .linear_value_head_dim as $V | 64 as $C |
           ($gdn * .linear_num_value_heads * ($T / $C) *
            (4*$C*$K*$K + 4*$C*$K*$V + 3*$C*$C*$K + $C*$C*$V + $C*$C*$C/3 + 6*$C*$K*$V + $C*$C*$V)))' "$NEXT")
  if [ -n "$rel" ] && [ "$rel" != null ] && close "$added" "$hand" 1e-9 &&
    awk -v r="$rel" 'BEGIN { exit !(r > 0) }'; then
    pass "cp_flops: cp = 4 over cp = 1 at 8192 tokens: $(awk -v r="$rel" 'BEGIN { printf "%+.3f%%", 100 * r }') (added $added FLOPs = hand count)"
  else
    fail "cp_flops: relative increase '$rel', added '$added' vs hand count $hand"
  fi
}

# exchange_case NAME NP ARGS...: a one-step gdn_train run recording its counters, and
# gdn_plan's prediction for the same flags; every rank's sites must be equal.
exchange_case() {
  local name=$1 np=$2
  shift 2
  local args=(--config "${EXCHANGE_CONFIG:-$TINY}" --seq-len 102 "$@")
  if ! timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$BIN/gdn_train" "${args[@]}" --steps 1 --device cpu \
    --exchange-out "$WORK/$name.measured.json" >"$WORK/$name.out" 2>&1; then
    cat "$WORK/$name.out"
    fail "exchange $name: gdn_train failed"
    return
  fi
  # With --ep the routed rows follow the router: gdn_plan prices a balanced one. Their sites'
  # calls must be equal, their bytes are compared in total (within 25%), the rest exactly;
  # with EXACT_ROUTED=1 (a router that is balanced: every token to every expert) all exactly.
  local routed='["moe.fwd.alltoall_tokens","moe.fwd.alltoall_out","moe.bwd.alltoall_dy","moe.bwd.alltoall_dx"]'
  [ "${EXACT_ROUTED:-0}" = 1 ] && routed='[]'
  local strip="map(.sites |= with_entries(if (.key | IN($routed[])) then .value |= {calls} else . end))"
  local total="[.[].sites | to_entries[] | select(.key | IN($routed[])) | .value.bytes_sent] | add // 0"
  "$PLAN" "${args[@]}" --json | jq -S '.exchange.ranks' >"$WORK/$name.predicted.raw.json"
  jq -S '.ranks' "$WORK/$name.measured.json" >"$WORK/$name.measured.raw.json"
  jq -S --argjson routed "$routed" "$strip" "$WORK/$name.predicted.raw.json" >"$WORK/$name.predicted.json"
  jq -S --argjson routed "$routed" "$strip" "$WORK/$name.measured.raw.json" >"$WORK/$name.measured.sorted.json"
  local want got
  want=$(jq --argjson routed "$routed" "$total" "$WORK/$name.predicted.raw.json")
  got=$(jq --argjson routed "$routed" "$total" "$WORK/$name.measured.raw.json")
  if ! awk -v a="$want" -v b="$got" 'BEGIN { exit !((a == 0 && b == 0) || (a > 0 && b >= 0.75 * a && b <= 1.25 * a)) }'; then
    fail "exchange $name: routed rows' bytes $got measured vs $want for a balanced router (beyond 25%)"
    return
  elif [ "$want" != 0 ]; then
    echo "exchange $name: routed rows' bytes $got measured, $want for a balanced router"
  fi
  local sites
  sites=$(jq '[.[].sites | keys[]] | unique | length' "$WORK/$name.measured.sorted.json")
  if [ "$sites" -gt 0 ] && cmp -s "$WORK/$name.predicted.json" "$WORK/$name.measured.sorted.json"; then
    pass "exchange $name: $np ranks x $sites call sites, calls and bytes equal to gdn_train's counters"
  else
    diff "$WORK/$name.predicted.json" "$WORK/$name.measured.sorted.json" | head -40
    fail "exchange $name: prediction (<) and gdn_train's counters (>) differ"
  fi
}

case_mfu() {
  local args=(--config "$TINY" --seq-len 102 --cp 2 --batch 2 --recompute layer)
  if ! timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$BIN/gdn_train" "${args[@]}" --steps 2 \
    --device cpu --peak-tflops 0.5 --log "$WORK/mfu.jsonl" >"$WORK/mfu.out" 2>&1; then
    cat "$WORK/mfu.out"
    fail "mfu: gdn_train failed"
    return
  fi
  local want got mfu tflops
  want=$("$PLAN" --config "$TINY" --seq-len 102 --cp 1 --batch 2 --json | jq '.flops.step_cp1 | .fwd + .bwd')
  # The FLOPs a step implied by the logged rate: per rank x 2 ranks x the step's seconds.
  got=$(jq -s '.[-1] | .model_tflops * 1e12 * 2 * .step_ms / 1000' "$WORK/mfu.jsonl")
  tflops=$(jq -s '.[-1].model_tflops' "$WORK/mfu.jsonl")
  mfu=$(jq -s '.[-1].mfu' "$WORK/mfu.jsonl")
  if [ -n "$want" ] && [ "$want" != null ] && close "$got" "$want" 1e-9; then
    pass "mfu: the logged model FLOPs a step ($got) are gdn_plan's at cp 1 ($want)"
  else
    fail "mfu: the logged model FLOPs a step $got vs gdn_plan's $want"
  fi
  if close "$mfu" "$(awk -v t="$tflops" 'BEGIN { printf "%.17g", t / 0.5 }')" 1e-9; then
    pass "mfu: MFU $mfu = model TFLOP/s $tflops over --peak-tflops 0.5"
  else
    fail "mfu: MFU $mfu is not model TFLOP/s $tflops over 0.5"
  fi
  if grep -q "MFU against 0.5 TFLOP/s per rank, --peak-tflops" "$WORK/mfu.out" &&
    grep -q "step time: measured .* MFU .*gdn_plan: the busiest rank's FLOPs at the peak take" "$WORK/mfu.out"; then
    pass "mfu: the start-up line names the peak, the closing line sets gdn_plan's time beside the measured"
  else
    grep "MFU\|step time" "$WORK/mfu.out"
    fail "mfu: the start-up or closing line is missing"
  fi
  # Without --peak-tflops a CPU run measures its own peak and says so.
  if timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 1 "$BIN/gdn_train" --config "$TINY" --seq-len 34 \
    --steps 1 --device cpu >"$WORK/mfu_cpu.out" 2>&1 &&
    grep -q "TFLOP/s per rank, this CPU's fp32 FMA peak" "$WORK/mfu_cpu.out"; then
    pass "mfu: a CPU run's peak is its measured FMA peak"
  else
    tail -5 "$WORK/mfu_cpu.out"
    fail "mfu: no measured CPU peak in the start-up line"
  fi
}

case_exchange() {
  exchange_case cp2 2 --cp 2 --batch 2
  # Both pair scans by name (auto takes log_depth at cp 4 here): the log-depth scan's
  # send_recv rounds, a pair each way where a peer exists (cp 3: a round with neither).
  exchange_case cp3_allgather 3 --cp 3 --batch 1 --pair-scan allgather
  exchange_case cp3_log_depth_recompute 3 --cp 3 --batch 2 --pair-scan log_depth \
    --recompute layer
  exchange_case dp2cp2_log_depth_ep2 4 --cp 2 --dp 2 --batch 4 --pair-scan log_depth --ep 2
  exchange_case cp4_balanced_recompute 4 --cp 4 --batch 2 --attention-load-balance layer_local \
    --recompute layer
  exchange_case dp2cp2_f64 4 --cp 2 --dp 2 --batch 4 --dtype f64
  # The bf16 mode: attention's K, V all-gather in bf16, everything else in f32.
  exchange_case cp4_bf16_recompute 4 --cp 4 --batch 2 --dtype bf16 --recompute layer
  # The sharded training state: per unit, the reduce-scatter's padded blocks and the
  # all-gathers' owned parts (3 ranks: parts of unequal size, some units' last part short).
  exchange_case cp2_shard_optimizer 2 --cp 2 --batch 2 --shard optimizer
  exchange_case dp2cp2_shard_full_recompute 4 --cp 2 --dp 2 --batch 4 --shard full \
    --recompute layer
  exchange_case cp3_shard_full 3 --cp 3 --batch 1 --shard full
  # Experts over ep ranks, replicated and sharded on top.
  exchange_case dp2cp2_ep2 4 --cp 2 --dp 2 --batch 4 --ep 2
  exchange_case cp4_ep4_shard_full_recompute 4 --cp 4 --batch 2 --ep 4 --shard full \
    --recompute layer
  exchange_case cp2_ep2_shard_optimizer 2 --cp 2 --batch 2 --ep 2 --shard optimizer
  # A router that is balanced by construction (top-k = all 8 experts): the routed rows'
  # bytes too equal the prediction exactly, on every rank.
  jq '.model.num_experts_per_tok = 8' "$TINY" >"$WORK/all_experts.json"
  EXCHANGE_CONFIG="$WORK/all_experts.json" EXACT_ROUTED=1 exchange_case all_experts_dp2cp2_ep2 4 \
    --cp 2 --dp 2 --batch 4 --ep 2
  EXCHANGE_CONFIG="$WORK/all_experts.json" EXACT_ROUTED=1 exchange_case \
    all_experts_cp4_ep4_shard_full_recompute 4 --cp 4 --batch 2 --ep 4 --shard full --recompute layer
}

# The memory model: bench-memory's GDN stack made small per token in FLOPs (d 64, vocab 256)
# so that activations dominate at lengths that run in seconds.
case_memory() {
  local cfg="$WORK/memory.json"
  jq '.model.vocab_size = 256 | .model.hidden_size = 64 | .model.intermediate_size = 128 |
      .model.num_hidden_layers = 8 | .model.layer_types = [range(8) | "linear_attention"] |
      .model.linear_key_head_dim = 32 | .model.linear_value_head_dim = 32' \
    "$SRC/configs/bench-memory.json" >"$cfg"
  peak() {  # peak NP T RECOMPUTE: the largest rank's peak RSS of a one-step run, bytes
    rm -f "$WORK/m.jsonl"
    if ! timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$1" "$BIN/gdn_train" --device cpu --config "$cfg" --cp "$1" \
      --seq-len "$2" --recompute "$3" --steps 1 --log "$WORK/m.jsonl" >"$WORK/m.out" 2>&1; then
      cat "$WORK/m.out" >&2
      return 1
    fi
    jq '.peak_rss' "$WORK/m.jsonl"
  }
  estimate() { "$PLAN" --config "$cfg" --cp "$1" --seq-len "$2" --recompute "$3" --json | jq '.memory.estimate.total'; }
  # What the process holds besides the estimate's parts (the binary, MPI, and in a CUDA
  # build its libraries, ~230 MB): the peak of a run with one token per rank, less that
  # run's own estimate (its parameters, gradients and moments), per rank count.
  local -A base
  local np p e
  for np in 1 2; do
    p=$(peak "$np" "$np" none) && e=$(estimate "$np" "$np" none) || { fail "memory: start-up run at cp $np"; return; }
    base[$np]=$((p - e))
  done
  echo "start-up memory (peak RSS at one token per rank - its estimate): cp 1 $((base[1] / 1048576)) MiB, cp 2 $((base[2] / 1048576)) MiB"
  printf "%8s %3s %9s %11s %11s %11s %9s\n" seq_len cp recompute "peak RSS" estimate "+start-up" "vs peak"
  local spec T rc pred
  for spec in "1 4096 none" "2 8192 none" "2 16384 layer"; do
    read -r np T rc <<<"$spec"
    if ! p=$(peak "$np" "$T" "$rc") || ! e=$(estimate "$np" "$T" "$rc"); then
      fail "memory: seq_len $T cp $np recompute $rc did not run"
      continue
    fi
    pred=$((e + base[$np]))
    printf "%8s %3s %9s %7d MiB %7d MiB %7d MiB %+8.1f%%\n" "$T" "$np" "$rc" $((p / 1048576)) \
      $((e / 1048576)) $((pred / 1048576)) "$(awk -v a="$pred" -v b="$p" 'BEGIN { print 100 * (a - b) / b }')"
    if close "$pred" "$p" 0.25; then
      pass "memory: seq_len $T, cp $np, recompute $rc: estimate + start-up within 25% of the peak RSS"
    else
      fail "memory: seq_len $T, cp $np, recompute $rc: estimate + start-up $pred vs peak RSS $p bytes"
    fi
  done
}

# qwen3.5-397b-a17b at 1M tokens on 141 GiB GPUs: on at most 256 with the log-depth scan
# (issue 37's target), on none up to 16384 with the all-gather's P pairs per layer.
case_fewest() {
  local fit none
  fit=$("$PLAN" --config "$Q397" --seq-len 1048576 --memory-gb 141 --json 2>/dev/null |
    jq -c '.memory.smallest_fit | [.world, .pair_scan, .total]')
  none=$("$PLAN" --config "$Q397" --seq-len 1048576 --memory-gb 141 --pair-scan allgather \
    --json 2>/dev/null | jq -c '.memory.smallest_fit')
  if jq -e '.[0] <= 256 and .[1] == "log_depth" and .[2] <= 141 * 1073741824' <<<"$fit" >/dev/null &&
    [ "$none" = null ]; then
    pass "fewest: qwen3.5-397b-a17b at 1M fits $fit (GPUs, scan, bytes); with allgather nowhere"
  else
    fail "fewest: qwen3.5-397b-a17b at 1M: '$fit' with auto, '$none' with allgather"
  fi
}

case_flags() {
  local help f out="$WORK/out" rc
  help=$("$PLAN" --help)
  for f in config train-config seq-len batch cp dp dtype chunk-size recompute \
    attention-load-balance pair-scan memory-gb cluster rank-gflops json help; do
    grep -q -- "--$f" <<<"$help" || fail "flags: --help does not list --$f"
  done
  pass "flags: --help lists every flag"
  run_plan() { "$PLAN" "$@" >"$out" 2>&1; rc=$?; }
  run_plan --config "$TINY" --seq-len 64 --cluster "nodes=2,gpus=8,nvlink_GBps=400,bandwidth=3" --rank-gflops 10
  expect_once "flags: unknown --cluster key" "unknown key 'bandwidth'" "$out" "$rc"
  run_plan --config "$TINY" --seq-len 64 --cp 16 --cluster "nodes=1,gpus=8,nvlink_GBps=400" --rank-gflops 10
  expect_once "flags: a layout larger than the cluster" "but the cluster has nodes x gpus = 1 x 8" "$out" "$rc"
  run_plan --config "$TINY" --seq-len 64 --cp 2 --pair-scan ring
  expect_once "flags: --pair-scan ring" '--pair-scan ring: expected "allgather" or "log_depth" or "auto"' "$out" "$rc"
  run_plan --config "$TINY" --seq-len 64 --memory-gb lots
  expect_once "flags: --memory-gb not a number" "--memory-gb lots: expected a decimal number > 0" "$out" "$rc"
  run_plan --config "$TINY" --seq-len 64 --cluster "nodes=1,gpus=8,nvlink_GBps=400" --rank-gflops 1e306
  expect_once "flags: a --rank-gflops past any GPU (no 'inf GFLOP/s')" \
    "--rank-gflops 1e306: expected a number <= 1e+12" "$out" "$rc"
  run_plan --config "$TINY" --seq-len 64 --cp 0x2
  expect_once "flags: hex is not a number" "--cp 0x2: expected an integer >= 1" "$out" "$rc"
  if run_plan --config "$TINY" --seq-len 64 --cp 1.0 && [ "$rc" -eq 0 ]; then
    pass "flags: --cp 1.0 is 1"
  else
    cat "$out"
    fail "flags: --cp 1.0 refused"
  fi
  run_plan --config "$TINY" --seq-len 2 --cp 3
  expect_once "flags: seq_len below cp" "seq_len 2 (--seq-len) is below cp 3" "$out" "$rc"
  run_plan --config "$TINY" --rank-gflops 10
  expect_once "flags: --rank-gflops without --cluster" "--rank-gflops is used with --cluster" "$out" "$rc"
  timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$BIN/gdn_train" --config "$TINY" --cp 2 --steps 1 \
    --seq-len 64 --device cpu --exchange-out "$WORK/no/such/dir/x.json" >"$out" 2>&1
  expect_once "flags: gdn_train --exchange-out into a missing directory" \
    "/no/such/dir' does not exist" "$out" "$?"
  local bare="$SRC/tests/fixtures/hf/qwen3_5_moe/config.json"
  run_plan --config "$bare"
  expect_once "flags: a bare config.json without --seq-len" "train.seq_len is not set" "$out" "$rc"
  if "$PLAN" --config "$bare" --seq-len 128 --cp 2 --json 2>/dev/null | jq -e '.layout.cp == 2' >/dev/null; then
    pass "flags: a bare Hugging Face config.json with --seq-len"
  else
    fail "flags: a bare Hugging Face config.json with --seq-len"
  fi
}

run_case

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
#   exchange     tiny hybrid MoE model: the bytes and calls of every call site on every rank
#                equal gdn_train's Communicator counters of a real step (cp = 2; cp = 4 with
#                layer_local and recomputation; dp 2 x cp 2 in f64)
#   memory       the per-rank estimate plus the process's start-up memory is within 25% of
#                gdn_train's measured peak RSS at three seq_len values (the table is printed)
#   flags        --help lists every flag; bad flags give one message naming the value
#
#   test_gdn_plan.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
BIN=$1 MPIEXEC=$2 SRC=$3 CASE=$4
source "$(dirname "$0")/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PLAN="$BIN/gdn_plan"
NEXT="$SRC/configs/qwen3-next-80b-a3b.json"
Q35="$SRC/configs/qwen3.5-35b-a3b.json"
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
  local args=(--config "$TINY" --seq-len 102 "$@")
  if ! timeout 120 "$MPIEXEC" "${MPI_FLAGS[@]}" -np "$np" "$BIN/gdn_train" "${args[@]}" --steps 1 \
    --exchange-out "$WORK/$name.measured.json" >"$WORK/$name.out" 2>&1; then
    cat "$WORK/$name.out"
    fail "exchange $name: gdn_train failed"
    return
  fi
  "$PLAN" "${args[@]}" --json | jq -S '.exchange.ranks' >"$WORK/$name.predicted.json"
  jq -S '.ranks' "$WORK/$name.measured.json" >"$WORK/$name.measured.sorted.json"
  local sites
  sites=$(jq '[.[].sites | keys[]] | unique | length' "$WORK/$name.measured.sorted.json")
  if [ "$sites" -gt 0 ] && cmp -s "$WORK/$name.predicted.json" "$WORK/$name.measured.sorted.json"; then
    pass "exchange $name: $np ranks x $sites call sites, calls and bytes equal to gdn_train's counters"
  else
    diff "$WORK/$name.predicted.json" "$WORK/$name.measured.sorted.json" | head -40
    fail "exchange $name: prediction (<) and gdn_train's counters (>) differ"
  fi
}

case_exchange() {
  exchange_case cp2 2 --cp 2 --batch 2
  exchange_case cp4_balanced_recompute 4 --cp 4 --batch 2 --attention-load-balance layer_local \
    --recompute layer
  exchange_case dp2cp2_f64 4 --cp 2 --dp 2 --batch 4 --dtype f64
}

case "$CASE" in
  projections) case_projections ;;
  crossover) case_crossover ;;
  cp_flops) case_cp_flops ;;
  exchange) case_exchange ;;
  memory) case_memory ;;
  flags) case_flags ;;
  *) echo "test_gdn_plan.sh: unknown case '$CASE'" >&2; exit 2 ;;
esac
finish

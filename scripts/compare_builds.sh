#!/usr/bin/env bash
# Whether a change kept gdn_train's behaviour: runs the same training runs with two builds'
# gdn_train (a refactor's before and after) and compares what they wrote, byte for byte:
# every step line's numbers (the JSON log without its timings), every checkpoint part, every
# exported file, and the manifests (where they differ only in the config text they record,
# a change that adds a key, that is said on the run's line). Both builds run in the same directory, one after the
# other (a manifest records the run's paths), and their outputs are moved aside.
#
#   scripts/compare_builds.sh --old OLD_GDN_TRAIN --new NEW_GDN_TRAIN [--out DIR] [--steps N]
#
# The runs are the layouts the engine's paths differ by (f64 unless named): cp 2; dp 2 x
# cp 2 x ep 2; --shard optimizer; --shard full --ep 2 with packed documents; cp 3 with
# --recompute layer; --dtype bf16 at cp 2; and an f64 --export-hf. Prints one line per run
# ("same" or what differs) and exits 1 when any differs. Needs mpirun (4 ranks,
# oversubscribed) and jq.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
. "$(dirname "$0")/lib/args.sh"
cd "$(dirname "$0")/.."
OLD="" NEW="" OUT="" STEPS=4
parse_args "$0" --old OLD --new NEW --out OUT --steps STEPS -- "$@"
for b in "$OLD" "$NEW"; do
  [ -n "$b" ] && [ -x "$b" ] || { echo "compare_builds.sh: --old and --new must name gdn_train executables (got '$b')" >&2; exit 2; }
done
OLD=$(realpath "$OLD") NEW=$(realpath "$NEW")
. scripts/lib/mpi.sh
[ -n "$OUT" ] || { OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT; }
mkdir -p "$OUT"
CFG=configs/tiny-qwen3-next.json
COMMON=(--config "$CFG" --steps "$STEPS" --seed 7 --checkpoint-every 2)

# manifests_match A B: two checkpoint manifests agree in everything but the config text
# they record (the parts, their sizes and checksums, the parameters, the step).
manifests_match() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def manifest(path):
    data = open(path, "rb").read()
    size = int.from_bytes(data[8:16], "little")  # the header's, after the 8-byte magic
    doc = json.loads(data[16:16 + size])
    doc.pop("config_json", None)
    return doc
sys.exit(0 if manifest(sys.argv[1]) == manifest(sys.argv[2]) else 1)
PY
}

# run NAME NP FLAGS...: both builds, then the comparison; @DIR@ in FLAGS is the side's
# output directory.
status=0
run() {
  local name=$1 np=$2 side bin why="" config_only="" dir a
  shift 2
  for side in old new; do
    bin=$OLD
    [ "$side" = new ] && bin=$NEW
    dir=$OUT/$name.run
    rm -rf "$dir" "$OUT/$name.$side"
    mkdir -p "$dir"
    local flags=()
    for a in "$@"; do flags+=("${a//@DIR@/$dir}"); done
    if ! OMP_NUM_THREADS=1 mpirun "${MPI_FLAGS[@]}" --bind-to none -np "$np" "$bin" "${COMMON[@]}" \
      --log "$dir/log.jsonl" --checkpoint-dir "$dir/ckpt" "${flags[@]}" \
      >"$OUT/$name.$side.out" 2>&1; then
      echo "$name: the $side build failed ($OUT/$name.$side.out):"
      tail -n 5 "$OUT/$name.$side.out" | sed 's/^/  /'
      status=1
      return
    fi
    mv "$dir" "$OUT/$name.$side"
  done
  # The step lines without what is timed.
  for side in old new; do
    jq -c 'del(.step_ms, .peak_rss, .peak_device, .model_tflops, .mfu)' \
      "$OUT/$name.$side/log.jsonl" >"$OUT/$name.$side/steps.json"
  done
  cmp -s "$OUT/$name.old/steps.json" "$OUT/$name.new/steps.json" || why+=" step lines;"
  local f rel
  while IFS= read -r f; do
    rel=${f#"$OUT/$name.old/"}
    case "$rel" in log.jsonl | steps.json | *.lock) continue ;; esac
    cmp -s "$f" "$OUT/$name.new/$rel" 2>/dev/null && continue
    # A manifest (ckpt-N.bin) records the run's config and identity: a change that adds a
    # key there differs in that text alone, which is said apart from a real difference.
    if [[ $rel == */ckpt-*.bin ]] && manifests_match "$f" "$OUT/$name.new/$rel"; then
      config_only+=" $rel;"
      continue
    fi
    why+=" $rel;"
  done < <(find "$OUT/$name.old" -type f | sort)
  if [ -z "$why" ]; then
    echo "$name: same ($(wc -l <"$OUT/$name.old/steps.json") step lines, $(find "$OUT/$name.old" -type f | wc -l) files)${config_only:+; the recorded config of the manifests differs:$config_only}"
  else
    echo "$name: DIFFERS:$why"
    status=1
  fi
}

run cp2 2 --cp 2 --dtype f64
run dp2_cp2_ep2 4 --dp 2 --cp 2 --ep 2 --dtype f64
run shard_optimizer 2 --dp 2 --cp 1 --shard optimizer --dtype f64
run shard_full_ep2_documents 4 --dp 2 --cp 2 --ep 2 --shard full --documents eos \
  --data data/public_domain.txt --dtype f64
run cp3_recompute 3 --cp 3 --recompute layer --dtype f64
run bf16_cp2 2 --cp 2 --dtype bf16
run export_f64 2 --cp 2 --dtype f64 --export-hf @DIR@/export --export-dtype f64
exit "$status"

#!/usr/bin/env bash
# The layer rules of docs/design.md §7, checked on the source tree; ctest runs it.
#   1. Folders are libraries in one order: core < runtime < comm < ops < gdn < cp < model
#      < train < plan < apps. A file may include only its own folder and the folders before it,
#      and a folder's CMakeLists may link only the libraries of the folders before it.
#   2. No file includes another folder's *_impl.h.
#   3. Only src/comm and src/runtime talk to MPI (<mpi.h>); src/ops and src/gdn have no
#      communication at all (no comm/): the exchanges that feed them (the conv halo, the
#      pair all-gather, the log-depth scan) live in src/cp; everything else reaches other
#      ranks through the Communicator.
#   4. src/cp holds only what exchanges: each of its .cpp / .cu files reaches the cp group
#      (includes comm/, names a Communicator or takes a CpContext, which carries it), apart
#      from shard and documents, the boundaries the exchanges are cut by.
#   5. src/ops instantiates its templates by their signatures, one line each: no macro
#      holds a list of explicit instantiations (a `template` in a #define's body).
#   6. Inside src/gdn the parts are layers too (design.md §7, the GDN phases): the folder's
#      own files (the problem, the recurrence oracle) < chunk/ < the phases, in pipeline
#      order (prepare < state_walk < outputs < adjoint_walk < backward), with pairs/ beside
#      them (neither uses the other) < pass/ < split/ < op/. A file includes only its own
#      part and the parts below it.
# Prints every violation with its file and line; exits 1 if there is one.
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
order=(core runtime comm ops gdn cp model train plan)
declare -A rank lib
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
lib=([core]=gdncp_core [runtime]=gdncp_runtime [comm]=gdncp_comm [ops]=gdncp_ops [gdn]=gdncp_gdn
     [cp]=gdncp_cp [model]=gdncp_model [train]=gdncp_train [plan]=gdncp_plan)
bad=0
violation() { echo "layer rule: $*"; bad=1; }

for folder in "${order[@]}" apps; do
  if [ "$folder" = apps ]; then dir=apps; r=${#order[@]}; else dir=src/$folder; r=${rank[$folder]}; fi
  [ -d "$dir" ] || { violation "$dir is missing"; continue; }
  while IFS= read -r file; do
    while IFS=: read -r line inc; do
      [ -n "$line" ] || continue
      target=${inc%%/*}
      if [ -n "${rank[$target]+x}" ] && [ "${rank[$target]}" -gt "$r" ]; then
        violation "$file:$line includes \"$inc\": $folder may not use $target (it comes later)"
      fi
      if [[ "$inc" == *_impl.h ]] && [ "$target" != "$folder" ]; then
        violation "$file:$line includes another folder's $inc"
      fi
      if { [ "$folder" = ops ] || [ "$folder" = gdn ]; } && [ "$target" = comm ]; then
        violation "$file:$line includes \"$inc\": src/$folder has no communication"
      fi
    done < <(grep -n '^#include "' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
    if [ "$folder" != comm ] && [ "$folder" != runtime ] && [ "$folder" != apps ]; then
      grep -n '#include <mpi.h>' "$file" | while IFS=: read -r line _; do
        echo "layer rule: $file:$line includes <mpi.h>: only src/comm and src/runtime talk to MPI"
      done | grep . && bad=1
    fi
    if [ "$folder" = ops ]; then
      # Each #define with its continuation lines; one whose body says `template` is a list.
      awk '/^[[:space:]]*#[[:space:]]*define/ { d = 1; start = FNR; body = "" }
           d { body = body " " $0; if ($0 !~ /\\$/) { if (body ~ /[^[:alnum:]_]template[[:space:]]/) print start; d = 0 } }' "$file" |
        while read -r line; do
          echo "layer rule: $file:$line instantiates through a macro: write each instantiation out"
        done | grep . && bad=1
    fi
  done < <(find "$dir" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \))
  # Link edges of the folder's library.
  [ "$folder" = apps ] && continue
  cm="$dir/CMakeLists.txt"
  [ -f "$cm" ] || { violation "$cm is missing: every folder is a library"; continue; }
  grep -q "add_library(${lib[$folder]}" "$cm" || violation "$cm does not define ${lib[$folder]}"
  for other in "${order[@]}"; do
    if [ "${rank[$other]}" -ge "$r" ] && [ "$other" != "$folder" ] &&
      grep -E "target_link_libraries\(${lib[$folder]}" -A3 "$cm" | grep -w "${lib[$other]}" >/dev/null; then
      violation "$cm links ${lib[$other]}: $folder may not depend on $other"
    fi
  done
done
# Rule 6: the parts of src/gdn. below[P] lists what part P may include besides itself.
declare -A below
below=([base]="" [chunk]="base" [prepare]="base chunk" [state_walk]="base chunk prepare"
       [outputs]="base chunk prepare state_walk"
       [adjoint_walk]="base chunk prepare state_walk outputs"
       [backward]="base chunk prepare state_walk outputs adjoint_walk" [pairs]="base chunk")
phases="prepare state_walk outputs adjoint_walk backward"
below[pass]="base chunk $phases pairs"
below[split]="${below[pass]} pass"
below[op]="${below[split]} split"
gdn_part() {  # gdn/X/... -> X; a file of the folder itself -> base
  local rest=${1#gdn/}
  if [[ $rest == */* ]]; then echo "${rest%%/*}"; else echo base; fi
}
part_name() { [ "$1" = base ] && echo "gdn's own files" || echo "gdn/$1"; }
while IFS= read -r file; do
  part=$(gdn_part "${file#src/}")
  [ -n "${below[$part]+x}" ] || { violation "$file: src/gdn/$part is not a part of the GDN engine's order (tests/check_layers.sh rule 6)"; continue; }
  while IFS=: read -r line inc; do
    [ -n "$line" ] || continue
    target=$(gdn_part "$inc")
    [ "$target" = "$part" ] && continue
    [[ " ${below[$part]} " == *" $target "* ]] ||
      violation "$file:$line includes \"$inc\": $(part_name "$part") may not use $(part_name "$target") (the order inside src/gdn: base < chunk < prepare < state_walk < outputs < adjoint_walk < backward, pairs beside them, < pass < split < op)"
  done < <(grep -n '^#include "gdn/' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
done < <(find src/gdn -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \))
# Rule 4: every translation unit in src/cp exchanges.
while IFS= read -r file; do
  case "$(basename "$file")" in shard.cpp | documents.cpp) continue ;; esac
  grep -qE '#include "comm/|Communicator|CpContext' "$file" "${file%.*}.h" 2>/dev/null ||
    violation "$file exchanges nothing (no comm/, Communicator or CpContext): it belongs in src/gdn"
done < <(find src/cp -type f \( -name '*.cpp' -o -name '*.cu' \))
if [ "$bad" -eq 0 ]; then
  echo "layer rules hold: ${order[*]} < apps, no back edges, no foreign *_impl.h, MPI in comm/runtime only, no comm/ in ops or gdn, every cp unit exchanges, no instantiation macros in ops, src/gdn in its order (base < chunk < phases | pairs < pass < split < op)"
fi
exit "$bad"

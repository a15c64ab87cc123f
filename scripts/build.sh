#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures build/ in Release and builds
# everything: the libraries, the apps in build/apps and the tests.
#
#   scripts/build.sh [TARGET...]
#
# With TARGETs (CMake target names: gdn_train, gdn_eval, ...) it builds only those and what
# they link: the main job builds gdn_train alone (~4 min from scratch on 2 cores instead of
# ~10), and a later full build (the test command) builds the rest, nothing twice.
#
# The whole output of the three stages (setup, configure, build) goes to build/build.log
# (BUILD_DIR/build.log; rewritten each run). stderr shows the stage, the build's percent
# (CMake's "[ NN%]" lines; ninja's "[N/M]") and the time so far: one line rewritten in place
# on a terminal, a plain line every 30 s otherwise (CI, a pipe), then "built in ...". Set-up's
# own lines ("setup: ...": what it installs, its warnings) are shown as they come. When a
# stage fails it says which, names the log and prints its last 40 lines (and the first
# error when that is earlier), and exits with the stage's status.
#
# GDN_BUILD_DIR: another build directory (side-by-side builds); GDN_JOBS: the job count
# (default nproc); GDN_BUILD_VERBOSE=1: the whole output as it comes, on stdout (and in the
# log), instead of the progress line.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
case "${1:-}" in -h | --help) print_help "$0"; exit 0 ;; -*) echo "build.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;; esac
TARGETS=()
for t in "$@"; do TARGETS+=(--target "$t"); done
cd "$(dirname "$0")/.."
# The CUDA toolkit, where the machine has one, may not be on PATH in batch shells.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
BUILD_DIR=${GDN_BUILD_DIR:-build}  # another directory for side-by-side builds
mkdir -p "$BUILD_DIR"
LOG=$BUILD_DIR/build.log
exec 3>"$LOG"
START=$SECONDS
TTY=0
[ -t 2 ] && TTY=1
VERBOSE=${GDN_BUILD_VERBOSE:-0}

elapsed() {
  local s=$((SECONDS - START))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# show STAGE [PCT]: the progress line.
show() {
  local line="build.sh: $1${2:+ $2%}, $(elapsed)"
  if [ "$TTY" = 1 ]; then
    printf '\r%s\033[K' "$line" >&2
  else
    printf '%s\n' "$line" >&2
  fi
}

# follow STAGE: copies stdin into the log, line by line, and keeps the progress line up to
# date: on a terminal every second, otherwise every 30 s.
follow() {
  local stage=$1 line pct="" p shown=$SECONDS next=$((SECONDS + 30)) status
  while :; do
    if IFS= read -r -t 1 line; then
      printf '%s\n' "$line" >&3
      p=""
      if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
        p=${BASH_REMATCH[1]}
      elif [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] && [ "${BASH_REMATCH[2]}" -gt 0 ]; then
        p=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
      fi
      # Parallel jobs report out of order: the percent shown never goes back.
      if [ -n "$p" ] && { [ -z "$pct" ] || [ "$((10#$p))" -gt "$pct" ]; }; then
        pct=$((10#$p))
        [ "$TTY" = 1 ] && show "$stage" "$pct" && shown=$SECONDS
      fi
      if [[ $line == setup:* ]]; then  # set-up's own messages, on a line of their own
        [ "$TTY" = 1 ] && printf '\r\033[K' >&2
        printf '%s\n' "$line" >&2
        [ "$TTY" = 1 ] && show "$stage" "$pct"
      fi
    else
      status=$?
      if [ "$status" -le 128 ]; then  # end of input, not a timeout: the last line
        [ -n "$line" ] && printf '%s\n' "$line" >&3
        break
      fi
      [ -n "$line" ] && printf '%s' "$line" >&3  # a partial line: the rest comes next
    fi
    if [ "$TTY" = 1 ] && [ "$SECONDS" -ne "$shown" ]; then
      show "$stage" "$pct"
      shown=$SECONDS
    elif [ "$TTY" = 0 ] && [ "$SECONDS" -ge "$next" ]; then
      show "$stage" "$pct"
      next=$((SECONDS + 30))
    fi
  done
}

# stage NAME CMD...: runs CMD with its output into the log (and the progress line on
# stderr); on failure reports it and exits with CMD's status.
stage() {
  local name=$1 rc
  shift
  STAGE=$name
  printf '==== %s: %s\n' "$name" "$*" >&3
  set +e
  if [ "$VERBOSE" = 1 ]; then
    "$@" 2>&1 | tee /dev/fd/3
  else
    show "$name"
    "$@" 2>&1 | follow "$name"
  fi
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] && return 0
  [ "$TTY" = 1 ] && [ "$VERBOSE" != 1 ] && printf '\n' >&2
  exec 3>&-
  {
    echo "build.sh: the $name stage failed (exit $rc) after $(elapsed): the whole output is in $LOG; its last 40 lines:"
    tail -n 40 "$LOG" | awk '{ print "  " $0 }'
    local first total
    first=$(grep -n -m 1 -E ': (fatal )?error:|^CMake Error|Error [0-9]+$' "$LOG" | cut -d: -f1)
    total=$(wc -l <"$LOG")
    if [ -n "$first" ] && [ "$first" -le $((total - 40)) ]; then
      echo "build.sh: the first error, line $first of $LOG:"
      sed -n "${first},$((first + 9))p" "$LOG" | awk '{ print "  " $0 }'
    fi
  } >&2
  exit "$rc"
}

# Ctrl-C (or a TERM) reaches the stage's processes too; this says where it stopped.
STAGE=""
interrupted() {
  [ "$TTY" = 1 ] && [ "$VERBOSE" != 1 ] && printf '\n' >&2
  echo "build.sh: interrupted in the $STAGE stage after $(elapsed) (log: $LOG)" >&2
  exit 130
}
trap interrupted INT TERM
stage setup bash scripts/setup.sh
# Ninja where it is installed (setup.sh installs ninja-build): it starts a target's objects
# without waiting for the libraries the target links, as make does, which on 2 cores took
# gdn_train's build from 4m20s to 3m33s. A build directory keeps the generator it was
# first configured with.
GENERATOR=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  GENERATOR=(-G Ninja)
fi
stage configure cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release
stage build cmake --build "$BUILD_DIR" -j"${GDN_JOBS:-$(nproc)}" "${TARGETS[@]}"
if [ "$VERBOSE" = 1 ]; then
  echo "build.sh: built in $(elapsed) (log: $LOG)" >&2
elif [ "$TTY" = 1 ]; then
  printf '\rbuild.sh: built in %s (log: %s)\033[K\n' "$(elapsed)" "$LOG" >&2
else
  echo "build.sh: built in $(elapsed) (log: $LOG)" >&2
fi

#!/usr/bin/env bash
# A real one-node Slurm on this host, for the tests and for trying the batch script:
#
#   scripts/slurm/local_slurm.sh start [DIR]   # install if missing, configure, start, wait for idle
#   eval "$(scripts/slurm/local_slurm.sh env [DIR])"   # SLURM_CONF for sbatch, srun, sinfo...
#   scripts/slurm/local_slurm.sh stop [DIR]    # cancel jobs, end every daemon and job, remove DIR
#
# Everything lives in DIR (default $GDN_SLURM_DIR, else ${TMPDIR:-/tmp}/gdn-slurm): its own
# slurm.conf, munge key and socket, ports, spool, state and logs, so nothing in /etc is
# read or changed and it cannot clash with a system Slurm or with another local one.
# Slurm's daemons must run as root; without root, or without the packages and apt-get,
# `start` exits 77 (the tests' SKIP). Daemons that do not come up: exit 1 with their logs.
# With GDN_SLURM_OWNER=PID, a detached watcher stops the cluster once PID has gone, even
# if PID was killed (SIGKILL, a test runner's timeout) before it could call `stop`.
set -uo pipefail

CMD=${1:-}
DIR=${2:-${GDN_SLURM_DIR:-${TMPDIR:-/tmp}/gdn-slurm}}
[ -d "$DIR" ] && DIR=$(cd "$DIR" && pwd)
CONF=$DIR/slurm.conf
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
SOCK=$DIR/sock/munge.socket
say() { echo "local_slurm: $*" >&2; }
usage() { say "usage: $0 start|stop|env [DIR]"; exit 2; }

# The daemons are started with GDN_LOCAL_SLURM=$DIR in their environment, which slurmstepd
# inherits; the jobs' processes carry SLURM_CONF=$CONF and a SLURM_JOB_ID. That is how
# `stop` finds every process of this cluster, also after a failed start or a lost pid file.
ours() {
  local p env
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    { [ "$p" = $$ ] || [ "$p" = "$BASHPID" ]; } && continue
    env=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
    if grep -qxF "GDN_LOCAL_SLURM=$DIR" <<<"$env" ||
      { grep -qxF "SLURM_CONF=$CONF" <<<"$env" && grep -q '^SLURM_JOB_ID=' <<<"$env"; }; then
      echo "$p"
    fi
  done
}

stop() {
  [ -d "$DIR" ] || return 0
  local sig pids _
  if [ -f "$CONF" ] && command -v scancel >/dev/null; then
    SLURM_CONF=$CONF timeout 10 scancel --full --signal=KILL --user=root >/dev/null 2>&1
    for _ in $(seq 20); do  # up to 10 s for slurmstepd to end the jobs
      [ -z "$(SLURM_CONF=$CONF timeout 5 squeue -h -o %i 2>/dev/null | head -1)" ] && break
      sleep 0.5
    done
  fi
  for sig in TERM KILL; do
    pids=$(ours)
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -"$sig" $pids 2>/dev/null
    for _ in $(seq 50); do  # up to 5 s for them to go
      [ -n "$(ours)" ] || break
      sleep 0.1
    done
  done
  pids=$(ours)
  [ -z "$pids" ] || say "processes still running after SIGKILL: ${pids//$'\n'/ }"
  rm -rf "$DIR"
}

logs() {
  local f
  for f in "$DIR"/log/*.log; do
    [ -s "$f" ] && { echo "----- $f (last 30 lines)"; tail -n 30 "$f"; }
  done >&2
}

# Install what is missing from Debian: the daemons, the clients, munge, and libpmix-dev,
# whose unversioned libpmix.so is what Slurm's mpi_pmix plugin dlopens.
install() {
  local need=()
  command -v munged >/dev/null || need+=(munge)
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
    command -v sbatch >/dev/null || need+=(slurm-wlm)
  [ -e /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so ] ||
    compgen -G '/usr/lib/*/pmix2/lib/libpmix.so' >/dev/null || need+=(libpmix-dev)
  [ ${#need[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null; then
    say "cannot run here: ${need[*]} missing and no apt-get"
    exit 77
  fi
  say "installing ${need[*]}"
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends
             -o DPkg::Lock::Timeout=300 install)
  "${apt[@]}" "${need[@]}" >"$DIR/apt.log" 2>&1 ||
    { apt-get -q -o DPkg::Lock::Timeout=300 update >>"$DIR/apt.log" 2>&1 &&
      "${apt[@]}" "${need[@]}" >>"$DIR/apt.log" 2>&1; } || {
    tail -n 20 "$DIR/apt.log" >&2
    say "cannot run here: installing ${need[*]} failed"
    exit 77
  }
}

# A TCP port nobody listens on (from /proc/net/tcp*), away from Slurm's defaults.
free_port() {
  local used p h
  used=$(awk 'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r h; do echo $((16#$h)); done)
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    grep -qx "$p" <<<"$used" || [ "$p" = "${1:-}" ] || { echo "$p"; return; }
  done
  return 1
}

start() {
  if [ "$(id -u)" -ne 0 ]; then
    say "cannot run here: Slurm's daemons need root (uid $(id -u))"
    exit 77
  fi
  [ -e "$CONF" ] && { say "$DIR already holds a cluster; stop it first"; exit 1; }
  mkdir -p "$DIR" && chmod 755 "$DIR" || exit 1
  DIR=$(cd "$DIR" && pwd) CONF=$DIR/slurm.conf SOCK=$DIR/sock/munge.socket
  install
  if [ ${#SOCK} -gt 100 ]; then  # a Unix socket path holds 108 bytes
    say "the state directory's path is too long for munge's socket: $DIR"
    exit 1
  fi
  # munged wants its socket's directory open to all (clients of any user connect).
  local d=$DIR
  while [ "$d" != / ]; do  # munged refuses a socket that some user could not reach
    if [ "$(($(stat -c %#a "$d") & 1))" -eq 0 ]; then
      say "munged needs every directory above its socket open to all (o+x): not $d"
      exit 1
    fi
    d=$(dirname "$d")
  done
  mkdir -p "$DIR"/{munge,sock,log,ctld,spool,run} && chmod 700 "$DIR"/* &&
    chmod 755 "$DIR" "$DIR/sock" || exit 1

  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none &&
    chmod 400 "$DIR/munge/munge.key" || exit 1
  GDN_LOCAL_SLURM=$DIR munged --socket="$SOCK" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed" || {
    logs
    say "munged did not start"
    stop
    exit 1
  }

  local host cpus mem p1 p2
  host=$(hostname -s)
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc heeds them
  mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
  if ! p1=$(free_port) || ! p2=$(free_port "$p1"); then
    say "no free TCP port"
    stop
    exit 1
  fi
  : >"$DIR/plugstack.conf"  # not /etc/slurm's
  # proctrack/linuxproc and task/affinity (sched_setaffinity, for srun --cpu-bind): no
  # cgroups needed, so it runs in containers.
  # KillWait=30: the seconds between SIGTERM and SIGKILL, gdn_train's time to save.
  # cred_expire (120 s by default) and the scheduling intervals set how long a requeued
  # job waits before it starts again.
  cat >"$CONF" <<EOF
ClusterName=gdnlocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK,cred_expire=10
PlugStackConfig=$DIR/plugstack.conf
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=debug
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

  if ! env SLURM_CONF="$CONF" GDN_LOCAL_SLURM="$DIR" slurmctld -c ||
    ! env SLURM_CONF="$CONF" GDN_LOCAL_SLURM="$DIR" slurmd; then
    logs
    say "slurmctld or slurmd did not start"
    stop
    exit 1
  fi
  local state=""
  for _ in $(seq 120); do  # up to 60 s
    state=$(SLURM_CONF=$CONF timeout 5 sinfo -h -N -o %t 2>/dev/null)
    if [ "$state" = idle ]; then
      say "node $host is idle ($cpus CPUs, $mem MB) in $DIR"
      if [ -n "${GDN_SLURM_OWNER:-}" ]; then
        GDN_LOCAL_SLURM=$DIR setsid -f bash "$SELF" watch "$DIR" "$GDN_SLURM_OWNER" \
          </dev/null >/dev/null 2>&1
      fi
      return 0
    fi
    sleep 0.5
  done
  logs
  say "the node did not become idle within 60 s (state '${state:-no answer}')"
  stop
  exit 1
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  watch)  # watch DIR PID: stop the cluster once PID is gone (started by `start`)
    while [ -e "$CONF" ] && kill -0 "${3:?}" 2>/dev/null; do sleep 2; done
    stop
    ;;
  env)
    [ -f "$CONF" ] || { say "no cluster in $DIR"; exit 1; }
    echo "export SLURM_CONF=$CONF"
    ;;
  *) usage ;;
esac

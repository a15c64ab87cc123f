# Sourced by the scripts that run the apps under mpirun, not run. Sets BIN (the apps of
# GDN_BUILD_DIR, default build) and MPI_FLAGS, and gives threads_per_rank and mpi_run.
#
# --oversubscribe lets cp = 4 run on a 2-core machine. Open MPI's default binding puts
# each rank of a 1- or 2-process job on one core, so a rank's OpenMP threads would share
# it: mpi_run gives each rank its own cores instead (mpi_binding), and gdn_train, gdn_eval
# and gdn_kernel report every rank's threads and CPUs at start-up and warn when threads
# outnumber them.
BIN=${GDN_BUILD_DIR:-build}/apps
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)

# threads_per_rank NP: the cores shared out among NP ranks, at least 1.
threads_per_rank() {
  local t=$(($(nproc) / $1))
  echo $((t >= 1 ? t : 1))
}

# mpi_binding NP THREADS: mpirun flags that give each of NP ranks THREADS cores of its
# own (--map-by slot:PE=THREADS binds a rank to its THREADS cores), or, when NP x THREADS
# do not fit in the cores this shell may use (cp = 4 on 2 cores), --bind-to none: the
# ranks then share the cores, and the tools say so at start-up.
mpi_binding() {
  if [ $(($1 * $2)) -le "$(nproc)" ]; then
    echo "--map-by slot:PE=$2"
  else
    echo "--bind-to none"
  fi
}

# mpi_run NP THREADS APP [ARGS...]: APP (a binary of $BIN) on NP ranks, THREADS OpenMP
# threads each, bound by mpi_binding.
mpi_run() {
  # shellcheck disable=SC2046  # two words on purpose
  OMP_NUM_THREADS=$2 mpirun "${MPI_FLAGS[@]}" $(mpi_binding "$1" "$2") -np "$1" "$BIN/$3" "${@:4}"
}

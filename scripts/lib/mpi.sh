# Sourced by the scripts that run the apps under mpirun, not run. Sets BIN (the apps of
# GDN_BUILD_DIR, default build) and MPI_FLAGS, and gives threads_per_rank and mpi_run.
#
# --oversubscribe lets cp = 4 run on a 2-core machine. Binding is Open MPI's default: at
# -np <= 2 each rank is bound to one core, so a cp = 1 run's two OpenMP threads share
# core 0. Unbound (--bind-to none) was 3-5x slower at cp = 1 on the shared 2-core machine
# (load 7): with two CPUs in its mask libgomp spins at barriers while the other thread
# waits for its core; bound, it sees more threads than CPUs and yields at once.
BIN=${GDN_BUILD_DIR:-build}/apps
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)

# threads_per_rank NP: the cores shared out among NP ranks, at least 1.
threads_per_rank() {
  local t=$(($(nproc) / $1))
  echo $((t >= 1 ? t : 1))
}

# mpi_run NP THREADS APP [ARGS...]: APP (a binary of $BIN) on NP ranks, THREADS OpenMP
# threads each.
mpi_run() {
  OMP_NUM_THREADS=$2 mpirun "${MPI_FLAGS[@]}" -np "$1" "$BIN/$3" "${@:4}"
}

# Sourced by the scripts, not run. print_help SCRIPT prints SCRIPT's header comment: every
# line after the #! line up to the first that is not a comment, "# " taken off. The header
# is found rather than given as a line range, so --help shows all of it as it grows.
print_help() {
  awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$1"
}

# For a script that takes no arguments but --help: no_arguments SCRIPT "$@" prints the
# help and exits 0 on -h/--help, exits 2 naming any other argument, and returns otherwise.
no_arguments() {
  local script=$1
  shift
  case "${1:-}" in
    -h | --help) print_help "$script"; exit 0 ;;
    "") ;;
    *) echo "$(basename "$script"): unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
}

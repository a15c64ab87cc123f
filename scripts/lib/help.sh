# Sourced by the scripts, not run. print_help SCRIPT prints SCRIPT's header comment: every
# line after the #! line up to the first that is not a comment, "# " taken off. The header
# is found rather than given as a line range, so --help shows all of it as it grows.
print_help() {
  awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$1"
}

# Sourced by the scripts that take flags, not run (after help.sh: --help prints the
# script's header). parse_args SCRIPT SPEC... -- ARG... reads a command line ARG... by a
# table: each SPEC is two words, a flag and what it does:
#   --flag VAR        VAR = the next argument
#   --flag VAR=VALUE  VAR = VALUE (a switch; takes no argument)
#   --flag VAR+       the next argument appended to the array VAR
# -h/--help prints SCRIPT's help and exits 0; an unknown flag, or a flag without its
# value, exits 2 naming it. The variables keep their defaults when their flag is absent.
parse_args() {
  local script=$1 name
  name=$(basename "$1")
  shift
  local -A does=()
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    does[$1]=$2
    shift 2
  done
  shift  # the --
  local what
  while [ "$#" -gt 0 ]; do
    case "$1" in
      -h | --help) print_help "$script"; exit 0 ;;
    esac
    what=${does[$1]-}
    if [ -z "$what" ]; then
      echo "$name: unknown argument '$1' (see --help)" >&2
      exit 2
    fi
    if [[ $what == *=* ]]; then
      printf -v "${what%%=*}" '%s' "${what#*=}"
      shift
      continue
    fi
    if [ "$#" -lt 2 ]; then
      echo "$name: $1 needs a value (see --help)" >&2
      exit 2
    fi
    if [[ $what == *+ ]]; then
      eval "${what%+}+=(\"\$2\")"
    else
      printf -v "$what" '%s' "$2"
    fi
    shift 2
  done
}

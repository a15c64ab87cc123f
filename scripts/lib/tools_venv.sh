# Sourced, not run. The tools' venv: .venv-tools/ in the repository (ignored by git), a
# small Python virtual environment with two packages, pinned: Hugging Face's `tokenizers`
# (Debian does not package it), for scripts/tokenize_text.py and its test
# (tests/cli/test_tokenize.sh), and matplotlib, for scripts/plot_run.py and its test
# (tests/cli/test_plot.sh). scripts/setup.sh makes it; the tests make it too where it is
# missing, and skip only when it cannot be had.
#
# tokenizers is installed from PyPI without its dependencies: its one dependency,
# huggingface_hub, serves only Tokenizer.from_pretrained (downloads), which nothing here
# calls. matplotlib comes with its own (numpy, pillow, fonttools, ...): the venv is ~210 MB,
# and making it takes up to a minute.
TOOLS_VENV_TOKENIZERS=0.22.1
TOOLS_VENV_MATPLOTLIB=3.10.7

# tools_venv_dir: where the venv lives, .venv-tools/ at the repository root.
tools_venv_dir() {
  echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.venv-tools"
}

# tools_venv_ok DIR: true when DIR's python imports tokenizers and matplotlib at the pinned
# versions.
tools_venv_ok() {
  "$1/bin/python" -c "import sys, tokenizers, matplotlib
sys.exit(tokenizers.__version__ != '$TOOLS_VENV_TOKENIZERS' or
         matplotlib.__version__ != '$TOOLS_VENV_MATPLOTLIB')" 2>/dev/null
}

# tools_venv_make DIR: makes DIR (from scratch) unless it is already ready; true when it is
# ready afterwards. When it cannot be made it removes what it made, prints one line saying
# why (the last line of venv's or pip's output) and is false. Callers may run at once (ctest
# -j): they take turns on a lock on this file.
tools_venv_make() {
  local dir=$1 py=python3 log why rc=0
  [ -x /usr/bin/python3 ] && py=/usr/bin/python3  # Debian's, which setup.sh installs
  (
    flock 9
    tools_venv_ok "$dir" && exit 0
    log=$(mktemp)
    if "$py" -m venv --clear "$dir" >"$log" 2>&1 &&
      "$dir/bin/python" -m pip install --no-deps --disable-pip-version-check --no-input -q \
        "tokenizers==$TOOLS_VENV_TOKENIZERS" >>"$log" 2>&1 &&
      "$dir/bin/python" -m pip install --disable-pip-version-check --no-input -q \
        "matplotlib==$TOOLS_VENV_MATPLOTLIB" >>"$log" 2>&1 &&
      tools_venv_ok "$dir"; then
      rm -f "$log"
      exit 0
    fi
    why=$(grep -v '^\s*$' "$log" | tail -n 1)
    rm -rf "$dir" "$log"
    echo "cannot make the tools' venv $dir (tokenizers==$TOOLS_VENV_TOKENIZERS and matplotlib==$TOOLS_VENV_MATPLOTLIB from PyPI with $py): ${why:-they do not import}"
    exit 1
  ) 9<"${BASH_SOURCE[0]}" || rc=$?
  return $rc
}

# Sourced, not run. The tools' venv: .venv-tools/ in the repository (ignored by git), a
# small Python virtual environment with two packages, pinned: Hugging Face's `tokenizers`
# (Debian does not package it), for scripts/tokenize_text.py and its test
# (tests/cli/test_tokenize.sh), and matplotlib, for scripts/plot_run.py and its test
# (tests/cli/test_plot.sh). scripts/setup.sh makes it with tokenizers and adds matplotlib in
# the background (the build need not wait for its download); the tests make what they
# need where it is missing (waiting for a background install under way), and skip only
# when it cannot be had.
#
# tokenizers is installed from PyPI without its dependencies: its one dependency,
# huggingface_hub, serves only Tokenizer.from_pretrained (downloads), which nothing here
# calls; that takes ~3 s. matplotlib comes with its own (numpy, pillow, fonttools, ...):
# ~170 MB more, up to a minute to download and install.
TOOLS_VENV_TOKENIZERS=0.22.1
TOOLS_VENV_MATPLOTLIB=3.10.7

# tools_venv_dir: where the venv lives, .venv-tools/ at the repository root.
tools_venv_dir() {
  echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.venv-tools"
}

# tools_venv_ok DIR: true when DIR's python imports tokenizers at the pinned version.
tools_venv_ok() {
  "$1/bin/python" -c "import sys, tokenizers
sys.exit(tokenizers.__version__ != '$TOOLS_VENV_TOKENIZERS')" 2>/dev/null
}

# tools_venv_plots_ok DIR: true when DIR's python imports matplotlib at the pinned version.
tools_venv_plots_ok() {
  "$1/bin/python" -c "import sys, matplotlib
sys.exit(matplotlib.__version__ != '$TOOLS_VENV_MATPLOTLIB')" 2>/dev/null
}

# tools_venv_make DIR: makes DIR (from scratch) unless it is already ready; true when it is
# ready afterwards. When it cannot be made it removes what it made, prints one line saying
# why (the last line of venv's or pip's output) and is false. Callers may run at once (ctest
# -j, setup's background install): they take turns on a lock on this file.
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
      tools_venv_ok "$dir"; then
      rm -f "$log"
      exit 0
    fi
    why=$(grep -v '^\s*$' "$log" | tail -n 1)
    rm -rf "$dir" "$log"
    echo "cannot make the tools' venv $dir (tokenizers==$TOOLS_VENV_TOKENIZERS from PyPI with $py): ${why:-tokenizers does not import}"
    exit 1
  ) 9<"${BASH_SOURCE[0]}" || rc=$?
  return $rc
}

# tools_venv_make_plots DIR: tools_venv_make, then matplotlib into it unless it is there;
# true when it imports afterwards, else one line saying why and false (the venv stays).
tools_venv_make_plots() {
  local dir=$1 log why rc=0
  tools_venv_make "$dir" || return 1
  (
    flock 9
    tools_venv_plots_ok "$dir" && exit 0
    log=$(mktemp)
    if "$dir/bin/python" -m pip install --disable-pip-version-check --no-input -q \
      "matplotlib==$TOOLS_VENV_MATPLOTLIB" >"$log" 2>&1 && tools_venv_plots_ok "$dir"; then
      rm -f "$log"
      exit 0
    fi
    why=$(grep -v '^\s*$' "$log" | tail -n 1)
    rm -f "$log"
    echo "cannot add matplotlib==$TOOLS_VENV_MATPLOTLIB to the tools' venv $dir from PyPI: ${why:-it does not import}"
    exit 1
  ) 9<"${BASH_SOURCE[0]}" || rc=$?
  return $rc
}

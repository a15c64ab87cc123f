#!/usr/bin/env bash
# Installs what gdn-cp needs to build and test, from Debian's packages, and the tools'
# venv .venv-tools/ (scripts/lib/tools_venv.sh: tokenizers and matplotlib from PyPI, for
# scripts/tokenize_text.py and scripts/plot_run.py). Safe to run again: it installs only what is missing.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
# ninja-build runs the build (scripts/build.sh: faster than make on few cores); jq reads the
# JSON-lines logs and stats.json in the scripts and CLI tests (rather than a
# hand-rolled parser in shell); gnuplot-nox draws the loss-curve PNG of the reproduction;
# python3 (standard library only) runs tests/cli/npy_tool.py, which edits .npy files and
# checkpoints for the CLI tests, and python3-venv the tools' venv. libopenblas-dev is for
# gdn_bench alone (optional there): its GEMM ceiling line times a library's GEMM beside
# ours (docs/design.md §2d).
pkgs=(build-essential cmake ninja-build g++ openmpi-bin libopenmpi-dev libcxxopts-dev libspdlog-dev
      nlohmann-json3-dev catch2 jq gnuplot-nox python3 python3-venv libopenblas-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Only the tokenizer test needs the venv (it skips, saying why, without it): a machine
# without PyPI still builds.
. "$(dirname "$0")/lib/tools_venv.sh"
venv=$(tools_venv_dir)
if ! tools_venv_ok "$venv"; then
  echo "setup: making $venv (tokenizers==$TOOLS_VENV_TOKENIZERS)"
  tools_venv_make "$venv" | sed 's/^/setup: warning: /' || true
fi
# matplotlib (scripts/plot_run.py) in the background, its output in $venv.log: the build
# goes on meanwhile, and whoever needs it waits for it (tools_venv_make_plots's lock).
if tools_venv_ok "$venv" && ! tools_venv_plots_ok "$venv"; then
  echo "setup: adding matplotlib==$TOOLS_VENV_MATPLOTLIB to $venv in the background (log: $venv.log)"
  (tools_venv_make_plots "$venv" >"$venv.log" 2>&1 &)
fi
# The CUDA build's fused attention needs cudnn-frontend's headers (scripts/lib/cudnn_frontend.sh);
# only where the CUDA toolkit is: a machine without it, or without PyPI, builds without it
# (the flash kernel then runs every attention).
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  . "$(dirname "$0")/lib/cudnn_frontend.sh"
  fe_py=python3
  [ -x "$venv/bin/python" ] && fe_py=$venv/bin/python
  [ -f "$(cudnn_frontend_dir)/VERSION" ] || echo "setup: fetching cudnn-frontend $CUDNN_FRONTEND_VERSION's headers"
  cudnn_frontend_fetch "$fe_py" | sed 's/^/setup: warning: /' || true
fi

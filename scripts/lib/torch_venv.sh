# Sourced by the benchmarks that run a torch peer, not run. torch_venv_usable VENV: true
# when VENV (a venv outside the repository, never a test dependency) has torch and
# transformers; otherwise prints a note saying why our side alone is printed, and is false.
torch_venv_usable() {
  local venv=$1
  if [ -z "$venv" ]; then
    echo "note: no venv given (--venv DIR or GDN_VENV; needs torch and transformers): printing our side only"
  elif [ ! -x "$venv/bin/python" ]; then
    echo "note: no venv at $venv (needs torch and transformers): printing our side only"
  elif ! "$venv/bin/python" -c "import torch, transformers" 2>/dev/null; then
    echo "note: $venv lacks torch or transformers: printing our side only"
  else
    return 0
  fi
  return 1
}

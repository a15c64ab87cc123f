# Sourced, not run. cudnn-frontend, NVIDIA's header-only C++ graph API over cuDNN (which the
# CUDA toolkit carries): the CUDA build's fused attention (ops/attention/cudnn_attention.h)
# is written against it, as TransformerEngine's is. Its headers come from its PyPI wheel
# (nvidia-cudnn-frontend, pinned; the wheel's include/ is the whole C++ API) into
# .deps-build/cudnn-frontend/ (ignored by git), where CMake looks first.
CUDNN_FRONTEND_VERSION=1.32.0

cudnn_frontend_dir() {
  echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.deps-build/cudnn-frontend"
}

# cudnn_frontend_fetch PYTHON: puts the pinned headers in place unless they are there, with
# PYTHON's pip (download only: nothing is installed into it). True when they are in place
# afterwards; otherwise prints one line saying why and is false.
cudnn_frontend_fetch() {
  local py=$1 dir tmp why rc=0
  dir=$(cudnn_frontend_dir)
  [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$CUDNN_FRONTEND_VERSION" ] && return 0
  tmp=$(mktemp -d)
  if "$py" -m pip download --no-deps --disable-pip-version-check --no-input -q -d "$tmp" \
    "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" >"$tmp/log" 2>&1 &&
    "$py" - "$tmp" "$dir" "$CUDNN_FRONTEND_VERSION" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest, version = sys.argv[1:]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
shutil.rmtree(dest, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("include/")])
assert os.path.exists(os.path.join(dest, "include", "cudnn_frontend.h")), "no include/cudnn_frontend.h"
open(os.path.join(dest, "VERSION"), "w").write(version)
PY
  then
    rm -rf "$tmp"
    return 0
  fi
  why=$(grep -v '^\s*$' "$tmp/log" 2>/dev/null | tail -n 1)
  rm -rf "$tmp"
  echo "cannot fetch cudnn-frontend $CUDNN_FRONTEND_VERSION from PyPI with $py: ${why:-the wheel has no include/cudnn_frontend.h}"
  return 1
}

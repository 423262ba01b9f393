#!/bin/sh
# Configures and builds placer into build/ (CUDA objects too when nvcc is
# found, in /usr/local/cuda or on PATH). Quiet unless something fails.
set -eu
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ]; then PATH="/usr/local/cuda/bin:$PATH"; export PATH; fi
BUILD="${BUILD:-build}"
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dcuda=auto >"${TMPDIR:-/tmp}/placer-meson-setup.log" 2>&1 || {
    cat "${TMPDIR:-/tmp}/placer-meson-setup.log" >&2; exit 1; }
fi
ninja -C "$BUILD" >"${TMPDIR:-/tmp}/placer-ninja.log" 2>&1 || {
  grep -E "error|FAILED" -A3 "${TMPDIR:-/tmp}/placer-ninja.log" | head -60 >&2; exit 1; }

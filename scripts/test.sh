#!/bin/sh
# The README's test command: installs what is missing, builds (CUDA objects
# included when the toolkit is present, no GPU needed), runs the CPU test
# suite under AddressSanitizer + UndefinedBehaviorSanitizer, then the plain
# build's suite. The output ends with Criterion's synthesis line.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
if [ -x /usr/local/cuda/bin/nvcc ]; then PATH="/usr/local/cuda/bin:$PATH"; export PATH; fi

echo "== sanitizer build (address, undefined) =="
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    >/tmp/placer-asan-setup.log 2>&1 || { cat /tmp/placer-asan-setup.log >&2; exit 1; }
fi
ninja -C build-asan >/tmp/placer-asan-ninja.log 2>&1 || {
  grep -E "error|FAILED" -A3 /tmp/placer-asan-ninja.log | head -60 >&2; exit 1; }
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
  meson test -C build-asan --print-errorlogs --no-rebuild -q

echo "== build (CUDA objects when the toolkit is present) =="
./scripts/build.sh
if ls build/hw/*.p/*.cu.o >/dev/null 2>&1; then echo "CUDA engine objects built: $(ls build/hw/*.p/*.cu.o | wc -l)"; else echo "CUDA toolkit not found: CPU-only build"; fi
echo "== layering and documents =="
python3 scripts/check-layering.py --self-test --objects build
python3 scripts/check-docs-index.py
python3 scripts/check-file-refs.py
python3 scripts/check-readme.py
echo "== python package (pip install . in build-python/venv, pytest) =="
./scripts/test-python.sh
echo "== placer serve's page in a real browser (tests/web: Debian's chromium + Selenium) =="
./scripts/test-web.sh
echo "== framework parsers (the exports loaded by Megatron-Core, torchtitan, DeepSpeed; a venv in the user's cache) =="
./scripts/test-framework-parsers.sh
echo "== tests =="
# the multi-process checks under Open MPI (tests/hw/test_dist_mpi.c: mpirun -np 1..4) run inside the suite
if command -v mpirun >/dev/null 2>&1; then echo "mpirun: $(mpirun --version 2>&1 | head -1)"; else echo "mpirun not found: the dist_mpi tests skip"; fi
./build/tests/placer-tests -j2 --short-filename

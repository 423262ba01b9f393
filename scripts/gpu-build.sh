#!/bin/sh
# Builds the GPU-side binaries here (no GPU needed) into build-gpu/, for the
# device machine: CUDA on, Criterion tests off, release, sm_90 (H100/H200).
# Then copies every shared library the binaries need that the device image
# lacks (it has glibc, libstdc++, CUDA 13 with cuBLAS, NCCL and
# libsqlite3.so.0; no GSL, OpenBLAS, Criterion or MPI) into build-gpu/lib.
# Run scripts set LD_LIBRARY_PATH=build-gpu/lib. Carry build-gpu with the run.
set -eu
cd "$(dirname "$0")/.."
PATH="/usr/local/cuda/bin:$PATH"; export PATH
BUILD="${BUILD:-build-gpu}"
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dcuda=enabled -Dtests=disabled -Dbuildtype=release -Dgpu_archs=9.0 -Dopenblas=disabled \
    >/tmp/placer-gpu-setup.log 2>&1 || { cat /tmp/placer-gpu-setup.log >&2; exit 1; }
fi
# No OpenBLAS (36 MB) on the device side: the placers train here, and the
# carried tree must stay under the device tool's 64 MiB with the tracked files.
if ! meson configure "$BUILD" 2>/dev/null | grep -Eq '^ *openblas +disabled'; then
  meson setup --reconfigure "$BUILD" -Dopenblas=disabled >/tmp/placer-gpu-setup.log 2>&1 ||
    { cat /tmp/placer-gpu-setup.log >&2; exit 1; }
fi
# The engine's own binaries must build; the placer command links every area
# and is built when the rest of the tree builds.
ninja -C "$BUILD" hw/gpu_tests hw/tp_check benchmarks/hw/bench_step benchmarks/hw/gemm_sweep
ninja -C "$BUILD" cli/placer || echo "gpu-build: cli/placer did not build; the GPU tests and benchmark did" >&2
rm -rf "$BUILD/lib"
mkdir -p "$BUILD/lib"
for bin in "$BUILD/hw/gpu_tests" "$BUILD/benchmarks/hw/bench_step" "$BUILD/cli/placer"; do
  [ -x "$bin" ] || continue
  ldd "$bin" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    case "$name" in
      linux-vdso*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libsqlite3.so*) ;;
      *) cp -Lu "$path" "$BUILD/lib/" && echo "gpu-build: bundled $name" ;;
    esac
  done
done
# Open MPI: its libraries came with the loop above when placer links MPI
# (it only starts MPI under mpirun). MPI_RUNTIME=1 also bundles mpirun, its
# components and their libraries (about 12 MB more; scripts/bundle-mpi.sh,
# then `. $BUILD/mpi/env.sh` there), for runs of several ranks.
if [ "${MPI_RUNTIME:-0}" = 1 ] && [ -x "$BUILD/cli/placer" ]; then
  ./scripts/bundle-mpi.sh "$BUILD" "$BUILD/cli/placer"
fi
echo "gpu-build: $(du -sh "$BUILD" | cut -f1) in $BUILD"

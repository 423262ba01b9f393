#!/bin/sh
# Bundles Open MPI's runtime for a machine that has none (the GPU machine),
# when BIN links libmpi: mpirun and orted, the MCA components a single host
# needs and PMIx's plugins (the InfiniBand / UCX / OFI / PSM ones are left out: a GPU host here
# has no such fabric, and a component whose libraries are missing would
# warn at every start), Open MPI's help texts and default settings, and
# every shared library those need that the device image lacks, into
# BUILD/mpi and BUILD/lib. BUILD/mpi/env.sh relocates Open MPI there
# through its OPAL_* variables (checked here with strace: every component
# then loads from the bundle, none from /usr):
#   . build-gpu/mpi/env.sh && mpirun -np 2 build-gpu/cli/placer step ...
# Usage: scripts/bundle-mpi.sh BUILD BIN. Does nothing when BIN has no MPI.
set -eu
BUILD="$1"
BIN="$2"
ldd "$BIN" 2>/dev/null | grep -q 'libmpi\.so' || { echo "bundle-mpi: $BIN does not link MPI; nothing to bundle"; exit 0; }
command -v ompi_info >/dev/null 2>&1 || { echo "bundle-mpi: ompi_info not found (openmpi-bin)" >&2; exit 1; }
path_of() { ompi_info --path "$1" | sed 's/.*: *//'; }
PKGLIB=$(path_of pkglibdir)
PKGDATA=$(path_of pkgdatadir)
SYSCONF=$(path_of sysconfdir)
BINDIR=$(path_of bindir)
M="$BUILD/mpi"
rm -rf "$M"
mkdir -p "$M/bin" "$M/lib/openmpi3" "$M/share" "$M/etc" "$BUILD/lib"
cp -L "$BINDIR/mpirun" "$M/bin/mpirun"
cp -L "$BINDIR/orted" "$M/bin/orted"
for f in "$PKGLIB"/*.so; do
  case "$(basename "$f")" in
    *ucx*|*ofi*|*openib*|*psm*|*verbs*|*usnic*|*portals*) ;;
    *) cp -L "$f" "$M/lib/openmpi3/" ;;
  esac
done
# PMIx (Open MPI's process manager interface) keeps a few plugins of its own
PMIX_LIB=$(ldd "$BIN" | awk '/libpmix\.so/ {print $3}')
[ -n "$PMIX_LIB" ] || PMIX_LIB=$(ldd "$PKGLIB"/mca_pmix_ext3x.so 2>/dev/null | awk '/libpmix\.so/ {print $3}')
mkdir -p "$M/lib/pmix"
for d in /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix "$(dirname "${PMIX_LIB:-/nonexistent}")/pmix2/lib/pmix"; do
  [ -d "$d" ] && cp -L "$d"/*.so "$M/lib/pmix/" 2>/dev/null && break
done
cp -rL "$PKGDATA" "$M/share/openmpi"
cp -rL "$SYSCONF"/. "$M/etc/"
# the libraries of mpirun, orted and the components (the device image has glibc and libstdc++)
for f in "$M"/bin/* "$M"/lib/openmpi3/*.so "$M"/lib/pmix/*.so; do
  [ -e "$f" ] || continue
  ldd "$f" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    case "$name" in
      linux-vdso*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      *) [ -e "$BUILD/lib/$name" ] || { cp -L "$path" "$BUILD/lib/" && echo "bundle-mpi: bundled $name"; } ;;
    esac
  done
done
cat > "$M/env.sh" <<'ENV'
# Source from the repository root: Open MPI relocated to the bundle beside
# this file (PLACER_MPI overrides where that is).
PLACER_MPI="${PLACER_MPI:-$PWD/build-gpu/mpi}"
OPAL_PREFIX="$PLACER_MPI"; OPAL_BINDIR="$PLACER_MPI/bin"; OPAL_LIBDIR="$PLACER_MPI/lib"
OPAL_PKGLIBDIR="$PLACER_MPI/lib/openmpi3"; OPAL_DATAROOTDIR="$PLACER_MPI/share"; OPAL_DATADIR="$PLACER_MPI/share"
OPAL_PKGDATADIR="$PLACER_MPI/share/openmpi"; OPAL_SYSCONFDIR="$PLACER_MPI/etc"
PMIX_MCA_mca_base_component_path="$PLACER_MPI/lib/pmix"
PATH="$PLACER_MPI/bin:$PATH"
LD_LIBRARY_PATH="$PLACER_MPI/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the device machine runs as root; its containers forbid ptrace (vader's single copy)
OMPI_ALLOW_RUN_AS_ROOT=1; OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPAL_PREFIX OPAL_BINDIR OPAL_LIBDIR OPAL_PKGLIBDIR OPAL_DATAROOTDIR OPAL_DATADIR OPAL_PKGDATADIR \
  OPAL_SYSCONFDIR PMIX_MCA_mca_base_component_path PATH LD_LIBRARY_PATH OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
  OMPI_MCA_btl_vader_single_copy_mechanism
ENV
echo "bundle-mpi: $(du -sh "$M" | cut -f1) in $M; . $M/env.sh before mpirun"

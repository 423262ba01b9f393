#!/bin/sh
# Installs the Debian packages placer needs, only those missing
# (libmicrohttpd for placer serve; chromium, its driver, Selenium and pytest
# for the browser tests of its page, tests/web).
# Idempotent and silent when everything is already present.
set -eu
PKGS="build-essential pkg-config meson ninja-build libgsl-dev libsqlite3-dev \
libcriterion-dev libopenblas-dev gnuplot-nox sqlite3 clang python3-dev python3-venv libglpk-dev libjansson-dev \
libopenmpi-dev openmpi-bin libmicrohttpd-dev \
chromium chromium-driver python3-selenium python3-pytest"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null

#!/usr/bin/env bash
# Installs the Debian packages Engram Store builds, tests and benchmarks with.
# Idempotent: asks apt only for what is missing, and runs `apt-get update` only
# when something is.
set -euo pipefail

# Besides the compilers and libraries: gnuplot-nox draws the charts, fio is
# the I/O baseline, strace checks the one-thread test list, and prometheus's
# promtool checks the metrics exposition (metrics_http_test), and
# redis-server / redis-tools run the local Redis Cluster the remote-table
# tests, benchmark and README start (scripts/redis_cluster.sh; the Debian
# package's own service is not used). Nothing is
# downloaded or built from another project's source: these are all.
PACKAGES=(
  build-essential cmake ninja-build pkg-config lld
  liburing-dev libxxhash-dev libhiredis-dev libboost-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  gnuplot-nox fio strace python3 prometheus redis-server redis-tools
  pybind11-dev python3-dev python3-numpy python3-pytest python3-torch
)
# Extra groups, asked for by the scripts that need them.
for extra in "$@"; do
  case "$extra" in
    --fuzz) PACKAGES+=(clang libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown option $extra" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

#!/usr/bin/env bash
# Installs splitkv's build and test dependencies from Debian/Ubuntu packages.
#
# Idempotent, and apt is touched only when something is missing: the GPU machine cannot
# download anything but already has every dependency, some of them (cmake, ninja, numpy)
# from outside apt, so a tool found on PATH or a Python module that imports counts as
# installed.
set -euo pipefail

packages=(
  build-essential
  cmake
  ninja-build
  libbenchmark-dev
  nlohmann-json3-dev
  libcli11-dev
  libfmt-dev
  libgtest-dev
  python3-matplotlib
  python3-numpy
  # fuzz/ (libFuzzer) needs clang and its runtime; libclang-rt-14-dev is only recommended by
  # clang on Debian 12, so it is listed by name.
  clang
  libclang-rt-14-dev
)

say() { echo "install_deps: $*"; }

installed_by_dpkg() {
  command -v dpkg-query >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# The same thing installed another way: pip's or Kitware's cmake, a ninja release binary,
# numpy from pip.
installed_elsewhere() {
  case "$1" in
    cmake) command -v cmake >/dev/null 2>&1 ;;
    ninja-build) command -v ninja >/dev/null 2>&1 ;;
    python3-numpy) python3 -c 'import numpy' >/dev/null 2>&1 ;;
    python3-matplotlib) python3 -c 'import matplotlib' >/dev/null 2>&1 ;;
    clang) command -v clang++ >/dev/null 2>&1 ;;
    libclang-rt-14-dev)
      command -v clang >/dev/null 2>&1 &&
        ls "$(clang -print-runtime-dir 2>/dev/null)"/libclang_rt.fuzzer*.a >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

missing=()
for pkg in "${packages[@]}"; do
  if installed_by_dpkg "$pkg"; then
    continue
  elif installed_elsewhere "$pkg"; then
    say "$pkg: not a Debian package here, but provided by another install; using that"
  else
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  say "all ${#packages[@]} dependencies present; skipping apt"
  exit 0
fi

say "missing: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  say "no apt-get on this machine; install the packages above by hand" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    say "not root and no sudo; cannot install" >&2
    exit 1
  fi
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
say "running: ${sudo[*]:+${sudo[*]} }apt-get update"
"${sudo[@]}" apt-get update -q
say "running: ${sudo[*]:+${sudo[*]} }apt-get install -y --no-install-recommends ${missing[*]}"
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
say "done"

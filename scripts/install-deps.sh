#!/usr/bin/env bash
# Installs, as root with apt-get, the Debian packages metagrad needs that are missing.
# The CUDA toolkit (nvcc, CCCL) is used where it is already installed at /usr/local/cuda.
set -euo pipefail
pkgs=(g++ cmake ninja-build libxtensor-dev xtl-dev libxsimd-dev libopenblas-dev
      libgtest-dev librapidcheck-dev libbenchmark-dev pkg-config
      clang-16 libclang-rt-16-dev)  # the ThreadSanitizer leg builds with clang 16
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "metagrad: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

#!/usr/bin/env bash
# Installs what rime needs to build and test on Debian 12 (Debian packages only) and configures a build.
# Idempotent: packages already present are not reinstalled. The CUDA toolkit (NVRTC, headers) is expected at
# /usr/local/cuda or on PATH; the CUDA driver is opened at run time, so no GPU is needed to build.
set -euo pipefail
packages=(cmake ninja-build g++ nlohmann-json3-dev libfmt-dev catch2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

#!/usr/bin/env bash
# Installs what rime needs to build and test, and only what is really missing. It checks for what the build
# uses (commands with their versions; the CMake packages find_package must find), not for package names, so a
# machine with cmake and ninja from pip or conda and the libraries from apt (the GPU machines) passes as it is.
# On Debian and Ubuntu it installs what is missing with apt-get; where it cannot (no package registry, no root),
# it says plainly what to install and exits 1. The CUDA toolkit (NVRTC, headers) is expected at /usr/local/cuda
# or on PATH; the CUDA driver is opened at run time, so no GPU is needed to build.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()   # Debian/Ubuntu package names
reasons=()

version_at_least() {  # version_at_least 3.25.1 3.22
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

if ! command -v cmake >/dev/null 2>&1; then
  missing+=(cmake); reasons+=("cmake: not found")
else
  v=$(cmake --version | head -n1 | awk '{print $3}')
  version_at_least "$v" 3.22 || { missing+=(cmake); reasons+=("cmake $v is older than 3.22"); }
fi
command -v ninja >/dev/null 2>&1 || { missing+=(ninja-build); reasons+=("ninja: not found"); }
if ! command -v g++ >/dev/null 2>&1; then
  missing+=(g++); reasons+=("g++: not found")
else
  v=$(g++ -dumpfullversion -dumpversion)
  version_at_least "$v" 9 || { missing+=(g++); reasons+=("g++ $v is older than 9 (C++17)"); }
fi

# The libraries, as CMake finds them (the build's own find_package calls), once cmake is there.
if command -v cmake >/dev/null 2>&1; then
  probe=$(mktemp -d)
  trap 'rm -rf "$probe"' EXIT
  cat > "$probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(rime_setup_probe LANGUAGES CXX)  # CXX: package version files check the pointer size
find_package(nlohmann_json 3.10 QUIET)
find_package(fmt QUIET)
find_package(CLI11 2.1 QUIET)
find_package(Catch2 QUIET)
foreach(p nlohmann_json fmt CLI11 Catch2)
  if(NOT ${p}_FOUND)
    message(STATUS "rime-missing: ${p}")
  endif()
endforeach()
EOF
  out=$(cmake -S "$probe" -B "$probe/build" 2>&1 || true)
  for p in $(echo "$out" | sed -n 's/.*rime-missing: //p'); do
    case $p in
      nlohmann_json) missing+=(nlohmann-json3-dev) ;;
      fmt) missing+=(libfmt-dev) ;;
      CLI11) missing+=(libcli11-dev) ;;
      Catch2) missing+=(catch2) ;;
    esac
    reasons+=("CMake package $p: not found")
  done
else
  missing+=(nlohmann-json3-dev libfmt-dev libcli11-dev catch2)
  reasons+=("the CMake packages nlohmann_json, fmt, CLI11, Catch2: not checked without cmake")
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: missing: ${reasons[*]}"
  installed=0
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"; fi
    if [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; then
      echo "setup: installing ${missing[*]} with apt-get"
      if $SUDO apt-get update -qq >/dev/null 2>&1 &&
         DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; then
        installed=1
      fi
    fi
  fi
  if [ $installed -ne 1 ]; then
    cat >&2 <<EOF
setup: could not install what the build needs (no package registry, no root, or not Debian/Ubuntu).
Install it, then run this again:
  Debian/Ubuntu:  apt-get install ${missing[*]}
  or by hand:     cmake >= 3.22 and ninja (e.g. pip install cmake ninja), a C++17 g++, and the CMake packages
                  nlohmann_json >= 3.10, fmt, CLI11 >= 2.1 (header-only), Catch2 (v2 or v3), where
                  CMAKE_PREFIX_PATH can find them.
EOF
    exit 1
  fi
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -e /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: no CUDA toolkit at /usr/local/cuda or on PATH (rime needs its NVRTC and headers to build)" >&2
  exit 1
fi

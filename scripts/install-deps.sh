#!/usr/bin/env bash
# Installs ork's build and test dependencies from Debian packages (needs root or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# arm64 libraries come through multiarch, for the ARM cross build.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config clang python3 \
  libfmt-dev libcli11-dev libpcre2-dev libicu-dev libhwy-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev chromium
# The ARM (aarch64) cross build and its test runner.
$SUDO apt-get install -y -qq --no-install-recommends \
  g++-aarch64-linux-gnu qemu-user \
  libfmt-dev:arm64 libpcre2-dev:arm64 libicu-dev:arm64 libhwy-dev:arm64 libgtest-dev:arm64
# The official OpenAI client, for the server's tests (tests/server/package.json);
# Node and npm from Debian unless the machine has them already.
if ! command -v npm >/dev/null; then $SUDO apt-get install -y -qq --no-install-recommends nodejs npm; fi
npm install --prefix "$(dirname "$0")/../tests/server" --no-audit --no-fund --loglevel=error

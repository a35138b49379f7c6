#!/usr/bin/env bash
# Installs ork's build and test dependencies from Debian packages (needs root or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config clang \
  libfmt-dev libcli11-dev libpcre2-dev libicu-dev libhwy-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev libbenchmark-dev

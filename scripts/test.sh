#!/usr/bin/env bash
# Builds (incrementally) and runs every test: GoogleTest suites via ctest, then the
# Node test that drives the server with the official `openai` client.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 300)
if [ -f tests/node/package.json ]; then
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error && ECOSERVE_BIN="$PWD/../../build/ecoserve" node --test)
fi

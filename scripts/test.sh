#!/usr/bin/env bash
# Builds (incrementally) and runs every test: GoogleTest suites via ctest, then the
# Node tests: the official `openai` client against the server, and llama.cpp (the
# prebuilt CPU build in node-llama-cpp) loading ecoserve's GGUF files and checking
# greedy output. --omit=optional skips node-llama-cpp's GPU builds; --ignore-scripts
# keeps its postinstall from trying to download or compile anything. Last, every parser is
# fuzzed for a bounded time (scripts/fuzz.sh: clang-14 build in build-fuzz/, about 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 300)
if [ -f tests/node/package.json ]; then
  (cd tests/node && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error &&
   ECOSERVE_BIN="$PWD/../../build/ecoserve" node --test &&
   # The openai client again, against two instances: NoDG behind the cache-aware router, FuDG 1P1D, PaDG.
   ECOSERVE_BIN="$PWD/../../build/ecoserve" ECOSERVE_SERVE_ARGS="--instances 2 --threads-per-instance 1 --router cache-aware" \
     node --test openai_client.test.js &&
   ECOSERVE_BIN="$PWD/../../build/ecoserve" ECOSERVE_SERVE_ARGS="--instances 2 --threads-per-instance 1 --strategy fudg" \
     node --test openai_client.test.js &&
   # And FuDG with each instance in its own process, over ZeroMQ (ecoserve instance + router).
   ECOSERVE_BIN="$PWD/../../build/ecoserve" ECOSERVE_SERVE_ARGS="--instances 2 --threads-per-instance 1 --strategy fudg --multi-process" \
     node --test openai_client.test.js &&
   # And PaDG (EcoServe): temporal instances in a macro instance.
   ECOSERVE_BIN="$PWD/../../build/ecoserve" ECOSERVE_SERVE_ARGS="--instances 2 --threads-per-instance 1 --strategy padg" \
     node --test openai_client.test.js)
fi
bash scripts/fuzz.sh

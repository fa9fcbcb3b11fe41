#!/usr/bin/env bash
# Prefill (pp512) and single-stream decode tok/s of ecoserve and of llama.cpp
# (the prebuilt CPU build in the node-llama-cpp npm package, tests/node) on the
# same GGUF file and thread counts, on this machine.
# Usage: scripts/compare_llamacpp.sh MODEL.gguf [THREADS...]   (default threads: 1 2)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/compare_llamacpp.sh MODEL.gguf [THREADS...]}
shift
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)
[ -x build/ecoserve ] || bash scripts/build.sh
[ -d tests/node/node_modules/node-llama-cpp ] ||
  (cd tests/node && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
printf '%-8s %-10s %14s %14s\n' threads engine "pp512 tok/s" "decode tok/s"
for t in "${threads[@]}"; do
  ./build/ecoserve profile engine -m "$model" -t "$t" --batches 1 --json |
    node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
             const pp = r.find((x) => x.test.startsWith("prefill")).tokens_per_second;
             const tg = r.find((x) => x.test === "decode batch 1").tokens_per_second;
             console.log(`${String(process.argv[1]).padEnd(8)} ${"ecoserve".padEnd(10)} ${pp.toFixed(1).padStart(14)} ${tg.toFixed(1).padStart(14)}`);' "$t"
  node tests/node/bench_llamacpp.mjs "$model" "$t" |
    node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
             console.log(`${String(r.threads).padEnd(8)} ${"llama.cpp".padEnd(10)} ${r.pp512.toFixed(1).padStart(14)} ${r.decode.toFixed(1).padStart(14)}`);'
done
